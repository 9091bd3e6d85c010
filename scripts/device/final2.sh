#!/usr/bin/env bash
# The closing device run of the direct-push executor, most important first: all-reduce and the
# other collectives against NCCL, the correctness matrix, the multi-process (CUDA IPC) check,
# CUDA-graph replay, topology detection, a 10,000-call memory check and compute-sanitizer.
# Logs in $OUT/*.log; prints one summary line per section.
set -u
. "$(dirname "$0")/env.sh"
sec() { # sec NAME TIMEOUT ARGS... : runs topoplan, appends to $OUT/NAME.log
  local name=$1 t=$2; shift 2
  { echo "+ topoplan $*"; timeout "$t" "$BIN" "$@"; echo "rc=$?"; } >> "$OUT/$name.log" 2>&1
}
machine_info > "$OUT/info.txt" 2>&1
sec perf 150 bench -b 8 -e 1G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
echo "perf: $(grep -c 'x$' "$OUT/perf.log") rows"
sec others 90 bench --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 256M -f 8 -g 2 -w 3 -n 20 --runs 3 -c 0 --vs-nccl
sec check 90 bench --coll all -d all -o sum,max --counts 1,7,65537,1048579 -w 0 -n 1 --runs 1 -c 1
sec check 40 bench --coll all -d float -o avg --counts 0,16777219 -w 0 -n 1 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed commands"
if [ -f "$(dirname "$0")/mp.sh" ]; then timeout 150 bash "$(dirname "$0")/mp.sh" | tail -1; fi
sec graph 40 bench -b 8 -e 64M -f 16 -g 2 -w 3 -n 20 --runs 3 -c 1 --vs-nccl --cuda-graph
echo "graph: $(grep '# summary' "$OUT/graph.log" | tail -1)"
sec detect 30 detect -o "$OUT/detected.xml" --compare tests/data/measurements/h200x2/topo.xml
echo "detect: $(tail -2 "$OUT/detect.log" | tr '\n' ' ')"
sec leak 30 bench -b 64K -e 64K -g 2 -w 10 -n 10000 --runs 1 -c 0
grep '# memory' "$OUT/leak.log" | head -1
if command -v compute-sanitizer >/dev/null; then
  { echo "+ compute-sanitizer --tool memcheck topoplan bench -b 64K -e 4M -f 64 -c 1"; timeout 60 compute-sanitizer --tool memcheck "$BIN" bench -b 64K -e 4M -f 64 -g 2 -w 1 -n 2 --runs 1 -c 1; echo "rc=$?"; } > "$OUT/memcheck.log" 2>&1
  grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -2
fi
