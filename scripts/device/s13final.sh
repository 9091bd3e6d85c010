#!/usr/bin/env bash
# Session 13's closing run, part 1 of 2 (correctness; s13perf.sh times): the correctness matrix
# of session 12's closing run (every collective, type and op; multi-segment LL with 2 CTAs; LL to
# 4 MiB; CUDA graphs), the multi-process check (mp.sh), then 10,000 calls per size for memory
# growth (LL, pull, push, and the hybrid with 1,000 calls). Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
sec check 150 "" bench --coll all -d all -o sum,max --counts 1,7,4099,65537,262147,1048579 -w 1 -n 2 --runs 1 -c 1
sec check 60 "TOPOPLAN_DIRECT_LL_CTAS=2" bench --coll all -d float -o sum,min --counts 3,65537,262147 -w 1 -n 3 --runs 1 -c 1
sec check 60 "TOPOPLAN_LL_MAX=4194304" bench --coll all-reduce,all-gather -d float,half -o sum --counts 5,1048579 -w 1 -n 3 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce -d float -o sum,avg --counts 2,1000,65536,1048576,4194307 -w 2 -n 5 --runs 1 -c 1 --cuda-graph
sec check 120 "" bench --coll all-reduce -d float,bfloat16 -o sum,avg --counts 8388611,67108867,134217731 -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed; algos: $(grep -oE 'one-shot[-a-z+0-9]*' "$OUT/check.log" | sort | uniq -c | tr '\n' ' ') [$((SECONDS-T0)) s]"
MP_T=60 timeout 200 bash "$(dirname "$0")/mp.sh" | tail -1; echo "[$((SECONDS-T0)) s]"
sec leak 90 "" bench -b 4K -e 32M -f 8 -w 10 -n 10000 --runs 1 -c 0
sec leak 60 "" bench -b 512M -e 512M -w 2 -n 1000 --runs 1 -c 0
grep -E '^# memory \(MiB|^ +[0-9]+ |^rc=' "$OUT/leak.log" | awk '{print substr($0, 1, 200)}'; echo "[$((SECONDS-T0)) s]"
