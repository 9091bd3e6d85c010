#!/usr/bin/env bash
# The generic copy-engine lowering (TOPOPLAN_CE_PAIR=0 --algo ce), which lowers the planner's
# interleaved copy-engine schedule since session 10 but had not run on a GPU since: checked
# against the CPU reference, then timed beside the copy-engine pair path.
set -u
. "$(dirname "$0")/env.sh"
sec ce 60 "TOPOPLAN_CE_PAIR=0" bench --algo ce --coll all-reduce -d float,half -o sum,max --counts 7,1048579,16777219 -w 1 -n 3 --runs 1 -c 1
sec ce 60 "TOPOPLAN_CE_PAIR=0" bench --algo ce -b 4M -e 256M -f 4 -w 3 -n 10 --runs 3 -c 0
sec ce 60 "" bench --algo ce -b 4M -e 256M -f 4 -w 3 -n 10 --runs 3 -c 0
grep -E '^\+|summary|rc=|^ +[0-9]+ ' "$OUT/ce.log" | awk '/^\+/ {print; next} {print $1, $6, $7, $9, $10, $11}'
