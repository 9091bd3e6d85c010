#!/usr/bin/env bash
# Session 11's closing device run with the shipped defaults (pull mode at 512 KiB-16 MiB, implied
# LL credits): the correctness matrix (with one-way calls between symmetric ones, multi-segment
# LL with 2 CTAs, LL up to 4 MiB, CUDA graphs), the multi-process check, then the headline
# all-reduce table and the other collectives against NCCL. Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
sec check 150 "" bench --coll all -d all -o sum,max --counts 1,7,4099,65537,262147,1048579 -w 1 -n 2 --runs 1 -c 1
sec check 60 "TOPOPLAN_DIRECT_LL_CTAS=2" bench --coll all -d float -o sum,min --counts 3,65537,262147 -w 1 -n 3 --runs 1 -c 1
sec check 60 "TOPOPLAN_LL_MAX=4194304" bench --coll all-reduce,all-gather -d float,half -o sum --counts 5,1048579 -w 1 -n 3 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce -d float -o sum,avg --counts 2,1000,65536,1048576,4194307 -w 2 -n 5 --runs 1 -c 1 --cuda-graph
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed; algos: $(grep -oE 'one-shot[-a-z+0-9]*' "$OUT/check.log" | sort | uniq -c | tr '\n' ' ')"
MP_T=60 timeout 200 bash "$(dirname "$0")/mp.sh" | tail -1
sec perf 200 "" bench -b 8 -e 1G -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/perf.log" | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'
sec others 100 "" bench --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 256M -f 8 -w 3 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^#.*bench:|^ +[0-9]+ ' "$OUT/others.log" | awk '/bench:/ {printf "\n%s ", $4; next} {printf "%s:%s/%s ", $1, $14, $22}'; echo
