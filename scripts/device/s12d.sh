#!/usr/bin/env bash
# Session 12, run 5: bulk pushes (TOPOPLAN_BULK=1: Simple senders stage through shared memory
# and push 16 KiB chunks with cp.async.bulk) checked on every collective, then against the
# default 16-store pushes at 16-64 MiB and in the hybrid at 512 MiB-1 GiB, against NCCL.
# Slower everywhere (32 MiB 123 against 105 us): the bulk code was removed after this run; it is
# in commit 03038c6 (kernels/src/direct_bulk.cu).
set -u
. "$(dirname "$0")/env.sh"
rows() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -"$2" | awk -v tag="$3" '{printf "%s:%s/%s ip %s/%s  ", $1, $7, $11, $15, $19} END {print "<- " tag}'; }
sec check 60 "TOPOPLAN_BULK=1" bench --coll all -d float,half -o sum,max --counts 1,7,262147,4194307,16777219 --algo one-shot -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
grep -m3 -iE 'error|panick' "$OUT/check.log"
for v in "TOPOPLAN_BULK=1" "" "TOPOPLAN_BULK=1" ""; do
  sec push 30 "$v" bench -b 16M -e 64M -f 2 --algo one-shot -w 5 -n 20 --runs 3 -c 0 --vs-nccl
  rows push 3 "push $v"
done
for v in "TOPOPLAN_BULK=1" ""; do
  sec big 45 "$v" bench -b 512M -e 1G -f 2 -w 2 -n 5 --runs 3 -c 0 --vs-nccl
  rows big 2 "hybrid $v"
done
sec check2 30 "TOPOPLAN_BULK=1" bench -b 512M -e 512M -w 1 -n 2 --runs 1 -c 1
grep -E '# summary|rc=' "$OUT/check2.log"
