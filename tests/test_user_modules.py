"""User modules (``--import MODULE``, a configuration's ``import = [...]``): a user's algorithm,
kept in ``tests/userpkg``, is described, run and swept (loky and Dask workers) like a built-in one."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fedtheory.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
NAME = "userpkg_heavyball"
CFG = f"""\
[problem]
factory = "quadratic"
n_clients = 4
dim = 3
heterogeneity = 1.0

[run]
algorithm = "{NAME}"
rounds = 6
local_steps = 2
lr = 0.1
eval_every = 2

[grid]
seed = [0, 1]
"""


def _cli(*args, cwd=TESTS):
    """``python -m fedtheory ARGS`` in a fresh process whose path holds the project, not tests/."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "fedtheory", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture
def userpkg():
    """The user package imported in this process, and forgotten afterwards (other tests see only
    the built-in algorithms)."""
    from fedtheory import registry
    before = list(registry._IMPORTED)
    registry.import_modules(["userpkg"])
    yield
    from fedtheory.sweep import _POOL, _stop_pool
    for pool in list(_POOL.values()):            # its workers imported the package: later sweeps start afresh
        _stop_pool(pool)
    registry.ALGORITHMS.pop(NAME, None)
    sys.modules.pop("userpkg", None)
    registry._IMPORTED[:] = before


def test_an_unknown_name_says_what_was_imported_and_suggests_import():
    res = _cli("describe", NAME)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "no user module imported" in res.stderr and "--import MODULE" in res.stderr
    res = _cli("describe", "fedavgg", "--import", "userpkg")
    assert res.returncode == 2
    assert "Did you mean 'fedavg'" in res.stderr and "user modules imported: userpkg" in res.stderr


def test_describe_and_run_a_user_algorithm_from_the_command_line(tmp_path):
    res = _cli("describe", NAME, "--import", "userpkg")
    assert res.returncode == 0, res.stderr
    assert f"{NAME}: algorithm" in res.stdout and "beta = 0.3" in res.stdout
    one = tmp_path / "one.toml"                       # the configuration names the module itself
    one.write_text('import = ["userpkg"]\n' + CFG.replace("seed = [0, 1]", "seed = [3]"))
    res = _cli("run", one, "--out", tmp_path / "res", "--quiet")
    assert res.returncode == 0, res.stderr
    df = pd.read_parquet(tmp_path / "res" / "results.parquet")
    assert set(df.param_algorithm) == {NAME} and set(df.status) == {"max_rounds"}
    assert df.value.iloc[-1] < df.value.iloc[0]


