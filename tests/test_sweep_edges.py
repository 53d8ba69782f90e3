"""Sweeps one step off the documented path: grid values of two types, two spellings of one number,
an input error found by the parallel driver's warm-up, resuming from another entry point, and an
algorithm logging a value under a column's name."""
import hashlib
import json
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

import fedtheory as ft
import problems
from fedtheory.reporting.config import ConfigError, load
from fedtheory.reporting.results import run_id
from fedtheory.exceptions import DeclarationError, InvalidParameterError
from fedtheory.reporting.sweep import sweep

QUAD = """
[problem]
factory = "quadratic"
n_clients = 3
dim = 3
[run]
algorithm = "{alg}"
rounds = 4
eval_every = 4
{run}
[grid]
{grid}
"""


def _cfg(alg="fedavg", run="lr = 0.1", grid="seed = [0]"):
    return load(QUAD.format(alg=alg, run=run, grid=grid), progress=False)


def test_a_grid_axis_of_a_number_and_a_list_is_stored_and_read_back(tmp_path):
    """FedSPS's lower_bound is a float or one value per client (both documented): the two runs were
    stored, then every write of the table (this sweep's, every later one's, ``fedtheory plot``'s)
    failed in pyarrow on the column holding a number and a text. The column is now text."""
    out = tmp_path / "mix"
    df = sweep(_cfg("fedsps", "lr = 0.1\ngamma_b = 0.5", "lower_bound = [-1.0, [-1.0, -1.0, -1.0]]"), out,
               n_jobs=1, progress=False)
    assert df.run_id.nunique() == 2
    assert sorted(df.param_lower_bound.unique()) == ["-1.0", "[-1.0, -1.0, -1.0]"]
    again = sweep(_cfg("fedsps", "lr = 0.1\ngamma_b = 0.5", "lower_bound = [-2.0]"), out, n_jobs=1, progress=False)
    assert again.run_id.nunique() == 3
    stored = pd.read_parquet(out / "results.parquet")
    assert stored.run_id.nunique() == 3


def test_one_number_written_two_ways_is_one_run(tmp_path):
    """``lr = [1, 1.0]`` ran one configuration twice under two run ids, and resuming after writing
    1.0 for 1 computed and stored it again. The grid now refuses the repeat, and the run id hashes
    numbers in one form."""
    with pytest.raises(ConfigError, match="listed twice"):
        _cfg(grid="lr = [1, 1.0]", run="")
    out = tmp_path / "one"
    first = sweep(_cfg(run="lr = 1", grid="seed = [0]"), out, n_jobs=1, progress=False)
    second = sweep(_cfg(run="lr = 1.0", grid="seed = [0]"), out, n_jobs=1, progress=False)
    assert first.run_id.nunique() == second.run_id.nunique() == 1
    pd.testing.assert_frame_equal(first, second)
    # ids of stores written before the rule: the values as written (a resumed sweep looks them up too)
    run = {"algorithm": "fedavg", "lr": 1.0}
    old = json.dumps({"problem": {"name": "quadratic"}, "run": run}, sort_keys=True, default=str)
    assert run_id({"factory": "quadratic"}, run, legacy=True) == hashlib.sha256(old.encode()).hexdigest()[:16]
    assert run_id({"factory": "quadratic"}, run) == run_id({"factory": "quadratic"}, {"algorithm": "fedavg", "lr": 1})


def test_parallel_warm_up_reports_a_problem_without_optimum_as_a_configuration_error(tmp_path):
    """``reference = true`` on separable data without ridge: -j 1 said so in one line (exit 2), -j 2
    ended in a ValueError traceback from the driver's warm-up."""
    text = """
[problem]
factory = "logistic"
A = [[[1.0, 0.0], [0.0, 1.0]], [[2.0, 1.0], [1.0, 2.0]]]
y = [[1.0, 1.0], [1.0, 1.0]]
[run]
algorithm = "fedavg"
rounds = 3
lr = 0.1
reference = true
[grid]
seed = [0, 1]
"""
    for jobs in (1, 2):
        with pytest.raises(ConfigError, match="reference = true needs the problem's optimum"):
            sweep(load(text, progress=False), tmp_path / f"sep{jobs}", n_jobs=jobs, progress=False)


