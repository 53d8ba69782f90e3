"""The ``fedtheory`` command line (also ``python -m fedtheory``), README.md, "Command line".

Subcommands: ``list``, ``describe NAME``, ``run CONFIG``, ``sweep CONFIG --out DIR``,
``verify [--quick]``, ``plot DIR``, ``demo``. ``fedtheory COMMAND --help`` shows examples.
"""
from __future__ import annotations

import argparse
import json
import math
import sys

EXAMPLE_CONFIG = """\
  # examples/sweep.toml: 3 algorithms x 2 heterogeneity levels x 2 seeds = 12 runs
  [problem]                 # factory = a problems factory; every other key is its argument
  factory = "quadratic"
  n_clients = 20
  dim = 10
  L = 1.0
  mu = 0.1
  hessian = "distinct"      # client-specific Hessians: local steps drift (shared ones would not)
  heterogeneity = 1.0

  [run]                     # fedtheory.run arguments, the algorithm and its hyperparameters
  algorithm = "fedavg"
  rounds = 150
  local_steps = 10
  lr = 0.1
  clients_per_round = 5     # partial participation: the seed changes the sampled clients
  eval_every = 5
  reference = true          # measure against the certified optimum (suboptimality, dist_sq)

  [grid]                    # lists: the sweep runs their Cartesian product
  algorithm = ["fedavg", "scaffold", "feddyn"]
  "problem.heterogeneity" = [0.1, 10.0]
  seed = [0, 1]
"""

EPILOGS = {
    "main": "examples:\n  fedtheory list\n  fedtheory describe fedspeed\n  fedtheory verify --quick --out report\n"
            "  fedtheory sweep sweep.toml --out results -j 4\n  fedtheory plot results --out rates.png",
    "run": "example:\n  fedtheory run one.toml --out results\n\n" + EXAMPLE_CONFIG.replace("[grid]", "[grid]  (optional; run takes one point)"),
    "sweep": "examples:\n  fedtheory sweep examples/sweep.toml --out results   # all cores, joblib/loky\n"
             "  fedtheory sweep sweep.toml --out results -j 2\n"
             "  fedtheory sweep sweep.toml --out results --backend dask --scheduler tcp://10.0.0.5:8786\n"
             "  (killed and restarted: finished runs are skipped, none is lost or duplicated)\n\n" + EXAMPLE_CONFIG,
    "verify": "examples:\n  fedtheory verify --quick            # 6-14 s on 2 cores (30 s when the kernels compile)\n"
              "  fedtheory verify --out verify-report # full run: report.md, verdicts.csv, PNGs\n"
              "  fedtheory verify --theorem fedspeed.theorem_4_4",
    "plot": "examples:\n  fedtheory plot results                       # results/rates.png\n"
            "  fedtheory plot results --out rates.pdf --y grad_mapping_sq\n"
            "  fedtheory plot results --filter algorithm=scaffold --filter lr=0.1 --x comm",
    "describe": "examples:\n  fedtheory describe scaffold                 # an algorithm\n"
                "  fedtheory describe libsvm                   # a problem factory\n"
                "  fedtheory describe fedspeed.theorem_4_4     # a theorem: variants, conditions with roles\n"
                "  fedtheory describe fedprox --json",
}


class UsageError(Exception):
    """A usage mistake: printed as one line ``fedtheory CMD: error: ...``, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (raised, so that main() prints them and returns 2)."""

    def error(self, message):
        raise UsageError(f"{self.prog}: error: {message} (see '{self.prog} --help')")


