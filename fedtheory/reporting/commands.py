"""The commands of the ``fedtheory`` command line (:mod:`fedtheory.__main__` parses the arguments and
calls them): ``describe``'s text, ``demo``, ``run``, ``sweep``, ``verify``, ``errata``, ``falsify``
and ``plot``, and the checks of their output paths. Each returns the exit status or raises
:class:`UsageError` (one line, exit status 2); the library is imported where a command needs it, so
that ``fedtheory --help`` and ``--version`` load none of it."""
from __future__ import annotations

import math
import os
import sys

#: Exit status of ``fedtheory run`` when its run diverged.
DIVERGED = 3


def _one_line(e):
    """An error's text on one line."""
    return " ".join(str(e).split())


class UsageError(Exception):
    """A usage mistake: printed as one line ``fedtheory CMD: error: ...``, exit status 2."""


def _out_dir(path, flag="--out"):
    """Refuse an output directory that cannot be written (one-line error, before any work).

    An empty path, an existing file, a file among its parents, or a directory where nothing can
    be created (read-only, permission denied: tried by creating and removing a probe directory
    in the closest existing directory, so nothing is left behind).
    """
    from pathlib import Path
    if not str(path).strip():
        raise UsageError(f"{flag} {path!r}: an empty path; a directory name is expected")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{flag} {path}: is a file; a directory is expected")
    for parent in p.parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{flag} {path}: {parent} is a file; a directory is expected")
    _probe_writable(next(q for q in (p, *p.parents) if q.is_dir()), path, flag)
    return path


def _probe_writable(directory, path, flag):
    """UsageError unless a directory can be created (and is removed again) in ``directory``."""
    import tempfile
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".fedtheory-probe-", dir=directory))
    except OSError as e:
        where = "" if str(directory) == str(path) else f" (in {directory})"
        raise UsageError(f"{flag} {path}: cannot write there{where}: {(e.strerror or str(e)).lower()}") from None


def _os_error(e):
    """An OSError as one line without the errno: ``PATH: reason`` (``[Errno 13] ...`` otherwise)."""
    if e.strerror and e.filename:
        return f"{e.filename}: {e.strerror.lower()}"
    return str(e)


def _out_file(path, flag="--out"):
    """Refuse an output file that is a directory, in a missing directory, or of an unknown format."""
    from pathlib import Path
    if not str(path).strip():
        raise UsageError(f"{flag} {path!r}: an empty path; a file name is expected (e.g. rates.png)")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; a file name is expected (e.g. {p / 'rates.png'})")
    for parent in p.parents:
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"{flag} {path}: {parent} is a file; a directory is expected")
    if not p.parent.is_dir():
        raise UsageError(f"{flag} {path}: the directory {p.parent} does not exist")
    _probe_writable(p.parent, path, flag)
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
    if kind in ("theorem", "lemma"):
        lines += [f"{info['name']}: {kind} (measures algorithm {info['algorithm']!r})",
                  f"  statement: {info['statement']}", f"  reference: {info['reference']}"]
        if info.get("proof"):
            lines.append("  proof, in order (fedtheory verify --lemmas): " + ", ".join(info["proof"]))
        if info.get("proof_of"):
            lines.append("  in the proof of: " + ", ".join(info["proof_of"]))
        if "quantity" in info:
            lines.append(f"  quantity (measured left-hand side): {info['quantity']}")
        if "parameters" in info:
            lines.append("  parameters (validation.verify(NAME, problem, **params); also variant=, algorithm=):")
            lines += [f"    {k} ({v})" if v in ("required", "more arguments") else f"    {k} = {v!r}"
                      for k, v in info["parameters"].items()]
        if info.get("assumptions") is not None:
            lines.append("  assumptions (from the problem's components): "
                         + ("; ".join(f"{a['name']} ({a['capability']})" for a in info["assumptions"])
                            or "none declared"))
        if "conforming_space" in info:
            lines.append("  conforming space (validation.falsify): "
                         + (info["conforming_space"] or "none declared"))
        lines.append("  variants:")
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
        if info.get("errata"):
            lines.append("  errata (measured by 'fedtheory errata'):")
            lines += [f"    {e['label']}, {e['where']}: {e['why']} (variant {e['variant']!r})" for e in info["errata"]]
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
        if info.get("scalars"):
            lines.append("  scalars logged in the history (a column each, at evaluated rounds):")
            lines += [f"    {k}: {v}" for k, v in info["scalars"].items()]
    return "\n".join(lines)


