"""Sweeps: a configuration's grid run in parallel, locally (joblib/loky) or on Dask.

The driver process is the only writer of its :class:`~fedtheory.reporting.results.ResultsStore`;
workers only compute. ``-j 1`` runs in the driver process (no pool, no warm-up). With more
workers the driver first warms up the Numba cache (one one-round run per algorithm and problem
family) and the ground-truth cache (one solve per distinct problem), so workers load compiled
kernels and certified optima from disk, then keeps ``2 * workers`` runs in flight on a loky
process pool. Each of N loky workers limits its BLAS and OpenMP threads to its share of the CPUs,
max(1, CPUs // N) (:mod:`fedtheory._threads`: OpenBLAS's idle threads spin on the CPUs the other
workers need; a 12-run a9a sweep on 2 workers took 6.7 s with them, 5.1 s without). Dask's
nannies already start their workers with one BLAS thread.

Interrupts: on Ctrl-C (``KeyboardInterrupt``) or any error, the driver kills its loky workers
(or cancels its Dask futures, which stops running runs at their next round), rewrites
``results.parquet`` from the finished runs and raises :class:`SweepInterrupted`. A driver killed
outright (SIGKILL) cannot clean up: each loky worker notices within 0.2 s that its parent is
gone and exits; Dask releases the futures of a disconnected client and its running runs stop
at their next round. Starting the same sweep again skips the stored runs.

User modules: every worker (loky or Dask) imports the driver's user modules
(:func:`fedtheory.registry.user_modules`: those of ``--import`` or a configuration's
``import = [...]``, and the modules of the user's registered algorithms, components and
theorems) before it looks a name up.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
import time
from pathlib import Path


from .config import build_problem, load, make_problem, run_call, run_id  # noqa: F401  (build_problem, make_problem: importable from here as before)
from .results import ResultsStore, flatten_params


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
    from .. import truth
    try:
        return truth.ground_truth(p, progress=progress or None)
    except ValueError as e:
        from .config import ConfigError
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
    from ..runs.runner import run
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
    from .. import __version__
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
    """
    from ..runs.runner import run
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


# ------------------------------------------------------------------------------- local workers

_WATCH_PERIOD = 0.2


def _worker_init(n_workers=1):
    """Loky worker initializer: leave Ctrl-C to the driver, exit as soon as the driver is gone, and
    keep BLAS to this worker's share of the CPUs (:func:`fedtheory._threads.limit_worker_threads`).

    A terminal's Ctrl-C reaches the whole process group; the driver decides and kills the
    workers. A daemon thread polls ``os.getppid()``: when the driver dies (even by SIGKILL)
    the worker is re-parented and exits within ``_WATCH_PERIOD`` seconds, mid-run if need be.
    """
    import signal
    from .._threads import limit_worker_threads
    limit_worker_threads(n_workers)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):           # pragma: no cover
        pass
    if os.name != "posix":                  # pragma: no cover  (no re-parenting to observe)
        return
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(_WATCH_PERIOD)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="fedtheory-parent-watch", daemon=True).start()


_POOL = {}          # n_workers -> this process's loky pool (kept between sweeps; idle workers exit)
_POOL_CODE = {}     # n_workers -> the user's code files as they were when the pool started


_OWN_PACKAGES = ("fedtheory", "problems", "validation")


def _user_files(modules=()):
    """The user's source files a sweep's runs depend on, as ``(path, size, mtime_ns)``: the files of
    ``modules`` (:func:`fedtheory.registry.user_modules`) and of their packages, and of every other
    loaded module of the user's (:func:`fedtheory._kernels.drivers._user_module`: a helper beside
    them), sorted. The running script (``__main__``: ``fedtheory`` or ``python -m fedtheory``) and
    this project's packages (an editable install lies outside site-packages) are not the user's
    code, unless they declare the algorithms or problems themselves."""
    from .._kernels.drivers import _source_files, _user_module
    paths = set()
    for name, m in list(sys.modules.items()):
        f = getattr(m, "__file__", None)
        if name not in modules and (name in ("__main__", "__mp_main__") or name.partition(".")[0] in _OWN_PACKAGES):
            continue        # the running script or console entry point (multiprocessing's alias too), and
                            # this project's own code
        if f and (name in modules or _user_module(name)):
            paths.update(_source_files(Path(f)) if name in modules else [f])
    out = []
    for p in sorted(paths):
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.append((os.path.realpath(p), st.st_size, st.st_mtime_ns))
    return tuple(out)


