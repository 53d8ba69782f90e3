"""Shared by the benchmark scripts: best-of timing and the JSON report (stdout and ``--out``)."""
import json
import time

import numpy as np


def timed(fn, *a, repeat=3):
    """Best wall time of ``fn(*a)`` over ``repeat`` calls."""
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*a)
        best = min(best, time.perf_counter() - t0)
    return best


def report(out, path=None):
    """Print the results as JSON and write them to ``path`` when given."""
    print(json.dumps(out, indent=2))
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