def _demo(args):
    from .._argcheck import Interval, check_param
    check_param("rounds", args.rounds, [Interval(int, 1, None)], "demo")
    # l2 > 0: a9a without ridge is quasi-separable, with no minimiser to certify
    check_param("l2", args.l2, [Interval(float, 0, None, "neither")], "demo")
    from .. import truth

    from .. import run
    from .config import factories
    make = factories()

    try:
        p = make["libsvm"](args.dataset, n_clients=100, l2=args.l2, data_dir=args.data_dir, seed=0)
        label = f"LIBSVM {args.dataset}, 100 clients (i.i.d.), l2={args.l2}"
    except (FileNotFoundError, OSError) as e:
        print(f"[demo] {e}\n[demo] falling back to scikit-learn's breast cancer data.", file=sys.stderr)
        p = make["breast_cancer"](n_clients=20, l2=args.l2)
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
    """Exit 0 when the run ends, 3 (:data:`DIVERGED`) when it diverges (the round, the client when
    known and a smaller step size on stderr; the table stops before the iterates blow up)."""
    from .config import load
    from .results import ResultsStore
    from .points import run_point
    if args.out is not None:
        _out_dir(args.out)
    cfg = load(args.config)
    pts = cfg.points()
    if len(pts) != 1:
        raise UsageError(f"{args.config}: the [grid] has {len(pts)} points; 'fedtheory run' runs one "
                         "configuration (use 'fedtheory sweep').")
    from .._progress import enabled
    rid, df, res = run_point(*pts[0], progress=enabled(), result=True)
    last = df.iloc[-1]
    cols = [c for c in ("round", "value", "suboptimality", "grad_mapping_sq", "dist_sq", "comm_up", "grad_evals")
            if c in df]
    print(f"run {rid}: {pts[0][1]['algorithm']} on {pts[0][0]['factory']}, status {last.status}")
    if pts[0][1].get("reference"):
        from .. import truth
        from .config import build_problem
        print(_reference_line(truth.ground_truth(build_problem(pts[0][0]), clients=False)))
    diverged = res.status == "diverged"
    shown, cut = (_before_blowup(df) if diverged else (df, None))
    if len(shown):
        print(shown[cols].to_string(index=False, max_rows=20))
    if cut is not None:
        print(f"({cut})")
    if args.out is not None:
        store = ResultsStore(args.out)
        store.add(rid, df)
        print(f"results: {store.path}")
    if diverged:
        print(f"fedtheory run: diverged: {res.message}; {_step_hint(*pts[0], diverged_at=res.rounds + 1)} "
              f"(exit status {DIVERGED})", file=sys.stderr)
        return DIVERGED
    return 0


BLOWUP = 1e6           # the growth (of the squared gradient mapping norm) from which a table stops


def _before_blowup(df):
    """``(rows, note)``: a diverged run's rows up to the first whose squared gradient mapping
    norm exceeds BLOWUP times its start (later values only measure the overflow), and what was
    left out (None when nothing was)."""
    import numpy as np
    g = df["grad_mapping_sq"].to_numpy(dtype=float) if "grad_mapping_sq" in df else None
    if g is None or not len(g):
        return df, None
    start = g[0] if np.isfinite(g[0]) and g[0] > 0 else 1.0
    bad = ~np.isfinite(g) | (g > BLOWUP * start)
    if not bad.any():
        return df, None
    i = int(np.flatnonzero(bad)[0])
    n_left = len(df) - i
    if i == 0:
        return df.iloc[:0], f"{n_left} evaluations left out: the iterates blew up from the first evaluation"
    return df.iloc[:i], (f"{n_left} later evaluation{'s' if n_left > 1 else ''} left out: from round "
                         f"{int(df['round'].iloc[i])} the squared gradient mapping norm exceeds {BLOWUP:.0e} times "
                         f"its start, {start:.3g}; the iterates blow up")


