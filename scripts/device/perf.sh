#!/usr/bin/env bash
# Performance against NCCL on the same buffers (medians of --runs), all-reduce float sum first.
set -u
. "$(dirname "$0")/env.sh"
run() { echo "+ topoplan $*" | tee -a "$OUT/perf.log"; timeout "${T:-300}" "$BIN" "$@" 2>&1 | tee -a "$OUT/perf.log" | grep -v '^#' ; }
T=300 run bench -b 8 -e 2G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
T=120 run bench -b 256M -e 1G -f 4 -g 2 -w 2 -n 10 --runs 1 -c 0 --vs-nccl --algo ce
TOPOPLAN_CE_PULL=1 T=120 run bench -b 256M -e 1G -f 4 -g 2 -w 2 -n 10 --runs 1 -c 0 --algo ce
