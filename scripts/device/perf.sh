#!/usr/bin/env bash
# Performance against NCCL on the same buffers (medians of --runs), all-reduce float sum first.
# Usage: perf.sh [all-reduce|sweep|others]...
set -u
. "$(dirname "$0")/env.sh"
run() { echo "+ $*" | tee -a "$OUT/perf.log"; timeout "${T:-300}" "$BIN" "$@" 2>&1 | tee -a "$OUT/perf.log" | grep -v '^#' | cut -c1-200; }
for what in "${@:-all-reduce}"; do
  case $what in
    all-reduce) T=400 run bench -b 8 -e 2G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl ;;
    sweep)
      TOPOPLAN_LL_MAX=1048576 T=60 run bench -b 64K -e 1M -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
      for c in 64 132; do TOPOPLAN_CTAS=$c T=60 run bench -b 4M -e 32M -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --algo one-shot; done
      T=120 run bench -b 256M -e 1G -f 4 -g 2 -w 2 -n 10 --runs 1 -c 0 --algo ce
      T=120 run bench -b 256M -e 1G -f 4 -g 2 -w 2 -n 10 --runs 1 -c 0 --algo one-shot ;;
    others) T=400 run bench --coll all-gather,reduce-scatter,broadcast,reduce -b 8 -e 1G -f 4 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl ;;
  esac
done
