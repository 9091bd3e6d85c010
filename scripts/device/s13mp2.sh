#!/usr/bin/env bash
# Session 13: pull mode across processes (`--procs`, the bench's buffers registered with
# CudaProcComm::register): both libraries checked on every collective with pull at 512 KiB-16 MiB,
# pull forced on every Simple one-shot call (TOPOPLAN_PULL=1), then the all-reduce table against
# NCCL (one communicator per process). Logs in $OUT/mppull.log.
set -u
. "$(dirname "$0")/env.sh"
LOG="$OUT/mppull.log"
: > "$LOG"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
run() { local t=$1; shift
  echo "+ $* " >> "$LOG"; timeout "$t" env "$@" >> "$LOG" 2>&1; echo "rc=$?" >> "$LOG"; }
run 150 "$BIN" bench -g 2 --procs --vs-nccl --coll all -d float,half,bfloat16 -o sum,max --counts 0,1,7,65537,262147,1048579,4194307,16777219 -w 1 -n 2 --runs 1 -c 1
run 90 TOPOPLAN_PULL=1 "$BIN" bench -g 2 --procs --coll all -d float,half -o sum,min --counts 7,65537,1048579,8388611 -w 1 -n 2 --runs 1 -c 1
echo "MP-PULL-CHECK: $(grep -c '# summary' "$LOG") runs, $(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}') wrong (ours); NCCL #nwrong nonzero rows: $(grep -E '^ +[0-9]+ ' "$LOG" | awk '($13 != 0 && $13 != "N/A") || ($21 != 0 && $21 != "N/A")' | wc -l); $(grep -c '^rc=[^0]' "$LOG") failed; algos: $(grep -oE 'one-shot[-a-z+0-9]*' "$LOG" | sort | uniq -c | tr '\n' ' ') [$((SECONDS-T0)) s]"
grep -E 'rror' "$LOG" | head -5
run 150 "$BIN" bench -g 2 --procs --vs-nccl -b 8 -e 1G -f 2 -w 5 -n 20 --runs 5 -c 0
grep -E '^ +[0-9]+ ' "$LOG" | tail -28 | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'; echo "[$((SECONDS-T0)) s]"