_LOWER_STEPS = ("try a smaller step size (set lr, or the algorithm's own step parameters, below their current "
                "value)")
#: The step sizes a diverged run's hint tries, as fractions of its lr (each run in full, in turn).
HINT_FRACTIONS = (0.1, 0.01, 0.001)


def _step_hint(problem_args, run_args, diverged_at=None):
    """A step size checked to work: the same configuration run again with lr a tenth, a hundredth,
    a thousandth of the configured one, then 1/L (L the smoothness constant of F, from the data);
    the first that does not diverge is named with how it was chosen. The checks run at most
    ten times the rounds the run lasted (and at least 100), and say so when that is fewer than the
    configuration's. Or which step sizes to lower."""
    lr = run_args.get("lr")
    if not (isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0):
        return _LOWER_STEPS
    from .config import build_problem
    from .points import run_point
    rounds = int(run_args.get("rounds", 1))
    checked = rounds if diverged_at is None else min(rounds, max(10 * int(diverged_at), 100))
    what = "this configuration" if checked == rounds else f"the first {checked} rounds of this configuration"

    def one_over_L():
        from ..constants import smoothness
        L = float(smoothness(build_problem(problem_args)))
        return 1.0 / L, f"1/L, L = {L:.3g} the smoothness constant of F computed from the data"
    tried = []
    for choose in [*((lambda f=f: (lr * f, f"{f:g} x lr = {lr:g}")) for f in HINT_FRACTIONS), one_over_L]:
        try:
            cand, how = choose()
            if not (cand > 0 and math.isfinite(cand)) or cand in tried:
                continue
            tried.append(cand)
            _, _, res = run_point(problem_args, dict(run_args, lr=cand, rounds=checked), result=True)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:                     # no constant for this problem, or a run that cannot be made
            continue
        if res.status != "diverged":
            return f"lr = {cand:.3g} ({how}) ran {what} without diverging (status {res.status})"
    if not tried:
        return _LOWER_STEPS
    return (f"lr = {', '.join(f'{c:.3g}' for c in tried)} diverged too: lower the algorithm's own step "
            "parameters as well")


def _sweep(args):
    """Exit 0 when every run is stored, 130 on Ctrl-C (workers stopped, finished runs kept), 1 when
    the sweep failed (Dask cluster lost, KilledWorker, dead workers; finished runs kept): one line
    with the command that resumes it."""
    import shlex
    from .points import SweepFailed
    from .sweep import sweep
    _out_dir(args.out)
    if args.scheduler is not None and args.backend != "dask":
        raise UsageError(f"--scheduler {args.scheduler}: applies to --backend dask only (the backend is "
                         f"{args.backend}); add --backend dask or leave --scheduler out")

    def resume():
        cmd = ["fedtheory", "sweep", args.config, "--out", args.out]
        if args.jobs is not None:
            cmd += ["-j", str(args.jobs)]
        if args.backend != "local":
            cmd += ["--backend", args.backend]
        if args.scheduler:
            cmd += ["--scheduler", args.scheduler]
        for m in args.imports:
            cmd += ["--import", m]
        return shlex.join(cmd)

    try:
        df = sweep(args.config, args.out, n_jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                   progress=None)
    except KeyboardInterrupt as e:
        what = str(e) if str(e).startswith("interrupted") else f"interrupted; finished runs are stored in {args.out}"
        print(f"fedtheory sweep: {what}; resume with the same command: {resume()}", file=sys.stderr)
        return 130
    except ImportError as e:            # an optional extra missing ([dask], [torch]): one line
        raise UsageError(_one_line(e)) from None
    except SweepFailed as e:
        again = "the same command" if e.stored else "the same command once the cause is fixed"
        print(f"fedtheory sweep: error: {_one_line(e)}; resume with {again}: {resume()}", file=sys.stderr)
        return 1
    print(f"{df.run_id.nunique() if len(df) else 0} runs, {len(df)} rows in {args.out}/results.parquet")
    diverged = df.loc[df.status == "diverged", "run_id"].nunique() if len(df) else 0
    if diverged:
        print(f"{diverged} of them diverged (status 'diverged'; their finite rows are stored; "
              "'fedtheory plot' draws them up to the divergence)")
    return 0


