#!/usr/bin/env bash
# Session 13, run 1: the GPU tests (cuda_device on the refactored one-process entry), a check of
# the defaults after session 12's refactors (direct/launch.rs, direct/local.rs), then split.sh
# (push and pull halves at once: in one grid, and on two streams), never run on a GPU before.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
timeout 150 .devbin/cuda_device --test-threads 1 --nocapture > "$OUT/tests.log" 2>&1; echo "rc=$?" >> "$OUT/tests.log"
grep -E '^test |test result|rc=' "$OUT/tests.log"
{ echo "+ defaults"; timeout 150 "$BIN" bench --coll all -d float,half,bfloat16 -o sum,max --counts 1,7,4097,262147,4194307,16777219,134217731 -w 1 -n 1 --runs 1 -c 1; echo "rc=$?"; } > "$OUT/defaults.log" 2>&1
echo "DEFAULTS: $(grep -c '# summary' "$OUT/defaults.log") runs, $(grep '# summary' "$OUT/defaults.log" | awk '{s+=$5} END {print s+0}') wrong, $(grep '^rc=' "$OUT/defaults.log")"
bash "$(dirname "$0")/split.sh"
