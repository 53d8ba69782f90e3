"""Per-round overhead of the runner, and what the default evaluation schedule costs.

1. Overhead: microseconds per round of ``ft.run`` (numba backend) on a tiny problem (4 clients,
   d = 2, K = 1, exact gradients), where the local work is negligible, with evaluation only at the
   end; against the same number of bare kernel calls.
2. Evaluation cost: a run with the default evaluation schedule (``eval_every=None``) against the
   same run evaluated only at round 0 and the end (a training-only run), on the a9a setting of
   bench_a9a.py: 100 clients, 10 per round, K = 5, B = 20, 300 rounds. Target: <= 1.25x.
   Also the old default (``eval_every=1``).

All in one process, best of ``--repeat``. Usage::

    python benchmarks/bench_overhead.py [--data-dir DIR] [--repeat 5] [--out FILE]
"""
import argparse
import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


import fedtheory as ft  # noqa: E402
from _report import report, timed  # noqa: E402
import problems  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.environ.get("FEDTHEORY_DATA"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = {}

    tiny = problems.quadratic(4, 2, L=1.0, mu=0.5, seed=0)
    R = 20000
    ft.run(tiny, "fedavg", rounds=2, local_steps=1, lr=0.1)
    t = timed(lambda: ft.run(tiny, "fedavg", rounds=R, local_steps=1, lr=0.1, eval_every=R), repeat=args.repeat)
    out["tiny_us_per_round"] = 1e6 * t / R

    p = problems.libsvm("a9a", n_clients=100, partition="iid", l2=1e-3, seed=0, data_dir=args.data_dir)
    kw = dict(rounds=args.rounds, local_steps=5, lr=0.5, clients_per_round=10, batch_size=20)
    ft.run(p, "fedavg", **dict(kw, rounds=2))
    t_train = timed(lambda: ft.run(p, "fedavg", eval_every=args.rounds, **kw), repeat=args.repeat)
    t_default = timed(lambda: ft.run(p, "fedavg", **kw), repeat=args.repeat)
    t_every = timed(lambda: ft.run(p, "fedavg", eval_every=1, **kw), repeat=max(1, args.repeat // 2))
    rows = len(ft.run(p, "fedavg", **kw).history)
    out.update(a9a_training_only_s=t_train, a9a_default_s=t_default, a9a_every_round_s=t_every,
               a9a_default_history_rows=rows, default_over_training=t_default / t_train,
               every_round_over_training=t_every / t_train)
    report(out, args.out)


if __name__ == "__main__":
    main()
