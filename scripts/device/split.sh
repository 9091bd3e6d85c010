#!/usr/bin/env bash
# Not yet run (written in session 12, after its device time): do SM stores and SM peer loads at
# once move more than the push path alone (360 GB/s both ways), as SM stores and the copy
# engines do (the hybrid: 371-376)? Two forms:
#   - in one grid (TOPOPLAN_SPLIT_PCT: direct_split.cu, push CTAs then pull CTAs, no fork/join);
#   - on two streams (TOPOPLAN_HYBRID_SIDE=pull: the hybrid's side range pulled instead of
#     copied; the push grid cut with TOPOPLAN_DIRECT_CTAS so the pull CTAs find SMs: the direct
#     kernels take 128 registers a thread, one 512-thread CTA per SM).
# Each form is checked first (every element, in and out of place), then timed against NCCL.
set -u
. "$(dirname "$0")/env.sh"
rows() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -"$2" | awk -v tag="$3" '{printf "%s:%s/%s ip %s/%s  ", $1, $7, $11, $15, $19} END {print "<- " tag}'; }
ONE="TOPOPLAN_SPLIT_PCT=30 TOPOPLAN_SPLIT_MAX_MB=1024 TOPOPLAN_HYBRID_CE_PCT=0"
TWO="TOPOPLAN_HYBRID_SIDE=pull TOPOPLAN_HYBRID_MIN_MB=16 TOPOPLAN_DIRECT_CTAS=48 TOPOPLAN_PULL_CTAS=72"
# The GPU test of both forms (runtime/tests/cuda_split.rs: f32 sum/avg and f16 max at 32 MiB +
# odd, 64 MiB and 512 MiB + odd, in and out of place), from its stripped test binary if carried.
if [ -x .devbin/cuda_split ]; then
  timeout 180 .devbin/cuda_split --nocapture > "$OUT/gputest.log" 2>&1; echo "rc=$?" >> "$OUT/gputest.log"
  grep -E '^test |test result|rc=' "$OUT/gputest.log"
fi
sec check 90 "$ONE" bench -d float,half -o sum,max,avg --counts 8388611,16777216,67108867 -w 1 -n 2 --runs 1 -c 1
sec check 90 "$TWO" bench -d float,half -o sum,max --counts 8388611,16777216,67108867 -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
# Baselines: pull mode alone at these sizes, and the push path with a cut grid alone.
sec base 60 "TOPOPLAN_HYBRID_CE_PCT=0 TOPOPLAN_PULL=1" bench -b 32M -e 1G -f 4 --algo one-shot -w 3 -n 10 --runs 3 -c 0 --vs-nccl
rows base 3 "pull alone"
sec base 60 "TOPOPLAN_HYBRID_CE_PCT=0 TOPOPLAN_DIRECT_CTAS=48" bench -b 32M -e 1G -f 4 --algo one-shot -w 3 -n 10 --runs 3 -c 0 --vs-nccl
rows base 3 "push alone, 48 CTAs"
for v in "" "$ONE" "$ONE TOPOPLAN_SPLIT_PCT=20" "$TWO" "$ONE TOPOPLAN_SPLIT_PCT=40 TOPOPLAN_SPLIT_PULL_CTAS=48"; do
  sec split 60 "$v" bench -b 32M -e 1G -f 4 -w 3 -n 10 --runs 3 -c 0 --vs-nccl
  rows split 3 "$v"
done
