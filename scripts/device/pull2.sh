#!/usr/bin/env bash
# Pull mode, second pass (relaxed arrive and in-place done words): the correctness matrix with
# pull forced on every Simple one-shot call down to 1 element, the new defaults against NCCL,
# pull below 1 MiB and at 16-32 MiB, the hybrid at 2-64 MiB, and the hybrid's share in place
# at 512 MiB-1 GiB.
set -u
. "$(dirname "$0")/env.sh"
vs() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -n "$2" | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'; }
row() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -n "$2" | awk -v tag="$3" '{printf "%s:%s/%s ", $1, $7, $11} END {print tag}'; }
F="TOPOPLAN_PULL=1"
sec check 150 "$F" bench --coll all -d all -o sum,max --counts 1,7,65537,1048579 --algo one-shot -w 0 -n 1 --runs 1 -c 1
sec check 60 "$F" bench --coll all -d float,half -o avg,prod,min --counts 0,3,16777219 --algo one-shot -w 0 -n 1 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce -d float,bfloat16,int8 -o sum,min --counts 1048576,2097155,4194307 -w 1 -n 3 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed; algos: $(grep -oE 'one-shot[-a-z+]*' "$OUT/check.log" | sort | uniq -c | tr '\n' ' ')"
sec perf 150 "" bench -b 8 -e 64M -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
vs perf 24; echo "defaults vs nccl ^"
sec var 60 "$F" bench -b 64K -e 1M -f 2 --algo one-shot -w 5 -n 20 --runs 3 -c 0
row var 5 "pull 64K-1M"
sec var 60 "TOPOPLAN_PULL_MAX_KB=65536" bench -b 8M -e 32M -f 2 -w 5 -n 20 --runs 3 -c 0
row var 3 "pull 8-32M"
for p in 15 25 35; do
  sec var 60 "TOPOPLAN_HYBRID_MIN_MB=2 TOPOPLAN_HYBRID_CE_PCT=$p" bench -b 2M -e 64M -f 2 -w 5 -n 20 --runs 3 -c 0
  row var 6 "hybrid $p% 2-64M"
done
for p in 50 60 70; do
  sec var 60 "TOPOPLAN_HYBRID_CE_PCT=$p" bench --counts 134217728,268435456 -w 3 -n 20 --runs 3 -c 0
  row var 2 "hybrid $p% 512M-1G"
done