_CODE_FILE = "code-versions.json"


def _record_code(directory, adding):
    """Compare the user's code files (:func:`_user_files`, by content) with the versions the runs
    stored in ``directory`` were computed with (``code-versions.json``, one entry per version);
    record this version when runs are about to be added. Returns the files (names) that differ
    from an earlier version: a resumed sweep then holds runs of two versions of the user's code,
    which the run ids (a hash of the configuration) cannot tell apart."""
    import hashlib
    from ..registry import user_modules
    now = {}
    for path, _, _ in _user_files(user_modules()):
        try:
            now[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            continue
    target = Path(directory) / _CODE_FILE
    try:
        versions = json.loads(target.read_text())["versions"]
        assert isinstance(versions, list) and all(isinstance(v, dict) for v in versions)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        versions = []                       # none recorded (an older store) or unreadable: nothing to compare
    changed = sorted({os.path.basename(p) for v in versions for p in set(v) | set(now) if v.get(p) != now.get(p)})
    if adding and now not in versions:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"versions": versions + [now]}, indent=1))
            os.replace(tmp, target)
        except OSError:                     # pragma: no cover - a read-only store still sweeps
            pass
    return changed


def _local_pool(n, code=()):
    """A loky process pool of ``n`` workers started with :func:`_worker_init`, reused between
    sweeps of this process (its own, not joblib's shared one); idle workers exit after 60 s.
    ``code``: the user's files (:func:`_user_files`); when one changed since the pool started (an
    edit, then ``importlib.reload``), its workers, which imported the old code, are replaced."""
    from joblib.externals.loky import ProcessPoolExecutor
    pool = _POOL.get(n)
    flags = getattr(pool, "_flags", None)
    if pool is not None and _POOL_CODE.get(n) != code:
        _stop_pool(pool)
        pool = None
    if pool is None or flags is not None and (flags.broken is not None or flags.shutdown):
        pool = _POOL[n] = ProcessPoolExecutor(max_workers=n, initializer=_worker_init, initargs=(n,), timeout=60)
        _POOL_CODE[n] = code
    return pool


def _stop_pool(pool):
    """Kill the pool's workers now (running runs are abandoned; their results were never stored)."""
    for n, p in list(_POOL.items()):
        if p is pool:
            del _POOL[n]
    try:
        pool.shutdown(wait=True, kill_workers=True)
    except Exception:                       # pragma: no cover  (already broken)
        pass


def _worker_run_point(modules, problem_args, run_args):
    """``run_point`` in a worker process, after importing the driver's user modules (they register
    the user's algorithms, problem factories, components and theorems;
    :func:`fedtheory.registry.user_modules`)."""
    from ..registry import import_modules
    import_modules(modules)
    return run_point(problem_args, run_args)


# ------------------------------------------------------------------------------- Dask tasks

def _dask_run_point(problem_args, run_args, modules=()):
    """``run_point`` on a Dask worker, stopping at the next round once its future is cancelled
    (the driver cancelled it on Ctrl-C, or the scheduler released it when the driver vanished).
    ``modules``: the driver's user modules, imported first (a worker that cannot import one says
    it is a worker, and how to give it the module)."""
    from ..registry import import_modules
    try:
        import_modules(modules)
    except ImportError as e:
        import socket
        raise ImportError(f"on the Dask worker at {socket.gethostname()} (the driver imported these modules): {e}; "
                          "make them importable on every worker (the workers' PYTHONPATH or working directory, "
                          "or client.upload_file for a single file)") from e
    try:
        from distributed import get_worker
        worker = get_worker()
        key = worker.get_current_task()
    except Exception:                       # not on a worker (e.g. a synchronous scheduler)
        return run_point(problem_args, run_args)

    def still_wanted(r, x):
        ts = worker.state.tasks.get(key)
        if ts is None or ts.state not in ("executing", "long-running"):
            raise SweepCancelled(f"run {run_id(problem_args, run_args)} cancelled at round {r}")
        return False

    return run_point(problem_args, run_args, callback=still_wanted)


