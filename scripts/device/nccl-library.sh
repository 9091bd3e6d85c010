#!/usr/bin/env bash
# The NCCL-compatible library (libnccl.so.2, docs/nccl-library.md) under its two real clients,
# with default settings (device buffers on topoplan):
#   1. unmodified nccl-tests 2.19.6, built here against our header and library and against
#      stock NCCL: every binary (all_reduce, all_gather, reduce_scatter, broadcast, reduce,
#      alltoall, alltoallv, sendrecv, gather, scatter, hypercube _perf) with -g 1 -c 1, then
#      -G 10 (CUDA graphs), then -R 1 (registered buffers), each expected to print
#      "# Out of bounds values : 0 OK";
#   2. PyTorch with LD_PRELOAD (nccl/tests/torch/collectives.py under torchrun): every torch
#      collective (all-to-all, batch_isend_irecv, gather and scatter included), a new_group, a
#      graph-captured all-reduce and a 20-step DDP run, at world sizes WORLDS, the ranks sharing
#      the GPUs when there are more ranks than GPUs:
#        - a world that stock NCCL runs (ranks <= GPUs) is compared with it bit for bit;
#        - every world is checked element by element against a CPU reference from every
#          rank's inputs, DDP parameters identical on every rank after every step;
#        - world 2 also runs the DDP job on PyTorch's gloo backend: the losses bit for bit;
#        - no device-buffer call of ours may go to NCCL (TOPOPLAN_DEBUG=INFO lines).
#
#   3. (killed) world 2 sharing the GPU, a rank SIGKILLed inside a loop of all-reduces: the
#      survivor exits naming it within TOPOPLAN_TIMEOUT + 5 s, and the next job runs:
#      $OUT/killed.log;
#   4. (hang) world 2 sharing the GPU, rank 1 skipping one all-reduce of ten: rank 0's hang
#      report names rank 1 as behind within TOPOPLAN_HANG_REPORT: $OUT/hang.log;
#   5. (mismatch) world 2 sharing the GPU, built from nccl/tests/c/mismatch.c: rank 1 calls
#      all-reduce with another count, then another type, then receives fewer bytes than rank 0
#      sends; each case must end on both ranks with ncclInvalidUsage naming the field within
#      10 s, and an agreeing all-reduce (checked element by element) then runs; then rank 1
#      skips a call and rank 0's ncclCommAbort must stop its waiting kernel within 1 s, after
#      which a new communicator on the GPU all-reduces right: $OUT/mismatch.log;
#   6. (inproc) ranks of one process (nccl/tests/c/inproc.c, ncclCommInitAll): 2 and 4 ranks
#      sharing GPU 0 (and one rank per GPU where there are several), every collective, a
#      send/recv ring and PreMulSum (host and device scalar), in and out of place, grouped from one thread, a thread per rank, and
#      captured into CUDA graphs (global mode; an int64 all-reduce whose kernels load inside the
#      capture), every element checked, then ranks that disagree on a count (ncclInvalidUsage
#      and every rank's async error within 10 s); each run must print "all checks passed" and, under
#      TOPOPLAN_DEBUG=INFO, "direct path in one process", the int64 all-reduce on "topoplan CUDA
#      backend" and never "through host copies": $OUT/inproc.log;
#   7. (bench) one-rank all-reduce, 8 B to 256 MiB, in and out of place, ours against stock
#      NCCL alternating ROUNDS (default 3) times: $OUT/one-rank.log (BENCHMARKS.md);
#   8. (types) nccl-tests all_reduce, reduce_scatter and reduce with every type of TYPES
#      (default float8 e4m3 and e5m2, uint32, uint64) and -o all (sum prod max min avg mulsum),
#      -g <GPUs>, against ours and stock NCCL: ours expected to print "Out of bounds values :
#      0 OK" with none of its calls of those types sent to NCCL; stock too, except that on one
#      GPU stock NCCL 2.28 refuses float8 avg ("invalid argument") after checking sum, prod, max
#      and min: $OUT/types.log. (The GPU kernels' FP8 arithmetic on ranks sharing a GPU is the
#      `cuda_fp8` test binary of check.sh.)
#
# Usage: bash .devbin/nccl-library.sh [tests|torch|killed|hang|mismatch|inproc|bench|types|all]  (default all)
# Needs (carry .devbin): .devbin/nccl/lib/libnccl.so.2 and .devbin/nccl/include/nccl.h
#   (scripts/install-nccl.sh .devbin/nccl), .devbin/nccl-tests-2.19.6.tar.gz
#   (from shared/peers/), and this repository's nccl/tests/torch/collectives.py.
# Environment: WORLDS (torch world sizes, default "1 2 4"), NT_MAX (largest nccl-tests size,
#   default 64M), NT_T (seconds per binary, default 120), NT_LIBS (the libraries nccl-tests
#   runs against, default "stock ours"; "ours" alone halves the time), NT_G (nccl-tests -g: ranks of one
#   process, one GPU each, default 1; NT_G=2 on a machine of 2 GPUs runs every binary with
#   -g 2, NT_G=4 on 4), TYPES (nccl-tests -d names of the types mode), STOCK_NCCL (default
#   /usr/lib/x86_64-linux-gnu/libnccl.so.2).
# Outputs: $OUT/nccl-tests.log, $OUT/torch.log, $OUT/killed.log, $OUT/hang.log, $OUT/mismatch.log,
#   $OUT/inproc.log, $OUT/one-rank.log, $OUT/types.log, $OUT/info.txt; prints
#   NCCL-LIBRARY PASS or FAIL.
set -u
. "$(dirname "$0")/env.sh"
WHAT=${1:-all}
G=$(nvidia-smi -L | wc -l)
WORLDS=${WORLDS:-1 2 4}
MAX=${NT_MAX:-64M}
T=${NT_T:-120}
NG=${NT_G:-1}
NT_LIBS=${NT_LIBS:-stock ours}
STOCK=${STOCK_NCCL:-/usr/lib/x86_64-linux-gnu/libnccl.so.2}
OURS=$(cd .devbin/nccl && pwd)
export TOPOPLAN_NCCL_LIB=$STOCK TOPOPLAN_DEBUG=INFO
machine_info > "$OUT/info.txt" 2>&1
fail=0

