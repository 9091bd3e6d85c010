#!/usr/bin/env bash
# Session 12, run 1: the GPU tests (two never run on a GPU), then the in-place progress word
# (GPU-scope release, the new default, against the old system-scope one) and one fence per
# Simple segment (TOPOPLAN_ONE_FENCE=1) on the push path (4-64 MiB) and the hybrid (512 MiB,
# 1 GiB), each checked; then where the host time of a small call goes.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
timeout 240 .devbin/cuda_device --test-threads 1 --nocapture > "$OUT/tests.log" 2>&1; echo "rc=$?" >> "$OUT/tests.log"
grep -E '^test |test result|rc=' "$OUT/tests.log"
rows() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -"$2" | awk -v tag="$3" '{printf "%s:%s/%s ip %s/%s  ", $1, $7, $11, $15, $19} END {print "<- " tag}'; }
for v in "" "TOPOPLAN_ONE_FENCE=1" "TOPOPLAN_PROGRESS=relaxed TOPOPLAN_ONE_FENCE=1"; do
  sec check 90 "$v" bench --coll all -d float,half -o sum,max --counts 1,7,262147,4194307,16777219 --algo one-shot -w 1 -n 2 --runs 1 -c 1
done
sec check 120 "TOPOPLAN_ONE_FENCE=1" bench -b 512M -e 1G -f 2 -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
for v in "TOPOPLAN_PROGRESS=sys" "" "TOPOPLAN_ONE_FENCE=1" "TOPOPLAN_ONE_FENCE=1 TOPOPLAN_PROGRESS=relaxed" "TOPOPLAN_PROGRESS=sys" "" "TOPOPLAN_ONE_FENCE=1"; do
  sec push 60 "$v" bench -b 4M -e 64M -f 2 --algo one-shot -w 5 -n 20 --runs 3 -c 0 --vs-nccl
  rows push 5 "push $v"
done
for v in "TOPOPLAN_PROGRESS=sys" "" "TOPOPLAN_ONE_FENCE=1" "TOPOPLAN_PROGRESS=sys" "TOPOPLAN_ONE_FENCE=1"; do
  sec big 120 "$v" bench -b 512M -e 1G -f 2 -w 2 -n 5 --runs 3 -c 0 --vs-nccl
  rows big 2 "hybrid $v"
done
sec host 40 "TOPOPLAN_BENCH_HOST=1" bench -b 8 -e 64K -f 8 -w 5 -n 100 --runs 3 -c 0 --vs-nccl
grep '# host' "$OUT/host.log" | head -8
rows host 6 "host"
for v in "TOPOPLAN_DIRECT_NOOP=1" "TOPOPLAN_DIRECT_NOOP=1 TOPOPLAN_PDL=0"; do
  sec noop 40 "TOPOPLAN_BENCH_HOST=1 $v" bench -b 8 -e 8 -w 5 -n 100 --runs 3 -c 0
  grep '# host' "$OUT/noop.log" | tail -2; grep -E '^ +[0-9]+ ' "$OUT/noop.log" | tail -1
done
