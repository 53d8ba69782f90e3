"""Ground truth at scale: every client's optimum on a9a with many clients, against the previous
method (the same solver, clients one after another on their CSR rows, default BLAS threads), in
one run.

The library (``fedtheory.truth.ground_truth``) warm-starts every client at x*, densifies small
clients, gives each solve one BLAS thread and solves chunks of clients in parallel processes
(started while the global optimum is solved). Reported: the client-optima stage and the whole
call (global optimum + client optima), for both.
Target: a9a with 1000 clients at least 5x faster than the previous method. Usage::

    python benchmarks/bench_ground_truth.py [--clients 1000] [--data-dir DIR] [--out FILE]
                                            [--baseline-checkout DIR]

``--baseline-checkout`` (a checkout of an earlier commit, e.g. ``git worktree add /tmp/base
0b19b09``) also times that code's ``validation.ground_truth`` in a subprocess of the same run.
"""
import argparse
import json
import os
import time

import numpy as np

import problems
from _report import report
from fedtheory.problem import FederatedProblem
from fedtheory.truth import ground_truth
from fedtheory.truth import optimum


def previous_method(p, x):
    """The former loop: each client's CSR rows as its own problem, solved in turn."""
    out = []
    for i in range(p.n_clients):
        s, e = p.client_rows(i)
        sub = FederatedProblem(p.kind, p.M[s:e], p.b[s:e], np.array([0, e - s]), l2=p.l2, l1=p.l1,
                               name=f"client {i}")
        xi, _ = optimum._solve(sub, "CLARABEL", use_cvxpy=p.is_composite, start=x)
        out.append(sub.value(xi))
    return np.array(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--data-dir", default=os.environ.get("FEDTHEORY_DATA"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--baseline-checkout", default=None)
    args = ap.parse_args()
    p = problems.libsvm("a9a", n_clients=args.clients, partition="iid", l2=1e-3, seed=0, data_dir=args.data_dir)
    t0 = time.perf_counter()
    gt = ground_truth(p, cache=False, progress=False)
    t_new = gt.info["time_clients"]
    t_total = time.perf_counter() - t0
    t0 = time.perf_counter()
    old_f = previous_method(p, gt.x)
    t_old = time.perf_counter() - t0
    out = dict(clients=args.clients, cores=os.cpu_count(), new_client_optima_s=t_new, new_total_s=t_total,
               previous_client_optima_s=t_old, speedup=t_old / t_new,
               max_abs_diff_client_f=float(np.max(np.abs(old_f - gt.client_f))))
    if args.baseline_checkout:
        import subprocess
        import sys
        code = ("import problems, validation, json, time; "
                f"p = problems.libsvm('a9a', n_clients={args.clients}, partition='iid', l2=1e-3, seed=0, "
                f"data_dir={args.data_dir!r}); t0 = time.perf_counter(); gt = validation.ground_truth(p, cache=False); "
                "print(json.dumps([gt.info['time_clients'], time.perf_counter() - t0]))")
        r = subprocess.run([sys.executable, "-c", code], cwd=args.baseline_checkout, capture_output=True, text=True)
        out["baseline_client_optima_s"], out["baseline_total_s"] = json.loads(r.stdout.strip().splitlines()[-1])
        out["speedup_vs_baseline"] = out["baseline_client_optima_s"] / t_new
        out["total_speedup_vs_baseline"] = out["baseline_total_s"] / t_total
    report(out, args.out)


if __name__ == "__main__":
    main()