def _registered(names):
    """"registered theorems: ...; lemmas: ..." of the theorem checks ``names``."""
    from ..theory import is_lemma
    theorems = ", ".join(sorted(n for n in names if not is_lemma(n)))
    lemmas = ", ".join(sorted(n for n in names if is_lemma(n)))
    return f"registered theorems: {theorems}" + (f"; lemmas: {lemmas}" if lemmas else "")


def _verify(args):
    from ..theory import THEOREMS
    from .verify_report import verify_all
    from .._argcheck import did_you_mean
    from ..registry import import_hint
    unknown = [t for t in (args.theorem or []) if t not in THEOREMS]
    if unknown:
        raise UsageError(f"unknown theorem {', '.join(map(repr, unknown))}; {_registered(THEOREMS)}."
                         f"{''.join(did_you_mean(t, THEOREMS) for t in unknown)}{import_hint()}")
    if args.tightness:                 # before the regular cases: no traceback after minutes of work
        from ..theory.tightness import require_pepit
        try:
            require_pepit()
        except ImportError as e:
            raise UsageError(f"--tightness: {e}") from None
    _out_dir(args.out)
    from .verification import default_jobs
    jobs = default_jobs() if args.jobs is None else args.jobs
    if jobs < 0:                                       # joblib's convention: -1 all CPUs, -2 all but one
        jobs = max(1, (os.cpu_count() or 1) + 1 + jobs)
    df, _ = verify_all(quick=args.quick, out=args.out, theorems=args.theorem or None, tightness=args.tightness,
                       jobs=jobs, lemmas=args.lemmas)
    from ..theory.verdicts import is_failure     # a violation no expectation covers fails the check too
    return 1 if df.verdict.map(is_failure).any() else 0


def _errata(args):
    from .errata import _num, errata, write_errata
    _out_dir(args.out)
    rows = errata(tightness=not args.no_tightness)
    md, tex = write_errata(rows, args.out)
    for r in rows:
        said = [f"{w} {r[k + '_verdict'].split(':')[0]}" + (f" (measured/bound {_num(r[k + '_ratio'])})"
                                                             if r[k + "_ratio"] == r[k + "_ratio"] else "")
                for w, k in (("printed", "printed"), (r["variant"], "corrected"))]
        where = "" if r["level"] == "theorem" else f" at {r['level']}"
        print(f"{r['theorem']} [{r['label']}]: {', '.join(said)}{where}"
              + ("" if r["separated"] else " (not separated)"))
    n_sep = sum(bool(r["separated"]) for r in rows)
    print(f"{len(rows)} errata, {n_sep} separated by a computation: {md}, {tex}")
    return 0