# ------------------------------------------------------------------------------- the driver

def _n_workers(n_jobs):
    from joblib import effective_n_jobs
    return max(1, effective_n_jobs(-1 if n_jobs is None else n_jobs))


def sweep(config, out, n_jobs=None, backend="local", scheduler=None, progress=None, warm=True):
    """Run every point of ``config``'s grid not yet stored in ``out``; return the results table.

    Parameters
    ----------
    config : str, Path or Config
        A TOML file (or text) or a loaded :class:`~fedtheory.reporting.config.Config`.
    out : str or Path
        Results directory (:class:`~fedtheory.reporting.results.ResultsStore`: ``out/runs/``,
        ``out/results.parquet``).
    n_jobs : int, optional
        Local worker processes (loky); default all CPUs; 1 runs in this process; a negative
        count is joblib's, counted back from the CPUs (-1 all, -2 all but one; at least -(the
        CPUs)). With backend
        "dask" and no ``scheduler``, the number of workers of the local Dask cluster started for
        the sweep (one thread each; default all CPUs).
    backend : {"local", "dask"}
        Where the runs execute.
    scheduler : str or dask.distributed.Client, optional
        Dask scheduler address (``tcp://host:port``) or a connected client (backend "dask");
        None starts a local Dask cluster of ``n_jobs`` workers for the sweep.
    progress : bool, optional
        A tqdm progress bar on stderr; None shows it only when stderr is a terminal (never with
        ``FEDTHEORY_QUIET=1`` or ``fedtheory --quiet``).
    warm : bool
        Warm the Numba and ground-truth caches in the driver first (parallel runs only).

    Returns
    -------
    pandas.DataFrame
        The whole stored table (finished runs of earlier invocations included).

    Raises
    ------
    SweepInterrupted
        On Ctrl-C, after the workers are stopped and ``results.parquet`` is rewritten.
    SweepFailed
        When the sweep cannot finish (the Dask scheduler unreachable or lost, runs that killed
        their Dask workers, dead local workers), after the finished runs are stored: its message
        is one line; running the same sweep again resumes it.
    fedtheory.exceptions.InvalidParameterError
        A bad argument (``out`` empty, ``scheduler`` malformed or given without
        ``backend="dask"``, ...), before anything runs.

    Examples
    --------
    >>> import tempfile
    >>> from fedtheory.reporting.sweep import sweep
    >>> cfg = '''
    ... [problem]
    ... factory = "quadratic"
    ... n_clients = 4
    ... dim = 3
    ... [run]
    ... algorithm = "fedavg"
    ... rounds = 3
    ... eval_every = 1
    ... [grid]
    ... seed = [0, 1]
    ... '''
    >>> df = sweep(cfg, tempfile.mkdtemp(), n_jobs=1, progress=False)
    >>> df.run_id.nunique(), len(df)
    (2, 8)
    """
    from .._progress import bar as progress_bar
    _check_sweep_args(out, n_jobs, backend, scheduler, progress, warm)
    cfg = config if hasattr(config, "points") else load(config, progress=progress)
    points = cfg.points(progress)
    store = ResultsStore(out)
    done = store.finished()
    todo, seen, wanted = [], set(), set()
    for prob, rn in points:
        rid = run_id(prob, rn)
        if rid not in seen:                 # identical grid points run once
            seen.add(rid)
            old = run_id(prob, rn, legacy=True)       # a store written before numbers had one form
            key = old if rid not in done and old in done else rid
            wanted.add(key)
            if key not in done:
                todo.append((rid, prob, rn))
    skipped = len(wanted & done)
    bar = progress_bar(progress, total=len(todo), desc="sweep", unit="run")
    if skipped:
        bar.write(f"sweep: {skipped} of {len(points)} runs already stored in {store.path}; skipping them",
                  file=sys.stderr)
    changed = _record_code(store.dir, bool(todo))
    if skipped and changed:
        bar.write(f"sweep: warning: the runs stored in {store.dir} were computed with another version of your "
                  f"code ({', '.join(changed)} changed since); they are kept, not recomputed. Sweep into a new "
                  "output directory to run every point with this code.", file=sys.stderr)

    def stored():
        return len(wanted & store.finished())

    try:
        for attempt in range(2):
            if backend == "local":
                _run_local(store, todo, n_jobs, warm, bar)
            else:
                _run_dask(store, todo, scheduler, bar, n_jobs)
            store.commit()                  # also picks up runs stored by concurrent writers
            fin = store.finished()
            todo = [t for t in todo if t[0] not in fin]     # e.g. a concurrent writer's file went bad
            if not todo:
                break
        if todo:
            raise _BackendFailure(f"{len(todo)} runs could not be stored in {store.dir} "
                                  f"(see {store.quarantine_dir})")
    except KeyboardInterrupt:
        bar.close()
        store.commit()
        raise SweepInterrupted(stored(), len(wanted), str(out)) from None
    except _BackendFailure as e:
        bar.close()
        store.commit()
        raise SweepFailed(str(e), stored(), len(wanted), str(out)) from None
    except BaseException:
        bar.close()
        try:
            store.commit()
        except Exception:                   # pragma: no cover  (keep the original error)
            pass
        raise
    bar.close()
    return store.table()


