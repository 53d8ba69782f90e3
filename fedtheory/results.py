"""The results store of sweeps: ``DIR/results.parquet`` (API.md "Command line").

One row per evaluated round, with ``run_id`` (hash of the run's full configuration),
``param_*`` columns (every problem and run setting; problem arguments as ``param_problem_*``),
the history's metric columns, ``status``, ``seed`` and ``version``.

Writing is crash-safe: each finished run is first written to ``DIR/runs/<run_id>.parquet``
through a temporary file and an atomic rename, then ``results.parquet`` is rewritten the same
way. A process killed at any moment leaves the previous complete files; a restarted sweep
skips every run whose part file exists, and rows are keyed by ``run_id`` so none is duplicated.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd


def _atomic_parquet(df, path):
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    df.to_parquet(tmp, index=False)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def flatten_params(problem_args, run_args):
    """``param_*`` columns: scalars as they are, other values (lists) as JSON text."""
    out = {}
    for prefix, d in (("param_problem_", problem_args), ("param_", run_args)):
        for k, v in sorted(d.items()):
            out[prefix + k] = v if isinstance(v, (bool, int, float, str)) or v is None else json.dumps(v)
    return out


class ResultsStore:
    """Crash-safe, resumable table of sweep results in ``directory``.

    Examples
    --------
    >>> import pandas as pd, tempfile
    >>> from fedtheory.results import ResultsStore
    >>> d = tempfile.mkdtemp()
    >>> s = ResultsStore(d)
    >>> s.add("abc", pd.DataFrame({"run_id": ["abc"], "round": [0], "value": [1.0]}))
    >>> sorted(s.finished()), len(pd.read_parquet(s.path))
    (['abc'], 1)
    """

    def __init__(self, directory):
        self.dir = Path(directory)
        self.parts = self.dir / "runs"
        self.parts.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "results.parquet"
        for stale in list(self.parts.glob(".*.tmp")) + list(self.dir.glob(".*.tmp")):
            stale.unlink(missing_ok=True)            # left by a killed writer; never complete
        self._frames = {p.stem: None for p in self.parts.glob("*.parquet")}

    def finished(self):
        """Run ids whose results are stored."""
        return set(self._frames)

    def add(self, rid, df):
        """Store one finished run's rows (atomically), then commit ``results.parquet``."""
        _atomic_parquet(df, self.parts / f"{rid}.parquet")
        self._frames[rid] = df
        self.commit()

    def table(self):
        """All stored rows (one per evaluated round of every finished run)."""
        frames = []
        for rid in sorted(self._frames):
            if self._frames[rid] is None:
                self._frames[rid] = pd.read_parquet(self.parts / f"{rid}.parquet")
            frames.append(self._frames[rid])
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def commit(self):
        """Rewrite ``results.parquet`` from the stored runs (atomic replace)."""
        _atomic_parquet(self.table(), self.path)
