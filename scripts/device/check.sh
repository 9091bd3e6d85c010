#!/usr/bin/env bash
# Correctness on the device: every collective x type x operator x in/out-of-place against the CPU
# reference (runtime::reference) on fresh random data, outputs poisoned (NaN / 0xFF) first.
# Sizes: 0, 1 and odd element counts up to ~1M for every combination, then float sum up to 1 GiB.
# Prints one summary line per bench invocation and a final CHECK line.
set -u
. "$(dirname "$0")/env.sh"
LOG="$OUT/check.log"
: > "$LOG"
fail=0
run() {
  echo "+ topoplan $*" >> "$LOG"
  timeout "${T:-300}" "$BIN" "$@" >> "$LOG" 2>&1 || fail=1
  grep '# summary' "$LOG" | tail -1
}
# Every combination, small and odd sizes, the size-based algorithm choice (LL, one-shot, ...).
T=400 run bench --coll all -d all -o all --counts 0,1,7,1023,4097,65537,1048579 -w 0 -n 1 --runs 1 -c 1
# Each algorithm explicitly, float and bf16 sum, odd counts.
for algo in one-shot ring; do
  T=200 run bench --coll all -d float,bfloat16 -o sum,max --counts 1,4097,1048579 -w 0 -n 1 --runs 1 -c 1 --algo $algo
done
for algo in two-shot tree; do
  T=200 run bench --coll all-reduce -d float,bfloat16 -o sum,max --counts 1,4097,1048579 -w 0 -n 1 --runs 1 -c 1 --algo $algo
done
T=200 run bench --coll all-reduce,all-gather,reduce-scatter -d float,half,int8 -o sum,max --counts 1,4097,65537 -w 0 -n 1 --runs 1 -c 1 --algo one-shot-ll
# Large: all-reduce float sum up to 1 GiB (copy-engine pipeline and one-shot), odd count too.
T=300 run bench --coll all-reduce -d float -o sum --counts 16777219,268435456 -w 0 -n 1 --runs 1 -c 1 --algo ce
T=300 run bench --coll all-reduce -d float -o sum --counts 16777219,268435456 -w 0 -n 1 --runs 1 -c 1 --algo one-shot
T=300 run bench --coll all-gather,reduce-scatter,broadcast,reduce -d float -o sum --counts 268435456 -w 0 -n 1 --runs 1 -c 1
wrong=$(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}')
echo "CHECK $( [ $fail = 0 ] && [ "$wrong" = 0 ] && echo PASS || echo FAIL ): $(grep -c '# summary' "$LOG") runs, $wrong wrong elements, $(grep -c 'out of bounds' "$LOG") tables (log: check.log)"
