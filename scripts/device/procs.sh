#!/usr/bin/env bash
# One process per GPU (`topoplan bench --procs`: CUDA IPC between the ranks, a TCP bootstrap on
# 127.0.0.1; NCCL as one communicator per process, as nccl-tests runs under MPI): correctness of
# every direct collective, then the all-reduce table against NCCL.
#
# Usage: bash .devbin/procs.sh [check] [perf]            (default: check perf)
#   check: every collective × float / half / int8 × sum / max at 0 … 1,048,579 elements with NCCL
#          beside ours; pull mode forced on every Simple one-shot call; CUDA graphs; a large
#          all-reduce of $MP_BIG elements (default 134,217,731: the hybrid at 512 MiB + 12 B;
#          every process computes the reference for all ranks on the CPU, so allow time).
#   perf:  all-reduce 8 B–1 GiB against NCCL (-w 5 -n 20 --runs 5), out of place and in place.
# Environment: GPUS (default 2), MP_BIG, MP_T (seconds for the large check, default 150).
# Outputs: $OUT/procs.log (commands, tables, memory per rank), $OUT/procs-K.json, $OUT/procs-perf.log,
#   $OUT/procs.svg (ours against NCCL); $OUT/info.txt. Prints a PROCS PASS / FAIL line for the
#   checks and exits 1 on FAIL.
set -u
. "$(dirname "$0")/env.sh"
G=${GPUS:-2}
machine_info > "$OUT/info.txt" 2>&1
status=0
for what in "${@:-check perf}"; do
  for w in $what; do
    case $w in
      check)
        C=(-g "$G" --procs -w 1 -n 2 --runs 1 -c 1)
        sec procs 120 "" bench --coll all -d float,half,int8 -o sum,max --counts 0,1,7,65537,1048579 "${C[@]}" --vs-nccl
        sec procs 90 "TOPOPLAN_PULL=1" bench --coll all -d float -o sum,min --counts 7,65537,1048579 "${C[@]}"
        sec procs 90 "" bench --coll all-reduce,all-gather -d float -o sum,avg --counts 2,65536,1048576,4194307 -g "$G" --procs -w 2 -n 5 --runs 1 -c 1 --cuda-graph --vs-nccl
        sec procs "${MP_T:-150}" "" bench --coll all-reduce -d float -o sum,avg --counts "${MP_BIG:-134217731}" "${C[@]}"
        if summary procs; then echo "PROCS PASS"; else echo "PROCS FAIL"; status=1; fi ;;
      perf)
        sec procs-perf 300 "" bench -g "$G" --procs -b 8 -e 1G -f 2 -w 5 -n 20 --runs 5 -c 0 --vs-nccl
        "$BIN" bench --from-log "$OUT/procs-perf.log" --plot "$OUT/procs.svg"
        grep -E '^ +[0-9]+ |^# memory' "$OUT/procs-perf.log" | cut -c1-200 ;;
      *) echo "procs.sh: unknown part \`$w\` (check, perf)" >&2; exit 2 ;;
    esac
  done
done
exit $status
