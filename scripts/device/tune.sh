#!/usr/bin/env bash
# Correctness after kernel changes, then tuning sweeps: small-message latency against NCCL,
# the copy-engine pair all-reduce's knobs (copy streams, chunk), and the Simple direct path's
# segment and grid knobs at 1-32 MiB. Logs in $OUT/{check,lat,ce,mid}.log.
set -u
. "$(dirname "$0")/env.sh"
sec() { # sec LOG TIMEOUT "ENV=.. ENV=.." ARGS... : runs topoplan with env, appends to $OUT/LOG.log
  local name=$1 t=$2 envs=$3; shift 3
  { echo "+ $envs topoplan $*"; timeout "$t" env $envs "$BIN" "$@"; echo "rc=$?"; } >> "$OUT/$name.log" 2>&1
}
summ() { echo "$1: $(grep -c '# summary' "$OUT/$2.log") runs, $(grep '# summary' "$OUT/$2.log" | awk '{s+=$5} END {print s+0}') wrong, $(grep -c '^rc=[^0]' "$OUT/$2.log") failed"; }
machine_info > "$OUT/info.txt" 2>&1
sec check 100 "" bench --coll all -d all -o sum,max --counts 1,7,65537,1048579 -w 0 -n 1 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce --algo ce -d float,half,int8 -o sum,avg,min --counts 7,1048579,16777219 -w 2 -n 3 --runs 1 -c 1
sec check 60 "" bench --coll all-reduce --algo ce -d float -o sum --counts 268435459 -w 1 -n 2 --runs 1 -c 1
summ CHECK check
sec lat 40 "" bench -b 8 -e 64K -f 2 -w 5 -n 20 --runs 5 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/lat.log" | awk '{printf "%s:%s/%s ", $1, $7, $11} END {print ""}'
C=4194304,16777216,67108864,134217728,268435456
sec ce 60 "" bench --counts $C --algo ce -w 3 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/ce.log" | awk '{printf "%s:%s/%s ", $1, $9, $12} END {print ""}'
for v in TOPOPLAN_CE_STREAMS=3 TOPOPLAN_CE_CHUNK_MB=64 "TOPOPLAN_CE_STREAMS=3 TOPOPLAN_CE_CHUNK_MB=64" TOPOPLAN_CE_STREAMS=1; do
  sec ce 30 "$v" bench --counts $C --algo ce -w 3 -n 20 --runs 3 -c 0
done
echo "ce variants done"
sec mid 60 "" bench -b 1M -e 32M -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/mid.log" | awk '{printf "%s:%s/%s ", $1, $7, $11} END {print ""}'
for v in TOPOPLAN_DIRECT_SEG_KB=16 TOPOPLAN_DIRECT_SEG_KB=32 "TOPOPLAN_DIRECT_CTAS=64 TOPOPLAN_DIRECT_SEG_KB=16" TOPOPLAN_LL128_MAX=33554432 "TOPOPLAN_LL_MAX=2097152"; do
  sec mid 30 "$v" bench -b 1M -e 32M -f 2 -w 5 -n 20 --runs 3 -c 0
done
echo "mid variants done"
