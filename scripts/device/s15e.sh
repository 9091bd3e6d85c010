#!/usr/bin/env bash
# Session 15, run 6: the session's final binary: a check with NCCL beside ours through the
# bench's split-out data code, then the GPU tests (cuda_device).
set -u
. "$(dirname "$0")/env.sh"
sec check 60 "" bench --coll all-reduce,all-gather,reduce-scatter -d float,bfloat16 -o sum,avg --counts 1027,262147,4194307 -w 1 -n 2 --runs 1 -c 1 --vs-nccl
grep -E "summary" "$OUT/check.log"
{ echo "+ cuda_device"; timeout 200 .devbin/cuda_device --test-threads 1; echo "rc=$?"; } > "$OUT/gputest.log" 2>&1
tail -10 "$OUT/gputest.log"