build_tests() {
  # nccl-tests built against a 2.28 header includes NCCL's device-API header: use this machine's.
  for d in nccl_device.h nccl_device; do
    [ -e "/usr/include/$d" ] && [ ! -e "$OURS/include/$d" ] && ln -sfn "/usr/include/$d" "$OURS/include/$d"
  done
  src=/tmp/nccl-tests
  [ -x $src/build-ours/all_reduce_perf ] && [ -x $src/build-stock/all_reduce_perf ] && return 0
  rm -rf $src && mkdir -p $src
  tar xzf .devbin/nccl-tests-2.19.6.tar.gz -C $src --strip-components 1
  for lib in ours stock; do
    home=$OURS; [ $lib = stock ] && home=/usr
    ( cd $src && make -j16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=$home \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=$src/build-$lib ) >> "$OUT/nccl-tests.log" 2>&1 \
      || { echo "build against $lib failed" >> "$OUT/nccl-tests.log"; fail=1; }
  done
}

if [ "$WHAT" = tests ] || [ "$WHAT" = all ]; then
  build_tests
  BINS="all_reduce all_gather reduce_scatter broadcast reduce alltoall alltoallv sendrecv gather scatter hypercube"
  for b in $BINS; do
    for mode in "-c 1" "-c 1 -G 10" "-c 1 -R 1"; do
      for lib in $NT_LIBS; do
        ld=$OURS/lib; [ $lib = stock ] && ld=$(dirname "$STOCK")
        echo "+ [$lib] ${b}_perf -g $NG -b 8 -e $MAX -f 2 $mode" >> "$OUT/nccl-tests.log"
        LD_LIBRARY_PATH=$ld:${LD_LIBRARY_PATH:-} timeout $T $src/build-$lib/${b}_perf -g "$NG" -b 8 -e "$MAX" -f 2 $mode \
          >> "$OUT/nccl-tests.log" 2>&1
        rc=$?; echo "rc=$rc" >> "$OUT/nccl-tests.log"; [ $rc = 0 ] || fail=1
      done
    done
  done
  oob=$(grep -c "Out of bounds values : 0 OK" "$OUT/nccl-tests.log")
  want=$(( $(echo $BINS | wc -w) * 3 * $(echo $NT_LIBS | wc -w) ))
  echo "nccl-tests: $oob runs printed 'Out of bounds values : 0 OK' (expected $want)" | tee -a "$OUT/nccl-tests.log"
  [ "$oob" = "$want" ] || fail=1
