"""Faults injected into sweeps, their results store, the caches, the data and the runs: killed and interrupted
drivers, damaged, stray and overwritten run files, concurrent writers, diverged runs.

Every test ends with the same check: the store holds exactly the grid's run ids, once each,
with every evaluated round, nothing duplicated and nothing lost. Processes run on this machine
only; each test is bounded in time.
"""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedtheory.reporting.config import load
from fedtheory.reporting.results import run_id
from fedtheory.reporting.sweep import sweep

TINY = """\
[problem]
name = "quadratic"
n_clients = 4
dim = 3

[run]
rounds = 30
lr = 0.1
eval_every = 10
reference = true

[grid]
algorithm = ["fedavg", "scaffold"]
seed = [0, 1, 2]
"""
TINY_ROWS = 4                                  # rounds 0, 10, 20, 30

# a few seconds per run: long enough to be mid-run when the driver is killed. The python backend
# (the rules run as Python, round by round) keeps a run's time independent of how fast the compiled
# path gets: at 60000 rounds a compiled run took 0.25 s, and the whole sweep finished between "one
# run stored" and the interrupt; it also leaves the workers nothing to compile.
_SLOW_BASE = """\
[problem]
name = "quadratic"
n_clients = 6
dim = 4

[run]
algorithm = "fedavg"
rounds = 24000
local_steps = 3
lr = 0.1
eval_every = 8000
{backend}
[grid]
seed = [0, 1, 2, 3]
"""
# 9000 rounds: about 2 s a run on a loaded 2-core machine, still mid-run when the driver is stopped
SLOW = _SLOW_BASE.format(backend='backend = "python"\n').replace("rounds = 24000", "rounds = 9000") \
    .replace("eval_every = 8000", "eval_every = 3000")
SLOW_ROWS = 4                                   # rounds 0, 3000, 6000, 9000


def _ids(cfg_text):
    return {run_id(p, r) for p, r in load(cfg_text).points()}


def _check_complete(df, cfg_text, rows):
    """Exactly the grid's run ids, each with all its rows, no (run_id, round) twice."""
    assert set(df.run_id) == _ids(cfg_text)
    assert not df.duplicated(["run_id", "round"]).any()
    assert (df.groupby("run_id").size() == rows).all()
    assert len(df) == len(_ids(cfg_text)) * rows


def _same(a, b):
    key = ["run_id", "round"]
    a = a.drop(columns=["time"]).sort_values(key).reset_index(drop=True)
    b = b.drop(columns=["time"]).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The TINY grid swept once, undisturbed."""
    return sweep(TINY, tmp_path_factory.mktemp("ref"), n_jobs=1, progress=False)


def _fresh(tmp_path):
    out = tmp_path / "store"
    sweep(TINY, out, n_jobs=1, progress=False)
    return out, sorted((out / "runs").glob("*.parquet"))


def _resweep(out, reason):
    """Sweep TINY again into ``out``; return the table and the StoreWarnings that name ``reason``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = sweep(TINY, out, n_jobs=1, progress=False)
    named = [str(w.message) for w in caught if w.category.__name__ == "StoreWarning" and reason in str(w.message)]
    return df, named


def _quarantined(out):
    q = out / "quarantine"
    return sorted(p.name for p in q.iterdir() if p.name != "log.txt") if q.exists() else []


# ----------------------------------------------------------------------------- killed drivers

def _group(pgid):
    """Live (non-zombie) processes of a process group."""
    ps = subprocess.run(["ps", "-A", "-o", "pid=,pgid=,stat="], capture_output=True, text=True).stdout
    return [int(p) for p, g, st in (line.split() for line in ps.splitlines())
            if int(g) == pgid and not st.startswith("Z")]


def _sigint_default():
    """In the child before exec: SIGINT to its default, so that Python installs its KeyboardInterrupt
    handler. A process started in the background by a non-interactive shell inherits SIGINT
    ignored, and a driver started from it would never see the Ctrl-C these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_driver(tmp_path, out, jobs="2"):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW)
    log = open(tmp_path / "driver.err", "w+")
    cmd = [sys.executable, "-m", "fedtheory", "sweep", str(cfg), "--out", str(out), "-j", jobs]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                            preexec_fn=_sigint_default)
    runs = out / "runs"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:          # one run stored, the workers busy with the next ones (300 s: a cold compile, loaded)
        if runs.exists() and list(runs.glob("*.parquet")) and len(_group(proc.pid)) >= 3:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    time.sleep(0.2)
    n = len(list(runs.glob("*.parquet")))
    assert proc.poll() is None and 1 <= n < 4, (proc.poll(), n)
    return cfg, proc, log


def _gone_within(pgid, seconds):
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if not _group(pgid):
            return True
        time.sleep(0.05)
    return False


def _reap(pgid):
    for pid in _group(pgid):                   # only what this test started
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow          # the class of fault (a killed driver: test_dask_driver_killed_mid_sweep_and_rerun[SIGKILL] in the default run)
def test_sigkill_driver_workers_exit_and_restart_completes(tmp_path):
    """SIGKILL the driver of a ``-j 2`` sweep mid-way: its loky workers exit within 3 s (they
    were mid-run), and a restart stores exactly the missing runs."""
    out = tmp_path / "k"
    cfg, proc, log = _start_driver(tmp_path, out)
    try:
        before = {p.stem for p in (out / "runs").glob("*.parquet")}
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert _gone_within(proc.pid, 3.0), f"workers still running 3 s after the driver was killed: {_group(proc.pid)}"
    finally:
        _reap(proc.pid)
        log.close()
    df = sweep(cfg, out, n_jobs=2, progress=False)
    _check_complete(df, SLOW, SLOW_ROWS)
    assert before <= set(df.run_id)
    _check_complete(pd.read_parquet(out / "results.parquet"), SLOW, SLOW_ROWS)
    assert _quarantined(out) == []
    assert {p.stem for p in (out / "runs").glob("*.parquet")} == _ids(SLOW)


def test_ctrl_c_exits_130_with_resume_line_and_stops_workers(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it): exit status 130,
    one line saying how to resume, workers gone within 3 s, finished runs in results.parquet."""
    out = tmp_path / "c"
    cfg, proc, log = _start_driver(tmp_path, out)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=15)
        assert _gone_within(proc.pid, 3.0), f"workers still running 3 s after Ctrl-C: {_group(proc.pid)}"
    finally:
        _reap(proc.pid)
        log.seek(0)
        err = log.read()
        log.close()
    assert rc == 130, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].endswith(f"resume with the same command: fedtheory sweep {cfg} --out {out} -j 2"), lines[0]
    stored = {p.stem for p in (out / "runs").glob("*.parquet")}
    mid = pd.read_parquet(out / "results.parquet")               # rewritten on the interrupt
    assert set(mid.run_id) == stored and 1 <= len(stored) < 4
    df = sweep(cfg, out, n_jobs=1, progress=False)                # the rest, in this process (no pool to start)
    _check_complete(df, SLOW, SLOW_ROWS)


