#!/usr/bin/env bash
# Fifth pass: relaxed credit loads at kernel start (TOPOPLAN_SEQ_RELAXED=1), checked, then
# timed against the default twice each, alternating, every run against NCCL (8 B-64 KiB).
set -u
. "$(dirname "$0")/env.sh"
sec check 60 "TOPOPLAN_SEQ_RELAXED=1" bench --coll all -d float,int8 -o sum --counts 1,7,65537,1048579,16777219 -w 1 -n 3 --runs 1 -c 1
echo "CHECK: $(grep '# summary' "$OUT/check.log" | tail -1) rc: $(grep -c '^rc=0' "$OUT/check.log")"
for v in "" TOPOPLAN_SEQ_RELAXED=1 "" TOPOPLAN_SEQ_RELAXED=1; do
  sec lat 40 "$v" bench -b 8 -e 64K -f 2 -w 5 -n 20 --runs 5 -c 0 --vs-nccl
  grep -E '^ +[0-9]+ ' "$OUT/lat.log" | tail -14 | awk -v v="$v" '{o+=$7; n+=$11; s=s sprintf("%s/%s ", $7, $11)} END {printf "mean ours %.2f nccl %.2f | %s %s\n", o/NR, n/NR, v, s}'
done
