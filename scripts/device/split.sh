#!/usr/bin/env bash
# Not yet run (written in session 12, after its device time): does the SM push path with pull
# mode beside it on a second stream (TOPOPLAN_HYBRID_SIDE=pull: the hybrid's side range pulled
# instead of copied by the copy engines) move more than the push path alone (360 GB/s both
# ways) or the copy-engine hybrid (371-376)? Push CTAs are cut (TOPOPLAN_DIRECT_CTAS) so the
# pull kernel's CTAs (TOPOPLAN_PULL_CTAS, two per SM) find free SMs: td_direct_* uses 128
# registers a thread, one 512-thread CTA per SM. Checked first, then timed against NCCL.
set -u
. "$(dirname "$0")/env.sh"
sec() { local name=$1 t=$2 envs=$3; shift 3
  { echo "+ $envs topoplan $*"; timeout "$t" env $envs "$BIN" "$@"; echo "rc=$?"; } >> "$OUT/$name.log" 2>&1; }
rows() { grep -E '^ +[0-9]+ ' "$OUT/$1.log" | tail -"$2" | awk -v tag="$3" '{printf "%s:%s/%s ip %s/%s  ", $1, $7, $11, $15, $19} END {print "<- " tag}'; }
SPLIT="TOPOPLAN_HYBRID_SIDE=pull TOPOPLAN_HYBRID_MIN_MB=16 TOPOPLAN_DIRECT_CTAS=48 TOPOPLAN_PULL_CTAS=72"
sec check 90 "$SPLIT" bench -d float,half -o sum,max --counts 8388611,16777216,67108867 -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
# Baselines: the push path with the cut grid alone (hybrid off), and pull mode alone at these
# sizes, so a gain can be told from a grid effect.
sec base 60 "TOPOPLAN_HYBRID_CE_PCT=0 TOPOPLAN_DIRECT_CTAS=48" bench -b 32M -e 1G -f 4 --algo one-shot -w 3 -n 10 --runs 3 -c 0 --vs-nccl
rows base 3 "push alone, 48 CTAs"
sec base 60 "TOPOPLAN_HYBRID_CE_PCT=0 TOPOPLAN_PULL=1" bench -b 32M -e 1G -f 4 --algo one-shot -w 3 -n 10 --runs 3 -c 0 --vs-nccl
rows base 3 "pull alone"
for v in "" "$SPLIT" "$SPLIT TOPOPLAN_HYBRID_CE_PCT=30" "TOPOPLAN_HYBRID_SIDE=pull TOPOPLAN_HYBRID_MIN_MB=16 TOPOPLAN_DIRECT_CTAS=56 TOPOPLAN_PULL_CTAS=40" "" "$SPLIT"; do
  sec split 60 "$v" bench -b 32M -e 1G -f 4 -w 3 -n 10 --runs 3 -c 0 --vs-nccl
  rows split 3 "$v"
done
