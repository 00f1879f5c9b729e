#!/usr/bin/env python3
"""The SciPy side of `cargo bench -p octant-core --bench vs_scipy`: reads the data the bench
wrote (little-endian f64 files in DIR), times scipy.stats.bootstrap (vectorised, percentile,
B = 1000; best of 2) and prints JSON: {"units": {...}, "clusters": {...}}."""
import json
import sys
import time

import numpy as np
import scipy
from scipy import stats

d = sys.argv[1]
y = np.fromfile(f"{d}/units_y.f64", dtype="<f8")
hits = np.fromfile(f"{d}/clusters_hits.f64", dtype="<f8")
steps = np.fromfile(f"{d}/clusters_steps.f64", dtype="<f8")
RUNS = 2


def best(f):
    t, out = float("inf"), None
    for _ in range(RUNS):
        t0 = time.perf_counter()
        out = f()
        t = min(t, time.perf_counter() - t0)
    return t, out


def mean(x, axis=-1):
    return np.mean(x, axis=axis)


def ratio_of_sums(h, s, axis=-1):
    return np.sum(h, axis=axis) / np.sum(s, axis=axis)


rng = np.random.default_rng(42)
# batch bounds SciPy's memory: it materialises batch × n resamples at once.
t_u, r_u = best(lambda: stats.bootstrap((y,), mean, vectorized=True, method="percentile", n_resamples=1000, batch=20, random_state=rng))
t_c, r_c = best(lambda: stats.bootstrap((hits, steps), ratio_of_sums, paired=True, vectorized=True, method="percentile", n_resamples=1000, batch=100, random_state=rng))
print(json.dumps({
    "runs": RUNS,
    "versions": f"scipy {scipy.__version__}, numpy {np.__version__}",
    "units": {"seconds": t_u, "point": float(y.mean()), "lo": float(r_u.confidence_interval.low), "hi": float(r_u.confidence_interval.high)},
    "clusters": {"seconds": t_c, "point": float(hits.sum() / steps.sum()), "lo": float(r_c.confidence_interval.low), "hi": float(r_c.confidence_interval.high)},
}))
