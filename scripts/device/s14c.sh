#!/usr/bin/env bash
# Session 14, run 3: the direct kernels take 128 registers per thread, so a 512-thread CTA fills
# an SM's register file and the hybrid's copy-engine reduces find only the SMs the direct grid
# leaves (4 of 132). Caps the direct kernels' registers (TOPOPLAN_DIRECT_MAXREG, a knob of commit
# 4344bbb only: run this script with that commit's binary) and shrinks the
# reduce CTAs (TOPOPLAN_PAIR_BLOCK) so both fit on one SM: checked, then timed against the
# default (hybrid 512 MiB-1 GiB, pull and push 1-256 MiB, LL 8 B-64 KiB). Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
sec check 120 "TOPOPLAN_DIRECT_MAXREG=64" bench --coll all -d float,half -o sum,max --counts 7,65537,1048579,16777219 -w 1 -n 2 --runs 1 -c 1
sec check 120 "TOPOPLAN_DIRECT_MAXREG=96 TOPOPLAN_PAIR_BLOCK=256" bench --coll all-reduce -d float,bfloat16 -o sum,avg --counts 7,65537,1048579,134217731 -w 1 -n 2 --runs 1 -c 1
sec check 60 "TOPOPLAN_DIRECT_MAXREG=64" bench --coll all-reduce -d float -o sum --counts 134217731 -w 1 -n 2 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed [$((SECONDS-T0)) s]"
for v in "" "TOPOPLAN_DIRECT_MAXREG=64" "TOPOPLAN_DIRECT_MAXREG=96 TOPOPLAN_PAIR_BLOCK=256" "TOPOPLAN_DIRECT_MAXREG=80 TOPOPLAN_PAIR_BLOCK=256" "TOPOPLAN_DIRECT_MAXREG=64 TOPOPLAN_PAIR_BLOCK=256" ""; do
  sec hyb 60 "$v" bench -b 512M -e 1G -f 2 -w 3 -n 20 --runs 5 -c 0
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/hyb.log" | awk '/^\+/ {printf "\n%-62s", $2" "$3; next} {printf "%s: %s ip %s  ", $1, $9, $13}'; echo; echo "[$((SECONDS-T0)) s]"
for v in "" "TOPOPLAN_DIRECT_MAXREG=64" "TOPOPLAN_DIRECT_MAXREG=96"; do
  sec push 60 "$v" bench -b 1M -e 256M -f 4 -w 3 -n 20 --runs 3 -c 0
  sec lat 60 "$v" bench -b 8 -e 64K -f 8 -w 20 -n 100 --runs 3 -c 0
done
for f in push lat; do grep -E '^\+|^ +[0-9]+ ' "$OUT/$f.log" | awk '/^\+/ {printf "\n%-28s", $2; next} {printf "%s:%s/%s ", $1, $7, $11}'; done; echo; echo "[$((SECONDS-T0)) s]"
sec trace 60 "TOPOPLAN_HYBRID_TRACE=1 TOPOPLAN_DIRECT_MAXREG=96 TOPOPLAN_PAIR_BLOCK=256" bench -b 512M -e 512M -w 2 -n 8 --runs 1 -c 0
grep 'hybrid trace' "$OUT/trace.log" | awk '{k=$6; sm[k]+=$8; ce[k]+=$11; n[k]++} END {for (k in n) printf "trace %s: sm %.1f ce %.1f us (mean of %d)\n", k, sm[k]/n[k], ce[k]/n[k], n[k]}'; echo "[$((SECONDS-T0)) s]"
