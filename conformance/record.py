#!/usr/bin/env python3
"""Octant conformance recorder.

Runs real agent frameworks traced by real OpenTelemetry GenAI instrumentation
libraries against a local scripted model server, and records the OTLP they
produce (spans.pb / logs.pb, as the Collector's Kafka exporter writes
``otlp_proto``) plus the ground truth (truth.json) and a human-readable
spans.summary.txt.

    python3 conformance/record.py [--setup NAME ...] [--scenario NAME ...] [--out DIR]
    python3 conformance/record.py --summary-only [--out DIR]
    python3 conformance/record.py --list
    python3 conformance/record.py --install FAMILY ...
    python3 conformance/record.py --setup pydantic-ai-v6 strands-latest [--run-key octant.run.id]
        # self-tracing frameworks: only when named; default out conformance/frameworks(-keyed)/
    python3 conformance/record.py --setup adk-v2 adk-v1 [--run-key octant.run.id]
        # the framework outside the suite (OUTSIDE.md): default out conformance/outside(-keyed)/

Only the standard library is used here; each (setup, scenario) runs in a
subprocess with its family's venv (.octant/conformance/venvs/<family>/),
created and installed from conformance/requirements/<family>.txt on demand.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENVS = REPO / ".octant" / "conformance" / "venvs"
sys.path.insert(0, str(HERE))

import setups as S  # noqa: E402


# `--run-key`: the span attribute the application stamps its run id as (None: not stamped).
RUN_KEY: str | None = None

def venv_python(family: str) -> Path:
    return VENVS / family / "bin" / "python"


def ensure_venv(family: str) -> float:
    """Create + install the family venv if needed. Returns install seconds (0 if skipped)."""
    req = HERE / S.FAMILIES[family]["requirements"]
    if not req.exists():
        raise SystemExit(f"missing requirements file {req}")
    digest = hashlib.sha256(req.read_bytes()).hexdigest()
    vdir = VENVS / family
    stamp = vdir / ".installed-requirements.sha256"
    if stamp.exists() and stamp.read_text().strip() == digest and venv_python(family).exists():
        return 0.0
    t0 = time.time()
    vdir.parent.mkdir(parents=True, exist_ok=True)
    if not venv_python(family).exists():
        print(f"[record] creating venv {vdir}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(vdir)], check=True)
    print(f"[record] pip install -r {req.relative_to(REPO)} into {vdir.relative_to(REPO)}", flush=True)
    r = subprocess.run([str(venv_python(family)), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(req)])
    if r.returncode != 0:
        raise SystemExit(f"[record] FAILED: pip install for family {family} (exit {r.returncode})")
    stamp.write_text(digest + "\n")
    dt = time.time() - t0
    print(f"[record] family {family} installed in {dt:.1f}s", flush=True)
    return dt


def run_one(setup: str, scenario: str, out: Path, timeout: int = 300) -> tuple[bool, str]:
    cfg = S.SETUPS[setup]
    env = dict(os.environ)
    # keep the parent's env clean of things that would change instrumentation behaviour
    for k in list(env):
        if k.startswith(("OTEL_", "TRACELOOP_", "OPENAI_", "OPENINFERENCE_", "STRANDS_", "LOGFIRE_", "ADK_",
                         "LITELLM_", "GOOGLE_", "GEMINI_", "VERTEXAI_")):
            env.pop(k)
    env.update(S.env_for(setup, scenario))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if RUN_KEY:
        # The application stamps its own run id on every span (runner.py RunKeyProcessor).
        env["OCTANT_CONFORMANCE_RUN_KEY"] = RUN_KEY
    cmd = [str(venv_python(cfg["family"])), str(HERE / "runner.py"), "--setup", setup, "--scenario", scenario,
           "--out", str(out)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timeout after {timeout}s"
    dt = time.time() - t0
    last = (p.stdout.strip().splitlines() or [""])[-1]
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or [""])[-15:]
        return False, f"exit {p.returncode} in {dt:.1f}s: {last}\n    " + "\n    ".join(err)
    return True, f"{dt:.1f}s {last}"


def summary_only(out: Path) -> int:
    dirs = sorted(p.parent for p in out.glob("*/*/spans.pb"))
    if not dirs:
        print(f"no spans.pb under {out}")
        return 1
    py = next((venv_python(f) for f in S.FAMILIES if venv_python(f).exists()), None)
    if py is None:
        raise SystemExit("no conformance venv exists yet; run record.py once (it needs opentelemetry-proto)")
    r = subprocess.run([str(py), str(HERE / "summary.py"), *map(str, dirs)])
    return r.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", nargs="*", help="setups to run (default: all)")
    ap.add_argument("--scenario", nargs="*", help="scenarios to run (default: all of each setup's)")
    ap.add_argument("--out", default=None,
                    help="output root (default: conformance/fixtures; for the self-tracing framework setups "
                         "conformance/frameworks, or conformance/frameworks-keyed with --run-key; for ADK, the "
                         "framework outside the suite, conformance/outside(-keyed))")
    ap.add_argument("--summary-only", action="store_true", help="regenerate spans.summary.txt from spans.pb")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep-going", action="store_true", help="continue after a failing (setup, scenario)")
    ap.add_argument("--run-key", metavar="ATTR",
                    help="the application stamps its run id on every span as attribute ATTR (approval scenarios: "
                         "both parts of a paused run), as a team would with its own span processor")
    ap.add_argument("--install", nargs="+", metavar="FAMILY", help="only install these families' venvs (scripts/setup.sh)")
    args = ap.parse_args()
    out = Path(args.out).resolve() if args.out else None
    global RUN_KEY
    RUN_KEY = args.run_key

    if args.list:
        for name, cfg in S.SETUPS.items():
            extra = cfg.get("extra_scenarios", [])
            print(f"{name:32s} family={cfg['family']:18s} scenarios={','.join(cfg['scenarios'])}"
                  + (f" (when named: {','.join(extra)})" if extra else "")
                  + (" [only when named with --setup]" if cfg.get("opt_in") else ""))
        return 0
    if args.summary_only:
        return summary_only(out or HERE / "fixtures")
    if args.install:
        for fam in args.install:
            if fam not in S.FAMILIES:
                raise SystemExit(f"unknown family {fam!r}; known: {', '.join(S.FAMILIES)}")
            ensure_venv(fam)
        return 0

    # The self-tracing framework setups (opt_in) run only when named.
    setups = args.setup or [n for n, c in S.SETUPS.items() if not c.get("opt_in")]
    for s in setups:
        if s not in S.SETUPS:
            raise SystemExit(f"unknown setup {s!r}; known: {', '.join(S.SETUPS)}")
    failures = []
    install_times = {}
    for s in setups:
        cfg = S.SETUPS[s]
        fam = cfg["family"]
        if fam not in install_times:
            install_times[fam] = ensure_venv(fam)
        known = cfg["scenarios"] + cfg.get("extra_scenarios", [])
        scenarios = [x for x in (args.scenario or cfg["scenarios"]) if x in known]
        if out is not None:
            setup_out = out
        elif cfg.get("opt_in"):
            # "out_dir": where a self-tracing framework's recordings go (ADK: outside/, OUTSIDE.md).
            base = cfg.get("out_dir", "frameworks")
            setup_out = HERE / (f"{base}-keyed" if RUN_KEY else base)
        else:
            setup_out = HERE / "fixtures"
        for sc in scenarios:
            ok, msg = run_one(s, sc, setup_out)
            print(f"[record] {'OK  ' if ok else 'FAIL'} {s}/{sc}: {msg}", flush=True)
            if not ok:
                failures.append(f"{s}/{sc}")
                if not args.keep_going:
                    print(f"[record] setup {s} failed at scenario {sc}; stopping (use --keep-going to continue)",
                          file=sys.stderr)
                    return 1
    print("[record] install seconds per family: " + json.dumps({k: round(v, 1) for k, v in install_times.items()}))
    if failures:
        print(f"[record] FAILED: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
