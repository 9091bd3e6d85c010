#!/usr/bin/env bash
# Pull mode reads only memory the peers may read: the GPU test with pool memory without and then
# with peer access (runtime/tests/cuda_device.rs), then the defaults at 512 KiB-16 MiB, checked.
set -u
. "$(dirname "$0")/env.sh"
timeout 120 .devbin/cuda_device pull_mode_only --nocapture > "$OUT/readable.log" 2>&1; echo "rc=$?" >> "$OUT/readable.log"
tail -4 "$OUT/readable.log"
{ echo "+ topoplan bench -b 512K -e 16M -f 2 -w 3 -n 20 --runs 3 -c 1"; timeout 60 "$BIN" bench -b 512K -e 16M -f 2 -w 3 -n 20 --runs 3 -c 1; echo "rc=$?"; } > "$OUT/pullcheck.log" 2>&1
grep -E '^ +[0-9]+ |summary|rc=' "$OUT/pullcheck.log" | awk '{print $1, $6, $7, $10, $11, $14}'
