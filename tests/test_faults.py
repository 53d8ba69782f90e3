"""Faults injected into sweeps and their results store (issue #17): killed and interrupted
drivers, damaged, stray and overwritten run files, concurrent writers, diverged runs.

Every test ends with the same check: the store holds exactly the grid's run ids, once each,
with every evaluated round, nothing duplicated and nothing lost. Processes run on this machine
only; each test is bounded in time.
"""
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

from fedtheory.config import load, run_id
from fedtheory.sweep import sweep

TINY = """\
[problem]
name = "quadratic"
n_clients = 4
dim = 3

[run]
algorithm = "fedavg"
rounds = 30
lr = 0.1
eval_every = 10
reference = true

[grid]
algorithm = ["fedavg", "scaffold"]
seed = [0, 1, 2]
"""
TINY_ROWS = 4                                  # rounds 0, 10, 20, 30

# about half a second per run: long enough to be mid-run when the driver is killed
SLOW = """\
[problem]
name = "quadratic"
n_clients = 6
dim = 4

[run]
algorithm = "fedavg"
rounds = 9000
local_steps = 3
lr = 0.1
eval_every = 3000

[grid]
seed = [0, 1, 2, 3]
"""
SLOW_ROWS = 4


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


def _start_driver(tmp_path, out, jobs="2"):
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW)
    log = open(tmp_path / "driver.err", "w+")
    cmd = [sys.executable, "-m", "fedtheory", "sweep", str(cfg), "--out", str(out), "-j", jobs]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    runs = out / "runs"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 90:           # one run stored, the workers busy with the next ones
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
    df = sweep(cfg, out, n_jobs=2, progress=False)
    _check_complete(df, SLOW, SLOW_ROWS)


def test_dask_interrupted_or_killed_driver_stops_its_running_runs(tmp_path):
    """A driver whose runs execute on a Dask cluster, stopped by Ctrl-C (exit 130: it cancels its
    futures) or by SIGKILL (the scheduler releases a vanished client's futures): the running run
    stops at its next round, within 5 s; a restart completes the grid."""
    distributed = pytest.importorskip("distributed")
    cfg = tmp_path / "slow.toml"
    cfg.write_text(SLOW.replace("rounds = 9000", "rounds = 300000").replace("eval_every = 3000", "eval_every = 100000")
                   .replace("seed = [0, 1, 2, 3]", "seed = [0, 1]"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        def executing():
            return sum(client.run(lambda dask_worker: len(dask_worker.state.executing)).values())
        from fedtheory.sweep import run_point                  # kernels loaded: the run is in its rounds
        prob, rn = load(cfg).points()[0]
        client.submit(run_point, prob, dict(rn, rounds=1), pure=False).result()
        cmd = [sys.executable, "-m", "fedtheory", "sweep", str(cfg), "--out", str(tmp_path / "d"),
               "--backend", "dask", "--scheduler", cluster.scheduler_address]
        for sig in (signal.SIGINT, signal.SIGKILL):
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                t0 = time.monotonic()
                while time.monotonic() - t0 < 60 and not executing():
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
    from fedtheory.results import META_KEY, content_digest
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
    from fedtheory.results import META_KEY
    out, files = _fresh(tmp_path)
    old = pd.read_parquet(files[0])
    old.to_parquet(files[0], index=False)      # what the previous store wrote (pandas metadata only)
    assert META_KEY not in pq.read_schema(files[0]).metadata
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from fedtheory.results import ResultsStore
        s = ResultsStore(out)
    assert s.finished() == _ids(TINY)
    assert json.loads(pq.read_schema(files[0]).metadata[META_KEY])["run_id"] == files[0].stem
    pd.testing.assert_frame_equal(pd.read_parquet(files[0]), old)


# ----------------------------------------------------------------------------- concurrent writers

def test_opening_a_store_keeps_live_writers_temporary_files(tmp_path):
    """Opening a store never deletes another live writer's temporary file (the crash race of
    0.1); a dead writer's temporary file on this host is removed."""
    import socket
    from fedtheory.results import ResultsStore
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
    from fedtheory.results import ResultsStore
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


# ----------------------------------------------------------------------------- O(1) per run

def test_adding_a_run_does_not_rewrite_the_table(tmp_path, reference):
    """Storing a run writes its own file only: results.parquet is written on the first run and
    by commit(), not once per run (which made 3000 runs quadratic)."""
    from fedtheory.results import ResultsStore
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
    """Runs that overflow (lr = 30: F becomes inf; lr = 1000: NaN) keep their finite rows and
    status "diverged"; NaN in columns that are undefined at a round (FedSPS step statistics at
    round 0) is not divergence."""
    cfg = TINY.replace('algorithm = ["fedavg", "scaffold"]', 'algorithm = ["fedavg", "fedsps"]') \
              .replace("seed = [0, 1, 2]", "lr = [0.1, 30.0, 1000.0]") \
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
    assert n[("fedavg", 0.1)] == 151 and 50 < n[("fedavg", 30.0)] < 151
    fedsps = df[(df.param_algorithm == "fedsps") & (df.param_lr == 0.1)]
    assert len(fedsps) == 151 and fedsps.step_mean.isna().iloc[0]
    _same(pd.read_parquet(tmp_path / "div" / "results.parquet"), df)


def test_store_refuses_inf_and_nan_rows_and_repairs_old_files(tmp_path, reference):
    """add() drops rows with a non-finite value/grad_mapping_sq/suboptimality/dist_sq or any
    +-inf metric and marks the run diverged; a stored file with such rows is repaired on open."""
    from fedtheory.results import ResultsStore
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
