"""Command line: ``fedtheory list | describe NAME | demo`` (also ``python -m fedtheory``).

``run``, ``sweep``, ``verify`` and ``plot`` of API.md are not part of this release yet.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def _demo(args):
    import problems
    import validation

    from . import run

    try:
        p = problems.libsvm(args.dataset, n_clients=100, l2=args.l2, data_dir=args.data_dir, seed=0)
        label = f"LIBSVM {args.dataset}, 100 clients (i.i.d.), l2={args.l2}"
    except (FileNotFoundError, OSError) as e:
        print(f"[demo] {e}\n[demo] falling back to scikit-learn's breast cancer data.", file=sys.stderr)
        p = problems.breast_cancer(n_clients=20, l2=args.l2)
        label = f"breast cancer, 20 clients, l2={args.l2}"
    gt = validation.ground_truth(p)
    c = validation.constants(p, gt)
    print(f"Problem: logistic regression on {label}")
    print(f"Certified optimum: F* = {gt.f:.15f}  (gradient norm at x*: {gt.residual:.1e})")
    print(f"Constants: L = {c.L:.4g}, mu = {c.mu:.4g}, zeta_*^2 = {c.zeta_star_sq:.4g}")
    lr = 1.0 / c.L
    print(f"Runs: {args.rounds} rounds, K = 5 local steps, lr = 1/L, exact gradients, full participation\n")
    header = f"{'algorithm':<10} {'F(x_R) - F*':>14} {'||x_R - x*||^2':>15} {'grad evals':>11} {'vectors up':>11}"
    print(header)
    print("-" * len(header))
    for name in ("fedavg", "fedprox", "scaffold", "lfd"):
        kw = {"mu": 0.1} if name == "fedprox" else {}
        res = run(p, name, rounds=args.rounds, local_steps=5, lr=lr, reference=gt,
                  eval_every=args.rounds, **kw)
        h = res.history.iloc[-1]
        print(f"{name:<10} {h.suboptimality:>14.3e} {h.dist_sq:>15.3e} {res.grad_evals:>11d} {res.comm_up:>11d}")
    print("\nF(x_R) - F* and ||x_R - x*||^2 are measured against the certified optimum above.")


def main(argv=None):
    """Entry point of the ``fedtheory`` console command."""
    from . import algorithms, describe

    parser = argparse.ArgumentParser(prog="fedtheory", description="fedtheory: federated-optimization theory testbed")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="algorithms, problems and theorems")
    d = sub.add_parser("describe", help="hyperparameters and reference of an algorithm")
    d.add_argument("name")
    demo = sub.add_parser("demo", help="a small run that prints a suboptimality table")
    demo.add_argument("--dataset", default="a9a")
    demo.add_argument("--data-dir", default=None)
    demo.add_argument("--rounds", type=int, default=1000)
    demo.add_argument("--l2", type=float, default=1e-2)
    args = parser.parse_args(argv)
    if args.cmd == "list":
        import problems
        import validation
        print("algorithms:", ", ".join(algorithms()))
        print("problems:  ", ", ".join(problems.available()))
        print("theorems:  ", ", ".join(validation.theorems()) or "(none registered yet)")
    elif args.cmd == "describe":
        print(json.dumps(describe(args.name), indent=2, default=str))
    elif args.cmd == "demo":
        _demo(args)
    return 0


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    sys.exit(main())