fi

if [ "$WHAT" = torch ] || [ "$WHAT" = all ]; then
  py=nccl/tests/torch/collectives.py
  log="$OUT/torch.log"
  tr() { local w=$1; shift; timeout 300 torchrun --standalone --nproc-per-node "$w" $py "$@" >> "$log" 2>&1; }
  ours() { echo "+ [ours] LD_PRELOAD=$OURS/lib/libnccl.so.2 torchrun -n $*" >> "$log"
           LD_PRELOAD=$OURS/lib/libnccl.so.2 tr "$@" || { echo "FAILED: ours $*" >> "$log"; fail=1; }; }
  for w in $WORLDS; do
    rm -f /tmp/ours$w.* /tmp/stock$w.* /tmp/ddp-*$w.*
    ours "$w" run /tmp/ours$w
    python3 $py verify /tmp/ours$w >> "$log" 2>&1 || fail=1
    if [ "$w" -le "$G" ]; then
      echo "+ [stock] torchrun -n $w run" >> "$log"
      tr "$w" run /tmp/stock$w || fail=1
      python3 $py compare /tmp/stock$w /tmp/ours$w >> "$log" 2>&1 || fail=1
    fi
    if [ "$w" = 2 ]; then
      ours "$w" ddp /tmp/ddp-ours$w
      echo "+ [gloo] torchrun -n $w ddp" >> "$log"
      tr "$w" ddp /tmp/ddp-gloo$w gloo || fail=1
      python3 $py compare /tmp/ddp-gloo$w /tmp/ddp-ours$w ddp_losses >> "$log" 2>&1 || fail=1
    fi
  done
  grep -q "\[topoplan\] NCCL INFO" "$log" || { echo "no topoplan INFO line: the preload did not bind" >> "$log"; fail=1; }
  nccl=$(grep "\[topoplan\] NCCL INFO" "$log" | grep -c ": NCCL (")
  echo "calls of ours that went to NCCL: $nccl" >> "$log"
  [ "$nccl" = 0 ] || fail=1
fi

if [ "$WHAT" = killed ] || [ "$WHAT" = all ]; then
  # World 2 sharing the GPU, rank 1 killed inside a loop of all-reduces: the survivor exits
  # naming it within TOPOPLAN_TIMEOUT + 5 s; then the next job on the GPU runs.
  py=nccl/tests/torch/collectives.py
  log="$OUT/killed.log"
  # No core files: writing one of a GPU process takes longer than the detection being timed.
  ( ulimit -c 0; TOPOPLAN_TIMEOUT=20s LD_PRELOAD=$OURS/lib/libnccl.so.2 timeout 200 python3 $py killed ) >> "$log" 2>&1 || fail=1
  echo "+ the next job on the GPU" >> "$log"
  LD_PRELOAD=$OURS/lib/libnccl.so.2 timeout 300 torchrun --standalone --nproc-per-node 2 $py ddp /tmp/after >> "$log" 2>&1 \
    && echo "NEXT JOB PASS" >> "$log" || { echo "NEXT JOB FAIL" >> "$log"; fail=1; }
fi

