#!/usr/bin/env bash
# Session 15, run 2: average by 2^-k (tp_div) checked and timed against the previous binary
# (.devbin/topoplan-old, same run, alternating); the copy-engine pair's smallest chunk and the
# sharing kernels' registers for the in-place hybrid; the GPU tests.
set -u
. "$(dirname "$0")/env.sh"
OLD=.devbin/topoplan-old
machine_info > "$OUT/info.txt" 2>&1
{ echo "+ cuda_device"; timeout 240 .devbin/cuda_device --test-threads 1; echo "rc=$?"; } > "$OUT/gputest.log" 2>&1
tail -12 "$OUT/gputest.log"
# Every collective x every type x avg, odd counts, NCCL beside ours.
sec check 200 "" bench --coll all -d all -o avg --counts 1,7,1027,262147,4194307 -w 1 -n 2 --runs 1 -c 1 --vs-nccl
grep -E "summary|wrong element" "$OUT/check.log" | tail -4
sec check 60 "" bench --procs -d float,bfloat16,int32 -o avg --counts 7,262147,8388611,134217731 -w 1 -n 2 --runs 1 -c 1 --vs-nccl
grep -E "summary" "$OUT/check.log" | tail -2
# avg against sum, new binary against old, alternating.
for r in 1 2; do
  for b in "$BIN" "$OLD"; do
    { echo "+ $b avg/sum"; timeout 120 "$b" bench -d float,bfloat16 -o sum,avg -b 1M -e 512M -f 8 -w 3 -n 20 --runs 3 -c 0; echo "rc=$?"; } >> "$OUT/avg.log" 2>&1
  done
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/avg.log" | awk '/^\+/ {print; next} {printf "%12s %9s %4s %8s %8s\n", $1, $3, $4, $8, $12}'
for r in 1 2; do
  for v in "" "TOPOPLAN_CE_MIN_KB=4096" "TOPOPLAN_CE_MIN_KB=8192" "TOPOPLAN_CE_MIN_KB=16384" \
           "TOPOPLAN_CE_MIN_KB=8192 TOPOPLAN_SHARED_MAXREG=80"; do
    sec sweep 60 "$v" bench -b 512M -e 1G -f 2 -w 3 -n 20 --runs 5 -c 0
  done
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/sweep.log" | awk '/^\+/ {printf "\n%-50s", $2" "$3; next} {printf "%s: %s ip %s  ", $1, $9, $13}'; echo
