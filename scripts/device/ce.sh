#!/usr/bin/env bash
# The copy-engine pair all-reduce (runtime::cuda::ce_pair) on 2 GPUs: correctness against the
# CPU reference (every type, odd counts, in and out of place, one count above 1 GiB), timing
# against NCCL, knob variants; then the general correctness matrix and a latency diagnosis
# (one process vs one process per GPU, empty kernels, nsys API times where nsys exists).
# Logs in $OUT/{ce,check,lat}.log; prints one line per section.
set -u
. "$(dirname "$0")/env.sh"
sec() { # sec LOG TIMEOUT "ENV=.. ENV=.." ARGS... : runs topoplan with env, appends to $OUT/LOG.log
  local name=$1 t=$2 envs=$3; shift 3
  { echo "+ $envs topoplan $*"; timeout "$t" env $envs "$BIN" "$@"; echo "rc=$?"; } >> "$OUT/$name.log" 2>&1
}
machine_info > "$OUT/info.txt" 2>&1
sec ce 100 "" bench --coll all-reduce --algo ce -d all -o sum,max --counts 1,7,4097,65537,1048579,16777219 -w 2 -n 3 --runs 1 -c 1
sec ce 40 "" bench --coll all-reduce --algo ce -d float,half,bfloat16 -o avg,prod --counts 7,1048579 -w 2 -n 3 --runs 1 -c 1
sec ce 60 "" bench --coll all-reduce --algo ce -d float -o sum --counts 268435459 -w 1 -n 2 --runs 1 -c 1
echo "CE-CHECK: $(grep -c '# summary' "$OUT/ce.log") runs, $(grep '# summary' "$OUT/ce.log" | awk '{s+=$5} END {print s+0}') wrong, $(grep -c '^rc=[^0]' "$OUT/ce.log") failed"
sec ce 90 "" bench -b 1M -e 1G -f 2 --algo ce -w 5 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/ce.log" | tail -11 | awk '{print $1, $7, $14, $22}'
sec check 100 "" bench --coll all -d all -o sum,max --counts 1,7,65537,1048579 -w 0 -n 1 --runs 1 -c 1
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}') wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed"
sec lat 40 "" bench -b 8 -e 64K -f 8 -w 20 -n 200 --runs 5 -c 0 --vs-nccl
sec lat 20 "TOPOPLAN_DIRECT_NOOP=1" bench -b 8 -e 8 -w 20 -n 200 --runs 5 -c 0
sec lat 40 "" bench -g 2 --procs -b 8 -e 64K -f 8 -w 20 -n 200 --runs 5 -c 0
sec lat 30 "TOPOPLAN_DIRECT_NOOP=1" bench -g 2 --procs -b 8 -e 8 -w 20 -n 200 --runs 5 -c 0
echo "lat done"
for v in TOPOPLAN_CE_CHUNK_MB=16 TOPOPLAN_CE_CHUNK_MB=64 TOPOPLAN_CE_MIN_KB=1024 TOPOPLAN_CE_MIN_KB=8192 TOPOPLAN_CE_SLOTS=2 TOPOPLAN_CE_SIGNAL=kernel; do
  sec ce 30 "$v" bench -b 2M -e 1G -f 4 --algo ce -w 3 -n 20 --runs 3 -c 0
done
echo "variants done"
if command -v nsys >/dev/null; then
  ( cd /tmp && timeout 60 nsys profile -o /tmp/lat --force-overwrite true --stats=true "$OLDPWD/$BIN" bench -b 8 -e 8 -w 20 -n 500 --runs 1 -c 0 ) > "$OUT/nsys.log" 2>&1
  echo "nsys rc=$?"
else
  echo "no nsys" > "$OUT/nsys.log"; ls /usr/local/cuda*/bin 2>/dev/null | head -30 >> "$OUT/nsys.log"
fi