@pytest.mark.slow          # the class of fault (a killed worker: test_dask_killed_worker_is_one_line_and_the_rerun_completes in the default run)
def test_killed_local_worker_is_one_line_and_the_rerun_completes(tmp_path):
    """A loky worker killed mid-sweep (as the out-of-memory killer does) broke the pool with a
    TerminatedWorkerError traceback: one line, exit 1, with the resume command, which completes it."""
    out = tmp_path / "w"
    cfg, proc, log = _start_driver(tmp_path, out)
    try:
        kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True).stdout
        workers = [int(k) for k in kids.split() if "resource_tracker" not in Path(f"/proc/{k}/cmdline").read_text()]
        os.kill(workers[0], signal.SIGKILL)
        rc = proc.wait(timeout=60)
    finally:
        _reap(proc.pid)
        log.seek(0)
        err = log.read()
        log.close()
    assert rc == 1, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    stored = {p.stem for p in (out / "runs").glob("*.parquet")}
    assert lines[0].startswith("fedtheory sweep: error: a local worker process died (TerminatedWorkerError"), lines[0]
    assert lines[0].endswith(f"; {len(stored)} of 4 runs stored in {out}; resume with the same command: "
                             f"fedtheory sweep {cfg} --out {out} -j 2"), lines[0]
    r = subprocess.run([sys.executable, "-m", "fedtheory", "sweep", str(cfg), "--out", str(out), "-j", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    _check_complete(pd.read_parquet(out / "results.parquet"), SLOW, SLOW_ROWS)


@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGKILL, marks=pytest.mark.slow)],
                         ids=["SIGINT", "SIGKILL"])
def test_dask_interrupted_or_killed_driver_stops_its_running_runs(tmp_path, sig):
    """A driver whose runs execute on a Dask cluster, stopped by Ctrl-C (exit 130: it cancels its
    futures) or by SIGKILL (the scheduler releases a vanished client's futures): the running run
    stops at its next round, within 5 s; a restart completes the grid."""
    distributed = pytest.importorskip("distributed")
    cfg = tmp_path / "slow.toml"
    cfg.write_text(_SLOW_BASE.format(backend="").replace("rounds = 24000", "rounds = 300000")
                   .replace("eval_every = 8000", "eval_every = 100000")
                   .replace("seed = [0, 1, 2, 3]", "seed = [0, 1]"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        def executing():
            return sum(client.run(lambda dask_worker: len(dask_worker.state.executing)).values())
        from fedtheory.reporting.points import run_point                 # kernels loaded: the run is in its rounds
        prob, rn = load(cfg).points()[0]
        client.submit(run_point, prob, dict(rn, rounds=1), pure=False).result()
        cmd = [sys.executable, "-m", "fedtheory", "sweep", str(cfg), "--out", str(tmp_path / "d"),
               "--backend", "dask", "--scheduler", cluster.scheduler_address]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_sigint_default)
        try:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 300 and not executing():     # (a loaded machine)
                time.sleep(0.05)
            assert executing() == 1
            time.sleep(0.3)
            os.kill(proc.pid, sig)
            rc = proc.wait(timeout=15)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 5 and executing():
                time.sleep(0.05)
            assert executing() == 0, f"the run of a driver stopped by {sig.name} is still executing"
            assert rc == (130 if sig == signal.SIGINT else -signal.SIGKILL)
        finally:
            _reap(proc.pid)
        small = cfg.read_text().replace("rounds = 300000", "rounds = 30").replace("eval_every = 100000",
                                                                                    "eval_every = 10")
        df = sweep(small, tmp_path / "d2", backend="dask", scheduler=client, progress=False)
        assert df.run_id.nunique() == 2 and not df.duplicated(["run_id", "round"]).any()


# ----------------------------------------------------------------------------- Dask faults
# Each test drives a sweep with the command line against a LocalCluster of small process workers
# (the scheduler runs in this process: a SchedulerPlugin records every run a worker finished) and
# ends with the same checks: every run of the grid exists exactly once, with the values of a clean
# sweep, and a failure printed one line with the command that resumes the sweep.

DASK = _SLOW_BASE.format(backend="").replace("rounds = 24000", "rounds = 20000") \
           .replace("eval_every = 8000", "eval_every = 10000") \
           .replace("seed = [0, 1, 2, 3]", "seed = [0, 1, 2, 3, 4, 5]")
DASK_ROWS = 3                                   # rounds 0, 10000, 20000


@pytest.fixture(scope="module")
def dask_clean(tmp_path_factory):
    """The DASK grid swept once, undisturbed, in this process."""
    return sweep(DASK, tmp_path_factory.mktemp("dask-clean"), n_jobs=1, progress=False)


def _cluster(distributed, **kw):
    return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                    dashboard_address=":0", worker_dashboard_address=None, **kw)


@pytest.fixture(scope="module")
def _shared_dask_cluster():
    distributed = pytest.importorskip("distributed")
    with _cluster(distributed) as cluster, distributed.Client(cluster) as client:
        yield cluster, client


@pytest.fixture
def dask_cluster(_shared_dask_cluster):
    """One LocalCluster of two process workers shared by the tests that kill workers or drivers;
    ``(cluster, client)``, handed to each test once both workers are up again (a killed worker's
    nanny starts a new one, and on a loaded machine a test could start with one worker, which then
    held every queued run)."""
    cluster, client = _shared_dask_cluster
    client.wait_for_workers(2, timeout=120)
    return cluster, client


@contextlib.contextmanager
def _finished_runs(cluster):
    """A scheduler plugin recording ``(run_id, time)`` each time a worker finishes a sweep's run."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class Finished(SchedulerPlugin):
        name = "fedtheory-test-finished"

        def __init__(self):
            self.done = []

        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "memory" and str(key).startswith("fedtheory-run-"):
                self.done.append((str(key).split("-")[2], time.monotonic()))

    plugin = Finished()
    cluster.scheduler.add_plugin(plugin)
    try:
        yield plugin
    finally:
        cluster.scheduler.remove_plugin(name=plugin.name)


def _kill_busy_worker(client):
    """SIGKILL the worker process running the most tasks; return how many it was running."""
    busy = client.run(lambda dask_worker: len(dask_worker.state.executing))
    pids = client.run(os.getpid)
    victim = max(busy, key=busy.get)
    os.kill(pids[victim], signal.SIGKILL)
    return busy[victim]


def _dask_driver(tmp_path, out, address):
    cfg = tmp_path / "dask.toml"
    cfg.write_text(DASK)
    cmd = [sys.executable, "-m", "fedtheory", "sweep", str(cfg), "--out", str(out), "--backend", "dask",
           "--scheduler", address]
    return cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)


def _stored(out):
    return {p.stem for p in (out / "runs").glob("*.parquet")} if (out / "runs").exists() else set()


def _wait_stored(out, n, proc, seconds=300):         # covers a cold compile on a loaded machine
    t0 = time.monotonic()
    while len(_stored(out)) < n and proc.poll() is None and time.monotonic() - t0 < seconds:
        time.sleep(0.02)
    assert len(_stored(out)) >= n, (proc.poll(), _stored(out))


def _one_line_with_resume(err, cmd, what):
    """The driver's stderr is one line naming ``what`` and ending with the exact resume command."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert what in lines[0] and "Traceback" not in err, lines[0]
    assert lines[0].endswith("resume with the same command: fedtheory " + " ".join(cmd[3:])), lines[0]
    return lines[0]


