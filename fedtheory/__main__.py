"""The ``fedtheory`` command line (also ``python -m fedtheory``), API.md "Command line".

Subcommands: ``list``, ``describe NAME``, ``run CONFIG``, ``sweep CONFIG --out DIR``,
``verify [--quick]``, ``plot DIR``, ``demo``. ``fedtheory COMMAND --help`` shows examples.
"""
from __future__ import annotations

import argparse
import json
import sys

EXAMPLE_CONFIG = """\
  # sweep.toml
  [problem]
  name = "quadratic"              # a problems factory and its arguments
  n_clients = 10
  dim = 5
  heterogeneity = 1.0

  [run]                           # fedtheory.run arguments, algorithm, hyperparameters
  algorithm = "fedavg"
  rounds = 200
  local_steps = 5
  lr = 0.1
  eval_every = 10
  reference = true                # certified optimum: suboptimality columns

  [grid]                          # lists: the sweep runs their Cartesian product
  algorithm = ["fedavg", "scaffold", "fedspeed"]
  seed = [0, 1, 2]
  "problem.heterogeneity" = [0.5, 2.0]
"""

EPILOGS = {
    "main": "examples:\n  fedtheory list\n  fedtheory describe fedspeed\n  fedtheory verify --quick --out report\n"
            "  fedtheory sweep sweep.toml --out results -j 4\n  fedtheory plot results --out rates.png",
    "run": "example:\n  fedtheory run one.toml --out results\n\n" + EXAMPLE_CONFIG.replace("[grid]", "[grid]  (optional; run takes one point)"),
    "sweep": "examples:\n  fedtheory sweep sweep.toml --out results            # all cores, joblib/loky\n"
             "  fedtheory sweep sweep.toml --out results -j 2\n"
             "  fedtheory sweep sweep.toml --out results --backend dask --scheduler tcp://10.0.0.5:8786\n"
             "  (killed and restarted: finished runs are skipped, none is lost or duplicated)\n\n" + EXAMPLE_CONFIG,
    "verify": "examples:\n  fedtheory verify --quick            # under two minutes on 2 cores\n"
              "  fedtheory verify --out verify-report # full run: report.md, verdicts.csv, PNGs\n"
              "  fedtheory verify --theorem fedspeed.theorem_4_4",
    "plot": "examples:\n  fedtheory plot results                       # results/rates.png\n"
            "  fedtheory plot results --out rates.pdf --y grad_mapping_sq",
    "describe": "example:\n  fedtheory describe scaffold",
}


def _demo(args):
    import problems
    from . import truth

    from . import run

    try:
        p = problems.libsvm(args.dataset, n_clients=100, l2=args.l2, data_dir=args.data_dir, seed=0)
        label = f"LIBSVM {args.dataset}, 100 clients (i.i.d.), l2={args.l2}"
    except (FileNotFoundError, OSError) as e:
        print(f"[demo] {e}\n[demo] falling back to scikit-learn's breast cancer data.", file=sys.stderr)
        p = problems.breast_cancer(n_clients=20, l2=args.l2)
        label = f"breast cancer, 20 clients, l2={args.l2}"
    gt = truth.ground_truth(p)
    c = truth.constants(p, gt)
    print(f"Problem: logistic regression on {label}")
    print(f"Certified optimum: F* = {gt.f:.15f}  (gradient norm at x*: {gt.residual:.1e})")
    print(f"Constants: L = {c.L:.4g}, mu = {c.mu:.4g}, zeta_*^2 = {c.zeta_star_sq:.4g}")
    lr = 1.0 / c.L
    print(f"Runs: {args.rounds} rounds, K = 5 local steps, lr = 1/L, exact gradients, full participation\n")
    header = f"{'algorithm':<10} {'F(x_R) - F*':>14} {'||x_R - x*||^2':>15} {'grad evals':>11} {'vectors up':>11}"
    print(header)
    print("-" * len(header))
    for name, kw in (("fedavg", {}), ("fedprox", {"mu": 0.1}), ("scaffold", {}), ("lfd", {}),
                     ("feddyn", {"alpha": 0.5 * c.L}), ("fedspeed", {"lam": 2.0 / c.L, "alpha": 0.0})):
        res = run(p, name, rounds=args.rounds, local_steps=5, lr=lr, reference=gt,
                  eval_every=args.rounds, **kw)
        h = res.history.iloc[-1]
        print(f"{name:<10} {h.suboptimality:>14.3e} {h.dist_sq:>15.3e} {res.grad_evals:>11d} {res.comm_up:>11d}")
    print("\nF(x_R) - F* and ||x_R - x*||^2 are measured against the certified optimum above.")


def _run(args):
    from .config import load
    from .results import ResultsStore
    from .sweep import run_point
    cfg = load(args.config)
    pts = cfg.points()
    if len(pts) != 1:
        print(f"error: {args.config}: the [grid] has {len(pts)} points; 'fedtheory run' runs one "
              "configuration (use 'fedtheory sweep').", file=sys.stderr)
        return 2
    rid, df = run_point(*pts[0])
    last = df.iloc[-1]
    cols = [c for c in ("round", "value", "suboptimality", "grad_mapping_sq", "dist_sq", "comm_up", "grad_evals")
            if c in df]
    print(f"run {rid}: {pts[0][1]['algorithm']} on {pts[0][0]['name']}, status {last.status}")
    print(df[cols].to_string(index=False, max_rows=20))
    if args.out:
        store = ResultsStore(args.out)
        store.add(rid, df)
        print(f"results: {store.path}")
    return 0


