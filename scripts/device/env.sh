# Sourced by every script in scripts/device/ (not run on its own).
#
# Gives the scripts:
#   - the safety variables: NVLink multicast stays off on shared machines (a program using it can
#     take the host's GPUs down), for NCCL and for anything else loaded beside it;
#   - $BIN: the topoplan binary ($TOPOPLAN_BIN, else .devbin/topoplan, else target/release/topoplan);
#   - $OUT: where results go (the device tool sets it; default /tmp/topoplan-out);
#   - a libnccl.so link on LD_LIBRARY_PATH where the system only has libnccl.so.2 (cudarc loads
#     libnccl.so);
#   - machine_info: GPUs, driver, clocks and the GPU topology matrix;
#   - sec NAME TIMEOUT "ENV=.. ENV=.." ARGS...: runs `topoplan ARGS` with those variables under a
#     timeout, appending the command (a `+` line), its output and `rc=STATUS` to $OUT/NAME.log.
#     A `bench` command also writes its tables to $OUT/NAME-K.json (K counts the calls), which
#     `topoplan bench --from-json` reads (plots: --plot);
#   - summary NAME: one line of totals for $OUT/NAME.log (tables, wrong elements, failed commands);
#     returns nonzero when something was wrong or failed.
# Knobs (TOPOPLAN_*) are read once per process, so every variant of an A/B sweep is its own
# `sec` call. `topoplan env` lists them.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -n "${TOPOPLAN_BIN:-}" ]; then BIN=$TOPOPLAN_BIN
elif [ -x .devbin/topoplan ]; then BIN=.devbin/topoplan
else BIN=target/release/topoplan; fi
OUT=${OUT:-/tmp/topoplan-out}
mkdir -p "$OUT"
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so '; then
  NCCL_LINK_DIR=$(mktemp -d)
  for d in /usr/lib/x86_64-linux-gnu /usr/local/lib /usr/lib64; do
    if [ -e "$d/libnccl.so.2" ]; then ln -sf "$d/libnccl.so.2" "$NCCL_LINK_DIR/libnccl.so"; break; fi
  done
  export LD_LIBRARY_PATH="$NCCL_LINK_DIR:${LD_LIBRARY_PATH:-}"
fi
machine_info() {
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm --format=csv,noheader
  nvidia-smi topo -m 2>/dev/null | head -4
}
declare -A SEC_CALLS=()
sec() {
  local name=$1 t=$2 envs=$3; shift 3
  local k=$(( ${SEC_CALLS[$name]:-0} + 1 )); SEC_CALLS[$name]=$k
  local json=()
  [ "${1:-}" = bench ] && json=(--json "$OUT/$name-$k.json")
  { echo "+ $envs topoplan $*"
    timeout "$t" env $envs "$BIN" "$@" "${json[@]}"; echo "rc=$?"; } >> "$OUT/$name.log" 2>&1
}
summary() {
  local log="$OUT/$1.log"
  local tables wrong failed
  tables=$(grep -c '# summary' "$log")
  wrong=$(grep '# summary' "$log" | awk '{s+=$5} END {print s+0}')
  failed=$(grep -c '^rc=[^0]' "$log")
  echo "$1: $tables runs, $wrong wrong, $failed failed commands; algos: $(grep -oE ' one-shot[-a-z+0-9]*' "$log" | sort | uniq -c | tr -s ' \n' ' ')"
  [ "$wrong" = 0 ] && [ "$failed" = 0 ]
}
