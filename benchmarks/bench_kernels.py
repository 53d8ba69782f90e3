"""Speed of the datafit kernels (dense and CSR) against another checkout of fedtheory, in one run.

Every workload is timed in fresh worker processes that alternate between this checkout ("new")
and the ``--baseline`` checkout ("old"), so that both see the same machine load; each worker times
every workload ``--inner`` times and keeps its best. Times are the worker's CPU time
(``time.process_time``; everything runs on one thread), which a busy shared machine disturbs less
than wall time. Reported: min and median over the ``--repeat`` workers of each side, and their
ratios new / old (< 1: the new code is faster).

Workloads (one core, NUMBA_NUM_THREADS=1):

* ``raw_*``: the minibatch gradients only (``fedtheory._kernels.raw.minibatch_gradients_only``,
  which calls the gradient kernel ``client_grad``), B = 20, on a9a (CSR logistic, 32,561 x 123)
  and on dense synthetic least squares / logistic data (20,000 x 100);
* ``fedavg_*``: ``ft.run`` of FedAvg, 100 clients, 10 per round, K = 5, with minibatches of 20
  (the setting of ``bench_a9a.py``) or exact client gradients (the full-client kernel);
* ``fedsps_a9a`` (value and gradient kernel), ``pfedfbe_a9a`` (Hessian-vector kernel),
  ``fedmirror_lasso`` (prox kernel on a dense lasso).

Usage (the baseline is any checkout, e.g. a worktree of the previous commit)::

    git worktree add /tmp/fedtheory-old HEAD~1
    python benchmarks/bench_kernels.py --baseline /tmp/fedtheory-old [--repeat 7] [--out results.json]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = ("raw_csr_logistic", "raw_dense_least_squares", "raw_dense_logistic", "fedavg_a9a_minibatch",
             "fedavg_a9a_full", "fedavg_dense_full", "fedsps_a9a", "pfedfbe_a9a", "fedmirror_lasso")


def worker(tree, data_dir, inner, rounds):
    """Time every workload with the fedtheory of ``tree``; print a JSON dict of best seconds."""
    sys.path.insert(0, tree)
    for v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = "1"
    import numpy as np

    import fedtheory as ft
    import problems
    from fedtheory._kernels.raw import minibatch_gradients_only
    assert os.path.realpath(ft.__file__).startswith(os.path.realpath(tree)), ft.__file__

    rng = np.random.default_rng(0)
    a9a = problems.libsvm("a9a", n_clients=100, l2=1e-3, data_dir=data_dir)
    A = [rng.normal(size=(200, 100)) for _ in range(100)]
    b = [a @ rng.normal(size=100) + rng.normal(size=200) for a in A]
    dense_ls = problems.least_squares(A, b, l2=1e-3)
    dense_log = problems.logistic(A, [np.where(t > 0, 1.0, -1.0) for t in b], l2=1e-3)
    lasso = problems.lasso(A, b, l1=1e-2)

    def raw(p):
        idx = rng.integers(0, p.M.shape[0], size=(20000, 20))
        x = np.full(p.dim, 0.01)
        minibatch_gradients_only(*p.kernel_pack(), idx[:10], x, 1e-3)
        return lambda: minibatch_gradients_only(*p.kernel_pack(), idx, x, 1e-3)

    def fed(p, name, **kw):
        args = dict(rounds=rounds, local_steps=5, lr=0.05, clients_per_round=10, eval_every=rounds, **kw)
        ft.run(p, name, **{**args, "rounds": 2})
        return lambda: ft.run(p, name, **args)

    jobs = {"raw_csr_logistic": raw(a9a), "raw_dense_least_squares": raw(dense_ls),
            "raw_dense_logistic": raw(dense_log),
            "fedavg_a9a_minibatch": fed(a9a, "fedavg", batch_size=20),
            "fedavg_a9a_full": fed(a9a, "fedavg"),
            "fedavg_dense_full": fed(dense_log, "fedavg"),
            "fedsps_a9a": fed(a9a, "fedsps", batch_size=20),
            "pfedfbe_a9a": fed(a9a, "pfedfbe", batch_size=20, lam=20.0),
            "fedmirror_lasso": fed(lasso, "fedmirror", batch_size=20)}
    best = {}
    for _ in range(inner):
        for name, fn in jobs.items():
            t0 = time.process_time()
            fn()
            best[name] = min(best.get(name, float("inf")), time.process_time() - t0)
    print(json.dumps(best))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="path of the checkout to compare against")
    ap.add_argument("--repeat", type=int, default=7, help="worker processes per side")
    ap.add_argument("--inner", type=int, default=3, help="timings per workload in a worker (best kept)")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--data-dir", default=os.environ.get("FEDTHEORY_DATA"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.data_dir, args.inner, args.rounds)
    trees = {"new": HERE, "old": os.path.abspath(args.baseline)}
    times = {side: [] for side in trees}
    for r in range(args.repeat):
        for side in (("new", "old") if r % 2 == 0 else ("old", "new")):
            cmd = [sys.executable, os.path.abspath(__file__), "--baseline", args.baseline, "--worker", trees[side],
                   "--inner", str(args.inner), "--rounds", str(args.rounds)]
            if args.data_dir:
                cmd += ["--data-dir", args.data_dir]
            out = subprocess.check_output(cmd, cwd="/", text=True)
            times[side].append(json.loads(out.strip().splitlines()[-1]))
    import numpy as np
    rows = {}
    print(f"{'workload':26s} {'old min':>9s} {'old med':>9s} {'new min':>9s} {'new med':>9s} "
          f"{'min new/old':>11s} {'med new/old':>11s}")
    for w in WORKLOADS:
        o = np.array([t[w] for t in times["old"]])
        n = np.array([t[w] for t in times["new"]])
        row = dict(old_min=o.min(), old_median=float(np.median(o)), new_min=n.min(), new_median=float(np.median(n)))
        row["ratio_min"] = row["new_min"] / row["old_min"]
        row["ratio_median"] = row["new_median"] / row["old_median"]
        rows[w] = row
        print(f"{w:26s} {row['old_min']:9.4f} {row['old_median']:9.4f} {row['new_min']:9.4f} "
              f"{row['new_median']:9.4f} {row['ratio_min']:11.3f} {row['ratio_median']:11.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"repeat": args.repeat, "inner": args.inner, "rounds": args.rounds, "workloads": rows,
                       "raw": times}, f, indent=2)


if __name__ == "__main__":
    main()
