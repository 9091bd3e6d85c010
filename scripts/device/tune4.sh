#!/usr/bin/env bash
# Fourth tuning pass, 1-32 MiB all-reduce: Simple segment and slot knobs, LL at 1 MiB, a fuller
# grid; each variant checked (-c 1) and timed against NCCL in the same process.
set -u
. "$(dirname "$0")/env.sh"
for v in TOPOPLAN_DIRECT_SEG_KB=32 TOPOPLAN_DIRECT_SEG_KB=128 TOPOPLAN_DIRECT_SLOTS=4 TOPOPLAN_LL_MAX=1048576 TOPOPLAN_DIRECT_CTAS=64 "TOPOPLAN_DIRECT_SEG_KB=32 TOPOPLAN_DIRECT_SLOTS=4"; do
  sec mid 45 "$v" bench -b 1M -e 32M -f 2 -w 5 -n 20 --runs 3 -c 1 --vs-nccl
  grep -E '^ +[0-9]+ ' "$OUT/mid.log" | tail -6 | awk -v v="$v" '{printf "%s:%s/%s(%s) ", $1, $7, $11, $10} END {print v}'
done
