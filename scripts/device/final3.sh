#!/usr/bin/env bash
# Session 11's closing device run, with the shipped defaults (pull mode for 512 KiB-16 MiB
# all-reduce): the headline all-reduce table against NCCL, the correctness matrix, CUDA-graph
# replay, the multi-process check, a 10,000-call memory check at 1 MiB (pull), compute-sanitizer
# over pull sizes, then pull's block-size variant at 4-16 MiB. Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
sec perf 200 "" bench -b 8 -e 1G -f 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/perf.log" | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'
sec check 150 "" bench --coll all -d all -o sum,max --counts 1,7,65537,262147,1048579 -w 0 -n 1 --runs 1 -c 1
sec check 60 "" bench --coll all -d float,half -o avg,prod,min --counts 0,3,4194307 -w 0 -n 1 --runs 1 -c 1
wrong=$(grep '# summary' "$OUT/check.log" | awk '{s+=$5} END {print s+0}')
echo "CHECK: $(grep -c '# summary' "$OUT/check.log") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$OUT/check.log") failed; algos: $(grep -oE 'one-shot[-a-z+]*' "$OUT/check.log" | sort | uniq -c | tr '\n' ' ')"
sec graph 60 "" bench -b 8 -e 64M -f 4 -w 3 -n 20 --runs 3 -c 1 --vs-nccl --cuda-graph
echo "graph: $(grep '# summary' "$OUT/graph.log" | tail -1)"
grep -E '^ +[0-9]+ ' "$OUT/graph.log" | awk '{printf "%s:%s/%s(%s) ", $1, $7, $11, $6} END {print "graph ours/nccl"}'
MP_T=60 timeout 200 bash "$(dirname "$0")/mp.sh" | tail -1
sec leak 60 "" bench -b 1M -e 1M -g 2 -w 10 -n 10000 --runs 1 -c 0
grep '# memory' "$OUT/leak.log" | head -2
if command -v compute-sanitizer >/dev/null; then
  { echo "+ compute-sanitizer --tool memcheck topoplan bench -b 256K -e 16M -f 4 -c 1"; timeout 90 compute-sanitizer --tool memcheck "$BIN" bench -b 256K -e 16M -f 4 -g 2 -w 1 -n 2 --runs 1 -c 1; echo "rc=$?"; } > "$OUT/memcheck.log" 2>&1
  grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -2; grep '# summary' "$OUT/memcheck.log" | tail -1
fi
for v in "TOPOPLAN_PULL_BLOCK=256" "TOPOPLAN_PULL=0"; do
  sec var 60 "$v" bench -b 4M -e 16M -f 2 -w 5 -n 20 --runs 3 -c 0
  grep -E '^ +[0-9]+ ' "$OUT/var.log" | tail -3 | awk -v tag="$v" '{printf "%s:%s/%s ", $1, $7, $11} END {print tag}'
done
