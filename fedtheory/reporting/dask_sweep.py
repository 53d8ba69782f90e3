"""A sweep on a Dask cluster (``sweep(..., backend="dask")``): the task a worker runs, the connection to
the scheduler, and the driver's loop over the futures.

Loaded only for the Dask backend (``dask[distributed]`` is an optional extra); the runs, the store
and the errors are those of :mod:`fedtheory.reporting.sweep`.
"""
from __future__ import annotations

import contextlib
import re

from .points import _BackendFailure, _first_line, _n_workers, _noted, run_point, SweepCancelled
from .results import run_id
from ..registry import check_workers_can_import, import_modules, user_modules


# ------------------------------------------------------------------------------- Dask tasks

def _dask_run_point(problem_args, run_args, modules=()):
    """``run_point`` on a Dask worker, stopping at the next round once its future is cancelled
    (the driver cancelled it on Ctrl-C, or the scheduler released it when the driver vanished).
    ``modules``: the driver's user modules, imported first (a worker that cannot import one says
    it is a worker, and how to give it the module)."""
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


def run_dask(store, todo, scheduler, bar, n_jobs=None):
    """Run ``todo`` on a Dask cluster, storing each result as it arrives.

    Each future is released as soon as its run is stored, so that the scheduler forgets the
    result: a worker lost later does not make the cluster recompute stored runs. Runs that kill
    their workers (``KilledWorker``) are reported together after the others finished; a lost
    scheduler connection stops the sweep at once. Both are :class:`_BackendFailure`.

    Parameters
    ----------
    store : ResultsStore
        Where the runs are stored.
    todo : list of tuple
        ``(run_id, problem_args, run_args)`` of the runs to do.
    scheduler : str, Client or None
        The scheduler's address, a connected client, or None for a local cluster.
    bar : tqdm progress bar or None
        Advanced per stored run.
    n_jobs : int, optional
        Workers of a local cluster.
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


def _allowed_failures():
    """How many times a task may kill a worker before Dask gives up on it (its KilledWorker)."""
    import dask
    return int(dask.config.get("distributed.scheduler.allowed-failures", 3)) + 1