def _check_sweep_args(out, n_jobs, backend, scheduler, progress, warm):
    """sweep()'s own arguments, before the configuration is read (sklearn-style messages)."""
    from .._argcheck import Bool, Interval, NoneOk, Options, check_param
    from ..exceptions import InvalidParameterError
    if not isinstance(out, (str, os.PathLike)) or not str(os.fspath(out)).strip():
        raise InvalidParameterError(f"The 'out' parameter of sweep must be a non-empty path of a results "
                                    f"directory. Got {out!r} instead.")
    # joblib's negative counts (-1 every CPU, -2 all but one, ...) go down to -(the CPUs): below that
    # joblib would silently take one worker
    cpus = os.cpu_count() or 1
    check_param("n_jobs", n_jobs, [NoneOk(), Interval(int, -cpus, -1), Interval(int, 1, None)], "sweep")
    check_param("backend", backend, [Options("local", "dask")], "sweep")
    check_param("progress", progress, [NoneOk(), Bool()], "sweep")
    check_param("warm", warm, [Bool()], "sweep")
    if scheduler is None:
        return
    if backend != "dask":
        raise InvalidParameterError(f"The 'scheduler' parameter of sweep applies to backend='dask' only and must "
                                    f"be None with backend={backend!r}. Got {scheduler!r} instead.")
    if not isinstance(scheduler, str):
        if type(scheduler).__name__ != "Client":
            raise InvalidParameterError(f"The 'scheduler' parameter of sweep must be a Dask scheduler address "
                                        f"(str, 'tcp://host:port') or a distributed.Client. Got "
                                        f"{type(scheduler).__name__} instead.")
        return
    try:
        from distributed.comm.addressing import get_address_host_port, parse_address
        from distributed.comm.registry import get_backend
    except ImportError:
        raise ImportError("backend='dask' needs the optional extra: pip install 'fedtheory[dask]'") from None
    try:
        scheme, _ = parse_address(scheduler)
        get_backend(scheme)
        if scheme != "inproc":
            get_address_host_port(scheduler)
    except (ValueError, TypeError) as e:
        why = " ".join(str(e).split())
        raise InvalidParameterError(f"The 'scheduler' parameter of sweep must be a Dask scheduler address "
                                    f"'tcp://host:port' (or a distributed.Client). Got {scheduler!r} instead "
                                    f"({why}).") from None


