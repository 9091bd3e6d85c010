#!/usr/bin/env bash
# Correctness on the device: every output element checked against the CPU reference
# (runtime::reference) on fresh random data, outputs poisoned first; with NCCL beside ours on the
# same inputs (both checked) where NCCL loads.
#
# Usage: bash .devbin/check.sh [quick|full|shared|packed] (default: quick, about 3 minutes on 2×H200)
#   quick: every collective × type × operator at 1 … 1,048,579 elements (odd counts), in and out
#          of place, the runtime's own pick per size (LL, pull, push); one-way collectives between
#          symmetric ones and multi-segment LL with 2 CTAs (calls that change state between
#          calls); pull mode forced on every Simple one-shot call; LL up to 4 MiB; CUDA graph
#          replay; float / bfloat16 × sum / avg at 8,388,611 and 134,217,731 elements (push and
#          the hybrid at 512 MiB + 12 B); the GPU test binaries found in .devbin/ (cuda_device,
#          ...: build them with `cargo test -p gpubench --release --test cuda_device --no-run`).
#   full:  quick, plus every explicit algorithm (one-shot, one-shot-ll, one-shot-ll128, two-shot,
#          ring, tree, ce), the hybrid from 64 MiB with half × max, 1 GiB per rank, and memory over
#          10,000 calls of 1 MiB and 1,000 hybrid calls of 512 MiB (the `taken during the run`
#          line should read 0).
#   shared: ranks sharing GPU 0 in one process (the n-rank paths on one GPU; docs/cuda.md, "Ranks
#          sharing a GPU"; one GPU is enough, GPUS is ignored): .devbin/cuda_shared_device
#          (3, 4, 6 and 8 ranks: every collective × type × operator × algorithm at 0 … 65,537
#          elements, odd counts to 1,048,579, 2^28 + 3 floats, CUDA graphs, the two-rank
#          fallbacks; build it with `cargo test -p gpubench --release --test cuda_shared_device
#          --no-run`; each test runs alone under SHARED_TEST_T seconds, default 300, so a hang
#          names its test), then `bench -g 1 --ranks-per-gpu K` for K = 3, 4, 6, 8 (every
#          collective × float, half, int8 × sum, avg, max at 0 … 1,048,579 elements; CUDA graph
#          replay), at 8 ranks the ring, LL128, two-shot, tree, pull mode forced and off, at 6
#          one-shot through the generic lowering (TOPOPLAN_DIRECT=0), then compute-sanitizer
#          memcheck and racecheck on 4 ranks, auto and ring (SHARED_SAN_T seconds each, default
#          300). Timings of ranks sharing a GPU are not performance: none is kept.
#          SHARED_PARTS (default "tests bench sanitize") runs some of the three, and SHARED_FILTER
#          (a regex, e.g. "^n[34]_") some of the tests, so that each device command stays under
#          the device's 10 minutes: e.g. SHARED_PARTS=tests SHARED_FILTER='^n[234]_', then '^n[68]_|^shared_|^the_',
#          then SHARED_PARTS="bench sanitize".
#          Outputs: $OUT/shared-tests.log, $OUT/shared.log, $OUT/shared-K.json,
#          $OUT/shared-sanitize.log; prints SHARED PASS / FAIL.
#   packed: the planner's packed spanning-tree schedules (docs/planner.md, "Packed trees") on 3 … 8
#          ranks sharing GPU 0 through the generic lowering (one GPU is enough, GPUS is ignored):
#          .devbin/cuda_packed (the packings of azure-ndv2 as V100s, the 8-GPU NVSwitch machine,
#          Azure NCv4 and 4×A6000 and their subsets; all-reduce, all-gather, reduce-scatter: every
#          type × operator at 0 … 65,537 elements, odd counts to 4,194,307, LL where the lowering
#          takes it, CUDA graphs; build it with `cargo test -p gpubench --release --test
#          cuda_packed --no-run`), each test alone under PACKED_TEST_T seconds (default 300);
#          PACKED_FILTER (a regex, e.g. "^n[345]_") runs some of them.
#          Outputs: $OUT/packed-tests.log; prints PACKED PASS / FAIL.
# Environment: GPUS (default 2), CHECK_T (seconds per command, default 150).
# Outputs: $OUT/check.log (commands and tables), $OUT/check-K.json (each bench call's tables),
#   $OUT/gpu-tests.log, $OUT/info.txt, $OUT/leak.log (full). Prints a CHECK PASS / FAIL line and
#   exits 1 on FAIL.
set -u
. "$(dirname "$0")/env.sh"
LEVEL=${1:-quick}
G=${GPUS:-2}
T=${CHECK_T:-150}
case $LEVEL in quick|full|shared|packed) ;; *) echo "usage: check.sh [quick|full|shared|packed]" >&2; exit 2 ;; esac
machine_info > "$OUT/info.txt" 2>&1
# each_test BIN FILTER LIMIT LOG: every test of the GPU test binary BIN whose name matches the
# regex FILTER, one process each under LIMIT seconds (a hang, rc=124, names its test), appended
# to $OUT/LOG; fails when one failed or a GPU test skipped (no GPU found).
each_test() {
  local t=$1 filter=$2 limit=$3 log="$OUT/$4" name
  if [ ! -x "$t" ]; then
    echo "check.sh $LEVEL: $t missing (cargo test -p gpubench --release --test ${t##*/} --no-run)" >&2
    return 1
  fi
  for name in $("$t" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E -- "$filter"); do
    { echo "+ $t --exact $name --nocapture"; timeout "$limit" "$t" --exact "$name" --nocapture; echo "rc=$?"; } >> "$log" 2>&1
  done
  grep -E '^\+|^test result|^rc=|SKIP|configurations|refuses|panicked' "$log"
  ! grep -q '^rc=[^0]' "$log" && ! grep -q '^SKIP n[0-9]' "$log"
}
if [ "$LEVEL" = packed ]; then
  # Ranks sharing a GPU need every hardware queue.
  export CUDA_DEVICE_MAX_CONNECTIONS=32
  if each_test .devbin/cuda_packed "${PACKED_FILTER:-.}" "${PACKED_TEST_T:-300}" packed-tests.log; then
    echo "PACKED PASS"
  else
    echo "PACKED FAIL"; exit 1
  fi
  exit 0
