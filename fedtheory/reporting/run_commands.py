"""The commands of the ``fedtheory`` command line that run algorithms: ``demo``, ``run`` (with the
step-size hint of a diverged run) and ``sweep``. Each takes the parsed arguments and returns the
exit status, or raises :class:`~fedtheory.reporting.commands.UsageError`."""
from __future__ import annotations

import math
import shlex
import sys

import numpy as np

from .commands import DIVERGED, UsageError, _one_line, _out_dir
from .config import build_problem, factories, load
from .points import SweepFailed, run_point
from .results import ResultsStore
from .sweep import sweep
from .. import truth
from .._argcheck import Interval, check_param
from .._progress import enabled
from ..constants import smoothness
from ..runs.runner import run


def _demo(args):
    """A few algorithms on logistic regression over LIBSVM data (or scikit-learn's breast cancer data)
    against its certified optimum, as a table; exit 0."""
    check_param("rounds", args.rounds, [Interval(int, 1, None)], "demo")
    # l2 > 0: a9a without ridge is quasi-separable, with no minimiser to certify
    check_param("l2", args.l2, [Interval(float, 0, None, "neither")], "demo")
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
    return 0


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
    if args.out is not None:
        _out_dir(args.out)
    cfg = load(args.config)
    pts = cfg.points()
    if len(pts) != 1:
        raise UsageError(f"{args.config}: the [grid] has {len(pts)} points; 'fedtheory run' runs one "
                         "configuration (use 'fedtheory sweep').")
    rid, df, res = run_point(*pts[0], progress=enabled(), result=True)
    last = df.iloc[-1]
    cols = [c for c in ("round", "value", "suboptimality", "grad_mapping_sq", "dist_sq", "comm_up", "grad_evals")
            if c in df]
    print(f"run {rid}: {pts[0][1]['algorithm']} on {pts[0][0]['factory']}, status {last.status}")
    if pts[0][1].get("reference"):
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
    rounds = int(run_args.get("rounds", 1))
    checked = rounds if diverged_at is None else min(rounds, max(10 * int(diverged_at), 100))
    what = "this configuration" if checked == rounds else f"the first {checked} rounds of this configuration"

    def one_over_L():
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
