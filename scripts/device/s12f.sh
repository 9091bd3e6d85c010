#!/usr/bin/env bash
# Session 12, run 7: Simple's last segment per stream cut in pieces (TOPOPLAN_TAIL=d), checked
# on every collective, then against the uncut default at 32-64 MiB (push) and 512 MiB (hybrid),
# against NCCL. Not adopted (32 MiB 109.6 with 4 pieces, 106-107 with 2, against 105.5-106.0
# uncut; 512 MiB in place slower): the code was removed after this run; it is in commit 08cd907.
set -u
. "$(dirname "$0")/env.sh"
rows() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -"$2" | awk -v tag="$3" '{printf "%s:%s/%s ip %s/%s  ", $1, $7, $11, $15, $19} END {print "<- " tag}'; }
sec check 50 "TOPOPLAN_TAIL=4" bench --coll all -d float,double -o sum,max --counts 7,4194307,16777219 --algo one-shot -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
for v in "TOPOPLAN_TAIL=4" "" "TOPOPLAN_TAIL=2" "TOPOPLAN_TAIL=4" "" "TOPOPLAN_TAIL=2"; do
  sec push 20 "$v" bench -b 32M -e 64M -f 2 --algo one-shot -w 5 -n 20 --runs 3 -c 0 --vs-nccl
  rows push 2 "push $v"
done
for v in "TOPOPLAN_TAIL=4" "" "TOPOPLAN_TAIL=4" ""; do
  sec big 25 "$v" bench -b 512M -e 512M -w 2 -n 5 --runs 3 -c 0 --vs-nccl
  rows big 1 "hybrid $v"
done
