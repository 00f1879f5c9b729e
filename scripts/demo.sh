#!/usr/bin/env bash
# The README's main command: installs what the demo needs (scripts/setup.sh, idempotent),
# builds Octant and runs `octant demo` on the embedded broker. Arguments go to the demo,
# e.g. scripts/demo.sh --seconds 0 (until Ctrl-C). OCTANT_BROKERS=host:9092 uses a cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo run --quiet --locked -p octant -- demo "$@"
