#!/usr/bin/env bash
# The NCCL-compatible library (libnccl.so.2, docs/nccl-library.md) under its two real clients,
# each beside stock NCCL in the same call:
#   1. unmodified nccl-tests 2.19.6, built here against our header and library:
#      all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv, gather and
#      scatter _perf
#      with -g GPUS -c 1, then -G 10 (CUDA graphs), then -R 1 (registered buffers), each
#      expected to print "# Out of bounds values : 0 OK";
#   2. PyTorch with LD_PRELOAD (nccl/tests/torch/collectives.py under torchrun with GPUS
#      processes): every torch collective, a new_group, a graph-captured all-reduce and a short
#      DDP run, saved, then compared bit for bit with the same run on stock NCCL.
# Our runs set TOPOPLAN_NCCL_CUDA=1 (device buffers on topoplan's CUDA path where it applies);
# which library ran each call shows in the TOPOPLAN_DEBUG=INFO lines of the logs.
#
# Usage: bash .devbin/nccl-library.sh [tests|torch|all]       (default all)
# Needs (carry .devbin): .devbin/nccl/lib/libnccl.so.2 and .devbin/nccl/include/nccl.h
#   (scripts/install-nccl.sh .devbin/nccl), .devbin/nccl-tests-2.19.6.tar.gz
#   (from shared/peers/), and this repository's nccl/tests/torch/collectives.py.
# Environment: GPUS (default: every GPU), NT_MAX (largest size, default 1G), NT_T (seconds per
#   binary, default 120), STOCK_NCCL (default /usr/lib/x86_64-linux-gnu/libnccl.so.2).
# Outputs: $OUT/nccl-tests.log, $OUT/torch.log, $OUT/info.txt; prints NCCL-LIBRARY PASS or FAIL.
set -u
. "$(dirname "$0")/env.sh"
WHAT=${1:-all}
G=${GPUS:-$(nvidia-smi -L | wc -l)}
MAX=${NT_MAX:-1G}
T=${NT_T:-120}
STOCK=${STOCK_NCCL:-/usr/lib/x86_64-linux-gnu/libnccl.so.2}
OURS=$(cd .devbin/nccl && pwd)
export TOPOPLAN_NCCL_LIB=$STOCK TOPOPLAN_DEBUG=INFO
machine_info > "$OUT/info.txt" 2>&1
fail=0

if [ "$WHAT" = tests ] || [ "$WHAT" = all ]; then
  src=/tmp/nccl-tests && rm -rf $src && mkdir -p $src
  tar xzf .devbin/nccl-tests-2.19.6.tar.gz -C $src --strip-components 1
  for lib in ours stock; do
    home=$OURS; [ $lib = stock ] && home=/usr
    ( cd $src && make -j16 MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=$home \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=$src/build-$lib ) >> "$OUT/nccl-tests.log" 2>&1 \
      || { echo "build against $lib failed" >> "$OUT/nccl-tests.log"; fail=1; }
  done
  for b in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter; do
    for mode in "-c 1" "-c 1 -G 10" "-c 1 -R 1"; do
      for lib in stock ours; do
        ld=$OURS/lib; [ $lib = stock ] && ld=$(dirname "$STOCK")
        echo "+ [$lib] ${b}_perf -g $G -b 8 -e $MAX -f 2 $mode" >> "$OUT/nccl-tests.log"
        TOPOPLAN_NCCL_CUDA=1 LD_LIBRARY_PATH=$ld:${LD_LIBRARY_PATH:-} timeout $T $src/build-$lib/${b}_perf -g "$G" -b 8 -e "$MAX" -f 2 $mode \
          >> "$OUT/nccl-tests.log" 2>&1
        rc=$?; echo "rc=$rc" >> "$OUT/nccl-tests.log"; [ $rc = 0 ] || fail=1
      done
    done
  done
  oob=$(grep -c "Out of bounds values : 0 OK" "$OUT/nccl-tests.log")
  echo "nccl-tests: $oob runs printed 'Out of bounds values : 0 OK' (expected 54)" | tee -a "$OUT/nccl-tests.log"
  [ "$oob" = 54 ] || fail=1
fi

if [ "$WHAT" = torch ] || [ "$WHAT" = all ]; then
  py=nccl/tests/torch/collectives.py
  run() { timeout 300 torchrun --standalone --nproc-per-node "$G" $py run "$1" >> "$OUT/torch.log" 2>&1; }
  echo "+ stock NCCL" >> "$OUT/torch.log"; run /tmp/stock || fail=1
  echo "+ LD_PRELOAD=$OURS/lib/libnccl.so.2" >> "$OUT/torch.log"
  TOPOPLAN_NCCL_CUDA=1 LD_PRELOAD=$OURS/lib/libnccl.so.2 run /tmp/ours || fail=1
  python3 $py compare /tmp/stock /tmp/ours >> "$OUT/torch.log" 2>&1 || fail=1
  grep -q "\[topoplan\] NCCL INFO" "$OUT/torch.log" || { echo "no topoplan INFO line: the preload did not bind" >> "$OUT/torch.log"; fail=1; }
fi

if [ $fail = 0 ]; then echo "NCCL-LIBRARY PASS"; else echo "NCCL-LIBRARY FAIL"; exit 1; fi
