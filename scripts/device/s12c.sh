#!/usr/bin/env bash
# Session 12, run 3: the hybrid's SM half with fewer CTAs (the copy-engine half's reduce
# kernels run beside it on the side stream and need SMs too), at 512 MiB and 1 GiB, in and out
# of place, against NCCL; checked once.
set -u
. "$(dirname "$0")/env.sh"
rows() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -"$2" | awk -v tag="$3" '{printf "%s:%s/%s ip %s/%s  ", $1, $7, $11, $15, $19} END {print "<- " tag}'; }
sec check 90 "TOPOPLAN_DIRECT_CTAS=40" bench -b 512M -e 512M -w 1 -n 2 --runs 1 -c 1
for v in "" "TOPOPLAN_DIRECT_CTAS=48" "TOPOPLAN_DIRECT_CTAS=40" "TOPOPLAN_DIRECT_CTAS=32" "TOPOPLAN_DIRECT_CTAS=48 TOPOPLAN_HYBRID_CE_PCT=60" "TOPOPLAN_DIRECT_CTAS=32 TOPOPLAN_HYBRID_CE_PCT=60" "" "TOPOPLAN_DIRECT_CTAS=48" "TOPOPLAN_DIRECT_CTAS=40"; do
  sec big 90 "$v" bench -b 512M -e 1G -f 2 -w 2 -n 5 --runs 3 -c 0 --vs-nccl
  rows big 2 "hybrid $v"
done
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
