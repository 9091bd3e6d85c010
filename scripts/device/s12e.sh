#!/usr/bin/env bash
# Session 12, run 6: Simple segment size at 32-64 MiB now that one thread fences a segment
# (96/160/192 KiB against the default quarter-share, 128 KiB at 32 MiB), against NCCL.
set -u
. "$(dirname "$0")/env.sh"
rows() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -"$2" | awk -v tag="$3" '{printf "%s:%s/%s ip %s/%s  ", $1, $7, $11, $15, $19} END {print "<- " tag}'; }
for v in "" "TOPOPLAN_DIRECT_SEG_KB=96" "TOPOPLAN_DIRECT_SEG_KB=160" "TOPOPLAN_DIRECT_SEG_KB=192" "" "TOPOPLAN_DIRECT_SEG_KB=96" "TOPOPLAN_DIRECT_SEG_KB=160" "TOPOPLAN_DIRECT_SEG_KB=192"; do
  sec seg 25 "$v" bench -b 32M -e 64M -f 2 --algo one-shot -w 5 -n 20 --runs 3 -c 0 --vs-nccl
  rows seg 2 "push $v"
done
