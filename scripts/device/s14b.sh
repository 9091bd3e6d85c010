#!/usr/bin/env bash
# Session 14, run 2: mp.sh again (run 1 found registrations outliving the bench's buffers:
# CUDA_ERROR_ALREADY_MAPPED at the next configuration; fixed with CudaProcComm::deregister),
# where each half of the hybrid ends (TOPOPLAN_HYBRID_TRACE=1, read one call late), and LL grids
# at 4-128 KiB (TOPOPLAN_DIRECT_LL_CTAS; default 4 KiB per CTA). Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
MP_T=60 timeout 220 bash "$(dirname "$0")/mp.sh" | tail -1; echo "[$((SECONDS-T0)) s]"
sec trace 60 "TOPOPLAN_HYBRID_TRACE=1" bench -b 512M -e 512M -w 2 -n 8 --runs 1 -c 0
sec trace 60 "TOPOPLAN_HYBRID_TRACE=1" bench -b 1G -e 1G -w 2 -n 8 --runs 1 -c 0
sec trace 60 "TOPOPLAN_HYBRID_TRACE=1 TOPOPLAN_HYBRID_CE_PCT=55" bench -b 512M -e 512M -w 2 -n 8 --runs 1 -c 0
grep -E '^\+|hybrid trace' "$OUT/trace.log" | awk '/^\+/ {if (cfg) for (k in n) printf "%s %s: sm %.1f ce %.1f us (%d)\n", cfg, k, sm[k]/n[k], ce[k]/n[k], n[k]; cfg=$3" "$6; delete n; delete sm; delete ce; next} {k=$6; sm[k]+=$8; ce[k]+=$11; n[k]++} END {for (k in n) printf "%s %s: sm %.1f ce %.1f us (%d)\n", cfg, k, sm[k]/n[k], ce[k]/n[k], n[k]}'
grep -E '^ +[0-9]+ ' "$OUT/trace.log" | cut -c1-140
echo "[$((SECONDS-T0)) s]"
for c in def 16 32 64 def; do
  e=""; [ "$c" != def ] && e="TOPOPLAN_DIRECT_LL_CTAS=$c"
  sec llgrid 60 "$e" bench -b 4K -e 128K -f 2 -w 20 -n 200 --runs 5 -c 0
done
grep -E '^\+|^ +[0-9]+ ' "$OUT/llgrid.log" | awk '/^\+/ {printf "\n%-28s", $2; next} {printf "%s:%s/%s ", $1, $7, $11}'; echo; echo "[$((SECONDS-T0)) s]"