def _run_local(store, todo, n_jobs, warm, bar):
    n = min(_n_workers(n_jobs), len(todo))
    if n <= 1:                              # in this process: no pool, no pickling, no warm-up
        for rid, prob, rn in todo:
            if not store.has(rid):
                try:
                    out = run_point(prob, rn)
                except Exception as e:
                    raise _noted(e, rid, prob, rn)
                store.add(*out)
            bar.update(1)
        return
    from ..registry import check_workers_can_import
    check_workers_can_import([rn["algorithm"] for _, _, rn in todo],    # before any warm-up
                             factories=[p["factory"] for _, p, _ in todo])
    if warm:
        warm_up([(p, r) for rid, p, r in todo if not store.has(rid)])
    from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, wait

    from ..registry import user_modules
    modules = user_modules()
    pool = _local_pool(n, _user_files(modules))
    pending, point = set(), {}
    queue = iter(todo)
    try:
        while True:
            while len(pending) < 2 * n:
                nxt = next(queue, None)
                if nxt is None:
                    break
                rid, prob, rn = nxt
                if store.has(rid):          # stored meanwhile by a concurrent writer
                    bar.update(1)
                    continue
                fut = pool.submit(_worker_run_point, modules, prob, rn)
                point[fut] = nxt
                pending.add(fut)
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            failure = None                  # the batch's other results are stored before it is raised
            for fut in finished:
                try:
                    result = fut.result()
                except BrokenExecutor as e:         # a worker killed (out of memory, a signal)
                    failure = failure or _BackendFailure(f"a local worker process died ({type(e).__name__}: "
                                                         f"{_first_line(e)})")
                    continue
                except Exception as e:
                    failure = failure or _noted(e, *point[fut])
                    continue
                del point[fut]
                store.add(*result)
                bar.update(1)
            if failure is not None:
                raise failure
    except BaseException:
        _stop_pool(pool)
        raise


def _noted(e, rid, prob, rn):
    """``e`` with a note (shown under its traceback) naming the sweep's run it came from and how to
    resume: a run's own error stops the sweep, and its message alone named no grid point."""
    if hasattr(e, "add_note"):
        e.add_note(f"fedtheory sweep: in run {rid} (problem {prob}, run {rn}); the runs stored before it are "
                   "kept, and the same command resumes the sweep once the error is fixed")
    return e


def _connect(address, n_jobs=None):
    """A Client of the scheduler at ``address``; an unreachable one is a one-line failure. No
    address: a local cluster of ``n_jobs`` single-threaded worker processes (all CPUs by default)."""
    from distributed import Client
    try:
        if address is None:
            return Client(n_workers=_n_workers(n_jobs), threads_per_worker=1, processes=True,
                          dashboard_address=":0")
        return Client(address)
    except (OSError, TimeoutError) as e:
        raise _BackendFailure(f"cannot reach the Dask scheduler at {address} ({' '.join(str(e).split())}); "
                              "is it running, and is the address the one 'dask scheduler' printed?") from None


def _run_dask(store, todo, scheduler, bar, n_jobs=None):
    """Run ``todo`` on a Dask cluster, storing each result as it arrives.

    Each future is released as soon as its run is stored, so that the scheduler forgets the
    result: a worker lost later does not make the cluster recompute stored runs. Runs that kill
    their workers (``KilledWorker``) are reported together after the others finished; a lost
    scheduler connection stops the sweep at once. Both are :class:`_BackendFailure`.
    """
    try:
        from distributed import Client, as_completed
        from distributed.comm.core import CommClosedError
        from distributed.scheduler import KilledWorker
    except ImportError:
        raise ImportError("backend='dask' needs the optional extra: pip install 'fedtheory[dask]'") from None
    todo = [t for t in todo if not store.has(t[0])]          # stored meanwhile: never resubmitted
    if not todo:
        return
    own = not isinstance(scheduler, Client)
    with _quiet_dask_client():
        client = _connect(scheduler, n_jobs) if own else scheduler
        _dask_loop(store, todo, client, own, scheduler, bar, as_completed, CommClosedError, KilledWorker)


