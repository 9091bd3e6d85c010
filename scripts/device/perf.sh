#!/usr/bin/env bash
# The performance suite against NCCL (same buffers, alternating, one process, one host thread
# per GPU): the tables of docs/benchmarks-gpu.md.
#
# Usage: bash .devbin/perf.sh [allreduce] [others] [graph] [ce] [sweep]   (default: allreduce others)
#   allreduce: all-reduce float sum 8 B–64 MiB (-w 5 -n 50 --runs 5) and 128 MiB–1 GiB
#              (-w 3 -n 20 --runs 5), out of place and in place, the runtime's pick per size.
#   others:    all-gather, reduce-scatter, broadcast, reduce 1 KiB–256 MiB (-f 8).
#   graph:     all-reduce 8 B–64 KiB under CUDA graph capture, both libraries (the latency floor
#              without the host launch).
#   ce:        the copy-engine pair (--algo ce) 1 MiB–1 GiB.
#   sweep:     an A/B of knob settings: each of $VARIANTS (space-separated, each one ENV=VALUE or
#              `default`; e.g. VARIANTS="default TOPOPLAN_CE_MIN_KB=4096") runs $SWEEP_ARGS
#              (default: the 512 MiB hybrid, -b 512M -e 512M -w 3 -n 20 --runs 5 -c 0), $ROUNDS
#              rounds (default 2) alternating, so drift hits every variant alike.
# Environment: GPUS (default 2), VARIANTS, SWEEP_ARGS, ROUNDS.
# Outputs: $OUT/perf.log, $OUT/others.log, $OUT/graph.log, $OUT/ce.log, $OUT/sweep.log (commands
#   and tables); $OUT/NAME-K.json per bench call; $OUT/allreduce.svg (ours against NCCL, from
#   perf.log: `topoplan bench --from-log`); $OUT/info.txt. Timing runs do not check elements
#   (-c 0): run check.sh on the same binary.
set -u
. "$(dirname "$0")/env.sh"
G=${GPUS:-2}
machine_info > "$OUT/info.txt" 2>&1
for what in "${@:-allreduce others}"; do
  for w in $what; do
    case $w in
      allreduce)
        sec perf 150 "" bench -g "$G" -b 8 -e 64M -f 2 -w 5 -n 50 --runs 5 -c 0 --vs-nccl
        sec perf 240 "" bench -g "$G" -b 128M -e 1G -f 2 -w 3 -n 20 --runs 5 -c 0 --vs-nccl
        "$BIN" bench --from-log "$OUT/perf.log" --json "$OUT/allreduce.json" --plot "$OUT/allreduce.svg"
        grep -E '^ +[0-9]+ ' "$OUT/perf.log" | awk '{printf "%11s %-12s ours %9s NCCL %9s %7s | in place %9s %9s %7s\n", $1, $6, $7, $11, $14, $15, $19, $22}' ;;
      others)
        sec others 150 "" bench -g "$G" --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 256M -f 8 -w 3 -n 20 --runs 3 -c 0 --vs-nccl
        grep -E '^#.*bench:|^ +[0-9]+ ' "$OUT/others.log" | awk '/bench:/ {printf "\n%s ", $4; next} {printf "%s:%s/%s ", $1, $14, $22}'; echo ;;
      graph)
        sec graph 90 "" bench -g "$G" -b 8 -e 64K -f 8 -w 20 -n 200 --runs 5 -c 0 --cuda-graph --vs-nccl
        grep -E '^ +[0-9]+ ' "$OUT/graph.log" | awk '{print $1, $7, $11, $14}' ;;
      ce)
        sec ce 150 "" bench -g "$G" -b 1M -e 1G -f 2 --algo ce -w 5 -n 20 --runs 3 -c 0 --vs-nccl
        grep -E '^ +[0-9]+ ' "$OUT/ce.log" | awk '{print $1, $9, $13, $14}' ;;
      sweep)
        for r in $(seq "${ROUNDS:-2}"); do
          for v in ${VARIANTS:-default}; do
            [ "$v" = default ] && v=""
            # shellcheck disable=SC2086
            sec sweep 60 "$v" bench -g "$G" ${SWEEP_ARGS:--b 512M -e 512M -w 3 -n 20 --runs 5 -c 0}
          done
        done
        grep -E '^\+|^ +[0-9]+ ' "$OUT/sweep.log" | awk '/^\+/ {printf "\n%-34s", ($2 == "topoplan") ? "default" : $2; next} {printf "%s: %s ip %s  ", $1, $9, $13}'; echo ;;
      *) echo "perf.sh: unknown part \`$w\` (allreduce, others, graph, ce, sweep)" >&2; exit 2 ;;
    esac
  done
done
