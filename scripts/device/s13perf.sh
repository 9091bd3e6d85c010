#!/usr/bin/env bash
# Session 13's closing run, part 2 of 2 (timing; s13final.sh checks): the headline all-reduce
# table against NCCL with more samples than earlier closing runs (8 B-64 MiB: 5 runs of 50
# calls; 128 MiB-1 GiB: 5 runs of 20), the other collectives, then compute-sanitizer memcheck
# over LL, pull, push, the hybrid and the other collectives. Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
sec perf 150 "" bench -b 8 -e 64M -f 2 -w 5 -n 50 --runs 5 -c 0 --vs-nccl
sec perf 120 "" bench -b 128M -e 1G -f 2 -w 3 -n 20 --runs 5 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/perf.log" | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'; echo "[$((SECONDS-T0)) s]"
sec others 100 "" bench --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 256M -f 8 -w 3 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^#.*bench:|^ +[0-9]+ ' "$OUT/others.log" | awk '/bench:/ {printf "\n%s ", $4; next} {printf "%s:%s/%s ", $1, $14, $22}'; echo; echo "[$((SECONDS-T0)) s]"
if command -v compute-sanitizer >/dev/null; then
  mc() { local t=$1 envs=$2; shift 2
    { echo "+ $envs compute-sanitizer --tool memcheck topoplan $*"; timeout "$t" env $envs compute-sanitizer --tool memcheck "$BIN" "$@"; echo "rc=$?"; } >> "$OUT/memcheck.log" 2>&1; }
  mc 100 "" bench -b 8 -e 16M -f 8 -w 1 -n 2 --runs 1 -c 1
  mc 100 "" bench --coll all -d float,half -o sum --counts 7,65537,8388611 -w 1 -n 2 --runs 1 -c 1
  mc 80 "TOPOPLAN_HYBRID_MIN_MB=64" bench --counts 16777219 -w 1 -n 2 --runs 1 -c 1
  echo "MEMCHECK: $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/memcheck.log") clean of $(grep -c 'ERROR SUMMARY' "$OUT/memcheck.log"); $(grep '# summary' "$OUT/memcheck.log" | awk '{s+=$5} END {print s+0}') wrong; $(grep -c '^rc=[^0]' "$OUT/memcheck.log") failed; algos: $(grep -oE 'one-shot[-a-z+0-9]*' "$OUT/memcheck.log" | sort | uniq -c | tr '\n' ' ') [$((SECONDS-T0)) s]"
fi
