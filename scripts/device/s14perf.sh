#!/usr/bin/env bash
# Session 14's closing run, part 2 of 2 (timing; s14final.sh checks): the headline all-reduce
# table against NCCL (8 B-64 MiB: 5 runs of 50 calls; 128 MiB-1 GiB: 5 runs of 20), then the
# other collectives. Logs in $OUT/*.log.
set -u
. "$(dirname "$0")/env.sh"
machine_info > "$OUT/info.txt" 2>&1
T0=$SECONDS
sec perf 150 "" bench -b 8 -e 64M -f 2 -w 5 -n 50 --runs 5 -c 0 --vs-nccl
sec perf 120 "" bench -b 128M -e 1G -f 2 -w 3 -n 20 --runs 5 -c 0 --vs-nccl
grep -E '^ +[0-9]+ ' "$OUT/perf.log" | awk '{printf "%s:%s/%s=%s ip %s/%s=%s %s\n", $1, $7, $11, $14, $15, $19, $22, $6}'; echo "[$((SECONDS-T0)) s]"
sec others 100 "" bench --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 256M -f 8 -w 3 -n 20 --runs 3 -c 0 --vs-nccl
grep -E '^#.*bench:|^ +[0-9]+ ' "$OUT/others.log" | awk '/bench:/ {printf "\n%s ", $4; next} {printf "%s:%s/%s ", $1, $14, $22}'; echo; echo "[$((SECONDS-T0)) s]"
