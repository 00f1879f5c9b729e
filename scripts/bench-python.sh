#!/usr/bin/env bash
# Installs what the benchmark comparisons need beyond the test set-up: SciPy and NumPy (PyPI
# scipy==1.16.3) in .octant/bench-python, for `cargo bench -p octant-core --bench vs_scipy`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d .octant/bench-python/scipy ]; then
  python3 -m pip install --quiet --disable-pip-version-check --target .octant/bench-python scipy==1.16.3
fi