fi
if [ "$LEVEL" = shared ]; then
  ok=1
  # Ranks sharing a GPU need every hardware queue (topoplan bench sets it too).
  export CUDA_DEVICE_MAX_CONNECTIONS=32
  for part in ${SHARED_PARTS:-tests bench sanitize}; do
    case $part in
      tests)
        each_test .devbin/cuda_shared_device "${SHARED_FILTER:-.}" "${SHARED_TEST_T:-300}" shared-tests.log || ok=0 ;;
      bench)
      # The CLI path: the runtime's pick per size, CUDA graphs, explicit algorithms, push and pull
      # forced, and one-shot through the generic lowering (TOPOPLAN_DIRECT=0).
      for k in 3 4 6 8; do
        S=(-g 1 --ranks-per-gpu "$k" -w 1 -n 2 --runs 1 -c 1)
        sec shared "$T" "" bench --coll all -d float,half,int8 -o sum,avg,max --counts 0,1,7,65537,1048579 "${S[@]}"
        sec shared 90 "" bench --coll all-reduce,all-gather,reduce-scatter -d float -o sum,avg --counts 1,65537,1048579 "${S[@]}" --cuda-graph
      done
      S8=(-g 1 --ranks-per-gpu 8 -w 1 -n 2 --runs 1 -c 1)
      for algo in ring one-shot-ll128; do
        sec shared "$T" "" bench --coll all -d float,bfloat16 -o sum,max --counts 7,65537,1048579 "${S8[@]}" --algo $algo
      done
      sec shared 90 "" bench --coll all-reduce -d float -o sum,max --counts 7,65537,1048579 "${S8[@]}" --algo two-shot
      sec shared 90 "" bench --coll all-reduce -d float -o sum,max --counts 7,65537,1048579 "${S8[@]}" --algo tree
      sec shared 90 "TOPOPLAN_PULL=1" bench --coll all -d float -o sum,min --counts 7,65537,1048579 "${S8[@]}" --algo one-shot
      sec shared 90 "TOPOPLAN_PULL=0" bench --coll all-reduce -d float -o sum --counts 262147,4194307 "${S8[@]}"
      sec shared 90 "TOPOPLAN_DIRECT=0" bench --coll all -d float -o sum,max --counts 7,65537,1048579 -g 1 --ranks-per-gpu 6 -w 1 -n 2 --runs 1 -c 1 --algo one-shot
      summary shared || ok=0 ;;
      sanitize)
      SLOG="$OUT/shared-sanitize.log"; : > "$SLOG"
      if command -v compute-sanitizer >/dev/null; then
        for tool in memcheck racecheck; do
          for algo in auto ring; do
            echo "+ compute-sanitizer --tool $tool topoplan bench --coll all -d float -o sum --counts 7,65537,1048579 -g 1 --ranks-per-gpu 4 -w 0 -n 1 --runs 1 -c 1 --algo $algo" >> "$SLOG"
            timeout "${SHARED_SAN_T:-300}" compute-sanitizer --tool "$tool" "$BIN" bench --coll all -d float -o sum --counts 7,65537,1048579 -g 1 --ranks-per-gpu 4 -w 0 -n 1 --runs 1 -c 1 --algo "$algo" >> "$SLOG" 2>&1
            echo "rc=$?" >> "$SLOG"
          done
        done
        # memcheck ends with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: N hazards
        # displayed (E errors, W warnings)".
        runs=$(grep -cE 'ERROR SUMMARY|RACECHECK SUMMARY' "$SLOG")
        clean=$(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' "$SLOG")
        echo "shared sanitizers: $clean clean of $runs, $(grep -c '^rc=[^0]' "$SLOG") failed commands (rc=124: timed out)"
        [ "$runs" = 4 ] && [ "$clean" = 4 ] && ! grep -q '^rc=[^0]' "$SLOG" || ok=0
      else
        echo "check.sh shared: compute-sanitizer not found" >&2; ok=0
      fi ;;
      *) echo "check.sh shared: unknown part '$part' (tests, bench, sanitize)" >&2; exit 2 ;;
    esac
  done
  if [ $ok = 1 ]; then echo "SHARED PASS"; else echo "SHARED FAIL"; exit 1; fi
  exit 0