def _resume(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return r


def _complete_and_clean(out, clean):
    df = pd.read_parquet(out / "results.parquet")
    _check_complete(df, DASK, DASK_ROWS)
    _same(df, clean)
    assert _stored(out) == _ids(DASK) and _quarantined(out) == []


@pytest.mark.slow          # the class of fault (a killed worker: test_dask_killed_worker_is_one_line_and_the_rerun_completes in the default run)
@pytest.mark.xdist_group("dask-cluster")      # one worker starts the shared cluster and sweeps the clean grid
def test_dask_workers_killed_mid_sweep_stored_runs_are_never_recomputed(tmp_path, dask_clean, dask_cluster):
    """SIGKILL a worker twice mid-sweep (its nanny restarts it): the sweep completes without a word,
    and no run stored before a kill is computed again (the driver releases each future once its run
    is stored; it kept them all, and 40 runs took 83 executions)."""
    cluster, client = dask_cluster
    out = tmp_path / "k"
    with _finished_runs(cluster) as finished:
        cmd, proc = _dask_driver(tmp_path, out, cluster.scheduler_address)
        try:
            kills = []
            for n in (2, 4):
                _wait_stored(out, n, proc)
                time.sleep(0.1)                        # the release reaches the scheduler
                kills.append((_stored(out), time.monotonic()))
                _kill_busy_worker(client)
            _, err = proc.communicate(timeout=300)
        finally:
            _reap(proc.pid)
    assert proc.returncode == 0, err
    assert [ln for ln in err.splitlines() if ln.strip()] == [], err
    for stored, t in kills:
        again = {rid for rid, when in finished.done if when > t} & stored
        assert again == set(), f"stored runs recomputed after a worker was killed: {again}"
    _complete_and_clean(out, dask_clean)


@pytest.mark.xdist_group("dask-cluster")      # one worker starts the shared cluster and sweeps the clean grid
def test_dask_killed_worker_is_one_line_and_the_rerun_completes(tmp_path, dask_clean, dask_cluster):
    """With distributed.scheduler.allowed-failures = 0 a worker killed mid-run makes its run (and
    any run queued on it) a KilledWorker: the other runs finish, the driver prints one line (no
    traceback; it was 24 lines) with the resume command and exits 1; that command stores the rest."""
    cluster, client = dask_cluster
    out = tmp_path / "kw"
    allowed = cluster.scheduler.allowed_failures
    cluster.scheduler.allowed_failures = 0
    try:
        cmd, proc = _dask_driver(tmp_path, out, cluster.scheduler_address)
        try:
            _wait_stored(out, 1, proc)
            assert _kill_busy_worker(client) == 1
            _, err = proc.communicate(timeout=300)
        finally:
            _reap(proc.pid)
    finally:
        cluster.scheduler.allowed_failures = allowed
    assert proc.returncode == 1, err
    line = _one_line_with_resume(err, cmd, "KilledWorker")
    killed = len(_ids(DASK)) - len(_stored(out))         # the running run and any queued on that worker
    assert 1 <= killed <= 2
    assert line.startswith(f"fedtheory sweep: error: {killed} run{'s' if killed > 1 else ''} killed"), line
    assert f"{len(_stored(out))} of {len(_ids(DASK))} runs stored in {out}" in line, line
    _resume(cmd)
    _complete_and_clean(out, dask_clean)


@pytest.mark.slow          # the class of fault (Dask workers lost mid-sweep: test_dask_killed_worker_is_one_line_and_the_rerun_completes in the default run)
@pytest.mark.xdist_group("dask-cluster")      # one worker starts the shared cluster and sweeps the clean grid
def test_dask_cluster_closed_mid_sweep_is_one_line_and_the_rerun_completes(tmp_path, dask_clean, dask_cluster):
    """The cluster shut down under a running sweep (it gave a 48-60 line FutureCancelledError):
    one line, exit 1, with the stored count and the resume command; the same command against a
    new cluster stores exactly the missing runs."""
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "lost"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=":0", worker_dashboard_address=None) as cluster:
        cmd, proc = _dask_driver(tmp_path, out, cluster.scheduler_address)
        try:
            _wait_stored(out, 2, proc)
            cluster.close()
            _, err = proc.communicate(timeout=120)
        finally:
            _reap(proc.pid)
    assert proc.returncode == 1, err
    before = _stored(out)
    line = _one_line_with_resume(err, cmd, f"lost the Dask cluster at {cmd[-1]}")
    assert f"{len(before)} of {len(_ids(DASK))} runs stored in {out}" in line, line
    assert 2 <= len(before) < len(_ids(DASK))
    cluster, _ = dask_cluster                          # another cluster: the resume command with its address
    with _finished_runs(cluster) as finished:
        cmd[-1] = cluster.scheduler_address
        _resume(cmd)
    assert sorted(rid for rid, _ in finished.done) == sorted(_ids(DASK) - before)
    _complete_and_clean(out, dask_clean)


@pytest.mark.parametrize("sig", [signal.SIGKILL, pytest.param(signal.SIGINT, marks=pytest.mark.slow)],
                         ids=["SIGKILL", "SIGINT"])
@pytest.mark.xdist_group("dask-cluster")      # one worker starts the shared cluster and sweeps the clean grid
def test_dask_driver_killed_mid_sweep_and_rerun(tmp_path, dask_clean, dask_cluster, sig):
    """The driver killed (SIGKILL) or stopped by Ctrl-C (one line, exit 130, the resume command)
    mid-sweep: the rerun computes only the runs not stored, and the grid ends complete with the
    clean values."""
    cluster, _ = dask_cluster
    out = tmp_path / "drv"
    cmd, proc = _dask_driver(tmp_path, out, cluster.scheduler_address)
    try:
        _wait_stored(out, 2, proc)
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
    finally:
        _reap(proc.pid)
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        _one_line_with_resume(err, cmd, "interrupted")
    else:
        assert proc.returncode == -signal.SIGKILL
    before = _stored(out)
    assert 2 <= len(before) < len(_ids(DASK))
    with _finished_runs(cluster) as finished:
        _resume(cmd)
    assert sorted(rid for rid, _ in finished.done) == sorted(_ids(DASK) - before)
    _complete_and_clean(out, dask_clean)


