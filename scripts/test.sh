#!/usr/bin/env bash
# Runs Octant's whole test suite on a fresh machine: installs what the tests need
# (scripts/setup.sh, idempotent), checks formatting and lints, then runs every test of the
# workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Style first (seconds).
cargo fmt --all --check
# Lints ride on the test build: Octant's own crates are compiled by clippy-driver (cargo's
# wrapper for workspace members — what `cargo clippy` itself sets, with `-D warnings` passed
# the way cargo-clippy passes it), so every lint of `cargo clippy --all-targets -- -D warnings`
# fails the build, and the dependencies are built once instead of once more in check mode
# (that separate build took 4-5 of the command's minutes here). The cost: Octant's crates are
# compiled for the tests by clippy-driver, which turns off a few MIR passes and the debug
# null/alignment checks of raw-pointer dereferences (Octant's only unsafe code is libc calls,
# which have none), and `scripts/demo.sh` after this compiles Octant's crates again (not the
# dependencies). The wiring is checked first on
# a crate with a known lint: if a toolchain ever changed it, this fails rather than
# letting lints pass unchecked.
clippy_driver="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)"
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
probe="$(mktemp -d)"
# Removed however the probe ends (its failure, Ctrl-C): nothing else here needs a trap.
trap 'rm -rf "$probe"' EXIT
mkdir -p "$probe/src"
printf '[package]\nname = "lint-probe"\nversion = "0.0.0"\nedition = "2024"\n[workspace]\n' > "$probe/Cargo.toml"
printf 'pub fn len(v: &Vec<i32>) -> usize { v.len() }\n' > "$probe/src/lib.rs"
# The probe must fail, and for the lint (not for any other reason).
if probe_out="$(CARGO_TARGET_DIR="$probe/target" cargo build --offline --quiet --manifest-path "$probe/Cargo.toml" 2>&1)" \
    || ! grep -q 'clippy::ptr.arg' <<<"$probe_out"; then
    echo "$probe_out" >&2
    echo "test.sh: clippy-driver as RUSTC_WORKSPACE_WRAPPER ($clippy_driver) did not deny a known lint (clippy::ptr_arg); lints would go unchecked" >&2
    exit 1
fi
rm -rf "$probe"
trap - EXIT
# The integration tests mostly wait (for brokers, consumer groups, Prometheus, Chromium): four
# at a time keep this machine's 2 cores busy (integration binary: 501 s with two, 315 s with
# four, 311 s with eight; BENCHMARKS.md). RUST_TEST_THREADS overrides it.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"
# Every target (benches too, as `cargo clippy --all-targets` lints them) built and linted,
# then every test run.
cargo test --workspace --all-targets --locked --no-run
cargo test --workspace --locked "$@"
