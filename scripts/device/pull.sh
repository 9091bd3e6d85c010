#!/usr/bin/env bash
# Pull mode of the direct path (kernels/src/direct_pull.cu), first GPU run: the correctness
# matrix with pull forced on every Simple one-shot call, the shipped defaults' check (auto pull
# at 1-32 MiB, the hybrid from 512 MiB), then all-reduce time push against pull against NCCL,
# and pull's CTA size and arrive-fence variants.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
F="TOPOPLAN_PULL=1 TOPOPLAN_PROTO=Simple"
sec check 150 "$F" bench --coll all -d all -o sum,max --counts 1,7,65537,1048579 -w 0 -n 1 --runs 1 -c 1
sec check 60 "$F" bench --coll all -d float -o avg,prod,min --counts 0,3,16777219 -w 0 -n 1 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce -d float,half,bfloat16 -o sum --counts 262147,1048576,4194307 -w 1 -n 3 --runs 1 -c 1
sec check 90 "" bench --coll all-reduce -d float -o sum --counts 134217728,268435459 -w 0 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed; algos: $(grep -oE 'one-shot[-a-z+]*' "$OUT/check.log" | sort | uniq -c | tr '\n' ' ')"
row() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -n "$2" | awk -v tag="$3" '{printf "%s:%s/%s(%s) ", $1, $7, $11, $6} END {print tag}'; }
sec perf 120 "TOPOPLAN_PULL=0" bench -b 256K -e 64M -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/perf.log" | awk '{printf "%s:%s/%s=%s ip %s/%s=%s\n", $1, $7, $11, $14, $15, $19, $22}'
echo "push vs nccl ^"
sec perf 120 "$F" bench -b 8 -e 64M -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/perf.log" | tail -24 | awk '{printf "%s:%s/%s=%s ip %s/%s=%s\n", $1, $7, $11, $14, $15, $19, $22}'
echo "pull vs nccl ^"
for v in "TOPOPLAN_PULL_CTA_KB=4" "TOPOPLAN_PULL_CTA_KB=16" "TOPOPLAN_PULL_CTA_KB=32" "TOPOPLAN_PULL_RELEASE=0"; do
  sec var 60 "$F $v" bench -b 256K -e 32M -f 2 -w 5 -n 20 --runs 3 -c 0
  row var 8 "$v"
done