def test_sweep_j2_workers_import_the_module(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(CFG)
    res = _cli("sweep", cfg, "--out", tmp_path / "res", "-j", "2", "--import", "userpkg", "--quiet")
    assert res.returncode == 0, res.stderr
    df = pd.read_parquet(tmp_path / "res" / "results.parquet")
    assert df.run_id.nunique() == 2 and set(df.status) == {"max_rounds"}


def test_missing_module_and_bad_import_key_are_one_line_errors(tmp_path, capsys):
    assert main(["list", "--import", "no_such_user_module"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--import no_such_user_module: No module named" in err
    bad = tmp_path / "bad.toml"
    bad.write_text('import = "userpkg"\n' + CFG)
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.toml, line 1: key 'import': expected a list of module names" in err
    bad.write_text(CFG.replace("[run]", '[run]\nimport = ["userpkg"]'))
    assert main(["run", str(bad)]) == 2
    assert "import = [...] is a top-level key" in capsys.readouterr().err


def test_python_sweep_with_two_workers_imports_the_registering_module(tmp_path, userpkg):
    """sweep() from Python: the module that registered the algorithm is found in the registry and
    imported by every loky worker, although no --import named it."""
    from fedtheory.registry import user_modules
    from fedtheory.sweep import sweep
    assert "userpkg" in user_modules()
    local = sweep(CFG, tmp_path / "one", n_jobs=1, progress=False)
    two = sweep(CFG, tmp_path / "two", n_jobs=2, progress=False, warm=False)
    cols = ["run_id", "round", "value"]
    pd.testing.assert_frame_equal(local[cols].sort_values(cols[:2]).reset_index(drop=True),
                                  two[cols].sort_values(cols[:2]).reset_index(drop=True))
    assert two.run_id.nunique() == 2


def test_dask_workers_import_the_module(tmp_path, userpkg):
    distributed = pytest.importorskip("distributed")
    from fedtheory.sweep import sweep
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        df = sweep(CFG, tmp_path / "dask", backend="dask", scheduler=cluster.scheduler_address, progress=False)
    assert df.run_id.nunique() == 2 and set(df.status) == {"max_rounds"}


def test_the_console_script_finds_a_module_in_the_current_directory():
    """The ``fedtheory`` console script (unlike ``python -m``) has no current directory on its path:
    --import adds it."""
    import shutil
    exe = shutil.which("fedtheory")
    if exe is None:
        pytest.skip("the fedtheory console script is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([exe, "describe", NAME, "--import", "userpkg"], capture_output=True, text=True,
                         env=env, cwd=TESTS, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"{NAME}: algorithm" in res.stdout


def test_an_algorithm_of_main_is_refused_before_workers_start(tmp_path):
    """A class defined in a script (``__main__``) cannot be imported by a worker: the sweep says so
    and what to do, before it starts any worker; n_jobs=1 runs it."""
    script = tmp_path / "script.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "import userpkg\n"
        "from dataclasses import dataclass\n"
        "from fedtheory.registry import register\n"
        "from fedtheory.sweep import sweep\n"
        "from fedtheory.exceptions import InvalidParameterError\n"
        "@register\n"
        "@dataclass(frozen=True)\n"
        "class Mine(userpkg.ServerHeavyBall):\n"
        "    name = 'script_heavyball'\n"
        f"cfg = {CFG.replace(NAME, 'script_heavyball')!r}\n"
        "try:\n"
        f"    sweep(cfg, {str(tmp_path / 'two')!r}, n_jobs=2, progress=False)\n"
        "except InvalidParameterError as e:\n"
        "    print('refused:', e)\n"
        f"df = sweep(cfg, {str(tmp_path / 'one')!r}, n_jobs=1, progress=False)\n"
        "print('runs:', df.run_id.nunique())\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert ("refused: Algorithm 'script_heavyball' is defined in '__main__', which worker processes cannot "
            "import by name") in res.stdout
    assert "runs: 2" in res.stdout
    assert not list((tmp_path / "two").glob("runs/*.parquet"))     # no run was started


def test_describe_verify_and_falsify_a_user_theorem_from_the_command_line(tmp_path):
    """The user's theorem (tests/userpkg/theory.py) goes everywhere a built-in goes."""
    theorem = "userpkg.gd_contraction"
    res = _cli("describe", theorem, "--import", "userpkg.theory")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"{theorem}: theorem (measures algorithm 'fedavg')" in out
    params = out.split("parameters (")[1].split("assumptions")[0]
    assert [line.strip() for line in params.splitlines()[1:] if line.strip()] == [
        "rounds = 30", "lr = None", "seeds = 1", "x0 = None"]
    assert "assumptions (from the problem's components): L-smoothness (smooth); mu-strong convexity" in out
    assert "conforming space (validation.falsify): One to four clients" in out
    assert "[stated] eta <= 1/L: 1 vs 1 (ok)" in out
    res = _cli("verify", "--theorem", theorem, "--import", "userpkg.theory", "--quick", "--out", tmp_path / "v")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "v" / "verdicts.csv")
    assert df.verdict.tolist() == ["holds (vacuous: bound > 1e3 x measured)", "holds",
                                   "holds, contraction factor as predicted"]
    assert df.fitted_rate[2] < df.predicted_rate[2] and df.rate_ci[2].startswith("[")
    assert "Fitted contraction factor" in (tmp_path / "v" / "report.md").read_text()
    res = _cli("falsify", theorem, "--import", "userpkg.theory", "--budget", "8", "--seed", "0")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no counterexample found" in res.stdout, res.stdout
    res = _cli("describe", "userpkg_heavyball", "--import", "userpkg")
    assert "scalars logged in the history" in res.stdout and "server_step: ||x^{t+1} - x^t||" in res.stdout
