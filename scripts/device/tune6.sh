#!/usr/bin/env bash
# Sixth pass: LL CTAs of fewer threads (TOPOPLAN_LL_BLOCK) checked and timed against the default
# (alternating, each against NCCL), the host's enqueue time per call (TOPOPLAN_BENCH_HOST=1),
# and the copy-engine pair path's new defaults (1 copy stream, 64 MiB chunks) at 128 MiB-1 GiB.
set -u
. "$(dirname "$0")/env.sh"
sec check 40 "TOPOPLAN_LL_BLOCK=128" bench --coll all -d float,int8 -o sum --counts 1,7,65537,1048579 -w 1 -n 3 --runs 1 -c 1
sec check 40 "TOPOPLAN_LL_BLOCK=64" bench --coll all -d float -o sum --counts 1,7,65537,1048579 -w 1 -n 3 --runs 1 -c 1
echo "CHECK: $(grep '# summary' "$OUT/check.log" | awk '{s+=$5; n+=$3} END {print n" configs, "s" wrong"}') rc0: $(grep -c '^rc=0' "$OUT/check.log")"
for v in "TOPOPLAN_BENCH_HOST=1" TOPOPLAN_LL_BLOCK=128 TOPOPLAN_LL_BLOCK=64 "" TOPOPLAN_LL_BLOCK=128 TOPOPLAN_LL_BLOCK=64; do
  sec lat 40 "$v" bench -b 8 -e 64K -f 2 -w 5 -n 20 --runs 5 -c 0 --vs-nccl
  grep -E '^ +[0-9]+ ' "$OUT/lat.log" | tail -14 | awk -v v="$v" '{o+=$7; n+=$11; if ($7/$11>0.5) m++} END {printf "mean ours %.2f nccl %.2f above-0.5: %d | %s\n", o/NR, n/NR, m, v}'
done
grep '# host enqueue' "$OUT/lat.log" | awk '{s[$4]+=$(NF-1); c[$4]++} END {for (k in s) printf "host %s %.2f us/call\n", k, s[k]/c[k]}'
sec ce 60 "" bench --counts 33554432,134217728,268435456 --algo ce -d float -o sum -w 3 -n 20 --runs 3 -c 1 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/ce.log" | awk '{printf "%s:%s/%s(%s) ", $1, $9, $12, $10} END {print "ce"}'
