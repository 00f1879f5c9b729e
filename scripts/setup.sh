#!/usr/bin/env bash
# Installs what Octant's tests and demo need beyond the Rust toolchain. Idempotent: each step
# checks before it installs. Today: nothing beyond cargo (the evaluation core and contracts
# are pure). The broker, Prometheus and Alertmanager steps arrive with the services that
# need them.
set -euo pipefail
command -v cargo >/dev/null || { echo "setup: cargo is required (https://rustup.rs)" >&2; exit 1; }
echo "setup: toolchain $(cargo --version)"
