#!/usr/bin/env bash
# compute-sanitizer over every path the runtime takes: LL, pull mode, the push path, the hybrid
# (made to run at 64 MiB so the run stays short), every collective, and one process per GPU.
#
# Usage: bash .devbin/sanitize.sh [TOOL...]     (default: memcheck; also racecheck, synccheck,
#        initcheck). About 2 minutes per tool on 2×H200: the sanitizer slows kernels 10-100×, so
#        the counts are small and odd.
# Environment: GPUS (default 2), SAN_T (seconds per command, default 150).
# Outputs: $OUT/sanitize.log (commands, the sanitizer's report, the bench tables; elements are
#   checked too); $OUT/sanitize-K.json. Prints one line per tool (clean runs of all, wrong
#   elements, failed commands) and exits 1 when any run reported an error.
set -u
. "$(dirname "$0")/env.sh"
G=${GPUS:-2}
T=${SAN_T:-150}
LOG="$OUT/sanitize.log"
if ! command -v compute-sanitizer >/dev/null; then echo "sanitize.sh: compute-sanitizer not found" >&2; exit 2; fi
bad=0
: >> "$LOG"
k=0
san() { # san TOOL "ENV=.." ARGS...
  local tool=$1 envs=$2; shift 2
  k=$((k + 1))
  echo "+ $envs compute-sanitizer --tool $tool topoplan $*" >> "$LOG"
  timeout "$T" env $envs compute-sanitizer --tool "$tool" --target-processes all "$BIN" "$@" \
    --json "$OUT/sanitize-$k.json" >> "$LOG" 2>&1
  echo "rc=$?" >> "$LOG"
}
for tool in "${@:-memcheck}"; do
  start=$(wc -l < "$LOG" 2>/dev/null || echo 0)
  C=(-g "$G" -w 1 -n 2 --runs 1 -c 1)
  # The runtime's pick per size: LL, pull mode, the push path.
  san "$tool" "" bench -o sum,avg -d float,bfloat16 --counts 1027,262147,4194307,16777219 "${C[@]}"
  # Every collective, types of every width.
  san "$tool" "" bench --coll all -d float,half,int8,double -o sum,max --counts 7,65537,1048579 "${C[@]}"
  # The hybrid, in and out of place.
  san "$tool" "TOPOPLAN_HYBRID_MIN_MB=64" bench -o sum --counts 16777219 "${C[@]}"
  # One process per GPU (CUDA IPC), pull mode on registered buffers.
  san "$tool" "" bench --procs --coll all -d float -o sum --counts 7,1048579 "${C[@]}"
  part=$(tail -n +"$((start + 1))" "$LOG")
  runs=$(grep -c 'ERROR SUMMARY' <<< "$part")
  clean=$(grep -c 'ERROR SUMMARY: 0 errors' <<< "$part")
  wrong=$(grep '# summary' <<< "$part" | awk '{s+=$5} END {print s+0}')
  failed=$(grep -c '^rc=[^0]' <<< "$part")
  echo "SANITIZE $tool: $clean clean of $runs, $wrong wrong, $failed failed commands"
  [ "$clean" = "$runs" ] && [ "$wrong" = 0 ] && [ "$failed" = 0 ] || bad=1
done
exit $bad
