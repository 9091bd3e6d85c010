#!/usr/bin/env bash
# First end-to-end run: toolchain probe, correctness and timing of the all-reduce algorithms.
set -u
. "$(dirname "$0")/env.sh"
machine_info | tee "$OUT/info.txt"
ls -l /usr/lib/x86_64-linux-gnu/libnccl* | tee -a "$OUT/info.txt"
run() { echo "+ $*" | tee -a "$OUT/log.txt"; timeout "${T:-120}" "$BIN" "$@" 2>&1 | tee -a "$OUT/log.txt"; echo "rc=${PIPESTATUS[0]}" | tee -a "$OUT/log.txt"; }
T=120 run bench -b 8 -e 64M -f 8 -g 2 -w 3 -n 20 --runs 1 -c 1 --vs-nccl --algo one-shot
T=120 run bench -b 1K -e 64M -f 64 -g 2 -w 3 -n 20 --runs 1 -c 1 --vs-nccl --algo two-shot
T=120 run bench -b 64M -e 1G -f 4 -g 2 -w 2 -n 5 --runs 1 -c 1 --vs-nccl --algo ce
T=200 run bench -b 1K -e 16M -f 16 -g 2 -w 2 -n 10 --runs 1 -c 1 --vs-nccl --coll all
