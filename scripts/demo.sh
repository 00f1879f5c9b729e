#!/usr/bin/env bash
# The README's main command: installs what the demo needs (scripts/setup.sh, idempotent),
# builds Octant and runs `octant demo` on the embedded broker. Arguments go to the demo,
# e.g. scripts/demo.sh --seconds 0 (until Ctrl-C). OCTANT_BROKERS=host:9092 uses a cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# One build for both README commands: the workspace pins features so that this build reuses
# what scripts/test.sh compiled (and the other way round). Cargo shows its progress.
echo "demo: building Octant (a first build takes about 10 minutes on 2 cores; after that, seconds)"
exec cargo run --locked -p octant -- demo "$@"