def test_sweep_argument_errors_are_one_line(tmp_path, capsys):
    """A malformed or unreachable scheduler, --scheduler without --backend dask, an empty --out: one
    line, exit 2 (an unreachable scheduler: exit 1 and the resume command), nothing stored."""
    from fedtheory.__main__ import main
    from fedtheory.exceptions import InvalidParameterError
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY)
    base = ["sweep", str(cfg), "--out", str(tmp_path / "o")]
    cases = [
        (["--backend", "dask", "--scheduler", "127.0.0.1"], 2,
         "The 'scheduler' parameter of sweep must be a Dask scheduler address 'tcp://host:port' (or a "
         "distributed.Client). Got '127.0.0.1' instead (missing port number in address '127.0.0.1')."),
        (["--backend", "dask", "--scheduler", "nonsense://x"], 2, "Got 'nonsense://x' instead (unknown address scheme"),
        (["--scheduler", "tcp://127.0.0.1:8786"], 2,
         "--scheduler tcp://127.0.0.1:8786: applies to --backend dask only (the backend is local)"),
    ]
    for extra, rc, msg in cases:
        assert main(base + extra) == rc
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and msg in err, err
    assert main(["sweep", str(cfg), "--out", ""]) == 2
    err = capsys.readouterr().err
    assert err == "fedtheory sweep: error: --out '': an empty path; a directory name is expected\n", err
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob("runs"))
    one = tmp_path / "one.toml"
    one.write_text(TINY.split("[grid]")[0].replace("[run]\n", '[run]\nalgorithm = "fedavg"\n'))
    assert main(["run", str(one), "--out", ""]) == 2          # ran without storing, silently
    assert capsys.readouterr().err == "fedtheory run: error: --out '': an empty path; a directory name is expected\n"
    from fedtheory.reporting.results import ResultsStore
    with pytest.raises(InvalidParameterError, match="The 'directory' parameter of ResultsStore must be a non-empty"):
        ResultsStore("")
    with pytest.raises(InvalidParameterError, match="The 'out' parameter of sweep must be a non-empty path"):
        sweep(TINY, "", n_jobs=1, progress=False)
    with pytest.raises(InvalidParameterError, match="The 'scheduler' parameter of sweep applies to "
                                                    "backend='dask' only"):
        sweep(TINY, tmp_path / "o", scheduler="tcp://127.0.0.1:8786", progress=False)


def test_unreachable_scheduler_is_one_line(tmp_path, capsys):
    """A well-formed address where no scheduler listens: one line after the connect timeout."""
    pytest.importorskip("distributed")
    import dask
    from fedtheory.__main__ import main
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY)
    import socket
    with socket.socket() as s:                 # a free port: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        rc = main(["sweep", str(cfg), "--out", str(tmp_path / "o"), "--backend", "dask",
                   "--scheduler", f"tcp://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert rc == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"fedtheory sweep: error: cannot reach the Dask scheduler at tcp://127.0.0.1:{port} "), err
    assert "0 of 6 runs stored" in err and "resume with the same command once the cause is fixed: fedtheory sweep" in err


# ----------------------------------------------------------------------------- damaged run files

def test_truncated_run_file_is_quarantined_and_redone(tmp_path, reference):
    out, files = _fresh(tmp_path)
    victim = files[2]
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    df, named = _resweep(out, "unreadable")
    _check_complete(df, TINY, TINY_ROWS)
    _same(df, reference)
    assert len(named) == 1 and victim.name in named[0]
    assert [q.split(".parquet")[0] for q in _quarantined(out)] == [victim.stem]
    assert "unreadable" in (out / "quarantine" / "log.txt").read_text()
    _same(pd.read_parquet(out / "results.parquet"), reference)


def test_empty_run_file_is_quarantined_and_redone(tmp_path, reference):
    out, files = _fresh(tmp_path)
    files[0].write_bytes(b"")
    df, named = _resweep(out, files[0].name)
    _same(df, reference)
    assert len(named) == 1 and len(_quarantined(out)) == 1


def test_stray_parquet_files_are_quarantined(tmp_path, reference):
    """A Parquet file in runs/ that is not a run file (named like a run id, or not) neither
    counts as a finished run nor enters the table."""
    out, files = _fresh(tmp_path)
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_parquet(out / "runs" / "0123456789abcdef.parquet")
    pd.DataFrame({"run_id": ["zz"], "round": [0]}).to_parquet(out / "runs" / "notes.parquet")
    df, named = _resweep(out, "stray")
    _check_complete(df, TINY, TINY_ROWS)
    _same(df, reference)
    assert len(named) == 2 and len(_quarantined(out)) == 2
    # a stray file in the place of a real run's file: the run is redone
    victim = files[1]
    pd.DataFrame({"a": [1.0]}).to_parquet(victim)
    df, named = _resweep(out, "stray")
    _same(df, reference)
    assert len(named) == 1 and victim.name in named[0]


def test_run_file_overwritten_by_another_run_is_quarantined_and_redone(tmp_path, reference):
    out, files = _fresh(tmp_path)
    shutil.copyfile(files[0], files[3])         # run 3's file now holds run 0's rows
    df, named = _resweep(out, "mismatching run id")
    _check_complete(df, TINY, TINY_ROWS)
    _same(df, reference)
    assert len(named) == 1 and files[3].name in named[0]
    assert [q.split(".parquet")[0] for q in _quarantined(out)] == [files[3].stem]


def test_run_file_with_altered_content_fails_its_checksum(tmp_path, reference):
    """A value changed inside a run file (metadata kept) is caught by the recorded sha256."""
    out, files = _fresh(tmp_path)
    t = pq.read_table(files[4])
    i = t.column_names.index("value")
    v = t.column("value").to_numpy().copy()
    v[-1] *= 1.5
    pq.write_table(t.set_column(i, "value", pa.array(v)), files[4])
    df, named = _resweep(out, "checksum")
    _same(df, reference)
    assert len(named) == 1 and files[4].name in named[0]


def test_run_files_record_run_id_rows_and_checksum(tmp_path, reference):
    import json
    from fedtheory.reporting.results import META_KEY, content_digest
    out, files = _fresh(tmp_path)
    for f in files:
        t = pq.read_table(f)
        m = json.loads(t.schema.metadata[META_KEY])
        assert m["run_id"] == f.stem and m["rows"] == t.num_rows == TINY_ROWS
        assert m["sha256"] == content_digest(t.replace_schema_metadata(None))
        assert set(t.column("run_id").to_pylist()) == {f.stem}
    _same(pd.read_parquet(out / "results.parquet"), reference)


def test_run_file_of_the_previous_store_is_adopted_not_redone(tmp_path, reference):
    """A run file without run metadata but whose rows all carry its name's run id (as
    fedtheory 0.1 wrote them) is kept: rewritten with a checksum, its run not redone."""
    import json
    from fedtheory.reporting.results import META_KEY
    out, files = _fresh(tmp_path)
    old = pd.read_parquet(files[0])
    old.to_parquet(files[0], index=False)      # what the previous store wrote (pandas metadata only)
    assert META_KEY not in pq.read_schema(files[0]).metadata
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from fedtheory.reporting.results import ResultsStore
        s = ResultsStore(out)
    assert s.finished() == _ids(TINY)
    assert json.loads(pq.read_schema(files[0]).metadata[META_KEY])["run_id"] == files[0].stem
    pd.testing.assert_frame_equal(pd.read_parquet(files[0]), old)


# ----------------------------------------------------------------------------- concurrent writers

