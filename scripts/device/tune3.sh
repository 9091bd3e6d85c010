#!/usr/bin/env bash
# Third tuning pass: relaxed LL credits (now the default) and the relaxed-Simple diagnostic,
# checked against the CPU reference, then timed against NCCL at 8 B-512 KiB and 1-64 MiB.
set -u
. "$(dirname "$0")/env.sh"
summ() { echo "$1: $(grep -c '# summary' "$OUT/$2.log") runs, $(grep '# summary' "$OUT/$2.log" | awk '{s+=$5} END {print s+0}') wrong, $(grep -c '^rc=[^0]' "$OUT/$2.log") failed"; }
sec check 80 "" bench --coll all -d float,half,int8,double -o sum,max --counts 1,7,65537,1048579,16777219 -w 1 -n 3 --runs 1 -c 1
sec check 60 "TOPOPLAN_SIMPLE_RELAXED=1" bench --coll all -d float,int8 -o sum --counts 65537,1048579,16777219 -w 1 -n 3 --runs 1 -c 1
summ CHECK check
sec lat 40 "" bench -b 8 -e 512K -f 4 -w 5 -n 20 --runs 5 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/lat.log" | awk '{printf "%s:%s/%s ", $1, $7, $11} END {print ""}'
for v in "" TOPOPLAN_SIMPLE_RELAXED=1; do
  sec mid 60 "$v" bench -b 1M -e 64M -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
  grep -E '^ +[0-9]+ ' "$OUT/mid.log" | tail -7 | awk -v v="$v" '{printf "%s:%s/%s ", $1, $7, $11} END {print v}'
done