if [ "$WHAT" = hang ] || [ "$WHAT" = all ]; then
  # World 2 sharing the GPU, rank 1 skips one all-reduce of ten: rank 0's last all-reduce waits
  # on the GPU for a call that never comes, and rank 0's hang report must name rank 1 as behind
  # within TOPOPLAN_HANG_REPORT (5 s), long before TOPOPLAN_TIMEOUT (30 s) ends the wait.
  py=nccl/tests/torch/collectives.py
  log="$OUT/hang.log"
  ( ulimit -c 0; TOPOPLAN_HANG_REPORT=5s TOPOPLAN_TIMEOUT=30s LD_PRELOAD=$OURS/lib/libnccl.so.2 \
      timeout 120 torchrun --standalone --nproc-per-node 2 $py skip ) > "$log" 2>&1
  if grep -q "hang report:" "$log" && grep -A1 "hang report:" "$log" | grep -q "behind: rank 1;"; then
    echo "HANG REPORT PASS" >> "$log"
  else
    echo "HANG REPORT FAIL" >> "$log"; fail=1
  fi
fi

if [ "$WHAT" = mismatch ] || [ "$WHAT" = all ]; then
  # World 2 sharing the GPU: calls that differ in count, type or message size fail on both
  # ranks with ncclInvalidUsage naming the field, long before TOPOPLAN_TIMEOUT (60 s); then an
  # agreeing all-reduce on the same GPU succeeds with the right sum; last, ncclCommAbort stops a
  # kernel waiting for a peer that skipped the call within 1 s, and a new communicator runs.
  log="$OUT/mismatch.log"
  bin=/tmp/tp-mismatch
  cc -O1 -Inccl/tests/c -I"$OURS/include" -I/usr/local/cuda/include nccl/tests/c/mismatch.c -o $bin \
    -L"$OURS/lib" -lnccl -L/usr/local/cuda/lib64/stubs -lcuda > "$log" 2>&1 || fail=1
  for c in count dtype sendrecv agree abort; do
    echo "+ mismatch $c" >> "$log"
    ( ulimit -c 0; TOPOPLAN_TIMEOUT=60s LD_LIBRARY_PATH=$OURS/lib:${LD_LIBRARY_PATH:-} timeout 300 $bin $c ) >> "$log" 2>&1 || fail=1
  done
  pass=$(grep -c "^mismatch [a-z]*: PASS" "$log")
  echo "mismatch: $pass of 5 cases passed" | tee -a "$log"
  [ "$pass" = 5 ] || fail=1
fi

if [ "$WHAT" = inproc ] || [ "$WHAT" = all ]; then
  # Ranks of one process (ncclCommInitAll): on the CUDA kernels, never through host copies.
  log="$OUT/inproc.log"
  bin=/tmp/inproc
  cc -std=c11 -Wall -Werror -O1 -I"$OURS/include" nccl/tests/c/inproc.c -o $bin -L"$OURS/lib" \
    -Wl,-rpath,"$OURS/lib" -lnccl -ldl -lpthread >> "$log" 2>&1 || { echo "build failed" >> "$log"; fail=1; }
  lists=("0 0" "0 0 0 0")
  [ "$G" -ge 2 ] && lists+=("$(seq -s ' ' 0 $(( (G < 8 ? G : 8) - 1 )))")
  for devs in "${lists[@]}"; do
    echo "+ CUDA_DEVICE_MAX_CONNECTIONS=32 TOPOPLAN_DEBUG=INFO inproc $devs" >> "$log"
    out=$(CUDA_DEVICE_MAX_CONNECTIONS=32 TOPOPLAN_DEBUG=INFO timeout 300 $bin $devs 2>&1); rc=$?
    echo "$out" >> "$log"
    if [ $rc = 0 ] && grep -q "all checks passed" <<<"$out" && grep -q "direct path in one process" <<<"$out" \
        && grep -q "ncclAllReduce .* x int64 .*topoplan CUDA backend" <<<"$out" \
        && ! grep -q "through host copies" <<<"$out"; then
      echo "INPROC PASS ($devs)" >> "$log"
    else
      echo "INPROC FAIL ($devs, rc=$rc)" >> "$log"; fail=1
    fi
  done
