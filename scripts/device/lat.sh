#!/usr/bin/env bash
# LL credits implied by the peers' data (TD_LL_IMPLIED): the correctness matrix over every
# collective (one-way broadcast/reduce calls mixed with symmetric ones in one process, and
# multi-segment LL with 2 CTAs), then small-message all-reduce against NCCL with and without
# it, the host enqueue cost, and the empty-kernel floor.
set -u
. "$(dirname "$0")/env.sh"
sec check 120 "" bench --coll all -d float,half,int8,double -o sum,max --counts 1,7,4099,65537,262147 -w 1 -n 3 --runs 1 -c 1
sec check 60 "TOPOPLAN_DIRECT_LL_CTAS=2" bench --coll all -d float -o sum,min --counts 3,65537,262147 -w 1 -n 3 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce -d float -o sum,avg --counts 2,1000,65536 --algo one-shot-ll -w 2 -n 5 --runs 1 -c 1 --cuda-graph
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
for v in "TOPOPLAN_LL_IMPLIED=1" "TOPOPLAN_LL_IMPLIED=0" "TOPOPLAN_LL_IMPLIED=1"; do
  sec lat 60 "$v" bench -b 8 -e 256K -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
  grep -E '^ +[0-9]+ ' "$OUT/lat.log" | tail -16 | awk -v tag="$v" '{printf "%s:%s/%s ip %s/%s\n", $1, $7, $11, $15, $19} END {print tag}' | paste -sd' '
done
sec host 40 "TOPOPLAN_BENCH_HOST=1" bench -b 8 -e 64K -f 64 -w 5 -n 100 --runs 3 -c 0 --vs-nccl
grep '# host' "$OUT/host.log" | head -12
sec host 40 "TOPOPLAN_DIRECT_NOOP=1" bench -b 8 -e 8 -w 5 -n 100 --runs 3 -c 0
grep -E '^ +[0-9]+ ' "$OUT/host.log" | tail -1
