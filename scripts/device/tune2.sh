#!/usr/bin/env bash
# Second tuning pass: correctness (LL first-line preload, copy-engine pair), latency variants
# (relaxed LL credits, no PDL), copy-engine pair variants (copy streams, chunk) at 16 MiB-1 GiB.
set -u
. "$(dirname "$0")/env.sh"
summ() { echo "$1: $(grep -c '# summary' "$OUT/$2.log") runs, $(grep '# summary' "$OUT/$2.log" | awk '{s+=$5} END {print s+0}') wrong, $(grep -c '^rc=[^0]' "$OUT/$2.log") failed"; }
sec check 80 "" bench --coll all -d float,half,int8 -o sum,max --counts 1,7,65537,1048579 -w 0 -n 1 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce --algo ce -d float,half,int8 -o sum,avg,min --counts 7,1048579,16777219 -w 2 -n 3 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce --algo ce -d float -o sum --counts 268435459 -w 1 -n 2 --runs 1 -c 1
summ CHECK check
C=4194304,16777216,67108864,134217728,268435456
sec ce 60 "" bench --counts $C --algo ce -w 3 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/ce.log" | awk '{printf "%s:%s/%s ", $1, $9, $12} END {print ""}'
for v in TOPOPLAN_CE_STREAMS=3 TOPOPLAN_CE_STREAMS=4 TOPOPLAN_CE_CHUNK_MB=64 "TOPOPLAN_CE_STREAMS=3 TOPOPLAN_CE_CHUNK_MB=64" "TOPOPLAN_CE_STREAMS=4 TOPOPLAN_CE_CHUNK_MB=16"; do
  sec ce 30 "$v" bench --counts $C --algo ce -w 3 -n 20 --runs 3 -c 0
  grep -E '^ +[0-9]+ ' "$OUT/ce.log" | tail -5 | awk -v v="$v" '{printf "%s:%s ", $1, $9} END {print v}'
done
sec lat 40 "" bench -b 8 -e 64K -f 8 -w 5 -n 20 --runs 5 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/lat.log" | awk '{printf "%s:%s/%s ", $1, $7, $11} END {print ""}'
for v in TOPOPLAN_LL_RELAXED=1 TOPOPLAN_PDL=0 "TOPOPLAN_LL_RELAXED=1 TOPOPLAN_DIRECT_NOOP=1"; do
  sec lat 30 "$v" bench -b 8 -e 64K -f 8 -w 5 -n 20 --runs 5 -c 0
  grep -E '^ +[0-9]+ ' "$OUT/lat.log" | tail -6 | awk -v v="$v" '{printf "%s:%s ", $1, $7} END {print v}'
done
