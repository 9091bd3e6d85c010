#!/usr/bin/env bash
# Several processes, one GPU each (`topoplan bench --procs`, runtime::cuda::ipc): correctness of
# every direct collective against the CPU reference on small, odd and large counts, then timing.
# Logs into $OUT/mp.log; prints each run's summary line and a final MP-CHECK line.
set -u
. "$(dirname "$0")/env.sh"
LOG="$OUT/mp.log"
: > "$LOG"
run() {
  echo "+ topoplan $*" >> "$LOG"
  timeout "${T:-120}" "$BIN" "$@" >> "$LOG" 2>&1
  echo "rc=$?" >> "$LOG"
  grep '# summary' "$LOG" | tail -1
}
machine_info >> "$LOG" 2>&1
run bench -g 2 --procs --coll all -d float,half,int8 -o sum,max --counts 0,1,7,65537,1048579 -w 1 -n 3 --runs 1 -c 1
# 1 GiB per rank: every process also computes the reference for both ranks (CPU), hence T=240.
T=240 run bench --coll all-reduce -d float -o sum,avg --counts 16777219,268435456 -w 1 -n 3 --runs 1 -c 1 --procs -g 2
run bench -g 2 --procs -b 8 -e 1G -f 8 -w 5 -n 20 --runs 3 -c 0
wrong=$(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}')
echo "MP-CHECK: $(grep -c '# summary' "$LOG") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$LOG") failed commands (log: mp.log)" | tee -a "$LOG"
