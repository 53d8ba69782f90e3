"""Sweeps: a configuration's grid run in parallel, locally (joblib/loky) or on Dask.

The driver process is the single writer of the :class:`~fedtheory.results.ResultsStore`;
workers only compute. Before dispatching, the driver warms up the Numba cache (one tiny run
per algorithm) and the ground-truth cache (one solve per distinct problem), so workers load
compiled kernels and certified optima from disk instead of repeating the work.
"""
from __future__ import annotations

import functools
import json

import numpy as np

from .config import load, run_id
from .results import ResultsStore, flatten_params


@functools.lru_cache(maxsize=8)
def _problem(blob):
    import problems
    args = json.loads(blob)
    name = args.pop("name")
    return getattr(problems, name)(**args)


def build_problem(problem_args):
    """The problem of a configuration (cached per process)."""
    return _problem(json.dumps(problem_args, sort_keys=True))


def run_point(problem_args, run_args):
    """Run one configuration point; return its history with run_id, param_* and status columns."""
    from .runner import run
    p = build_problem(problem_args)
    kw = dict(run_args)
    alg = kw.pop("algorithm")
    ref = None
    if kw.pop("reference", False):
        from . import truth
        ref = truth.ground_truth(p)
    if "x0" in kw and kw["x0"] is not None:
        kw["x0"] = np.asarray(kw["x0"], dtype=float)
    res = run(p, alg, reference=ref, **kw)
    return history_frame(problem_args, run_args, res)


def history_frame(problem_args, run_args, res):
    """``(run_id, table)``: a run's history with the results store's run_id, param_*, status, seed
    and version columns (the rows :class:`~fedtheory.results.ResultsStore` and ``fedtheory plot`` read)."""
    from . import __version__
    h = res.history.copy()
    rid = run_id(problem_args, run_args)
    cols = {"run_id": rid, **flatten_params(problem_args, run_args), "status": res.status,
            "seed": int(run_args.get("seed", 0)), "version": __version__}
    for k, v in cols.items():
        h[k] = v
    return rid, h[list(cols) + [c for c in res.history.columns]]


def warm_up(points):
    """Compile the kernels once (Numba disk cache) and certify each distinct problem once."""
    from .runner import run
    seen_alg, seen_prob = set(), set()
    for prob, rn in points:
        key = json.dumps(prob, sort_keys=True)
        p = build_problem(prob)
        if rn.get("reference") and key not in seen_prob:
            from . import truth
            truth.ground_truth(p)
            seen_prob.add(key)
        sig = (rn["algorithm"], key)
        if sig not in seen_alg:
            seen_alg.add(sig)
            kw = {k: v for k, v in rn.items() if k not in ("algorithm", "reference", "rounds", "x0",
                                                           "record_iterates", "eval_every", "tol")}
            run(p, rn["algorithm"], rounds=1, **kw)


def sweep(config, out, n_jobs=None, backend="local", scheduler=None, progress=None, warm=True):
    """Run every point of ``config``'s grid not yet stored in ``out``; return the results table.

    Parameters
    ----------
    config : str, Path or Config
        A TOML file (or text) or a loaded :class:`~fedtheory.config.Config`.
    out : str or Path
        Results directory (``out/results.parquet``).
    n_jobs : int, optional
        Local worker processes (joblib/loky); default all CPUs; 1 runs in this process.
    backend : {"local", "dask"}
        Where the runs execute.
    scheduler : str or dask.distributed.Client, optional
        Dask scheduler address (``tcp://host:port``) or a connected client (backend "dask").
    progress : bool, optional
        tqdm progress bar; None shows it only on a terminal.
    warm : bool
        Warm the Numba and ground-truth caches in the driver first.

    Returns
    -------
    pandas.DataFrame
        The whole stored table (finished runs of earlier invocations included).

    Examples
    --------
    >>> import tempfile
    >>> from fedtheory.sweep import sweep
    >>> cfg = '''
    ... [problem]
    ... name = "quadratic"
    ... n_clients = 4
    ... dim = 3
    ... [run]
    ... algorithm = "fedavg"
    ... rounds = 3
    ... [grid]
    ... seed = [0, 1]
    ... '''
    >>> df = sweep(cfg, tempfile.mkdtemp(), n_jobs=1, progress=False)
    >>> df.run_id.nunique(), len(df)
    (2, 8)
    """
    from tqdm.auto import tqdm
    cfg = config if hasattr(config, "points") else load(config)
    points = cfg.points()
    store = ResultsStore(out)
    done = store.finished()
    todo, seen = [], set()
    for prob, rn in points:
        rid = run_id(prob, rn)
        if rid not in done and rid not in seen:     # identical grid points run once
            seen.add(rid)
            todo.append((prob, rn))
    skipped = len({run_id(p, r) for p, r in points} & done)
    bar = tqdm(total=len(todo), desc="sweep", disable=(None if progress is None else not progress))
    if skipped:
        bar.write(f"sweep: {skipped} of {len(points)} runs already stored in {store.path}; skipping them")
    if todo and warm:
        warm_up(todo)
    if backend == "local":
        if n_jobs == 1 or len(todo) <= 1:
            results = (run_point(p, r) for p, r in todo)
        else:
            from joblib import Parallel, delayed
            results = Parallel(n_jobs=n_jobs or -1, backend="loky", return_as="generator_unordered")(
                delayed(run_point)(p, r) for p, r in todo)
        for rid, df in results:
            store.add(rid, df)
            bar.update(1)
    elif backend == "dask":
        try:
            from distributed import Client, as_completed
        except ImportError:
            raise ImportError("backend='dask' needs the optional extra: pip install 'fedtheory[dask]'") from None
        client = scheduler if isinstance(scheduler, Client) else Client(scheduler)
        try:
            futures = client.map(run_point, [p for p, _ in todo], [r for _, r in todo], pure=False)
            for fut in as_completed(futures):
                rid, df = fut.result()
                store.add(rid, df)
                bar.update(1)
        finally:
            if not isinstance(scheduler, Client):
                client.close()
    else:
        raise ValueError(f"The 'backend' parameter of sweep must be 'local' or 'dask'. Got {backend!r} instead.")
    bar.close()
    store.commit()
    return store.table()
