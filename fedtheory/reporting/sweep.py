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

import json
import os
import sys
import threading
import time
from pathlib import Path


from .config import load
from .points import (_BackendFailure, _first_line, _n_workers, _noted, run_point, SweepFailed, SweepInterrupted,
                     warm_up)
from .results import ResultsStore, run_id
from .._argcheck import Bool, check_param, Interval, NoneOk, Options
from .._progress import bar as progress_bar
from .._threads import limit_worker_threads
from ..exceptions import InvalidParameterError
from ..registry import check_workers_can_import, import_modules, user_modules
from .._kernels.drivers import _source_files, _user_module


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
    import_modules(modules)
    return run_point(problem_args, run_args)


# ------------------------------------------------------------------------------- the driver

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
                from .dask_sweep import run_dask        # (dask: an optional dependency, for this backend only)
                run_dask(store, todo, scheduler, bar, n_jobs)
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
    check_workers_can_import([rn["algorithm"] for _, _, rn in todo],    # before any warm-up
                             factories=[p["factory"] for _, p, _ in todo])
    if warm:
        warm_up([(p, r) for rid, p, r in todo if not store.has(rid)])
    from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, wait

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
