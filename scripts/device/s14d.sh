#!/usr/bin/env bash
# Session 14, run 6: the in-place hybrid (sharing SMs) at 512 MiB: copy-engine share and the
# capped kernels' registers, alternating with the default. Logs in $OUT/sweep.log.
set -u
. "$(dirname "$0")/env.sh"
for v in "" "TOPOPLAN_HYBRID_CE_PCT=54" "TOPOPLAN_HYBRID_CE_PCT=58" "TOPOPLAN_SHARED_MAXREG=80" "TOPOPLAN_HYBRID_CE_PCT=62" "" "TOPOPLAN_HYBRID_CE_PCT=54" "TOPOPLAN_HYBRID_CE_PCT=58" "TOPOPLAN_SHARED_MAXREG=80"; do
  sec sweep 40 "$v" bench -b 512M -e 1G -f 2 -w 3 -n 20 --runs 5 -c 0
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/sweep.log" | awk '/^\+/ {printf "\n%-30s", $2; next} {printf "%s: %s ip %s  ", $1, $9, $13}'; echo
