#!/usr/bin/env bash
# Session 15, run 1: the in-place hybrid at 512 MiB against knobs (alternating with the
# default, two rounds), then the latency floor under CUDA graphs (empty kernel, LL call, NCCL).
# Logs in $OUT/sweep.log and $OUT/lat.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
for r in 1 2; do
  for v in "" "TOPOPLAN_HYBRID_CE_PCT=49" "TOPOPLAN_HYBRID_CE_PCT=51" "TOPOPLAN_SHARED_MAXREG=80" \
           "TOPOPLAN_SHARED_MAXREG=72" "TOPOPLAN_DIRECT_CTAS=56" "TOPOPLAN_DIRECT_CTAS=60" \
           "TOPOPLAN_CE_CHUNK_MB=32" "TOPOPLAN_CE_CHUNK_MB=128" "TOPOPLAN_CE_MIN_KB=1024" \
           "TOPOPLAN_CE_MIN_KB=8192" "TOPOPLAN_DIRECT_SLOTS=3"; do
    sec sweep 40 "$v" bench -b 512M -e 512M -w 3 -n 20 --runs 5 -c 0
  done
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/sweep.log" | awk '/^\+/ {printf "\n%-30s", $2; next} {printf "%s: %s ip %s  ", $1, $9, $13}'; echo
sec lat 60 "TOPOPLAN_DIRECT_NOOP=1" bench -b 8 -e 64K -f 8 -w 20 -n 200 --runs 5 -c 0 --cuda-graph
sec lat 60 "TOPOPLAN_DIRECT_NOOP=1" bench -b 8 -e 64K -f 8 -w 20 -n 200 --runs 5 -c 0
sec lat 90 "" bench -b 8 -e 64K -f 8 -w 20 -n 200 --runs 5 -c 0 --cuda-graph --vs-nccl
sec lat 90 "TOPOPLAN_BENCH_HOST=1" bench -b 8 -e 64K -f 8 -w 20 -n 200 --runs 5 -c 0 --vs-nccl
sec lat 90 "TOPOPLAN_PDL=0" bench -b 8 -e 64K -f 8 -w 20 -n 200 --runs 5 -c 0 --cuda-graph
grep -E '^\+|^ +[0-9]+ ' "$OUT/lat.log"
