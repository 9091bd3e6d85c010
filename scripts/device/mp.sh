#!/usr/bin/env bash
# Several processes, one GPU each (`topoplan bench --procs`, runtime::cuda::ipc): correctness of
# every direct collective against the CPU reference on small, odd and large counts (NCCL beside
# it, pull mode forced, CUDA graphs), then timing. Session 14 runs 1-2: it found registrations
# outliving the bench's buffers (fixed: CudaProcComm::deregister), then 0 wrong, 0 failed.
# Logs into $OUT/mp.log; prints each run's summary line and a final MP-CHECK line.
set -u
. "$(dirname "$0")/env.sh"
LOG="$OUT/mp.log"
: > "$LOG"
run() {
  echo "+ ${TOPOPLAN_PULL:+TOPOPLAN_PULL=$TOPOPLAN_PULL }topoplan $*" >> "$LOG"
  timeout "${T:-120}" "$BIN" "$@" >> "$LOG" 2>&1
  echo "rc=$?" >> "$LOG"
  grep '# summary' "$LOG" | tail -1
}
machine_info >> "$LOG" 2>&1
# NCCL beside ours (one communicator per process): both checked; pull mode runs at 1048579 (the
# bench registers its buffers).
T=90 run bench -g 2 --procs --vs-nccl --coll all -d float,half,int8 -o sum,max --counts 0,1,7,65537,1048579 -w 1 -n 3 --runs 1 -c 1
# Pull forced on every Simple one-shot call (in-place all-gather included), and CUDA graphs.
TOPOPLAN_PULL=1 T=60 run bench -g 2 --procs --coll all -d float -o sum,min --counts 7,65537,1048579 -w 1 -n 2 --runs 1 -c 1
T=60 run bench -g 2 --procs --cuda-graph --coll all-reduce,all-gather -d float -o sum --counts 2,65536,1048576,4194307 -w 2 -n 5 --runs 1 -c 1
# Every process also computes the reference for both ranks on the CPU: MP_BIG (elements) sizes
# the large check (default 64 MiB + odd tail; 134217731 is the hybrid at 512 MiB + 12 B, allow
# T=120).
T=${MP_T:-60} run bench --coll all-reduce -d float -o sum,avg --counts "${MP_BIG:-16777219}" -w 1 -n 3 --runs 1 -c 1 --procs -g 2
T=60 run bench -g 2 --procs -b 8 -e 1G -f 8 -w 5 -n 20 --runs 3 -c 0
wrong=$(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}')
echo "MP-CHECK: $(grep -c '# summary' "$LOG") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$LOG") failed commands (log: mp.log)" | tee -a "$LOG"
