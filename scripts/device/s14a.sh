#!/usr/bin/env bash
# Session 14, run 1: session 13's unverified refactors on the GPU (the whole-collective check
# with NCCL beside ours; mp.sh in its new form), where each half of the hybrid ends
# (TOPOPLAN_HYBRID_TRACE=1), a copy-engine share sweep at 512 MiB-1 GiB in and out of place, and
# the small-message table with 200 calls per run. Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
sec check 150 "" bench --vs-nccl --coll all -d float,half,bfloat16,int32 -o sum,max --counts 1,7,4099,65537,1048579,16777219 -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed; nccl wrong: $(grep -E '^ +[0-9]+ ' "$OUT/check.log" | awk '{s+=$13+$21} END {print s+0}') [$((SECONDS-T0)) s]"
MP_T=60 timeout 220 bash "$(dirname "$0")/mp.sh" | tail -1; echo "[$((SECONDS-T0)) s]"
sec trace 60 "TOPOPLAN_HYBRID_TRACE=1" bench -b 512M -e 1G -f 2 -w 2 -n 6 --runs 1 -c 0
grep 'hybrid trace' "$OUT/trace.log" | awk '{k=$5" "$6; sm[k]+=$8; ce[k]+=$11; n[k]++} END {for (k in n) printf "trace %s: sm %.1f ce %.1f us (mean of %d)\n", k, sm[k]/n[k], ce[k]/n[k], n[k]}'
for p in 44 47 50 53 56; do
  sec pct 60 "TOPOPLAN_HYBRID_CE_PCT=$p" bench -b 512M -e 1G -f 2 -w 3 -n 20 --runs 7 -c 0
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/pct.log" | awk '/^\+/ {printf "\n%s ", $2; next} {printf "%s: %s ip %s  ", $1, $9, $13}'; echo; echo "[$((SECONDS-T0)) s]"
sec lat 200 "" bench -b 8 -e 64K -f 2 -w 20 -n 200 --runs 7 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/lat.log" | awk '{printf "%s:%s/%s=%s ip %s/%s=%s\n", $1, $7, $11, $14, $15, $19, $22}'; echo "[$((SECONDS-T0)) s]"
