"""The cost of an evaluated round: rows computed in compiled code against rows computed in Python.

For each algorithm and problem, in one process: ``ft.run(..., eval_every=1)`` with the rows
evaluated inside the compiled rounds (the default where it applies), the same run with the rows
evaluated in Python (``fedtheory.runs.plan.COMPILED_EVALUATION = False``: the compiled call hands
the state to the run's log at every round, as before the compiled evaluation), and the run
evaluated only at its end (``eval_every=rounds``). Each is the best of ``--repeat`` timed runs after
one untimed run (compilation). Reported: microseconds per round, and per evaluation (the evaluated
run minus the unevaluated one, per round), for both ways, and their ratio.

Usage::

    FEDTHEORY_DATA=../shared/data/libsvm python benchmarks/bench_evaluation.py --repeat 5
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fedtheory as ft  # noqa: E402
import problems  # noqa: E402
from fedtheory.runs import plan as plan_module  # noqa: E402
from fedtheory.theory.fedspeed import spec_problem  # noqa: E402


def _best(p, name, repeat, compiled, **kw):
    plan_module.COMPILED_EVALUATION = compiled
    try:
        ft.run(p, name, **kw)
        best = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            ft.run(p, name, **kw)
            best = min(best, time.perf_counter() - t)
        return best
    finally:
        plan_module.COMPILED_EVALUATION = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of each configuration (default 5)")
    args = ap.parse_args()
    cases = [("fedavg", "quadratic n=3 d=2", problems.quadratic(3, 2, seed=0), dict(lr=0.01), 2000),
             ("scaffold", "quadratic n=3 d=2", problems.quadratic(3, 2, seed=0), dict(lr=0.01), 2000),
             ("fedspeed", "FedSpeed theorem quadratic n=5 d=5", spec_problem(5, 0.5, 0.2, seed=3)[0],
              dict(lr=0.004, lam=0.005, local_steps=2), 2000),
             ("feddeper", "quadratic n=5 d=4", problems.quadratic(5, 4, seed=0), dict(lr=0.01, rho=0.01), 2000)]
    if os.environ.get("FEDTHEORY_DATA"):
        a9a = problems.libsvm("a9a", n_clients=10, partition="iid", seed=0)
        cases.append(("fedavg", "a9a logistic, 10 clients", a9a, dict(lr=0.1), 100))
    print("| algorithm | problem | rounds | us/round, unevaluated | us/round, rows compiled | us/round, rows in "
          "Python | us/evaluation, compiled | us/evaluation, Python | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, label, p, kw, rounds in cases:
        kw = dict(kw, rounds=rounds, x0=np.full(p.dim, 0.5))
        none = _best(p, name, args.repeat, True, eval_every=rounds, **kw) / rounds * 1e6
        comp = _best(p, name, args.repeat, True, eval_every=1, **kw) / rounds * 1e6
        py = _best(p, name, args.repeat, False, eval_every=1, **kw) / rounds * 1e6
        print(f"| {name} | {label} | {rounds} | {none:.2f} | {comp:.2f} | {py:.2f} | {comp - none:.2f} | "
              f"{py - none:.2f} | {(py - none) / max(comp - none, 1e-9):.1f}x |", flush=True)


if __name__ == "__main__":
    main()
