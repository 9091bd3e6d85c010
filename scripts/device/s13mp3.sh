#!/usr/bin/env bash
# Session 13: pull mode across processes after the in-place all-gather fix (rank r's input is
# block r of its output): the checks of s13mp2.sh (both libraries, defaults; pull forced on every
# Simple one-shot call), then compute-sanitizer memcheck over --procs with pull. Logs in $OUT.
set -u
. "$(dirname "$0")/env.sh"
LOG="$OUT/mppull.log"
: > "$LOG"
T0=$SECONDS
run() { local t=$1; shift
  echo "+ $* " >> "$LOG"; timeout "$t" env "$@" >> "$LOG" 2>&1; echo "rc=$?" >> "$LOG"; }
run 150 "$BIN" bench -g 2 --procs --vs-nccl --coll all -d float,half,bfloat16 -o sum,max --counts 0,1,7,65537,262147,1048579,4194307,16777219 -w 1 -n 2 --runs 1 -c 1
run 90 TOPOPLAN_PULL=1 "$BIN" bench -g 2 --procs --coll all -d float,half -o sum,min --counts 7,65537,1048579,8388611 -w 1 -n 2 --runs 1 -c 1
echo "MP-PULL-CHECK: $(grep -c '# summary' "$LOG") runs, $(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}') wrong (ours); $(grep -c '^rc=[^0]' "$LOG") failed; algos: $(grep -oE 'one-shot[-a-z+0-9]*' "$LOG" | sort | uniq -c | tr '\n' ' ') [$((SECONDS-T0)) s]"
awk '/^\+/ {vs = ($0 ~ /vs-nccl/); next} /bench:/ {h=$4" "$9" "$10; next} /^ +[0-9]+ / { if (vs) { w=$10; wi=$18; nw=$13; nwi=$21 } else { w=$10; wi=$14; nw=0; nwi=0 } if ((w != 0 && w != "N/A") || (wi != 0 && wi != "N/A") || (nw != 0 && nw != "N/A") || (nwi != 0 && nwi != "N/A")) print "WRONG", h, $1, $3, $4, $6, "ours", w, wi, "nccl", nw, nwi }' "$LOG" | head
if command -v compute-sanitizer >/dev/null; then
  { echo "+ compute-sanitizer --tool memcheck --target-processes all topoplan bench -g 2 --procs ..."; timeout 150 compute-sanitizer --tool memcheck --target-processes all "$BIN" bench -g 2 --procs --coll all-reduce,all-gather -d float -o sum --counts 7,1048579,4194307 -w 1 -n 2 --runs 1 -c 1; echo "rc=$?"; } > "$OUT/mpmemcheck.log" 2>&1
  echo "MP-MEMCHECK: $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/mpmemcheck.log") clean of $(grep -c 'ERROR SUMMARY' "$OUT/mpmemcheck.log"); $(grep '# summary' "$OUT/mpmemcheck.log" | tail -1); $(grep '^rc=' "$OUT/mpmemcheck.log") [$((SECONDS-T0)) s]"
fi
