#!/usr/bin/env bash
# The direct-push path (runtime::cuda::direct): correctness first, then timing against NCCL and
# the sweeps behind its defaults (LL/Simple threshold, CTAs, PDL). Logs under $OUT.
# Usage: direct.sh [check|perf|sweep|others]...
set -u
. "$(dirname "$0")/env.sh"
LOG="$OUT/direct.log"
run() { echo "+ ${PRE:-}topoplan $*" >> "$LOG"; timeout "${T:-120}" "$BIN" "$@" >> "$LOG" 2>&1; echo "rc=$?" >> "$LOG"; grep '# summary' "$LOG" | tail -1; }
for what in "${@:-check perf}"; do
  case $what in
    check)
      machine_info >> "$LOG"
      T=240 run bench --coll all -d all -o sum,min,avg --counts 0,1,7,4097,1048579 -w 0 -n 1 --runs 1 -c 1
      T=120 run bench --coll all -d float,bfloat16,int8 -o sum,max,prod --counts 1,65537,1048579,16777219 -w 1 -n 3 --runs 1 -c 1 --algo one-shot
      PRE="TOPOPLAN_DIRECT_CTAS=3 " TOPOPLAN_DIRECT_CTAS=3 T=120 run bench --coll all -d float,half -o sum,avg --counts 7,1048579,16777219 -w 1 -n 3 --runs 1 -c 1 --algo one-shot
      T=120 run bench --coll all -d float,half,int64 -o sum,max --counts 7,65537,1048579 -w 1 -n 3 --runs 1 -c 1 --algo one-shot-ll
      T=120 run bench --coll all-reduce,broadcast -d float -o sum --counts 268435456 -w 1 -n 2 --runs 1 -c 1 --algo one-shot
      wrong=$(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}')
      echo "DIRECT-CHECK: $(grep -c '# summary' "$LOG") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$LOG") failed commands" | tee -a "$LOG" ;;
    perf)
      T=200 run bench -b 8 -e 1G -f 4 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl ;;
    sweep)
      PRE="TOPOPLAN_PDL=0 " TOPOPLAN_PDL=0 T=60 run bench -b 8 -e 64K -f 8 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl
      for a in one-shot-ll one-shot; do T=60 run bench -b 128K -e 4M -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --algo $a; done
      for c in 16 32 64; do PRE="TOPOPLAN_DIRECT_CTAS=$c " TOPOPLAN_DIRECT_CTAS=$c T=90 run bench -b 1M -e 1G -f 8 -g 2 -w 3 -n 10 --runs 3 -c 0 --algo one-shot; done
      PRE="TOPOPLAN_DIRECT=0 " TOPOPLAN_DIRECT=0 T=90 run bench -b 16M -e 1G -f 8 -g 2 -w 3 -n 10 --runs 3 -c 0 --algo one-shot ;;
    sweep2)
      PRE="TOPOPLAN_DIRECT_NOOP=1 " TOPOPLAN_DIRECT_NOOP=1 T=60 run bench -b 8 -e 64K -f 8 -g 2 -w 5 -n 20 --runs 3 -c 0
      for c in 32 64; do PRE="TOPOPLAN_DIRECT_LL_CTAS=$c " TOPOPLAN_DIRECT_LL_CTAS=$c T=60 run bench -b 256K -e 1M -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --algo one-shot-ll; done
      for sk in 32:8 64:4 128:4 256:4 512:2; do
        PRE="TOPOPLAN_DIRECT_SLOT_KB=${sk%:*} TOPOPLAN_DIRECT_SLOTS=${sk#*:} " TOPOPLAN_DIRECT_SLOT_KB=${sk%:*} TOPOPLAN_DIRECT_SLOTS=${sk#*:} T=90 run bench -b 1M -e 1G -f 4 -g 2 -w 3 -n 10 --runs 3 -c 0 --algo one-shot
      done ;;
    check3)
      T=200 run bench --coll all -d float,bfloat16,int8 -o sum,max --counts 7,1048579,16777219,67108865 -w 1 -n 2 --runs 1 -c 1 --algo one-shot
      wrong=$(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}')
      echo "DIRECT-CHECK: $(grep -c '# summary' "$LOG") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$LOG") failed commands" | tee -a "$LOG" ;;
    perf2)
      T=300 run bench -b 8 -e 1G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --vs-nccl ;;
    sweep3)
      for c in 32 88; do PRE="TOPOPLAN_DIRECT_CTAS=$c " TOPOPLAN_DIRECT_CTAS=$c T=60 run bench -b 512K -e 4M -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --algo one-shot; done
      PRE="TOPOPLAN_DIRECT_CTAS=64 " TOPOPLAN_DIRECT_CTAS=64 T=90 run bench -b 16M -e 1G -f 4 -g 2 -w 3 -n 10 --runs 3 -c 0 --algo one-shot ;;
    ll128)
      T=200 run bench --coll all -d float,half,int8,double -o sum,max,avg --counts 1,7,4097,65537,1048579,16777219 -w 1 -n 2 --runs 1 -c 1 --algo one-shot-ll128
      T=120 run bench --coll all -d float,bfloat16 -o sum,max --counts 7,1048579,67108865 -w 1 -n 2 --runs 1 -c 1 --algo one-shot
      wrong=$(grep '# summary' "$LOG" | awk '{s+=$5} END {print s+0}')
      echo "DIRECT-CHECK: $(grep -c '# summary' "$LOG") runs, $wrong wrong, $(grep -c '^rc=[^0]' "$LOG") failed commands" | tee -a "$LOG"
      T=120 run bench -b 256K -e 1G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --algo one-shot-ll128 --vs-nccl
      T=120 run bench -b 256K -e 1G -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --algo one-shot
      PRE="TOPOPLAN_DIRECT_CTAS=64 " TOPOPLAN_DIRECT_CTAS=64 T=60 run bench -b 256K -e 16M -f 2 -g 2 -w 5 -n 20 --runs 3 -c 0 --algo one-shot-ll128 ;;
    others)
      T=240 run bench --coll all-gather,reduce-scatter,broadcast,reduce -b 1K -e 256M -f 8 -g 2 -w 3 -n 20 --runs 3 -c 0 --vs-nccl ;;
  esac
done