@contextlib.contextmanager
def _quiet_dask_client():
    """Silence the driver's ``distributed.client`` and ``distributed.comm`` loggers for the sweep: a lost
    scheduler made them print 30-50 lines of reconnection tracebacks around the sweep's one-line
    error (what went wrong is in that line)."""
    import logging
    loggers = [logging.getLogger(n) for n in ("distributed.client", "distributed.comm", "distributed.core",
                                              "distributed.utils")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def _dask_loop(store, todo, client, own, scheduler, bar, as_completed, CommClosedError, KilledWorker):
    import asyncio
    import uuid
    address = getattr(client, "scheduler_address", None) or getattr(getattr(client, "scheduler", None),
                                                                     "address", scheduler)
    tag = uuid.uuid4().hex[:8]                 # keys name their run: fedtheory-run-<run_id>-<tag>
    rid_of, killed = {}, []
    pending = None
    from ..registry import check_workers_can_import, user_modules
    check_workers_can_import([r["algorithm"] for _, _, r in todo], factories=[p["factory"] for _, p, _ in todo])
    try:
        keys = [f"fedtheory-run-{rid}-{tag}" for rid, _, _ in todo]
        rid_of = {k: rid for k, (rid, _, _) in zip(keys, todo)}
        point_of = {rid: (p, r) for rid, p, r in todo}
        try:
            pending = as_completed(client.map(_dask_run_point, [p for _, p, _ in todo], [r for _, _, r in todo],
                                              modules=user_modules(), key=keys, pure=False))
        except (asyncio.CancelledError, OSError, TimeoutError) as e:
            raise _BackendFailure(f"lost the Dask cluster at {address} ({type(e).__name__}: "
                                  f"{_first_line(e)})") from None
        for fut in pending:
            rid = rid_of[fut.key]
            try:
                result = fut.result()
            except KilledWorker as e:
                killed.append((rid, e))
                continue
            except asyncio.CancelledError as e:          # FutureCancelledError: scheduler connection lost
                why = re.search(r"cancelled for reason: ([\w-]+)", str(e))
                raise _BackendFailure(f"lost the Dask cluster at {address} (run {rid} cancelled: "
                                      f"{why.group(1) if why else _first_line(e)})") from None
            except Exception as e:
                if isinstance(e, CommClosedError) or client.status != "running":
                    raise _BackendFailure(f"lost the Dask cluster at {address} ({type(e).__name__}: "
                                          f"{_first_line(e)})") from None
                raise _noted(e, rid, *point_of[rid])    # the run's own error (e.g. a missing data file)
            finally:
                fut.release()                  # the scheduler forgets it: never recomputed
                del fut
            if not store.has(rid):
                store.add(*result)
            del result
            bar.update(1)
        if killed:
            rid, e = killed[0]
            n = len(killed)
            times = (e.args[2] + 1) if len(e.args) > 2 and isinstance(e.args[2], int) else _allowed_failures()
            raise _BackendFailure(f"{n} run{'s' if n > 1 else ''} killed {'their' if n > 1 else 'its'} Dask "
                                  f"worker (KilledWorker: Dask gave up on run {rid} after its worker died {times} "
                                  f"time{'s' if times > 1 else ''}, distributed.scheduler.allowed-failures + 1; "
                                  "too little memory per worker?)")
    except BaseException:
        try:
            if pending is not None:
                client.cancel(list(pending.futures), force=True)
        except BaseException:                # pragma: no cover  (the cluster is gone)
            pass
        raise
    finally:
        pending = None
        if own:
            try:
                client.close()
            except BaseException:            # pragma: no cover  (the cluster is gone)
                pass


def _first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _allowed_failures():
    """How many times a task may kill a worker before Dask gives up on it (its KilledWorker)."""
    import dask
    return int(dask.config.get("distributed.scheduler.allowed-failures", 3)) + 1
