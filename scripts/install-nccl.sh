#!/usr/bin/env bash
# Builds topoplan's NCCL-compatible library and installs it into a prefix:
#   PREFIX/lib/libnccl.so.2.28.3, with libnccl.so.2 and libnccl.so pointing at it
#   PREFIX/include/nccl.h
# Usage: scripts/install-nccl.sh PREFIX      (docs/nccl-library.md shows the ways in)
#
# nccl-tests built against a 2.28 header also includes nccl_device.h (NCCL's device API, which
# this library forwards to NVIDIA's NCCL): where NVIDIA's is installed in /usr/include, it is
# linked into PREFIX/include beside ours.
set -euo pipefail
prefix=${1:?usage: scripts/install-nccl.sh PREFIX}
cd "$(dirname "$0")/.."
cargo build --release -p topoplan-nccl
mkdir -p "$prefix/lib" "$prefix/include"
install -m 755 target/release/libnccl.so "$prefix/lib/libnccl.so.2.28.3"
ln -sf libnccl.so.2.28.3 "$prefix/lib/libnccl.so.2"
ln -sf libnccl.so.2 "$prefix/lib/libnccl.so"
install -m 644 nccl/include/nccl.h "$prefix/include/nccl.h"
for d in nccl_device.h nccl_device; do
  if [ -e "/usr/include/$d" ]; then ln -sfn "/usr/include/$d" "$prefix/include/$d"; fi
done
echo "installed $prefix/lib/libnccl.so.2 and $prefix/include/nccl.h"
