#!/usr/bin/env bash
# Session 12, run 2: one fence per Simple segment is the default now. Segments and slots at
# 16-64 MiB (push), and the hybrid's share and chunks at 512 MiB in place, against NCCL.
set -u
. "$(dirname "$0")/env.sh"
rows() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -"$2" | awk -v tag="$3" '{printf "%s:%s/%s ip %s/%s  ", $1, $7, $11, $15, $19} END {print "<- " tag}'; }
sec check 90 "TOPOPLAN_DIRECT_SEG_KB=64 TOPOPLAN_DIRECT_SLOTS=4" bench --coll all-reduce,broadcast -d float -o sum --counts 7,8388611 --algo one-shot -w 1 -n 2 --runs 1 -c 1
for v in "" "TOPOPLAN_DIRECT_SEG_KB=64" "TOPOPLAN_DIRECT_SEG_KB=64 TOPOPLAN_DIRECT_SLOTS=4" "TOPOPLAN_DIRECT_SEG_KB=256" "TOPOPLAN_DIRECT_SLOTS=3" "" "TOPOPLAN_DIRECT_SEG_KB=64" "TOPOPLAN_ONE_FENCE=0"; do
  sec push 60 "$v" bench -b 16M -e 64M -f 2 --algo one-shot -w 5 -n 20 --runs 3 -c 0 --vs-nccl
  rows push 3 "push $v"
done
for v in "" "TOPOPLAN_HYBRID_CE_PCT=40" "TOPOPLAN_CE_CHUNK_MB=32" "TOPOPLAN_CE_CHUNK_MB=128" "TOPOPLAN_HYBRID_CE_PCT=45" "" "TOPOPLAN_HYBRID_CE_PCT=40"; do
  sec big 90 "$v" bench -b 512M -e 512M -w 2 -n 5 --runs 3 -c 0 --vs-nccl
  rows big 1 "hybrid $v"
done
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
