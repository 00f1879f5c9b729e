#!/usr/bin/env bash
# The bootstrap's NEON path (aarch64) on an x86-64 machine: octant-core's tests cross-built for
# aarch64 and run under qemu-aarch64, among them the property test that every vector path the
# CPU supports gives the scalar path's replicate sums (`every_path_gives_the_scalar_replicate_sums`,
# which prints the paths it ran: scalar and neon here). Part of `scripts/soak.sh`; installs
# qemu-user, the aarch64 linker and libc (Debian) and Rust's aarch64 standard library (rustup)
# when missing. Build output under .octant/aarch64-target.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get install -y -q qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross >/dev/null
fi
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export OCTANT_TEST_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$OCTANT_TEST_RUNNER"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-.octant/aarch64-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
cargo test --locked -p octant-core --lib --target aarch64-unknown-linux-gnu -- --nocapture every_path
cargo test --locked -p octant-core --lib --target aarch64-unknown-linux-gnu
