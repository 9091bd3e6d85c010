#!/usr/bin/env bash
# The whole test suite, as CI runs it: unit, integration, property and fuzz-corpus tests, then the
# loom model checks of the runtime's step protocol, the CUDA direct path's slot protocol (implied
# LL credits included), how a sender CTA publishes a segment, pull mode's handshakes and the
# copy-engine pair path's counters (a separate build with --cfg loom).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-targets --no-fail-fast
cargo test --workspace --doc
if [ -f runtime/tests/loom.rs ] && [ -f cuda/tests/loom_direct.rs ]; then
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p runtime --test loom --release
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p cuda --test loom_direct --test loom_ce_pair --test loom_pull --test loom_publish --release
fi
