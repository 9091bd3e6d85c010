#!/usr/bin/env bash
# Seventh pass: the experimental hybrid all-reduce (SM direct path and copy engines on disjoint
# ranges of one call, TOPOPLAN_HYBRID_CE_PCT): checked against the CPU reference, then busbw at
# 128 MiB-1 GiB for copy-engine shares 0 (against NCCL), 10, 20, 30 %.
set -u
. "$(dirname "$0")/env.sh"
sec check 60 "TOPOPLAN_HYBRID_CE_PCT=25 TOPOPLAN_HYBRID_MIN_MB=1" bench --coll all-reduce -d float,half,int8 -o sum,max --counts 1048579,16777219,67108867 -w 2 -n 3 --runs 1 -c 1
echo "CHECK: $(grep '# summary' "$OUT/check.log" | tail -1) rc: $(grep '^rc=' "$OUT/check.log")"
C=33554432,134217728,268435456
sec perf 40 "" bench --counts $C -w 3 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/perf.log" | awk '{printf "%s:%s/%s ", $1, $9, $12} END {print "pct 0 vs nccl"}'
for p in 10 20 30; do
  sec perf 40 "TOPOPLAN_HYBRID_CE_PCT=$p" bench --counts $C -w 3 -n 20 --runs 3 -c 0
  grep -E '^ +[0-9]+ ' "$OUT/perf.log" | tail -3 | awk -v p=$p '{printf "%s:%s(ip %s) ", $1, $9, $13} END {print "pct " p}'
done
