#!/usr/bin/env bash
# Session 13, last device call: one process per GPU with CUDA graphs (--procs --cuda-graph, both
# libraries checked), the hybrid across processes (copy engines through IPC-mapped rings and
# counters, CudaProcComm::enable_copy_engines) checked at 512 MiB-1 GiB with odd tails, then
# both timed against NCCL. Logs in $OUT/mp4.log.
set -u
. "$(dirname "$0")/env.sh"
LOG="$OUT/mp4.log"
: > "$LOG"
T0=$SECONDS
run() { local t=$1; shift
  echo "+ $* " >> "$LOG"; timeout "$t" env "$@" >> "$LOG" 2>&1; echo "rc=$?" >> "$LOG"; }
run 60 "$BIN" bench -g 2 --procs --cuda-graph --vs-nccl --coll all-reduce,all-gather -d float -o sum,avg --counts 2,1000,65536,1048576,4194307 -w 2 -n 5 --runs 1 -c 1
echo "[$((SECONDS-T0)) s] graph: $(grep '# summary' "$LOG" | tail -1)"
run 100 "$BIN" bench -g 2 --procs --vs-nccl -d float -o sum,avg --counts 134217731,268435456 -w 1 -n 2 --runs 1 -c 1
echo "[$((SECONDS-T0)) s] hybrid: $(grep '# summary' "$LOG" | tail -1)"
echo "MP4-CHECK: $(grep -c '# summary' "$LOG") runs, $(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}') wrong (ours); $(grep -c '^rc=[^0]' "$LOG") failed; algos: $(grep -oE 'one-shot[-a-z+0-9]*' "$LOG" | sort | uniq -c | tr '\n' ' ')"
awk '/^\+/ {next} /bench:/ {h=$4; next} /^ +[0-9]+ / { if (($10 != 0 && $10 != "N/A") || ($13 != 0 && $13 != "N/A") || ($18 != 0 && $18 != "N/A") || ($21 != 0 && $21 != "N/A")) print "WRONG", h, $1, $3, $4, $6, $10, $13, $18, $21 }' "$LOG" | head
grep -E 'rror' "$LOG" | head -3
run 60 "$BIN" bench -g 2 --procs --vs-nccl -b 256M -e 1G -f 2 -w 2 -n 10 --runs 3 -c 0
grep -E '^ +[0-9]+ ' "$LOG" | tail -3 | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'; echo "[$((SECONDS-T0)) s]"
run 50 "$BIN" bench -g 2 --procs --cuda-graph --vs-nccl -b 8 -e 16M -f 8 -w 3 -n 20 --runs 3 -c 0
grep -E '^ +[0-9]+ ' "$LOG" | tail -8 | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'; echo "[$((SECONDS-T0)) s]"
