"""The results store of sweeps: ``DIR/runs/`` and ``DIR/results.parquet`` (docs/user-guide.md: "Store layout"; docs/configuration.md).

Layout
------
``DIR/runs/<run_id>.parquet``
    One file per finished run, the authority. Its rows are the run's history (one per evaluated
    round) with ``run_id`` (hash of the run's full configuration), ``param_*`` columns (every
    problem and run setting; problem arguments as ``param_problem_*``), the metric columns,
    ``status``, ``seed`` and ``version``. The Parquet schema metadata key ``fedtheory.run``
    holds ``{"format": 1, "run_id": ..., "rows": ..., "sha256": ...}``, where ``sha256`` is the
    SHA-256 of the JSON text of ``[[column name, [values...]], ...]`` (:func:`content_digest`).
``DIR/results.parquet``
    The consolidated table: every run file's rows, runs sorted by ``run_id``. It is derived
    from ``runs/``, rewritten (atomically, under an exclusive lock on ``DIR/.lock``, a file that exists only while a writer holds it) on the first stored run, then
    at most every ``commit_interval`` seconds and never more than 1/``commit_cost_factor`` of
    the time, at the end of a sweep and when a sweep is interrupted.
``DIR/quarantine/``
    Run files found damaged (unreadable, truncated), stray (no run metadata and no consistent
    ``run_id`` column), mismatching (run id inside differs from the file name, missing
    columns) or whose content does not match its checksum are moved here with a
    :class:`StoreWarning` and a line in ``quarantine/log.txt``; their runs count as not done.

Each file is written to a temporary name unique to the writer (host, process id, random
suffix) and renamed atomically, so a reader sees complete files only and a process killed at
any moment leaves only its own temporary file, which a later writer deletes once that process
is dead (never the file of a live writer). Adding a run costs O(1): one file, no rewrite of
the table.

Divergence (a metric that is NaN in every row of a run was not computed, e.g. the gradient of a
deep run with ``eval_grad=False``, and is no sign of divergence): no stored row has a non-finite ``value``, ``grad_mapping_sq``, ``suboptimality``
or ``dist_sq``, and no metric column holds +-inf. A run with such rows keeps its finite rows
and gets ``status = "diverged"``. (Other metric columns may hold NaN where a quantity is not
defined at that round, e.g. step-size statistics before the first round.)
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import socket
import time
import uuid
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from .._argcheck import Bool, check_param, Interval
from ..exceptions import InvalidParameterError

FORMAT = 1
META_KEY = b"fedtheory.run"
REQUIRED = ("run_id", "round", "status", "seed", "version")
CORE_METRICS = ("value", "grad_mapping_sq", "suboptimality", "dist_sq")
NOT_METRICS = frozenset(("run_id", "status", "seed", "version", "round"))
_HOST = socket.gethostname().replace("~", "-") or "host"
# _NO_THREADS: every read goes through _read_table (no thread of Arrow's pools is ever started) and every
# conversion runs with use_threads=False. Arrow's thread pools can abort the process at interpreter
# exit while a worker is alive ("terminate called without an active exception", SIGABRT:
# apache/arrow#34314): `fedtheory plot DIR --y bad` exited with -6 instead of 2 in 2 of 36 runs six
# at a time on 2 cores, and in 0 of 144 with the reads single-threaded. `use_threads=False` alone
# was not enough: `pq.read_table` still pre-buffers through the I/O pool (ReadRangeCache ->
# ReadAsync), and a CI run lost a sweep process to the same abort. A run file is a few hundred rows:
# the threads gained nothing.


def _read_table(source):
    """An Arrow table from a Parquet file (a path or a binary file object) without starting any thread
    of Arrow's pools: ``ParquetFile(pre_buffer=False).read(use_threads=False)`` (see ``_NO_THREADS``).

    >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> pq.write_table(pa.table({"x": [1.0, 2.0]}), path)
    >>> _read_table(path).column("x").to_pylist()
    [1.0, 2.0]
    """
    import pyarrow.parquet as pq
    with pq.ParquetFile(source, pre_buffer=False) as f:
        return f.read(use_threads=False)


class StoreWarning(UserWarning):
    """A run file was damaged, stray or mismatching and was moved to ``DIR/quarantine/``."""


# ---------------------------------------------------------------------------- file primitives

def _tmp_name(path):
    """A temporary name next to ``path``, unique to this writer: ``.<name>~<host>~<pid>~<rand>.tmp``."""
    path = Path(path)
    return path.with_name(f".{path.name}~{_HOST}~{os.getpid()}~{uuid.uuid4().hex[:12]}.tmp")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _stale_tmp(p):
    """True for a temporary file of a writer on this host that is no longer running."""
    parts = p.name[:-len(".tmp")].split("~")
    if len(parts) != 4 or parts[1] != _HOST:
        return False
    try:
        pid = int(parts[2])
    except ValueError:
        return False
    return pid != os.getpid() and not _pid_alive(pid)


def _write_atomic(table, path, fsync=False):
    """Write an Arrow table as Parquet to ``path`` through a per-writer temporary file and a rename."""
    import pyarrow.parquet as pq
    tmp = _tmp_name(path)
    try:
        pq.write_table(table, tmp)
        if fsync:
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


@contextlib.contextmanager
def _exclusive(path):
    """Hold the exclusive lock ``path`` (``filelock.FileLock``: ``flock`` on POSIX, ``msvcrt`` on
    Windows) and remove the lock file before letting go, so no ``.lock`` stays in the store.

    Removing it is safe: it happens while the lock is held, and a writer that opened the removed
    file meanwhile finds, once it holds that lock, that the file is gone and locks the path anew
    (filelock re-checks the locked file's link count); every writer of a store goes through here.
    """
    import filelock

    with filelock.FileLock(path):
        try:
            yield
        finally:
            try:
                os.unlink(path)
            except OSError:                     # pragma: no cover  (Windows: filelock removes it on release)
                pass


# ---------------------------------------------------------------------------- content

def flatten_params(problem_args, run_args):
    """``param_*`` columns: scalars as they are, other values (lists) as JSON text.

    Parameters
    ----------
    problem_args, run_args : dict
        The point's arguments.

    Returns
    -------
    dict
        ``{"param_<key>": value}``.
    """
    out = {}
    for prefix, d in (("param_problem_", problem_args), ("param_", run_args)):
        for k, v in sorted(d.items()):
            out[prefix + k] = v if isinstance(v, (bool, int, float, str)) or v is None else json.dumps(v)
    return out


def content_digest(table):
    """SHA-256 (hex) of a table's content: the JSON text of ``[[name, [values...]], ...]``.

    Values are the Python values of the Arrow columns (ints stay ints, floats are written
    exactly, NaN as ``NaN``), so the digest does not depend on the Parquet encoding.

    Parameters
    ----------
    table : pandas.DataFrame
        The table.

    Returns
    -------
    str
        The hex digest.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from fedtheory.reporting.results import content_digest
    >>> content_digest(pa.table({"a": [1, 2]})) == content_digest(pa.table({"a": [1, 2]}))
    True
    >>> content_digest(pa.table({"a": [1, 2]})) == content_digest(pa.table({"a": [1.0, 2.0]}))
    False
    """
    blob = json.dumps([[n, c.to_pylist()] for n, c in zip(table.column_names, table.columns)],
                      default=str, allow_nan=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def nonfinite_rows(df):
    """Boolean mask of the rows that record a diverged state (see the module docstring).

    Parameters
    ----------
    df : pandas.DataFrame
        A results table.

    Returns
    -------
    ndarray of bool
        The rows of a diverged state.
    """
    bad = np.zeros(len(df), dtype=bool)
    if not len(df):
        return bad
    core = [c for c in CORE_METRICS if c in df.columns]
    if core:
        vals = df[core].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
        computed = ~np.isnan(vals).all(axis=0)          # a metric the run never computes (NaN throughout,
        bad |= ~np.isfinite(vals[:, computed]).all(axis=1)   # e.g. a deep run without gradients) is no sign
    flt = [c for c in df.columns if c not in NOT_METRICS and not c.startswith("param_")
           and df[c].dtype.kind == "f"]
    if flt:
        bad |= np.isinf(df[flt].to_numpy(dtype=float)).any(axis=1)
    return bad


def sanitize(df):
    """``(df, changed)``: drop the rows of :func:`nonfinite_rows`; such a run's status becomes "diverged".

    Parameters
    ----------
    df : pandas.DataFrame
        A results table.

    Returns
    -------
    tuple
        ``(df, changed)``.
    """
    bad = nonfinite_rows(df)
    if not bad.any():
        return df, False
    df = df.loc[~bad].reset_index(drop=True)
    if "status" in df.columns:
        df["status"] = "diverged"
    return df, True


def _any_nonfinite(table):
    """True if an Arrow table has a row that :func:`nonfinite_rows` would flag (no pandas conversion)."""
    import pyarrow as pa
    for n, c in zip(table.column_names, table.columns):
        if n in NOT_METRICS or n.startswith("param_") or not pa.types.is_floating(c.type):
            continue
        v = c.to_numpy()
        if (n in CORE_METRICS and not np.isfinite(v).all() and not np.isnan(v).all()) or np.isinf(v).any():
            return True
    return False


def _to_arrow(df):
    """Arrow table of a history frame, column by column (about twice as fast as from_pandas on
    small frames); any column Arrow cannot take directly falls back to ``Table.from_pandas``."""
    import pyarrow as pa
    try:
        arrays = [pa.array(s.to_numpy()) if s.dtype.kind in "iufb" else pa.array(s.array) for _, s in df.items()]
        return pa.Table.from_arrays(arrays, names=[str(c) for c in df.columns])
    except (pa.ArrowException, TypeError, ValueError):
        return pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(None)


def _with_meta(table, rid):
    meta = dict(table.schema.metadata or {})
    meta[META_KEY] = json.dumps({"format": FORMAT, "run_id": rid, "rows": table.num_rows,
                                 "sha256": content_digest(table.replace_schema_metadata(None))}).encode()
    return table.replace_schema_metadata(meta)


class _Bad(Exception):
    """A run file that must be quarantined (the message is the reason)."""


def _why(e):
    first = (str(e).splitlines() or [""])[0][:120]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


# ---------------------------------------------------------------------------- the store

class ResultsStore:
    """Crash-safe, resumable table of sweep results in ``directory`` (layout: module docstring).

    Opening a store checks every run file (schema, run id, checksum); bad ones are moved to
    ``quarantine/`` with a :class:`StoreWarning` and their runs are no longer finished.

    Parameters
    ----------
    directory : str or Path
        The results directory (created if missing).
    commit_interval : float
        Seconds between automatic rewrites of ``results.parquet`` by :meth:`add`.
    commit_cost_factor : float
        An automatic rewrite also waits this many times the duration of the previous one, so
        rewriting the table takes at most ~1/``commit_cost_factor`` of the time whatever its size.
    fsync : bool
        Also ``fsync`` each run file before its rename (``results.parquet`` always is). Without
        it, a run file lost in an operating-system crash is found damaged later and its run redone.

    Examples
    --------
    >>> import pandas as pd, tempfile
    >>> from fedtheory.reporting.results import ResultsStore
    >>> d = tempfile.mkdtemp()
    >>> s = ResultsStore(d)
    >>> s.add("abc", pd.DataFrame({"run_id": ["abc"], "round": [0], "status": ["max_rounds"],
    ...                            "seed": [0], "version": ["0"], "value": [1.0]}))
    >>> s.commit()
    >>> sorted(s.finished()), len(pd.read_parquet(s.path))
    (['abc'], 1)
    >>> sorted(ResultsStore(d).finished())            # reopened: the run file is verified
    ['abc']
    """

    def __init__(self, directory, commit_interval=30.0, commit_cost_factor=20.0, fsync=False):
        if not isinstance(directory, (str, os.PathLike)) or not str(os.fspath(directory)).strip():
            raise InvalidParameterError(f"The 'directory' parameter of ResultsStore must be a non-empty path "
                                        f"(Path('') is the current directory). Got {directory!r} instead.")
        check_param("commit_interval", commit_interval, [Interval(float, 0, None, "left")], "ResultsStore")
        check_param("commit_cost_factor", commit_cost_factor, [Interval(float, 0, None, "left")], "ResultsStore")
        check_param("fsync", fsync, [Bool()], "ResultsStore")
        self.dir = Path(directory)
        self.parts = self.dir / "runs"
        self.parts.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "results.parquet"
        self.quarantine_dir = self.dir / "quarantine"
        self.commit_interval = float(commit_interval)
        self.commit_cost_factor = float(commit_cost_factor)
        self.fsync = bool(fsync)
        self.quarantined = []            # (file name, reason) moved by this object
        self._tables = {}                # run_id -> Arrow table (schema metadata stripped)
        self._changes = 0                # bumped on every change of _tables (cache key)
        self._cache = None
        self._last_commit = -math.inf
        self._commit_cost = 0.0
        for d in (self.parts, self.dir):
            for p in d.glob(".*.tmp"):
                if _stale_tmp(p):          # left by a killed writer of this host: never complete
                    try:
                        p.unlink()
                    except OSError:
                        pass
        self._scan()

    # -------------------------------------------------------------- reading and checking
    def _run_files(self):
        for p in self.parts.iterdir():
            n = p.name
            if n.endswith(".parquet") and not n.startswith(".") and len(n) > len(".parquet"):
                yield p

    def _scan(self):
        """Load and check every run file not yet in memory."""
        new = [p for p in self._run_files() if p.name[:-len(".parquet")] not in self._tables]
        if not new:
            return
        if len(new) > 16:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 2)) as ex:
                loaded = list(ex.map(self._load, new))
        else:
            loaded = [self._load(p) for p in new]
        for p, (table, err, ino) in zip(new, loaded):
            if err is not None:
                self._quarantine(p, err, ino)
            elif table is not None:
                self._tables[p.name[:-len(".parquet")]] = table
                self._changes += 1

    def _load(self, p):
        """``(table, None, ino)`` for a good run file, ``(None, reason, ino)`` for a bad one."""
        rid = p.name[:-len(".parquet")]
        ino = None
        try:
            with open(p, "rb") as f:
                ino = os.fstat(f.fileno()).st_ino
                try:
                    table = _read_table(f)                          # see _NO_THREADS
                except Exception as e:           # truncated, not Parquet, bad pages
                    raise _Bad(f"unreadable ({_why(e)})") from None
            try:
                return self._check(rid, p, table), None, ino
            except _Bad:
                raise
            except Exception as e:               # anything else the content trips on
                raise _Bad(f"damaged ({_why(e)})") from None
        except FileNotFoundError:                # renamed or quarantined meanwhile by another writer
            return None, None, ino
        except OSError as e:                     # a directory, no permission, I/O error
            return None, f"unreadable ({_why(e)})", ino
        except _Bad as e:
            return None, str(e), ino

    def _check(self, rid, p, table):
        meta = (table.schema.metadata or {}).get(META_KEY)
        cols = set(table.column_names)
        missing = [c for c in REQUIRED if c not in cols]
        if meta is None:
            # a file without run metadata: a run file of fedtheory <= 0.1 if its rows say so, else stray
            if missing or table.num_rows == 0:
                raise _Bad(f"stray file (no fedtheory run metadata; missing columns {missing})"
                           if missing else "stray file (no fedtheory run metadata, no rows)")
            ids = set(table.column("run_id").to_pylist())
            if ids != {rid}:
                raise _Bad(f"mismatching run id: the file {p.name} holds rows of {sorted(map(str, ids))[:3]}")
            df, _ = sanitize(table.replace_schema_metadata(None).to_pandas(use_threads=False))
            return self._write_run(rid, df)      # adopt: rewritten with run metadata and checksum
        try:
            m = json.loads(meta)
        except ValueError:
            raise _Bad("damaged run metadata") from None
        if m.get("format") != FORMAT:
            raise _Bad(f"unknown run file format {m.get('format')!r} (this fedtheory writes {FORMAT})")
        if m.get("run_id") != rid:
            raise _Bad(f"mismatching run id: the file {p.name} holds run {m.get('run_id')!r}")
        if missing:
            raise _Bad(f"schema: missing columns {missing}")
        ids = set(table.column("run_id").to_pylist())
        if ids - {rid}:
            raise _Bad(f"mismatching run id: rows of {sorted(map(str, ids - {rid}))[:3]} in {p.name}")
        if m.get("rows") != table.num_rows:
            raise _Bad(f"row count {table.num_rows} differs from the recorded {m.get('rows')}")
        bare = table.replace_schema_metadata(None)
        if content_digest(bare) != m.get("sha256"):
            raise _Bad("checksum mismatch (content differs from the recorded sha256)")
        if _any_nonfinite(bare):                             # repair: finite rows, status diverged
            return self._write_run(rid, sanitize(bare.to_pandas(use_threads=False))[0])
        return bare

    def _quarantine(self, p, reason, ino=None):
        self.quarantine_dir.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        dest = self.quarantine_dir / f"{p.name}.{stamp}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        try:
            if ino is not None and os.stat(p).st_ino != ino:
                return                           # replaced meanwhile by a complete file: keep it
            os.rename(p, dest)
        except FileNotFoundError:
            return                               # another writer moved it first
        except OSError as e:
            warnings.warn(f"results store {self.dir}: {p.name}: {reason}; could not be moved to {dest} "
                          f"({_why(e)}); its run is not counted as stored", StoreWarning, stacklevel=4)
            return
        try:
            with open(self.quarantine_dir / "log.txt", "a") as f:
                f.write(f"{stamp}\t{p.name}\t{dest.name}\t{reason}\n")
        except OSError:
            pass
        self.quarantined.append((p.name, reason))
        warnings.warn(f"results store {self.dir}: {p.name}: {reason}; moved to {dest} and its run will be "
                      "redone", StoreWarning, stacklevel=4)

    # -------------------------------------------------------------- writing
    def _write_run(self, rid, df):
        table = _to_arrow(df)
        _write_atomic(_with_meta(table, rid), self.parts / f"{rid}.parquet", fsync=self.fsync)
        return table.replace_schema_metadata(None)

    def finished(self):
        """Run ids whose results are stored (checked when the store was opened, or added since)."""
        return set(self._tables)

    def has(self, rid):
        """True if ``rid`` is finished here or a run file for it exists (e.g. from a concurrent writer)."""
        return rid in self._tables or (self.parts / f"{rid}.parquet").exists()

    def add(self, rid, df):
        """Store one finished run's rows: one file, written atomically (O(1) in the store's size).

        Rows of a diverged state are dropped and the run's status becomes "diverged"
        (:func:`sanitize`). ``results.parquet`` is rewritten on the first call and then
        at most every ``commit_interval`` seconds; :meth:`commit` forces it.
        """
        if len(df) and "run_id" in df.columns and set(df["run_id"].unique()) != {rid}:
            raise ValueError(f"add({rid!r}, df): the rows' run_id column holds {sorted(df['run_id'].unique())[:3]}")
        table = _to_arrow(df)
        if _any_nonfinite(table):
            table = _to_arrow(sanitize(df)[0])
        _write_atomic(_with_meta(table, rid), self.parts / f"{rid}.parquet", fsync=self.fsync)
        self._tables[rid] = table.replace_schema_metadata(None)
        self._changes += 1
        now = time.monotonic()
        if now - self._last_commit >= max(self.commit_interval, self.commit_cost_factor * self._commit_cost):
            self.commit()

    # -------------------------------------------------------------- the consolidated table
    def _consolidated(self):
        key = (len(self._tables), self._changes)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        tables = [self._tables[r] for r in sorted(self._tables)]
        if not tables:
            return None
        self._cache = (key, self._concat(tables))
        return self._cache[1]

    @staticmethod
    def _concat(tables):
        import pyarrow as pa
        try:
            try:
                return pa.concat_tables(tables, promote_options="permissive")
            except TypeError:                    # pyarrow < 14
                return pa.concat_tables(tables, promote=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            df = pd.concat([t.to_pandas(use_threads=False) for t in tables], ignore_index=True)
            for c in df.columns:            # one column holding numbers and text (a parameter that is
                if df[c].dtype == object:   # a float in one run, a list in another): all as text
                    vals = [v for v in df[c] if v is not None and v == v]
                    if len({isinstance(v, str) for v in vals}) > 1:
                        df[c] = [v if v is None or v != v or isinstance(v, str) else json.dumps(v) for v in df[c]]
            return pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(None)

    def table(self):
        """All stored rows (one per evaluated round of every finished run, runs sorted by run_id),
        including runs stored meanwhile by other writers."""
        self._scan()
        t = self._consolidated()
        return pd.DataFrame() if t is None else t.to_pandas(use_threads=False)

    def commit(self):
        """Rewrite ``results.parquet`` from the run files (atomic replace, under ``DIR/.lock``)."""
        t0 = time.monotonic()
        with _exclusive(self.dir / ".lock"):
            self._scan()
            t = self._consolidated()
            if t is None:
                import pyarrow as pa
                t = pa.table({})
            _write_atomic(t, self.path, fsync=True)
        self._last_commit = time.monotonic()
        self._commit_cost = self._last_commit - t0


def canonical_value(v):
    """``v`` with every whole-number float written as an int (1.0 as 1, in lists and tables too),
    so that two spellings of one number are one configuration; other values as they are.

    Parameters
    ----------
    v : object
        A configuration value.

    Returns
    -------
    object
        The value, whole-number floats as ints.
    """
    if isinstance(v, float) and v.is_integer() and abs(v) < 2.0 ** 53:
        return int(v)
    if isinstance(v, dict):
        return {k: canonical_value(w) for k, w in v.items()}
    if isinstance(v, (list, tuple)):
        return [canonical_value(w) for w in v]
    return v


def run_id(problem_args, run_args, legacy=False):
    """Hash of a run's full configuration (problem and run arguments), 16 hex digits.

    Numbers are hashed in one form (:func:`canonical_value`: ``lr = 1`` and ``lr = 1.0`` are one
    run). ``legacy=True`` gives the hash of the values as written, as stores written before that
    rule named their runs: a sweep resumed on such a store finds them under either id.
    A factory without a ``name`` argument is hashed under the key ``name``, as configurations named
    it before ``factory`` existed: a sweep written then and resumed now finds its runs.

    Parameters
    ----------
    problem_args, run_args : dict
        The point's problem and run arguments.
    legacy : bool, default False
        The id of a store written before numbers had one form.

    Returns
    -------
    str
        16 hex digits.
    """
    if "factory" in problem_args and "name" not in problem_args:
        problem_args = {("name" if k == "factory" else k): v for k, v in problem_args.items()}
    if not legacy:
        problem_args, run_args = canonical_value(problem_args), canonical_value(run_args)
    blob = json.dumps({"problem": problem_args, "run": run_args}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