def test_the_running_script_and_this_project_are_not_the_users_code(tmp_path, monkeypatch):
    """Resuming with ``python -m fedtheory`` after ``fedtheory`` warned that "your code" changed: the
    console script (``__main__``, and multiprocessing's alias ``__mp_main__``) was recorded as the
    user's code. A module of the user's own is still recorded."""
    from fedtheory.reporting.sweep import _user_files
    script, mine = tmp_path / "entry_point", tmp_path / "my_helpers.py"
    script.write_text("# a console script\n")
    mine.write_text("X = 1\n")
    for name, f in (("__mp_main__", script), ("my_helpers_for_the_sweep_test", mine)):
        m = types.ModuleType(name)
        m.__file__ = str(f)
        monkeypatch.setitem(sys.modules, name, m)
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(script), raising=False)
    files = [p for p, _, _ in _user_files()]
    assert str(mine.resolve()) in files
    assert str(script.resolve()) not in files
    import validation
    # the project's own packages, wherever the checkout lies (a clone in a folder named
    # ``fedtheory`` puts "/fedtheory/" in every path, the user's files included)
    own = [Path(m.__file__).resolve().parent for m in (ft, problems, validation)]
    assert not [p for p in files if any(Path(p).is_relative_to(d) for d in own)]


def test_a_logged_value_may_not_take_a_columns_name():
    """A scalar logged as ``value`` replaced F(x) in the history (and its NaN at round 0 made a sweep
    call the run diverged); one logged as ``seed`` was replaced by the run's seed."""
    from fedtheory.algorithms.fedavg import FedAvg
    from fedtheory.registry import ALGORITHMS, register
    for bad in ("value", "seed", "param_lr", "comm_up"):
        with pytest.raises(DeclarationError, match="under the name of a column"):
            register(dataclass(frozen=True)(type("Clash", (FedAvg,), {
                "__annotations__": {"name": ClassVar[str], "scalars": ClassVar[dict]},
                "name": "clash_check", "scalars": {bad: "a number"}})))
        assert "clash_check" not in ALGORITHMS

    @register
    @dataclass(frozen=True)
    class ExtrasClash(FedAvg):
        name: ClassVar[str] = "extras_clash_check"
        compiled_rules: ClassVar[bool] = False

        def history_extras(self, state, problem):
            return {"grad_mapping_sq": 0.0}

    try:
        with pytest.raises(InvalidParameterError, match=r"logs \['grad_mapping_sq'\] under the name of a column"):
            ft.run(problems.quadratic(3, 2, seed=0), "extras_clash_check", rounds=2, lr=0.1)
    finally:
        ALGORITHMS.pop("extras_clash_check", None)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_runs_own_error_names_its_grid_point_and_how_to_resume(tmp_path, jobs):
    """A run failing in the middle of a sweep (Mime cannot average a round whose participants all
    have weight 0) stopped it with the run's message alone, naming no grid point; the error now
    carries a note with the run id, its configuration and how to resume, in a worker process too."""
    cfg = load(QUAD.format(alg="mime", run="lr = 0.1\nclients_per_round = 1",
                           grid="seed = [0, 1]\nproblem.weights = [[0.0, 0.0, 1.0]]"), progress=False)
    ids = {run_id(prob, rn) for prob, rn in cfg.points()}
    with pytest.raises(ValueError, match="objective weight w_i = 0") as e:
        sweep(cfg, tmp_path / "out", n_jobs=jobs, progress=False, warm=False)
    notes = " ".join(getattr(e.value, "__notes__", []))
    assert any(f"in run {rid} " in notes for rid in ids) and "'weights': [0.0, 0.0, 1.0]" in notes
    assert "the same command resumes the sweep" in notes


@pytest.mark.parametrize("n_jobs", [0, -(os.cpu_count() or 1) - 1, -1000, 2.0, "2"])
def test_sweep_refuses_a_worker_count_it_cannot_honour(tmp_path, n_jobs):
    """n_jobs: a positive count, or joblib's count back from the CPUs down to -(the CPUs); below that
    joblib would silently run one worker, so it is refused, naming the accepted ranges."""
    cpus = os.cpu_count() or 1
    with pytest.raises(InvalidParameterError, match=re.escape(
            f"The 'n_jobs' parameter of sweep must be None, an int in the range [-{cpus}, -1] or an int in the range "
            f"[1, 2**63 - 1]. Got {n_jobs!r} instead.")):
        sweep(_cfg(), tmp_path / "o", n_jobs=n_jobs, progress=False)
    assert not (tmp_path / "o").exists()
