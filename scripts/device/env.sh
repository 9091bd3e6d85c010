# Sourced by the device scripts: safety variables, the NCCL link cudarc needs, the binary.
# NVLink multicast stays off on shared machines (a program using it can take the host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -n "${TOPOPLAN_BIN:-}" ]; then BIN=$TOPOPLAN_BIN; elif [ -x .devbin/topoplan ]; then BIN=.devbin/topoplan; else BIN=target/release/topoplan; fi
OUT=${OUT:-/tmp/topoplan-out}
mkdir -p "$OUT"
# cudarc looks for libnccl.so; distributions ship libnccl.so.2.
if ! ldconfig -p | grep -q 'libnccl.so '; then
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
# sec NAME TIMEOUT "ENV=.. ENV=.." ARGS...: runs `topoplan ARGS` with those variables under a
# timeout, appending the command, its output and its exit status to $OUT/NAME.log.
sec() { local name=$1 t=$2 envs=$3; shift 3
  { echo "+ $envs topoplan $*"; timeout "$t" env $envs "$BIN" "$@"; echo "rc=$?"; } >> "$OUT/$name.log" 2>&1; }
