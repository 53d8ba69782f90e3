"""One point of a sweep: its run (:func:`run_point`), the history rows the results store keeps
(:func:`history_frame`), the warm-up of the kernels and ground truth its workers need, and the errors
a sweep raises. Shared by the local workers (:mod:`fedtheory.reporting.sweep`) and the Dask ones
(:mod:`fedtheory.reporting.dask_sweep`).
"""
from __future__ import annotations

import json

from .results import flatten_params, run_id
from .config import build_problem, run_call
from .. import __version__, truth
from ..runs.runner import run
from ..exceptions import ConfigError


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C: its workers are stopped and its finished runs stored.

    Running the same sweep again resumes it. The parameters are kept as attributes of the same
    names.

    Parameters
    ----------
    stored : int
        Runs in the store for this grid.
    total : int
        Distinct grid points.
    out : str or path-like
        The results directory.
    """

    def __init__(self, stored, total, out):
        self.stored, self.total, self.out = stored, total, out
        super().__init__(f"interrupted: {stored} of {total} runs stored in {out}")


class SweepFailed(RuntimeError):
    """A sweep that could not finish: the Dask cluster was lost or unreachable, runs killed their
    workers (``KilledWorker``), local workers died, or runs could not be stored.

    The finished runs are stored (``results.parquet`` rewritten). Attributes ``stored`` (runs in
    the store for this grid), ``total`` (distinct grid points), ``out`` (the results directory)
    and ``reason`` (one line). Running the same sweep again resumes it: stored runs are skipped.

    Parameters
    ----------
    reason : str
        What failed, one line.
    stored : int
        Runs in the store for this grid.
    total : int
        Distinct grid points.
    out : str or Path
        The results directory.
    """

    def __init__(self, reason, stored, total, out):
        self.reason, self.stored, self.total, self.out = reason, stored, total, out
        super().__init__(f"{reason}; {stored} of {total} runs stored in {out}")


class _BackendFailure(Exception):
    """Raised by the backends for a failure of the machinery (not of a run's own code): turned into
    :class:`SweepFailed` with the store's counts by :func:`sweep`."""


class SweepCancelled(RuntimeError):
    """Raised inside a Dask task whose future was cancelled (its driver stopped or vanished)."""


def _reference(p, progress=None):
    """The certified optimum of ``p`` for ``reference = true``; a problem without one (e.g. no
    minimiser: separable data, l2 = 0) is the configuration's error (:class:`ConfigError`), in the
    driver's warm-up as in a run."""
    try:
        return truth.ground_truth(p, progress=progress or None)
    except ValueError as e:
        raise ConfigError(f"[run] reference = true needs the problem's optimum: {e}") from None


def run_point(problem_args, run_args, callback=None, progress=False, result=False):
    """Run one configuration point.

    Parameters
    ----------
    problem_args : dict
        The problem: ``{"factory": name, **arguments}`` (:func:`build_problem`).
    run_args : dict
        Arguments of :func:`fedtheory.run` with ``algorithm``; ``reference = true`` measures
        against the certified optimum (:func:`validation.ground_truth`).
    callback : callable, optional
        Passed to :func:`fedtheory.run`; it must not stop the run (a stopped run is not the
        configured one): raise instead.
    progress : bool, default False
        Draw a bar over the rounds (and over the ground truth's stages when ``reference`` is set).
    result : bool, default False
        Also return the :class:`fedtheory.RunResult` (its ``message`` names the round and client
        of a divergence).

    Returns
    -------
    run_id : str
        Hash of the point's full configuration.
    history : pandas.DataFrame
        The run's history with run_id, param_*, status, seed and version columns
        (:func:`history_frame`).
    run_result : fedtheory.RunResult
        Only with ``result=True``.
    """
    p = build_problem(problem_args)
    alg, kw, want_ref = run_call(run_args)
    ref = _reference(p, progress) if want_ref else None
    res = run(p, alg, reference=ref, callback=callback, progress=progress, **kw)
    rid, df = history_frame(problem_args, run_args, res)
    return (rid, df, res) if result else (rid, df)


def history_frame(problem_args, run_args, res):
    """A run's history with the results store's run_id, param_*, status, seed and version columns.

    These are the rows :class:`~fedtheory.reporting.results.ResultsStore` and ``fedtheory plot`` read.

    Parameters
    ----------
    problem_args : dict
        The point's problem arguments.
    run_args : dict
        The point's run arguments.
    res : RunResult
        The run of that point.

    Returns
    -------
    run_id : str
        Hash of the point's full configuration.
    table : pandas.DataFrame
        One row per evaluated round.
    """
    import pandas as pd
    h = res.history
    rid = run_id(problem_args, run_args)
    cols = {"run_id": rid, **flatten_params(problem_args, run_args), "status": res.status,
            "seed": int(run_args.get("seed", 0)), "version": __version__}
    n = len(h)
    data = {k: [v] * n for k, v in cols.items()}          # one frame built at once (no column inserts)
    data.update({c: h[c].array for c in h.columns if c not in cols})
    return rid, pd.DataFrame(data, index=h.index if n else None)


def warm_up(points):
    """Compile the kernels once (Numba disk cache) and certify each distinct problem once.

    Kernels are compiled per algorithm and problem family (the problem's arguments other than
    its seed), so a grid over seeds costs one one-round warm-up run per algorithm.

    Parameters
    ----------
    points : list of tuple
        ``(problem_args, run_args)`` of the runs to come.
    """
    seen_alg, seen_prob = set(), set()
    for prob, rn in points:
        key = json.dumps(prob, sort_keys=True)
        family = json.dumps({k: v for k, v in prob.items() if k != "seed"}, sort_keys=True)
        if rn.get("reference") and key not in seen_prob:
            _reference(build_problem(prob))
            seen_prob.add(key)
        sig = (rn["algorithm"], family)
        if sig not in seen_alg:
            seen_alg.add(sig)
            kw = {k: v for k, v in rn.items() if k not in ("algorithm", "reference", "rounds", "x0",
                                                           "record_iterates", "eval_every", "tol")}
            run(build_problem(prob), rn["algorithm"], rounds=1, **kw)


def _n_workers(n_jobs):
    from joblib import effective_n_jobs
    return max(1, effective_n_jobs(-1 if n_jobs is None else n_jobs))


def _noted(e, rid, prob, rn):
    """``e`` with a note (shown under its traceback) naming the sweep's run it came from and how to
    resume: a run's own error stops the sweep, and its message alone named no grid point."""
    if hasattr(e, "add_note"):
        e.add_note(f"fedtheory sweep: in run {rid} (problem {prob}, run {rn}); the runs stored before it are "
                   "kept, and the same command resumes the sweep once the error is fixed")
    return e


def _first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
