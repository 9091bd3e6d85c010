#!/usr/bin/env bash
# Pull mode with two 256-thread CTAs per SM (the new default): the forced-pull correctness
# matrix, the headline all-reduce table against NCCL, then 128- and 512-thread CTAs and pull up
# to 64 MiB, to place the default block and the upper end of pull's range.
set -u
. "$(dirname "$0")/env.sh"
row() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -n "$2" | awk -v tag="$3" '{printf "%s:%s/%s ", $1, $7, $11} END {print tag}'; }
sec check 150 "TOPOPLAN_PULL=1" bench --coll all -d float,half,int8,double -o sum,max --counts 1,7,65537,1048579,4194307 --algo one-shot -w 0 -n 1 --runs 1 -c 1
sec check 60 "TOPOPLAN_PULL=1 TOPOPLAN_PULL_BLOCK=128" bench --coll all-reduce,reduce-scatter -d float,bfloat16 -o sum,avg --counts 3,1048579,16777219 --algo one-shot -w 0 -n 1 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed; algos: $(grep -oE 'one-shot[-a-z+]*' "$OUT/check.log" | sort | uniq -c | tr '\n' ' ')"
sec perf 200 "" bench -b 8 -e 1G -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/perf.log" | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'
for v in "TOPOPLAN_PULL_BLOCK=128" "TOPOPLAN_PULL_BLOCK=512"; do
  sec var 60 "$v" bench -b 512K -e 16M -f 2 -w 5 -n 20 --runs 3 -c 0
  row var 6 "$v"
done
for v in "TOPOPLAN_PULL_BLOCK=256" "TOPOPLAN_PULL_BLOCK=128"; do
  sec var 60 "$v TOPOPLAN_PULL_MAX_KB=65536" bench -b 32M -e 64M -f 2 -w 5 -n 20 --runs 3 -c 0
  row var 2 "$v pull to 64M"
done
