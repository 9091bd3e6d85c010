#!/usr/bin/env bash
# Session 15, run 3 (closing): the all-reduce table against NCCL; the copy-engine pair's smallest chunk (default now 8 MiB) against
# 2/4/16 MiB and the sharing kernels at 80 registers, at 512 MiB (three rounds, alternating); a
# check of the hybrid at an odd count; the hybrid across
# processes against NCCL; memcheck of average (tp_div's new path) on every path auto takes.
set -u
. "$(dirname "$0")/env.sh"
T0=$SECONDS
machine_info > "$OUT/info.txt" 2>&1
sec perf 120 "" bench -b 8 -e 64M -f 2 -w 5 -n 50 --runs 5 -c 0 --vs-nccl
sec perf 200 "" bench -b 128M -e 1G -f 2 -w 3 -n 20 --runs 5 -c 0 --vs-nccl
grep -E '^\+|^ +[0-9]+ ' "$OUT/perf.log" | awk '/^\+/ {print; next} {printf "%11s %8s %8s %6s | %8s %8s %6s\n", $1, $7, $11, $14, $15, $19, $22}'
echo "[perf $((SECONDS-T0)) s]"
for r in 1 2 3; do
  for v in "" "TOPOPLAN_CE_MIN_KB=2048" "TOPOPLAN_CE_MIN_KB=4096" "TOPOPLAN_CE_MIN_KB=16384" "TOPOPLAN_SHARED_MAXREG=80"; do
    sec sweep 40 "$v" bench -b 512M -e 512M -w 3 -n 20 --runs 5 -c 0
  done
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/sweep.log" | awk '/^\+/ {printf "\n%-30s", $2; next} {printf "%s: %s ip %s  ", $1, $9, $13}'; echo
echo "[sweep $((SECONDS-T0)) s]"
sec check 90 "" bench -o sum,avg --counts 134217731 -w 1 -n 2 --runs 1 -c 1 --vs-nccl
grep -E "^ +[0-9]+ |summary" "$OUT/check.log"
sec mp 120 "" bench --procs -b 512M -e 1G -f 2 -w 3 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/mp.log"
if command -v compute-sanitizer >/dev/null; then
  { echo "+ compute-sanitizer --tool memcheck topoplan bench -o avg -d float,bfloat16 --counts 1027,262147,4194307 -w 1 -n 2 --runs 1 -c 1"
    timeout 120 compute-sanitizer --tool memcheck "$BIN" bench -o avg -d float,bfloat16 --counts 1027,262147,4194307 -w 1 -n 2 --runs 1 -c 1; echo "rc=$?"; } >> "$OUT/memcheck.log" 2>&1
  echo "MEMCHECK: $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/memcheck.log") clean of $(grep -c 'ERROR SUMMARY' "$OUT/memcheck.log"); $(grep '# summary' "$OUT/memcheck.log" | awk '{s+=$5} END {print s+0}') wrong"
fi
echo "[done $((SECONDS-T0)) s]"
