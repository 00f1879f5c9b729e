#!/usr/bin/env bash
# The large runs, apart from the test tier (scripts/test.sh): the integration tests that have
# a size run at their large size (OCTANT_SOAK=1: the lake crash test with ten SIGKILLs over
# ~200,000 trajectory events, the scorer's poison test over ~40,000 events, the broker-outage
# test at 800 runs per system, the personal-data test with 10,000 canaries, and the scale-out
# test at 8,000 runs, see RELIABILITY.md), then the
# coverage soak (20,000 windows of the aggregator's intervals) and the validity simulation
# (false alarms and detection times of every veto, 300 system-days per rate).
#
#   scripts/soak.sh              everything (about 30 minutes on 2 cores)
#   scripts/soak.sh integration  only the integration tests at soak size
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
what="${1:-all}"
OCTANT_SOAK=1 cargo test --locked -p octant-integration-tests --test integration -- --include-ignored
if [ "$what" = "all" ]; then
    OCTANT_SOAK=1 cargo test --locked -p octant-core --test core
    # The bootstrap's NEON path, cross-built for aarch64 and run under qemu.
    scripts/neon.sh
    # Every framework and instrumentation of the conformance suite recorded live and replayed
    # through `octant up` (each family's venv is installed on first use), the frameworks that
    # trace themselves (Pydantic AI, Strands Agents) included.
    OCTANT_SOAK=1 cargo test --locked -p octant --test cli -- a_live_instrumented_agent
    cargo run --locked --release -p octant-integration-tests --bin octant-validity -- 300 200
fi
