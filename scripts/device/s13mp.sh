#!/usr/bin/env bash
# Session 13: one process per GPU against NCCL (`--procs --vs-nccl`: each process joins an NCCL
# communicator with ncclCommInitRank): both libraries checked on every collective, then the
# all-reduce table and the other collectives timed side by side. Logs in $OUT/mpnccl.log.
set -u
. "$(dirname "$0")/env.sh"
LOG="$OUT/mpnccl.log"
: > "$LOG"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
run() { local t=$1; shift
  echo "+ topoplan $*" >> "$LOG"; timeout "$t" "$BIN" "$@" >> "$LOG" 2>&1; echo "rc=$?" >> "$LOG"; }
run 120 bench -g 2 --procs --vs-nccl --coll all -d float,half -o sum,max --counts 0,1,7,65537,1048579,16777219 -w 1 -n 2 --runs 1 -c 1
echo "MP-NCCL-CHECK: $(grep -c '# summary' "$LOG") runs, $(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}') wrong (ours); NCCL #nwrong nonzero rows: $(grep -E '^ +[0-9]+ ' "$LOG" | awk '$13 != 0 && $13 != "N/A" || $21 != 0 && $21 != "N/A"' | wc -l); $(grep -c '^rc=[^0]' "$LOG") failed [$((SECONDS-T0)) s]"
grep -E 'rror' "$LOG" | head -5
run 150 bench -g 2 --procs --vs-nccl -b 8 -e 1G -f 2 -w 5 -n 20 --runs 5 -c 0
grep -E '^ +[0-9]+ ' "$LOG" | tail -28 | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'; echo "[$((SECONDS-T0)) s]"
run 120 bench -g 2 --procs --vs-nccl --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 256M -f 8 -w 3 -n 20 --runs 3 -c 0
grep -E '^#.*bench:|^ +[0-9]+ ' "$LOG" | tail -32 | awk '/bench:/ {printf "\n%s ", $4; next} {printf "%s:%s/%s ", $1, $14, $22}'; echo; echo "[$((SECONDS-T0)) s]"