def _falsify(args):
    """Exit 1 when a counterexample is found, 0 otherwise; the report (and its figure) in --out."""
    from pathlib import Path
    from ..exceptions import InvalidParameterError
    from ..theory import THEOREMS
    from ..theory.falsify import falsify
    if args.name not in THEOREMS:
        from .._argcheck import did_you_mean
        from ..registry import import_hint
        raise UsageError(f"unknown theorem {args.name!r}; {_registered(THEOREMS)}."
                         f"{did_you_mean(args.name, THEOREMS)}{import_hint()}")
    if args.out:
        _out_dir(args.out)
    try:
        from hypothesis.errors import HypothesisException
    except ImportError:
        raise UsageError("falsify needs hypothesis (the 'test' extra): pip install -e \".[test]\"") from None
    try:
        f = falsify(args.name, variant=args.variant, budget=args.budget, seed=args.seed, progress=None)
    except InvalidParameterError:
        raise
    except Exception as e:
        case = getattr(e, "fedtheory_case", None)
        if case is not None:                             # the user's theorem raised on a drawn case
            raise UsageError(f"the theorem raised {type(e).__name__}: {e} (on the drawn case {case})") from None
        if not isinstance(e, (ValueError, HypothesisException)):
            raise
        # no conforming space, or none could be drawn
        raise UsageError(f"{type(e).__name__}: {e}" if isinstance(e, HypothesisException) else str(e)) from None
    text = f.report()
    print(text)
    if args.out:
        import matplotlib
        matplotlib.use("Agg")
        from .verify_report import save_figure
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        save_figure(f.figure(), out / "falsify.png")
        (out / "report.md").write_text(f"# falsify {args.name}\n\n```\n{text}\n```\n\n![search](falsify.png)\n")
        print(f"\nreport: {out / 'report.md'}")
    return 1 if f.counterexample is not None else 0


def _plot(args):
    from pathlib import Path

    import matplotlib
    matplotlib.use("Agg")
    import pandas as pd

    from ..plotting import results_figure
    src = Path(args.dir)
    path = src / "results.parquet" if src.is_dir() else src
    if src.is_dir() and (src / "runs").is_dir():
        from .results import ResultsStore
        df = ResultsStore(src).table()            # the run files: current even after a killed sweep
    elif path.exists():
        try:
            from .results import _read_table
            df = _read_table(path).to_pandas(use_threads=False)      # results._NO_THREADS
        except Exception as e:                      # pyarrow's errors for a file that is not Parquet
            raise UsageError(f"{path}: not a results table (a Parquet file written by 'fedtheory sweep'): "
                             f"{_one_line(e)}") from None
    else:
        raise UsageError(f"no results table at {path} (run 'fedtheory sweep CONFIG --out {args.dir}' first)")
    if not len(df):
        raise UsageError(f"{path}: no runs stored yet (run 'fedtheory sweep CONFIG --out {args.dir}')")
    skip = {"run_id", "status", "seed", "version", "round"}
    numeric = [c for c in df.columns if not c.startswith("param_") and pd.api.types.is_numeric_dtype(df[c])]
    # a flag (reference_certified) is numeric to pandas but no metric to plot on a log axis
    metrics = [c for c in numeric if c not in skip and not pd.api.types.is_bool_dtype(df[c])]
    if args.y is not None and args.y not in metrics:
        from .._argcheck import did_you_mean
        raise UsageError(f"--y {args.y}: no such metric in {path}; metrics: {', '.join(metrics)}."
                         f"{did_you_mean(args.y, metrics)}")
    axes = ("round", "comm_up", "grad_evals")
    from ..plotting import X_ALIASES
    if args.x is not None and X_ALIASES.get(args.x, args.x) not in numeric:
        raise UsageError(f"--x {args.x}: not a numeric column of {path}; e.g. {', '.join(c for c in axes if c in numeric)}")
    xs = [args.x] if args.x else [c for c in axes if c in numeric] or ["round"]
    out = Path(_out_file(args.out) if args.out is not None else (src if src.is_dir() else src.parent) / "rates.png")
    try:
        fig = results_figure(df, y=args.y, title=args.title, filters=args.filter, xs=xs)
    except ValueError as e:          # a --filter naming no parameter, or matching no run
        raise UsageError(f"--filter: {e}" if args.filter else f"plot: {e}") from None
    fig.savefig(out, dpi=150)
    print(f"figure: {out}")
    return 0
