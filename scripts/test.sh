#!/usr/bin/env bash
# Runs Octant's whole test suite on a fresh machine: installs what the tests need
# (scripts/setup.sh, idempotent), checks formatting and lints, then runs every test of the
# workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Style first (seconds), then lints (a check build), then every test.
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The integration tests mostly wait (for brokers, consumer groups, Prometheus, Chromium): four
# at a time keep this machine's 2 cores busy (integration binary: 501 s with two, 315 s with
# four, 311 s with eight; BENCHMARKS.md). RUST_TEST_THREADS overrides it.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"
cargo test --workspace --locked "$@"
