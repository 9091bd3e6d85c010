#!/usr/bin/env bash
# Session 14, run 8: the hybrid at an odd count (512 MiB + 12 B) ran at 315 GB/s out of place and
# 264 in place (run 4's check): its copy-engine range started unaligned. Now the SM range is
# whole grains and the copy engines take the odd tail: checked and timed beside 512 MiB, in one
# process and across processes. Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
T0=$SECONDS
sec odd 90 "" bench --coll all-reduce -d float -o sum --counts 134217728,134217731 -w 3 -n 10 --runs 3 -c 1
sec odd 90 "" bench --procs -g 2 --coll all-reduce -d float -o sum --counts 134217731 -w 3 -n 10 --runs 3 -c 1
grep -E '^\+|^# summary|^rc=|^ +[0-9]+ ' "$OUT/odd.log" | cut -c1-160; echo "[$((SECONDS-T0)) s]"