def _jobs(text):
    """``-j``: a positive number of workers, or a negative one counted back from all CPUs (joblib)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n == 0:
        raise argparse.ArgumentTypeError(f"expected a nonzero int (workers; -1: all CPUs); got {text!r}")
    return n


def _out_dir(path, flag="--out"):
    """Refuse an output directory that is an existing file (one-line error)."""
    from pathlib import Path
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {path}: is a file; a directory is expected")
    for parent in p.parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{flag} {path}: {parent} is a file; a directory is expected")
    return path


def _out_file(path, flag="--out"):
    """Refuse an output file that is a directory, in a missing directory, or of an unknown format."""
    from pathlib import Path
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; a file name is expected (e.g. {p / 'rates.png'})")
    if not p.parent.is_dir():
        raise UsageError(f"{flag} {path}: the directory {p.parent} does not exist")
    from matplotlib.figure import Figure
    kinds = Figure().canvas.get_supported_filetypes()
    if p.suffix.lstrip(".").lower() not in kinds:
        raise UsageError(f"{flag} {path}: unknown figure format {p.suffix or '(no suffix)'!r}; "
                         f"expected one of {', '.join('.' + k for k in sorted(kinds))}")
    return path


def _describe_text(info):
    """``fedtheory describe``'s human-readable text (UTF-8) of :func:`fedtheory.describe`'s dict."""
    lines = []
    kind = info.get("kind")
    if kind == "theorem":
        lines += [f"{info['name']}: theorem (measures algorithm {info['algorithm']!r})",
                  f"  statement: {info['statement']}", f"  reference: {info['reference']}", "  variants:"]
        for v, var in info["variants"].items():
            default = " (default)" if v == info["default_variant"] else ""
            lines.append(f"    {v}{default}: {var['description'].rstrip('.')}; requires the "
                         f"{' and '.join(var['requires'])} conditions")
        if "conditions" in info:
            lines.append(f"  conditions (role, value vs limit on the default case {info['conditions_case']!r}):")
            for c in info["conditions"]:
                lines.append(f"    [{c['role']}] {c['name']}: {c['value']:.4g} vs {c['limit']:.4g} "
                             f"({'ok' if c['ok'] else 'fails'})")
        if "tightness" in info:
            lines.append(f"  tightness: {info['tightness']}")
    elif kind == "problem factory":
        lines += [f"{info['name']}: problem factory ({info['call']})", f"  {info['doc']}", "  parameters:"]
        lines += [f"    {k} ({v})" if v in ("required", "more arguments") else f"    {k} = {v!r}"
                  for k, v in info["parameters"].items()]
    else:
        lines += [f"{info['name']}: algorithm", f"  {info['doc']}", f"  reference: {info['reference']}",
                  "  hyperparameters:"]
        lines += [f"    {k} = {v!r}" for k, v in info["hyperparameters"].items()]
        c = info["communication_per_client"]
        lines.append(f"  communication per participating client and round: {c['down']} down, {c['up']} up (d-vectors)")
        lines.append("  traceable sequences (run(..., trace=...)):")
        lines += [f"    {k}: {v}" for k, v in info["traceables"].items()]
    return "\n".join(lines)


def _demo(args):
    from ._validation import Interval, check_param
    check_param("rounds", args.rounds, [Interval(int, 1, None)], "demo")
    check_param("l2", args.l2, [Interval(float, 0, None, "left")], "demo")
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
    print(_reference_line(gt))
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


def _reference_line(gt):
    """One line: the reference optimum and what certifies it (``fedtheory run``, ``fedtheory demo``)."""
    if not getattr(gt, "certified", True):
        return f"reference: F* = {gt.f:.15g} NOT CERTIFIED ({gt.reason}); suboptimality and dist_sq are NaN"
    how = (f"F* in [{gt.f_lower:.15g}, {gt.f_upper:.15g}] by {gt.info.get('certificate', 'a bound')}"
           if math.isfinite(gt.f_lower) else f"relative KKT residual {gt.rel_residual:.1e}, no lower bound known")
    return (f"reference: F* = {gt.f:.15g}, certified to {gt.tol:g} x max(1, |F*|) ({how}); "
            f"suboptimality = F(x) - F* (0 within that accuracy)")


def _run(args):
    from .config import load
    from .results import ResultsStore
    from .sweep import run_point
    if args.out:
        _out_dir(args.out)
    cfg = load(args.config)
    pts = cfg.points()
    if len(pts) != 1:
        raise UsageError(f"{args.config}: the [grid] has {len(pts)} points; 'fedtheory run' runs one "
                         "configuration (use 'fedtheory sweep').")
    from ._progress import enabled
    rid, df = run_point(*pts[0], progress=enabled())
    last = df.iloc[-1]
    cols = [c for c in ("round", "value", "suboptimality", "grad_mapping_sq", "dist_sq", "comm_up", "grad_evals")
            if c in df]
    print(f"run {rid}: {pts[0][1]['algorithm']} on {pts[0][0]['factory']}, status {last.status}")
    if pts[0][1].get("reference"):
        from . import truth
        from .sweep import build_problem
        print(_reference_line(truth.ground_truth(build_problem(pts[0][0]), clients=False)))
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
    _out_dir(args.out)
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
        raise UsageError(f"unknown theorem {', '.join(map(repr, unknown))}; registered theorems: "
                         f"{', '.join(sorted(THEOREMS))}")
    if args.tightness:                 # before the regular cases: no traceback after minutes of work
        from .theory.tightness import require_pepit
        try:
            require_pepit()
        except ImportError as e:
            raise UsageError(f"--tightness: {e}") from None
    _out_dir(args.out)
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
        try:
            df = pd.read_parquet(path)
        except Exception as e:                      # pyarrow's errors for a file that is not Parquet
            raise UsageError(f"{path}: not a results table (a Parquet file written by 'fedtheory sweep'): "
                             f"{_one_line(e)}") from None
    else:
        raise UsageError(f"no results table at {path} (run 'fedtheory sweep CONFIG --out {args.dir}' first)")
    if not len(df):
        raise UsageError(f"{path}: no runs stored yet (run 'fedtheory sweep CONFIG --out {args.dir}')")
    if args.y is not None and args.y not in df.columns:
        skip = {"run_id", "status", "seed", "version", "round"}
        metrics = [c for c in df.columns if not c.startswith("param_") and c not in skip
                   and pd.api.types.is_numeric_dtype(df[c])]
        raise UsageError(f"--y {args.y}: no such metric in {path}; metrics: {', '.join(metrics)}")
    out = Path(_out_file(args.out) if args.out else (src if src.is_dir() else src.parent) / "rates.png")
    try:
        fig = results_figure(df, y=args.y, title=args.title, filters=args.filter,
                             xs=[args.x] if args.x else ("round", "comm_up", "grad_evals"))
    except ValueError as e:          # a --filter naming no parameter, or matching no run
        raise UsageError(f"--filter: {e}") from None
    fig.savefig(out, dpi=150)
    print(f"figure: {out}")
    return 0


def main(argv=None):
    """Entry point of the ``fedtheory`` console command.

    Returns the exit status: 0 on success, 1 when ``verify`` finds an unexpected verdict, 2 for
    a usage mistake (one line on stderr, never a traceback: bad arguments, a bad or missing
    configuration, an unknown name, an output path of the wrong kind), 130 on Ctrl-C (one line).
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        cmd = next((a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("-")), "")
        print(f"fedtheory{' ' + cmd if cmd else ''}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130


def _one_line(e):
    return " ".join(str(e).split())


def _main(argv):
    from . import algorithms, describe
    from .config import ConfigError
    from .exceptions import DataError, IncompatibleProblemError, InvalidParameterError, UncertifiedOptimumError

    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="fedtheory", description="fedtheory: federated-optimization theory testbed",
                                     epilog=EPILOGS["main"], formatter_class=fmt)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="algorithms, problems and theorems")
    d = sub.add_parser("describe", help="an algorithm, a problem factory or a theorem (conditions, variants)",
                       epilog=EPILOGS["describe"], formatter_class=fmt)
    d.add_argument("name")
    d.add_argument("--json", action="store_true", help="the description as JSON (UTF-8)")
    r = sub.add_parser("run", help="one run from a TOML config", epilog=EPILOGS["run"], formatter_class=fmt)
    r.add_argument("config")
    r.add_argument("--out", help="results directory (results.parquet)")
    s = sub.add_parser("sweep", help="a grid of runs in parallel, resumable", epilog=EPILOGS["sweep"],
                       formatter_class=fmt)
    s.add_argument("config")
    s.add_argument("--out", required=True, help="results directory")
    s.add_argument("-j", "--jobs", type=_jobs, default=None, help="local worker processes (default: all CPUs)")
    s.add_argument("--backend", choices=("local", "dask"), default="local")
    s.add_argument("--scheduler", help="Dask scheduler address (tcp://host:port)")
    v = sub.add_parser("verify", help="every registered theorem: verdict table and report", epilog=EPILOGS["verify"],
                       formatter_class=fmt)
    v.add_argument("--quick", action="store_true", help="fewer rounds and seeds (seconds: 6-14 s measured on 2 cores, "
                   "30 s when the Numba kernels compile on first use)")
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
    pl.add_argument("--filter", action="append", metavar="KEY=VALUE",
                    help="only the runs whose parameter KEY equals VALUE (repeatable; e.g. algorithm=fedavg, "
                         "problem.heterogeneity=2.0)")
    pl.add_argument("--x", choices=("rounds", "comm", "grad_evals"), default=None,
                    help="one panel against this axis (default: three panels, one per axis)")
    demo = sub.add_parser("demo", help="a small run that prints a suboptimality table")
    demo.add_argument("--dataset", default="a9a")
    demo.add_argument("--data-dir", default=None)
    demo.add_argument("--rounds", type=int, default=1000)
    demo.add_argument("--l2", type=float, default=1e-2)
    for p in sub.choices.values():
        p.add_argument("-q", "--quiet", action="store_true",
                       help="no progress bars (bars go to stderr, only on a terminal; also FEDTHEORY_QUIET=1)")
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        print(_one_line(e), file=sys.stderr)
        return 2
    _utf8_stdout()
    from . import _progress
    if args.quiet:
        _progress._QUIET.append(True)
    try:
        if args.cmd == "list":
            from .config import factories
            from .theory import THEOREMS
            print("algorithms:", ", ".join(algorithms()))
            print("problems:  ", ", ".join(factories()))
            print("theorems:  ", ", ".join(sorted(THEOREMS)) or "(none registered yet)")
        elif args.cmd == "describe":
            info = describe(args.name)
            print(json.dumps(info, indent=2, default=str, ensure_ascii=False) if args.json else _describe_text(info))
        elif args.cmd == "demo":
            _demo(args)
        else:
            return {"run": _run, "sweep": _sweep, "verify": _verify, "plot": _plot}[args.cmd](args)
    except (UsageError, ConfigError, InvalidParameterError, IncompatibleProblemError, DataError, OSError,
            UncertifiedOptimumError) as e:
        print(f"fedtheory {args.cmd}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    finally:
        if args.quiet:
            _progress._QUIET.pop()
    return 0


def _utf8_stdout():
    """Print real UTF-8 (e.g. the section sign of references) whatever the locale says."""
    enc = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
    if enc != "utf8" and hasattr(sys.stdout, "reconfigure"):
        try:
            sys.stdout.reconfigure(encoding="utf-8")
        except (ValueError, OSError):          # pragma: no cover  (a stream that cannot be changed)
            pass


if __name__ == "__main__":
    sys.exit(main())
