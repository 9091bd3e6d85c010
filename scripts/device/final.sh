#!/usr/bin/env bash
# One call for the record: correctness sample, all-reduce and other collectives against NCCL,
# memory over 10,000 calls, topology detection vs NCCL's dump, compute-sanitizer memcheck.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
r() { echo "+ $*" >> "$OUT/final.log"; timeout "${T:-120}" "$BIN" "$@" >> "$OUT/final.log" 2>&1; echo "rc=$?" >> "$OUT/final.log"; }
T=60 r bench --coll all -d all -o sum,max --counts 7,65537 -w 0 -n 1 --runs 1 -c 1
T=40 r bench --coll all -d float,half -o sum,prod,avg --counts 1048579 -w 0 -n 1 --runs 1 -c 1
T=100 r bench -b 8 -e 1G -f 8 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
T=50 r bench --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 64M -f 64 -g 2 -w 3 -n 20 --runs 3 -c 0 --vs-nccl
T=20 r bench -b 64K -e 64K -g 2 -w 0 -n 10000 --runs 1 -c 0
T=10 r detect -o "$OUT/detected.xml" --json "$OUT/detected.json" --compare tests/data/measurements/h200x2/topo.xml
echo "+ compute-sanitizer" >> "$OUT/final.log"
timeout 40 compute-sanitizer --tool memcheck "$BIN" bench -b 1K -e 4M -f 64 -g 2 -w 1 -n 2 --runs 1 -c 1 > "$OUT/memcheck.log" 2>&1; echo "rc=$?" >> "$OUT/memcheck.log"
tail -4 "$OUT/memcheck.log" >> "$OUT/final.log"
grep -vE '^#  ' "$OUT/final.log" | cut -c1-230