fi
C=(-g "$G" -w 1 -n 2 --runs 1 -c 1)
NC=--vs-nccl
# Every combination at small and odd counts.
sec check "$T" "" bench --coll all -d all -o all --counts 1,7,4099,65537,262147,1048579 "${C[@]}" $NC
# State carried between calls: 2-CTA multi-segment LL after one-way collectives.
sec check 60 "TOPOPLAN_DIRECT_LL_CTAS=2" bench --coll all -d float -o sum,min --counts 3,65537,262147 "${C[@]}"
# Pull mode forced on every Simple one-shot call, in-place all-gather included.
sec check 90 "TOPOPLAN_PULL=1" bench --coll all -d float,half -o sum,min --counts 7,65537,1048579,8388611 "${C[@]}" --algo one-shot
# LL beyond its default range.
sec check 60 "TOPOPLAN_LL_MAX=4194304" bench --coll all-reduce,all-gather -d float,half -o sum --counts 5,1048579 "${C[@]}"
# CUDA graph replay (the checked call is a replayed one-call graph).
sec check 60 "" bench --coll all-reduce,all-gather -d float -o sum,avg --counts 2,1000,65536,1048576,4194307 -g "$G" -w 2 -n 5 --runs 1 -c 1 --cuda-graph $NC
# Large: push, and the hybrid at 512 MiB + 12 B.
sec check 120 "" bench --coll all-reduce -d float,bfloat16 -o sum,avg --counts 8388611,134217731 "${C[@]}" $NC
if [ "$LEVEL" = full ]; then
  for algo in one-shot one-shot-ll one-shot-ll128 ring; do
    sec check "$T" "" bench --coll all -d float,bfloat16 -o sum,max --counts 1,4097,1048579 "${C[@]}" --algo $algo
  done
  for algo in two-shot tree ce; do
    sec check "$T" "" bench --coll all-reduce -d float,half,int8 -o sum,max --counts 1,4097,1048579,16777219 "${C[@]}" --algo $algo
  done
  sec check 90 "TOPOPLAN_HYBRID_MIN_MB=64" bench --coll all-reduce -d half -o max --counts 16777219,33554435 "${C[@]}"
  sec check 200 "" bench --coll all -d float -o sum --counts 268435456 "${C[@]}"
  sec leak 60 "" bench -g "$G" -b 1M -e 1M -w 2 -n 10000 --runs 1 -c 0
  sec leak 90 "" bench -g "$G" -b 512M -e 512M -w 2 -n 1000 --runs 1 -c 0
  grep -E '^\+|^# memory' "$OUT/leak.log" | cut -c1-200
fi
tests_ok=1
: > "$OUT/gpu-tests.log"
for t in .devbin/cuda_*; do
  [ -x "$t" ] || continue
  case $t in *cuda_shared_device*|*cuda_packed*) continue ;; esac # their own levels: `check.sh shared`, `packed`
  { echo "+ $t --test-threads 1"; timeout 300 "$t" --test-threads 1; echo "rc=$?"; } >> "$OUT/gpu-tests.log" 2>&1
done
grep -E '^\+|^test result' "$OUT/gpu-tests.log"
grep -q '^rc=[^0]' "$OUT/gpu-tests.log" && tests_ok=0
if summary check && [ $tests_ok = 1 ]; then echo "CHECK PASS ($LEVEL)"; else echo "CHECK FAIL ($LEVEL)"; exit 1; fi
