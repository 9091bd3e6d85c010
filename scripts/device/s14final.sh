#!/usr/bin/env bash
# Session 14's closing run, part 1 of 2 (s14perf.sh times): correctness of every collective
# (types, ops, odd counts), the hybrid in and out of place at 512 MiB + 12 B (the in-place one
# now shares SMs: register-capped direct kernels beside 256-thread reduces), the hybrid at
# 64 MiB+ with other types and ops, the hybrid across processes; memcheck of the hybrid in and out
# of place; the in-place hybrid against TOPOPLAN_HYBRID_SHARE_SMS=0 (alternating); memory over
# 1,000 hybrid calls. Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
sec check 130 "" bench --coll all -d float,half,bfloat16,int32,double -o sum,min --counts 1,7,4099,65537,1048579 -w 1 -n 2 --runs 1 -c 1
sec check 120 "" bench --coll all-reduce -d float,bfloat16 -o sum,avg --counts 8388611,134217731 -w 1 -n 2 --runs 1 -c 1
sec check 60 "TOPOPLAN_HYBRID_MIN_MB=64" bench --coll all-reduce -d float,half -o sum,max --counts 16777219,33554435 -w 1 -n 2 --runs 1 -c 1
sec check 100 "" bench --procs -g 2 --coll all-reduce -d float -o sum --counts 134217731 -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed; algos: $(grep -oE 'one-shot[-a-z+0-9]*' "$OUT/check.log" | sort | uniq -c | tr '\n' ' ') [$((SECONDS-T0)) s]"
if command -v compute-sanitizer >/dev/null; then
  { echo "+ TOPOPLAN_HYBRID_MIN_MB=64 compute-sanitizer --tool memcheck topoplan bench --counts 16777219 -w 1 -n 2 --runs 1 -c 1"
    TOPOPLAN_HYBRID_MIN_MB=64 timeout 90 compute-sanitizer --tool memcheck "$BIN" bench --counts 16777219 -w 1 -n 2 --runs 1 -c 1; echo "rc=$?"; } >> "$OUT/memcheck.log" 2>&1
  echo "MEMCHECK: $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/memcheck.log") clean of $(grep -c 'ERROR SUMMARY' "$OUT/memcheck.log"); $(grep '# summary' "$OUT/memcheck.log" | awk '{s+=$5} END {print s+0}') wrong; $(grep -c '^rc=[^0]' "$OUT/memcheck.log") failed [$((SECONDS-T0)) s]"
fi
for v in "" "TOPOPLAN_HYBRID_SHARE_SMS=0" "" "TOPOPLAN_HYBRID_SHARE_SMS=0"; do
  sec ab 40 "$v" bench -b 512M -e 1G -f 2 -w 3 -n 20 --runs 5 -c 0
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/ab.log" | awk '/^\+/ {printf "\n%-30s", $2; next} {printf "%s: %s ip %s  ", $1, $9, $13}'; echo; echo "[$((SECONDS-T0)) s]"
sec leak 40 "" bench -b 512M -e 512M -w 2 -n 1000 --runs 1 -c 0
grep -E '^# memory|^ +[0-9]+ |^rc=' "$OUT/leak.log" | cut -c1-200; echo "[$((SECONDS-T0)) s]"