def test_opening_a_store_keeps_live_writers_temporary_files(tmp_path):
    """Opening a store never deletes another live writer's temporary file (the crash race of
    0.1); a dead writer's temporary file on this host is removed."""
    import socket
    from fedtheory.reporting.results import ResultsStore
    host = socket.gethostname().replace("~", "-")
    out = tmp_path / "s"
    (out / "runs").mkdir(parents=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = out / "runs" / f".abc.parquet~{host}~{other.pid}~0123abcd.tmp"
        live.write_bytes(b"half written")
        ResultsStore(out)
        assert live.exists()
    finally:
        other.kill()
        other.wait()
    ResultsStore(out)
    assert not live.exists()


def test_two_writers_interleaved_on_one_store(tmp_path, reference):
    """Two stores open on one directory, adding runs in turn: each commit holds both writers' runs."""
    from fedtheory.reporting.results import ResultsStore
    out = tmp_path / "two"
    a, b = ResultsStore(out), ResultsStore(out)
    groups = [g for _, g in reference.groupby("run_id", sort=True)]
    for i, g in enumerate(groups):
        (a if i % 2 else b).add(g.run_id.iloc[0], g.reset_index(drop=True))
    b.add(groups[0].run_id.iloc[0], groups[0].reset_index(drop=True))      # both computed run 0
    a.commit()
    _same(pd.read_parquet(out / "results.parquet"), reference)
    b.commit()
    _same(pd.read_parquet(out / "results.parquet"), reference)
    _same(a.table(), reference)


def test_two_concurrent_sweep_processes_on_one_store(tmp_path):
    """Two sweep processes with overlapping grids write one store at the same time: both succeed,
    and the table holds the union of their runs, once each."""
    cfg_a = TINY.replace("rounds = 30", "rounds = 1500").replace("eval_every = 10", "eval_every = 500")
    cfg_b = cfg_a.replace("seed = [0, 1, 2]", "seed = [2, 3, 4]")
    paths = []
    for name, text in (("a.toml", cfg_a), ("b.toml", cfg_b)):
        paths.append(tmp_path / name)
        paths[-1].write_text(text)
    out = tmp_path / "shared"
    procs = [subprocess.Popen([sys.executable, "-m", "fedtheory", "sweep", str(p), "--out", str(out), "-j", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in paths]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    df = pd.read_parquet(out / "results.parquet")
    want = _ids(cfg_a) | _ids(cfg_b)
    assert set(df.run_id) == want and len(want) == 10
    assert not df.duplicated(["run_id", "round"]).any() and len(df) == 10 * TINY_ROWS
    assert not list((out / "runs").glob(".*.tmp")) and not (out / "quarantine").exists()
    assert not (out / ".lock").exists()            # the commit lock leaves no file behind


NO_POOL_THREADS = """
import os, sys
import pyarrow                                     # its jemalloc thread starts here, before the count
from pathlib import Path
from fedtheory.reporting.results import ResultsStore, _read_table

def native_threads():
    return len(os.listdir("/proc/self/task"))

before = native_threads()
out = Path(sys.argv[1])
store = ResultsStore(out)                          # loads every run file another process wrote
df = store.table()
store.commit()
_read_table(out / "results.parquet").to_pandas(use_threads=False)
print(before, native_threads(), len(df))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts native threads through /proc")
def test_store_reads_start_no_arrow_pool_thread(tmp_path, reference):
    """Arrow's pool threads can abort a process at exit ("terminate called without an active
    exception", SIGABRT; apache/arrow#34314): a CI run lost one of two concurrent sweeps that way,
    after reading the other's run files. A process that loads a store another process wrote, reads
    its table, commits and reads results.parquet starts no native thread (pq.read_table with
    use_threads=False started two: its pre-buffering reads through Arrow's I/O pool)."""
    from fedtheory.reporting.results import ResultsStore
    out = tmp_path / "store"
    writer = ResultsStore(out)
    for rid, g in reference.groupby("run_id", sort=True):
        writer.add(rid, g.reset_index(drop=True))
    writer.commit()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", NO_POOL_THREADS, str(out)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    before, after, rows = map(int, r.stdout.split())
    assert rows == len(reference)
    assert after == before, f"{after - before} native thread(s) started by the store's reads"


EXCLUSIVE = """
import sys, time
from pathlib import Path
from fedtheory.reporting.results import _exclusive
d = Path(sys.argv[1])
for _ in range(int(sys.argv[2])):
    with _exclusive(d / ".lock"):
        n = int((d / "count").read_text())
        time.sleep(0.001)                          # widen the window a second holder would use
        (d / "count").write_text(str(n + 1))
"""


def test_commit_lock_excludes_concurrent_holders_and_leaves_no_file(tmp_path):
    """Four processes take the store's lock 60 times each and increment a counter inside it: no
    increment is lost although every holder removes the lock file before letting go, and no lock
    file remains."""
    (tmp_path / "count").write_text("0")
    procs = [subprocess.Popen([sys.executable, "-c", EXCLUSIVE, str(tmp_path), "60"], stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert (tmp_path / "count").read_text() == "240"
    assert not (tmp_path / ".lock").exists()


# ----------------------------------------------------------------------------- O(1) per run

def test_adding_a_run_does_not_rewrite_the_table(tmp_path, reference):
    """Storing a run writes its own file only: results.parquet is written on the first run and
    by commit(), not once per run (which made 3000 runs quadratic)."""
    from fedtheory.reporting.results import ResultsStore
    s = ResultsStore(tmp_path / "o1")
    groups = [g.reset_index(drop=True) for _, g in reference.groupby("run_id", sort=True)]
    s.add(groups[0].run_id.iloc[0], groups[0])
    first = os.stat(s.path).st_ino
    for g in groups[1:]:
        s.add(g.run_id.iloc[0], g)
    assert os.stat(s.path).st_ino == first
    assert len(list((tmp_path / "o1" / "runs").glob("*.parquet"))) == len(groups)
    s.commit()
    _same(pd.read_parquet(s.path), reference)


# ----------------------------------------------------------------------------- diverged runs

def test_diverged_rows_are_never_stored(tmp_path):
    """Runs that diverge (lr = 30: F grows past DIVERGENCE_GROWTH times its start; lr = 1000: NaN) keep their finite rows and
    status "diverged"; NaN in columns that are undefined at a round (FedSPS step statistics at
    round 0) is not divergence."""
    cfg = TINY.replace('algorithm = ["fedavg", "scaffold"]', 'algorithm = ["fedavg", "fedsps"]') \
              .replace("lr = 0.1\n", "").replace("seed = [0, 1, 2]", "lr = [0.1, 30.0, 1000.0]") \
              .replace("rounds = 30", "rounds = 150").replace("eval_every = 10", "eval_every = 1")
    df = sweep(cfg, tmp_path / "div", n_jobs=1, progress=False)
    core = df[["value", "grad_mapping_sq", "suboptimality", "dist_sq"]].to_numpy()
    assert np.isfinite(core).all()
    metric = [c for c in df.columns if df[c].dtype.kind == "f" and not c.startswith("param_")]
    assert not np.isinf(df[metric].to_numpy()).any()
    st = df.groupby(["param_algorithm", "param_lr"]).status.agg(set)
    assert st[("fedavg", 30.0)] == {"diverged"} and st[("fedavg", 1000.0)] == {"diverged"}
    assert st[("fedavg", 0.1)] == {"max_rounds"}
    n = df.groupby(["param_algorithm", "param_lr"]).size()
    assert n[("fedavg", 0.1)] == 151 and 1 < n[("fedavg", 30.0)] < 151     # (F grows past 1e20 x its start by round 8)
    fedsps = df[(df.param_algorithm == "fedsps") & (df.param_lr == 0.1)]
    assert len(fedsps) == 151 and fedsps.step_mean.isna().iloc[0]
    _same(pd.read_parquet(tmp_path / "div" / "results.parquet"), df)


def test_store_refuses_inf_and_nan_rows_and_repairs_old_files(tmp_path, reference):
    """add() drops rows with a non-finite value/grad_mapping_sq/suboptimality/dist_sq or any
    +-inf metric and marks the run diverged; a stored file with such rows is repaired on open."""
    from fedtheory.reporting.results import ResultsStore
    g = reference[reference.run_id == reference.run_id.iloc[0]].reset_index(drop=True)
    rid = g.run_id.iloc[0]
    bad = pd.concat([g, g.iloc[[-1]].assign(round=40, value=np.inf), g.iloc[[-1]].assign(round=50, dist_sq=np.nan),
                     g.iloc[[-1]].assign(round=60, time=-np.inf)], ignore_index=True)
    s = ResultsStore(tmp_path / "a")
    s.add(rid, bad)
    s.commit()
    t = pd.read_parquet(s.path)
    assert list(t["round"]) == list(g["round"]) and set(t.status) == {"diverged"}
    # an old-style file (no run metadata) holding an inf row: repaired on open, run kept
    d = tmp_path / "b"
    (d / "runs").mkdir(parents=True)
    bad.to_parquet(d / "runs" / f"{rid}.parquet", index=False)
    s2 = ResultsStore(d)
    assert s2.finished() == {rid}
    t2 = s2.table()
    assert list(t2["round"]) == list(g["round"]) and set(t2.status) == {"diverged"}
    assert np.isfinite(pd.read_parquet(d / "runs" / f"{rid}.parquet")["value"]).all()


def test_table_is_the_concatenation_of_the_run_files(tmp_path):
    """The returned table and results.parquet are the run files concatenated in run_id order
    (columns united across algorithms with different history columns), as before."""
    import glob
    cfg = TINY.replace('algorithm = ["fedavg", "scaffold"]', 'algorithm = ["fedavg", "fedspeed", "fedsps"]')
    out = tmp_path / "t"
    df = sweep(cfg, out, n_jobs=1, progress=False)
    cat = pd.concat([pd.read_parquet(f) for f in sorted(glob.glob(str(out / "runs" / "*.parquet")))],
                    ignore_index=True)
    pd.testing.assert_frame_equal(df, cat)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), cat)
    _check_complete(df, cfg, TINY_ROWS)


# =====================================================================================
# Faults in the caches, the data and the runs themselves: a corrupt or
# foreign ground-truth cache entry, concurrent solves, a damaged Numba cache, damaged
# data files, diverged runs.
# =====================================================================================
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
from pathlib import Path  # noqa: E402

import fedtheory as ft  # noqa: E402
import problems  # noqa: E402
from fedtheory.testing.checks import suite_problems  # noqa: E402
from fedtheory.truth import ground_truth  # noqa: E402
from fedtheory.truth.store import _cache_path  # noqa: E402


# ------------------------------------------------------------------ ground-truth cache
def _gt_problem(seed=0):
    rng = np.random.default_rng(seed)
    A = [rng.normal(size=(20, 4)) for _ in range(3)]
    return problems.least_squares(A, [a @ np.ones(4) + 0.1 * rng.normal(size=20) for a in A], l2=0.01)


def _fresh_gt(p, tmp_path):
    ref = ground_truth(p, cache=False)
    ground_truth(p, cache_dir=tmp_path)
    path = _cache_path(p, tmp_path)
    assert path.is_file()
    return ref, path


def _rewrite_npz(path, **changes):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    np.savez(path, **arrays)


def _gt_corruptions(path, p, tmp_path):
    raw = path.read_bytes()
    other = _gt_problem(1)
    ground_truth(other, cache_dir=tmp_path / "other")
    other_path = _cache_path(other, tmp_path / "other")
    return {
        "truncated": lambda: path.write_bytes(raw[: len(raw) // 2]),
        "empty": lambda: path.write_bytes(b""),
        "garbage": lambda: path.write_bytes(np.random.default_rng(0).bytes(len(raw))),
        "flipped byte": lambda: path.write_bytes(raw[:200] + bytes([raw[200] ^ 0xFF]) + raw[201:]),
        "not an npz": lambda: path.write_text("hello"),
        "a directory": lambda: (path.unlink(), path.mkdir()),
        "missing keys": lambda: np.savez(path, x=np.zeros(4)),
        "another problem's entry": lambda: shutil.copyfile(other_path, path),
        "edited x (checksum stale)": lambda: _rewrite_npz(path, x=np.ones(4)),
        "edited f (checksum stale)": lambda: _rewrite_npz(path, f=np.float64(-1.0)),
        "bad info json": lambda: _rewrite_npz(path, info="{not json"),
        "old version layout": lambda: np.savez(path, x=np.zeros(4), f=0.0, residual=0.0,
                                               client_f=np.zeros(3), client_x=np.zeros((3, 4)),
                                               client_residual=np.zeros(3),
                                               client_attained=np.ones(3, dtype=bool), info=json.dumps({})),
    }


@pytest.mark.parametrize("kind", ["truncated", "empty", "garbage", "flipped byte", "not an npz", "a directory",
                                  "missing keys", "another problem's entry", "edited x (checksum stale)",
                                  "edited f (checksum stale)", "bad info json", "old version layout"])
def test_corrupt_entry_is_recomputed_with_a_warning(kind, tmp_path):
    p = _gt_problem()
    ref, path = _fresh_gt(p, tmp_path)
    _gt_corruptions(path, p, tmp_path)[kind]()
    with pytest.warns(RuntimeWarning, match="ground_truth: (ignoring the cache entry|could not write)"):
        gt = ground_truth(p, cache_dir=tmp_path)
    assert not gt.info["cached"]
    assert np.allclose(gt.x, ref.x, rtol=0, atol=1e-12) and abs(gt.f - ref.f) <= 1e-14
    if kind != "a directory":                       # repaired: the next call reads the cache silently
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            again = ground_truth(p, cache_dir=tmp_path)
        assert again.info["cached"] and np.array_equal(again.x, gt.x)


def test_wrong_but_well_formed_entry_with_a_fresh_checksum_is_rejected(tmp_path):
    """An entry whose arrays were replaced consistently (checksum recomputed) but whose x* is not the
    optimum of the problem is caught by the optimality check."""
    from fedtheory.truth import optimum, store
    p = _gt_problem()
    ref, path = _fresh_gt(p, tmp_path)
    wrong = optimum.GroundTruth(x=ref.x + 0.1, f=p.value(ref.x + 0.1), residual=ref.residual,
                                client_f=ref.client_f, client_x=ref.client_x, client_residual=ref.client_residual,
                                client_attained=ref.client_attained, info=dict(ref.info))
    store._save(path, p, wrong)
    with pytest.warns(RuntimeWarning, match="gradient-mapping norm at the stored x"):
        gt = ground_truth(p, cache_dir=tmp_path)
    assert np.allclose(gt.x, ref.x, atol=1e-12)


def _solve_in_process(args):
    cache_dir, seed = args
    gt = ground_truth(_gt_problem(seed), cache_dir=cache_dir)
    return float(gt.f)


def test_concurrent_solves_of_one_problem_all_succeed(tmp_path):
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        fs = pool.map(_solve_in_process, [(str(tmp_path), 0)] * 8)
    ref = ground_truth(_gt_problem(0), cache=False).f
    assert all(abs(f - ref) <= 1e-14 for f in fs)
    assert not list(tmp_path.glob("*.tmp*")) and not list(tmp_path.glob(".*tmp*"))
    assert len(list(tmp_path.glob("*.npz"))) == 1


# ------------------------------------------------------------------ Numba cache
_NB_ROOT = Path(__file__).resolve().parent.parent
NUMBA_RUN = ("import warnings, fedtheory as ft, problems\n"
       "with warnings.catch_warnings(record=True) as w:\n"
       "    warnings.simplefilter('always')\n"
       "    r = ft.run(problems.quadratic(3, 2, seed=0), 'fedavg', rounds=2, local_steps=2)\n"
       "print(r.status, sum('Numba cache' in str(x.message) for x in w))\n"
       "from fedtheory._kernels.drivers import driver\n"
       "seg = driver('fedtheory.algorithms.fedavg').segment\n"
       "print(sum(seg.stats.cache_hits.values()), sum(seg.stats.cache_misses.values()))\n"
       "print(seg._cache._cache_path)\n")          # where Numba keeps its files


def _numba_run(cache_dir, drivers_only=False, where=False):
    """Run NUMBA_RUN in a child whose Numba cache is ``cache_dir`` (every kernel), or, with
    ``drivers_only``, whose generated drivers (and their cache beside them) are in ``cache_dir``
    while the library's kernels load from the suite's cache. ``(status, warnings about the cache)``,
    and with ``where`` also FedAvg's compiled rounds' cache hits and misses in that process and the
    directory of their cache files, as Numba names it."""
    env = dict(os.environ, **({"FEDTHEORY_DRIVER_DIR": str(cache_dir)} if drivers_only
                              else {"NUMBA_CACHE_DIR": str(cache_dir)}))
    r = subprocess.run([sys.executable, "-c", NUMBA_RUN], capture_output=True, text=True, cwd=_NB_ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.splitlines()
    status, warned = out[-3].split()
    hits, misses = (int(v) for v in out[-2].split())
    return (status, int(warned)) + ((hits, misses, Path(out[-1])) if where else ())


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    d = tmp_path_factory.mktemp("numba-cache")
    assert _numba_run(d) == ("max_rounds", 0)
    return d


def _damage(files, damage):
    for f in files:
        raw = f.read_bytes()
        f.write_bytes({"garbage": os.urandom(len(raw)), "truncate": raw[: len(raw) // 3], "empty": b""}[damage])


def test_damaged_driver_cache_is_recompiled(tmp_path):
    """The generated driver of an algorithm's rounds is written once and its compiled segment cached on
    disk; with those cache files garbled, the run warns, recompiles and caches them again; the next
    process loads them back silently. (The library's kernels load from the suite's cache: only the
    driver compiles. Every kernel's files damaged: the slow cases below.)"""
    status, warned, hits, misses, where = _numba_run(tmp_path, drivers_only=True, where=True)
    assert (status, warned) == ("max_rounds", 0)
    assert hits == 0 and misses >= 1, f"first process: hits/misses {hits}/{misses}"        # compiled and stored
    drivers = sorted(f.name for f in tmp_path.iterdir() if f.suffix == ".py")
    assert len(drivers) == 1 and drivers[0].startswith("fedtheory_driver_fedtheory_algorithms_fedavg_"), drivers
    # beside the drivers, or under NUMBA_CACHE_DIR when the suite runs with it set: where Numba says
    files = [f for f in where.iterdir() if f.suffix in (".nbi", ".nbc") and f.name.startswith("fedtheory_driver_")]
    assert any(".segment-" in f.name for f in files), files
    assert where == tmp_path / "__pycache__" or os.environ.get("NUMBA_CACHE_DIR"), where
    _damage(files, "garbage")
    status, warned = _numba_run(tmp_path, drivers_only=True)
    assert status == "max_rounds" and warned >= 1
    status, warned, hits, misses, _ = _numba_run(tmp_path, drivers_only=True, where=True)
    assert (status, warned) == ("max_rounds", 0)                                  # repaired: read back silently,
    assert hits >= 1 and misses == 0, f"repaired cache not loaded: hits/misses {hits}/{misses}"   # not compiled


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "truncate", "empty"])
def test_damaged_numba_cache_is_recompiled(populated, tmp_path, damage):
    shutil.copytree(populated, tmp_path, dirs_exist_ok=True)
    # every cache file: a compiled function that calls a kernel holds the kernel's code, so the run may
    # load the round primitives' or the driver's files and never the local-step kernel's own
    files = [f for f in tmp_path.rglob("*") if f.suffix in (".nbi", ".nbc")]
    assert any("local_steps" in f.name for f in files)
    assert files, "the kernel cache was not written where expected"
    _damage(files, damage)
    status, warned = _numba_run(tmp_path)
    assert status == "max_rounds" and warned >= 1
    assert _numba_run(tmp_path) == ("max_rounds", 0)          # repaired: read back silently


# ------------------------------------------------------------------ data files
def _uncompressed_mushrooms(data_dir, tmp_path):
    import bz2
    raw = bz2.decompress((Path(data_dir) / "mushrooms.bz2").read_bytes())
    return raw


def test_uncompressed_known_file_is_checked(data_dir, tmp_path):
    raw = _uncompressed_mushrooms(data_dir, tmp_path)
    (tmp_path / "mushrooms").write_bytes(raw)
    X, y = problems.load_libsvm("mushrooms", data_dir=tmp_path, download=False)
    assert X.shape == (8124, 112)


@pytest.mark.parametrize("damage", ["truncated", "relabelled", "bz2 truncated"])
def test_damaged_libsvm_file_is_rejected(data_dir, tmp_path, damage):
    raw = _uncompressed_mushrooms(data_dir, tmp_path)
    if damage == "truncated":
        (tmp_path / "mushrooms").write_bytes(raw[: len(raw) - len(raw) // 10])
    elif damage == "relabelled":
        first = raw.index(b" ")
        label = raw[:first]
        (tmp_path / "mushrooms").write_bytes((b"1" if label == b"2" else b"2") + raw[first:])
    else:
        packed = (Path(data_dir) / "mushrooms.bz2").read_bytes()
        (tmp_path / "mushrooms.bz2").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(OSError, match=r"has sha256 [0-9a-f]{64}, expected [0-9a-f]{64}"):
        problems.load_libsvm("mushrooms", data_dir=tmp_path, download=False)


def test_unknown_libsvm_file_needs_its_sha256(data_dir, tmp_path):
    from problems.datasets import file_digest
    raw = _uncompressed_mushrooms(data_dir, tmp_path)
    (tmp_path / "my_data.txt").write_bytes(raw)
    with pytest.raises(ValueError, match="'sha256' parameter of load_libsvm"):
        problems.load_libsvm("my_data.txt", data_dir=tmp_path, download=False)
    X, y = problems.load_libsvm("my_data.txt", data_dir=tmp_path, download=False,
                                sha256=file_digest(tmp_path / "my_data.txt"))
    assert X.shape[0] == 8124
    with pytest.raises(OSError, match="the given sha256"):
        problems.load_libsvm("my_data.txt", data_dir=tmp_path, download=False, sha256="0" * 64)


# ------------------------------------------------------------------ diverged runs
CORE = ("value", "grad_mapping_sq", "suboptimality", "dist_sq")


def _finite_history(res):
    cols = [c for c in CORE if c in res.history.columns]
    return np.all(np.isfinite(res.history[cols].to_numpy(dtype=float)))


@pytest.mark.parametrize("name", ft.algorithms())
@pytest.mark.parametrize("lr", [3.0, 50.0, 1e6])
def test_diverged_run_keeps_only_finite_rows(name, lr):
    p = suite_problems()["least_squares"]
    kw = dict(rounds=60, local_steps=5, lr=lr, eval_every=1)
    kw.update(ft.get_algorithm(name).divergence_params)
    kw["lr"] = max(kw["lr"], lr)
    res = ft.run(p, name, **kw)
    if res.status != "diverged":
        pytest.skip(f"{name} does not diverge at lr={lr}")
    # the round whose local phase blew up is not completed; aggregation and growth end a completed one
    done = "aggregation" in res.message or "has grown past" in res.message
    assert res.message.startswith(f"round {res.rounds + (0 if done else 1)}") or \
        "is not finite" in res.message, res.message
    assert _finite_history(res), res.history.tail()
    assert np.all(np.isfinite(res.x))
    assert res.history["round"].iloc[-1] <= res.rounds


def test_divergence_in_the_local_phase_names_round_and_client():
    p = suite_problems()["least_squares"]
    res = ft.run(p, "fedavg", rounds=20, local_steps=200, lr=1e8)
    assert res.status == "diverged"
    assert "client" in res.message and "local step" in res.message and res.message.startswith("round ")
    assert _finite_history(res) and np.all(np.isfinite(res.x))


def test_divergence_with_a_reference_keeps_finite_suboptimality():
    p = problems.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)
    from fedtheory.truth import ground_truth
    res = ft.run(p, "fedavg", rounds=400, local_steps=1, lr=10.0, reference=ground_truth(p, cache=False),
                 eval_every=5)
    assert res.status == "diverged" and _finite_history(res)
    assert res.history["suboptimality"].iloc[-1] > res.history["suboptimality"].iloc[0]


def test_a_metric_never_computed_is_not_divergence():
    """A deep run without gradients has grad_mapping_sq NaN in every row: stored as it is; a NaN that
    appears in a computed metric still marks divergence."""
    from fedtheory.reporting.results import nonfinite_rows
    df = pd.DataFrame({"round": [0, 1, 2], "value": [2.0, 1.5, 1.2], "grad_mapping_sq": [np.nan] * 3})
    assert not nonfinite_rows(df).any()
    df2 = df.assign(grad_mapping_sq=[1.0, np.nan, 0.5])
    assert nonfinite_rows(df2).tolist() == [False, True, False]


_LONG_RUN = r'''
import sys, fedtheory as ft, problems
p = problems.quadratic(10, 10, seed=0)
ft.run(p, "fedavg", rounds=10, lr=0.1)
print("ready", flush=True)
try:
    ft.run(p, "fedavg", rounds=10**7, lr=0.1, eval_every=50)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(130)
'''


@pytest.mark.parametrize("delay", [0.3, 1.0])
def test_ctrl_c_during_a_compiled_run_is_a_keyboard_interrupt(delay):
    """SIGINT while the rounds run inside one compiled call: Python raised KeyboardInterrupt inside
    the call's object-mode evaluation callback, and the process died of a segmentation fault (exit
    -11 in 3 of 3 tries; ``fedtheory run`` and ``sweep -j 1`` exited 139 with nothing printed). The
    interrupt is now held until the call returns at its next evaluation, then raised in Python."""
    proc = subprocess.Popen([sys.executable, "-c", _LONG_RUN], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and out.strip() == "KeyboardInterrupt", (proc.returncode, out)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_compiled_call_looks_for_ctrl_c_between_evaluations(monkeypatch, compiled):
    """No Python runs inside a compiled call between its evaluations (none at all when the rows are
    evaluated in compiled code), so no signal handler either: the call looks for a Ctrl-C in object
    mode every ``rounds.POLL_WORK`` per-sample gradients and ends after that round. Here the first
    look comes after round 1 (the runner sets it from ``POLL_WORK``) and finds Ctrl-C: the run of a
    million rounds, none of them evaluated, raises KeyboardInterrupt after one round."""
    from fedtheory._kernels import rounds as rk
    from fedtheory.runs import fused, plan as plan_module
    seen = []

    def interrupted(self):
        seen.append(self.log.counters["grad_evals"])
        self.sigint.hit = True
        return True
    monkeypatch.setattr(rk, "POLL_WORK", 0)
    monkeypatch.setattr(fused.FusedExecutor, "_interrupted", interrupted)
    monkeypatch.setattr(plan_module, "COMPILED_EVALUATION", compiled)
    with pytest.raises(KeyboardInterrupt):
        ft.run(problems.quadratic(4, 3, seed=0), "fedavg", rounds=10 ** 6, lr=0.1, eval_every=10 ** 6)
    assert len(seen) == 1


def test_ctrl_c_during_fedtheory_run_exits_130_with_one_line(tmp_path):
    """``fedtheory run`` interrupted while its compiled rounds run: exit 130 and the one documented
    line (it crashed with exit 139 and printed nothing)."""
    cfg = tmp_path / "long.toml"
    cfg.write_text('[problem]\nfactory = "quadratic"\nn_clients = 10\ndim = 10\n[run]\nalgorithm = "fedavg"\n'
                   "rounds = 10000000\nlr = 0.1\neval_every = 50\n")
    # the command in a process that says when its rounds run: when the rows of the first compiled call
    # are recorded (the compiled rounds evaluate in compiled code; the next call is running when the
    # signal comes) (SIGINT restored to Python's handler, which a process started in the background
    # by a non-interactive shell inherits ignored)
    code = ("import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "from fedtheory.runs import log\nrecord = log.RunLog.compiled_rows\n"
            "def announced(self, *a):\n    print('ready', flush=True)\n    return record(self, *a)\n"
            "log.RunLog.compiled_rows = announced\nfrom fedtheory.__main__ import main\n"
            f"sys.exit(main(['run', {str(cfg)!r}]))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, err)
    assert [ln for ln in err.splitlines() if ln.strip()] == ["fedtheory run: interrupted (Ctrl-C)"], err