fi

if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  # One-rank all-reduce, ours against stock NCCL in the same run, alternating ROUNDS times;
  # nccl-tests prints out-of-place and in-place times per size.
  build_tests
  for round in $(seq 1 "${ROUNDS:-3}"); do
    for lib in stock ours; do
      ld=$OURS/lib; [ $lib = stock ] && ld=$(dirname "$STOCK")
      echo "+ [$lib] round $round all_reduce_perf -g 1 -b 8 -e 256M -f 2 -n 200 -w 20" >> "$OUT/one-rank.log"
      TOPOPLAN_DEBUG=WARN LD_LIBRARY_PATH=$ld:${LD_LIBRARY_PATH:-} timeout $T $src/build-$lib/all_reduce_perf \
        -g 1 -b 8 -e 256M -f 2 -n 200 -w 20 >> "$OUT/one-rank.log" 2>&1 || fail=1
    done
  done
fi

# A stock NCCL 2.28 run of -o all on one rank: it refuses float8 avg (and mulsum after it) with
# "invalid argument" (its one-rank path has no float8 scaling kernel), so it must stop there,
# each sum, prod, max and min row before it checked with 0 wrong elements.
stock_fp8_one_rank() {
  grep -q "invalid argument" "$1" && awk '$3 ~ /^f8e/ && $4 ~ /^(sum|prod|max|min)$/ {
      n[$4]++; if ($9 != 0 || $13 != 0) bad++ }
    END { exit !(bad == 0 && n["sum"] > 0 && n["prod"] == n["sum"] && n["max"] == n["sum"] &&
                 n["min"] == n["sum"]) }' "$1"
}

if [ "$WHAT" = types ] || [ "$WHAT" = all ]; then
  # nccl-tests 2.19.6 names the types f8e4m3, f8e5m2, uint32, uint64 (-d); -o all runs every
  # operator.
  build_tests
  log="$OUT/types.log"
  runs=0 good=0
  for b in all_reduce reduce_scatter reduce; do
    for d in ${TYPES:-f8e4m3 f8e5m2 uint32 uint64}; do
      for lib in $NT_LIBS; do
        ld=$OURS/lib; [ $lib = stock ] && ld=$(dirname "$STOCK")
        echo "+ [$lib] ${b}_perf -g $G -b 8 -e 16M -f 4 -c 1 -d $d -o all" >> "$log"
        LD_LIBRARY_PATH=$ld:${LD_LIBRARY_PATH:-} timeout $T $src/build-$lib/${b}_perf -g "$G" -b 8 -e 16M \
          -f 4 -c 1 -d $d -o all > "$OUT/types-run.log" 2>&1
        rc=$?; cat "$OUT/types-run.log" >> "$log"; echo "rc=$rc" >> "$log"
        runs=$((runs + 1))
        if [ $lib = stock ] && [ "$G" = 1 ] && [ "${d#f8}" != "$d" ]; then
          [ $rc != 0 ] && stock_fp8_one_rank "$OUT/types-run.log" && good=$((good + 1))
        else
          [ $rc = 0 ] && grep -q "Out of bounds values : 0 OK" "$OUT/types-run.log" && good=$((good + 1))
        fi
      done
    done
  done
  rm -f "$OUT/types-run.log"
  nccl=$(grep -E " x (float8e4m3|float8e5m2|uint32|uint64) " "$log" | grep -c ": NCCL (")
  echo "types: $good of $runs runs as expected (ours: every operator checked, 'Out of bounds values : 0 OK'; stock on one GPU: float8 sum prod max min checked, avg refused with 'invalid argument'); $nccl calls of ours of these types went to NCCL" | tee -a "$log"
  [ "$good" = "$runs" ] && [ "$nccl" = 0 ] || fail=1
fi

if [ $fail = 0 ]; then echo "NCCL-LIBRARY PASS"; else echo "NCCL-LIBRARY FAIL"; exit 1; fi
