#!/usr/bin/env bash
# The timing half of final2.sh alone (all-reduce 8 B-1 GiB and the other collectives against
# NCCL), for when the correctness half already ran: at most 8 files come back per device call.
set -u
. "$(dirname "$0")/env.sh"
sec() { local name=$1 t=$2; shift 2
  { echo "+ topoplan $*"; timeout "$t" "$BIN" "$@"; echo "rc=$?"; } >> "$OUT/$name.log" 2>&1; }
machine_info > "$OUT/info.txt" 2>&1
sec perf 150 bench -b 8 -e 1G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
echo "perf: $(grep -c 'x$' "$OUT/perf.log") rows"
sec others 100 bench --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 256M -f 8 -g 2 -w 3 -n 20 --runs 3 -c 0 --vs-nccl
echo "others: $(grep -c 'x$' "$OUT/others.log") rows"
