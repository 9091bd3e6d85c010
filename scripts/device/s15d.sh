#!/usr/bin/env bash
# Session 15, run 5: the bench makes each size's host data once (one thread per rank) and
# uploads it for both libraries: checked with NCCL beside ours (one process and --procs), then
# the wall time of one 512 MiB row against the previous binary (.devbin/topoplan-old).
set -u
. "$(dirname "$0")/env.sh"
T0=$SECONDS
sec check 120 "" bench --coll all -d float,bfloat16,int8 -o sum,avg --counts 1,1027,262147,4194307 -w 1 -n 2 --runs 1 -c 1 --vs-nccl
grep -E "summary" "$OUT/check.log"
sec check 60 "" bench --procs -o avg --counts 7,4194307 -w 1 -n 2 --runs 1 -c 1 --vs-nccl
grep -E "^ +[0-9]+ |summary" "$OUT/check.log" | tail -3
echo "[check $((SECONDS-T0)) s]"
for b in .devbin/topoplan-old "$BIN" .devbin/topoplan-old "$BIN"; do
  t=$SECONDS
  "$b" bench -b 512M -e 512M -w 3 -n 20 --runs 5 -c 0 --vs-nccl | grep -E "^ +[0-9]"
  echo "$b: $((SECONDS-t)) s wall"
done 2>&1 | tee "$OUT/wall.log"
