"""Seconds per run of a sweep of tiny runs, against the same runs in process.

A grid of N tiny runs (quadratic, 4 clients, d = 3, FedAvg, 5 rounds by default; ``seed`` = 0..N-1) is
swept into an empty results directory with ``fedtheory.reporting.sweep.sweep(..., n_jobs=JOBS)``; the
in-process baseline calls ``fedtheory.reporting.points.run_point`` on the same points and stores nothing.
For each N the table gives seconds per run of both, their ratio, and the time to open the
finished store again and find nothing to do (the resume check of every run file). The store
must cost O(1) per run: the per-run time at the largest N should stay within 1.3x of that at
the smallest.

Usage::

    python benchmarks/bench_sweep.py                      # N = 300, 1000, 3000; -j 1
    python benchmarks/bench_sweep.py --sizes 300 1000 --jobs 2
    cd OLD_CHECKOUT && python /path/to/benchmarks/bench_sweep.py --sizes 300 1000   # an older fedtheory
"""
import argparse
import shutil
import tempfile
import time

import fedtheory
from fedtheory.reporting.points import run_point
from fedtheory.reporting.sweep import sweep

CONFIG = """\
[problem]
name = "quadratic"
n_clients = 4
dim = 3

[run]
algorithm = "fedavg"
rounds = {rounds}
lr = 0.1

[grid]
seed = {seeds}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 3000])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per run (5: the store's overhead dominates)")
    ap.add_argument("--baseline", type=int, default=300, help="in-process runs timed for the baseline")
    args = ap.parse_args()
    print(f"fedtheory {fedtheory.__version__} ({fedtheory.__file__})")
    prob = {"name": "quadratic", "n_clients": 4, "dim": 3}
    rn = {"algorithm": "fedavg", "rounds": args.rounds, "lr": 0.1}
    for s in range(20):                               # kernels loaded, problem cache warm
        run_point(prob, dict(rn, seed=s))
    t = time.perf_counter()
    for s in range(args.baseline):
        run_point(prob, dict(rn, seed=s))
    base = (time.perf_counter() - t) / args.baseline
    print(f"in process (run_point, nothing stored): {base * 1e3:.1f} ms per run ({args.baseline} runs)\n")
    rows = []
    print(f"| runs | sweep -j {args.jobs}: s | s per run | / in process | overhead per run: ms | "
          "reopen + nothing to do: s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        d = tempfile.mkdtemp(prefix="bench_sweep_")
        cfg = CONFIG.format(seeds=list(range(n)), rounds=args.rounds)
        try:
            t = time.perf_counter()
            df = sweep(cfg, d, n_jobs=args.jobs, progress=False)
            total = time.perf_counter() - t
            assert df.run_id.nunique() == n, df.run_id.nunique()
            t = time.perf_counter()
            again = sweep(cfg, d, n_jobs=args.jobs, progress=False)
            reopen = time.perf_counter() - t
            assert len(again) == len(df)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        rows.append((n, total / n))
        print(f"| {n} | {total:.1f} | {total / n:.4f} | {total / n / base:.2f}x | {(total / n - base) * 1e3:.1f} | "
              f"{reopen:.2f} |", flush=True)
    if len(rows) > 1:
        print(f"\nper-run time at {rows[-1][0]} / at {rows[0][0]}: {rows[-1][1] / rows[0][1]:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