def _sweep(args):
    """Exit 0 when every run is stored, 130 on Ctrl-C (workers stopped, finished runs kept)."""
    import shlex
    from .sweep import sweep
    try:
        df = sweep(args.config, args.out, n_jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                   progress=None)
    except KeyboardInterrupt as e:
        cmd = ["fedtheory", "sweep", args.config, "--out", args.out]
        if args.jobs is not None:
            cmd += ["-j", str(args.jobs)]
        if args.backend != "local":
            cmd += ["--backend", args.backend]
        if args.scheduler:
            cmd += ["--scheduler", args.scheduler]
        what = str(e) if str(e).startswith("interrupted") else f"interrupted; finished runs are stored in {args.out}"
        print(f"fedtheory sweep: {what}; resume with the same command: {shlex.join(cmd)}", file=sys.stderr)
        return 130
    print(f"{df.run_id.nunique() if len(df) else 0} runs, {len(df)} rows in {args.out}/results.parquet")
    return 0


def _verify(args):
    from .theory import THEOREMS
    from .verification import verify_all
    unknown = [t for t in (args.theorem or []) if t not in THEOREMS]
    if unknown:
        print(f"error: unknown theorem {', '.join(map(repr, unknown))}; registered theorems: "
              f"{', '.join(sorted(THEOREMS))}", file=sys.stderr)
        return 2
    df, _ = verify_all(quick=args.quick, out=args.out, theorems=args.theorem or None, tightness=args.tightness)
    return 1 if df.verdict.astype(str).str.startswith("UNEXPECTED").any() else 0


def _plot(args):
    from pathlib import Path

    import matplotlib
    matplotlib.use("Agg")
    import pandas as pd

    from .plotting import results_figure
    src = Path(args.dir)
    path = src / "results.parquet" if src.is_dir() else src
    if src.is_dir() and (src / "runs").is_dir():
        from .results import ResultsStore
        df = ResultsStore(src).table()            # the run files: current even after a killed sweep
    elif path.exists():
        df = pd.read_parquet(path)
    else:
        print(f"error: no results table at {path} (run 'fedtheory sweep CONFIG --out {args.dir}' first)",
              file=sys.stderr)
        return 2
    fig = results_figure(df, y=args.y, title=args.title)
    out = Path(args.out) if args.out else (src if src.is_dir() else src.parent) / "rates.png"
    fig.savefig(out, dpi=150)
    print(f"figure: {out}")
    return 0


def main(argv=None):
    """Entry point of the ``fedtheory`` console command."""
    from . import algorithms, describe
    from .config import ConfigError

    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="fedtheory", description="fedtheory: federated-optimization theory testbed",
                                     epilog=EPILOGS["main"], formatter_class=fmt)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="algorithms, problems and theorems")
    d = sub.add_parser("describe", help="an algorithm (hyperparameters, reference) or a theorem (variants)", epilog=EPILOGS["describe"],
                       formatter_class=fmt)
    d.add_argument("name")
    r = sub.add_parser("run", help="one run from a TOML config", epilog=EPILOGS["run"], formatter_class=fmt)
    r.add_argument("config")
    r.add_argument("--out", help="results directory (results.parquet)")
    s = sub.add_parser("sweep", help="a grid of runs in parallel, resumable", epilog=EPILOGS["sweep"],
                       formatter_class=fmt)
    s.add_argument("config")
    s.add_argument("--out", required=True, help="results directory")
    s.add_argument("-j", "--jobs", type=int, default=None, help="local worker processes (default: all CPUs)")
    s.add_argument("--backend", choices=("local", "dask"), default="local")
    s.add_argument("--scheduler", help="Dask scheduler address (tcp://host:port)")
    v = sub.add_parser("verify", help="every registered theorem: verdict table and report", epilog=EPILOGS["verify"],
                       formatter_class=fmt)
    v.add_argument("--quick", action="store_true", help="fewer rounds and seeds (under two minutes)")
    v.add_argument("--out", default="verify-report", help="report directory (default verify-report)")
    v.add_argument("--theorem", action="append", help="only this theorem (repeatable)")
    v.add_argument("--tightness", action="store_true",
                   help="also the exact worst case by performance estimation (extra [pep]): measured <= worst case "
                        "<= bound, looseness, figures")
    pl = sub.add_parser("plot", help="rate plots from a results directory", epilog=EPILOGS["plot"], formatter_class=fmt)
    pl.add_argument("dir")
    pl.add_argument("--out", help="output file (PNG, PDF, SVG; default DIR/rates.png)")
    pl.add_argument("--y", default=None, help="metric (default: suboptimality if measured, else grad_mapping_sq)")
    pl.add_argument("--title", default=None)
    demo = sub.add_parser("demo", help="a small run that prints a suboptimality table")
    demo.add_argument("--dataset", default="a9a")
    demo.add_argument("--data-dir", default=None)
    demo.add_argument("--rounds", type=int, default=1000)
    demo.add_argument("--l2", type=float, default=1e-2)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            import problems
            from .theory import THEOREMS
            print("algorithms:", ", ".join(algorithms()))
            print("problems:  ", ", ".join(problems.available()))
            print("theorems:  ", ", ".join(sorted(THEOREMS)) or "(none registered yet)")
        elif args.cmd == "describe":
            from .exceptions import InvalidParameterError
            from .theory import THEOREMS
            try:
                info = describe(args.name)
            except InvalidParameterError:
                print(f"error: {args.name!r} is neither an algorithm ({', '.join(algorithms())}) nor a "
                      f"theorem ({', '.join(sorted(THEOREMS))})", file=sys.stderr)
                return 2
            print(json.dumps(info, indent=2, default=str, ensure_ascii=False))
        elif args.cmd == "demo":
            _demo(args)
        else:
            return {"run": _run, "sweep": _sweep, "verify": _verify, "plot": _plot}[args.cmd](args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
