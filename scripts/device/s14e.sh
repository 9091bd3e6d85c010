#!/usr/bin/env bash
# Session 14, run 7: `topoplan bench --procs` now reports memory (per rank, the maximum over
# ranks, as in one process): checked against the reference with NCCL beside ours, 8 B-512 MiB
# (the hybrid across processes, in place sharing SMs); then the GPU tests. Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
T0=$SECONDS
sec mpmem 120 "" bench -g 2 --procs --vs-nccl --coll all-reduce -d float -o sum --counts 2,65536,1048576,16777216,134217731 -w 2 -n 10 --runs 1 -c 1
grep -E '^# memory|^# summary|^rc=|^ +[0-9]+ ' "$OUT/mpmem.log" | cut -c1-190; echo "[$((SECONDS-T0)) s]"
if [ -x .devbin/cuda_device ]; then
  { timeout 120 .devbin/cuda_device --test-threads 1; echo "rc=$?"; } > "$OUT/gputest.log" 2>&1
  grep -E "^test |test result|rc=" "$OUT/gputest.log"
fi
echo "[$((SECONDS-T0)) s]"
