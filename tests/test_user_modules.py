"""User modules (``--import MODULE``, a configuration's ``import = [...]``): a user's package, kept in
``tests/userpkg`` (an algorithm, a log-cosh datafit with its problem factory, a theorem with its PEP,
none built in), goes through every subcommand (describe, list, run, sweep on loky and Dask workers,
verify, verify --tightness, falsify) and through ``sweep(..., n_jobs=2)`` from Python like a
built-in one; the certified optimum of its datafit's problem is checked against scipy."""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedtheory.__main__ import main
from fedtheory.exceptions import InvalidParameterError

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
NAME = "userpkg_heavyball"
FACTORY = "userpkg_logcosh"
THEOREM = "userpkg.gd_contraction"
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
# the user's algorithm on the user's problem, measured against its certified optimum:
# 2 runs x 4 evaluations (rounds 0, 2, 4, 6)
USER_CFG = f"""\
[problem]
factory = "{FACTORY}"
n_clients = 3
dim = 3

[run]
algorithm = "{NAME}"
rounds = 6
local_steps = 2
lr = 0.2
eval_every = 2
reference = true

[grid]
seed = [0, 1]
"problem.shift" = [0.5]
"""
USER_ROWS = 8


def _cli(*args, cwd=TESTS):
    """``python -m fedtheory ARGS`` in a fresh process whose path holds the project, not tests/."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "fedtheory", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture
def userpkg(forget_user_modules):
    """The user package imported in this process, and forgotten afterwards."""
    from fedtheory import registry
    registry.import_modules(["userpkg"])
    return sys.modules["userpkg"]


@pytest.fixture(scope="module")
def dask_cluster():
    """One LocalCluster of two process workers for this module's Dask sweeps."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=":0", worker_dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        yield cluster, client


def _decreasing(values):
    values = np.asarray(values, dtype=float)
    return bool(np.isfinite(values).all() and (np.diff(values) < 0).all())


def test_an_unknown_name_says_what_was_imported_and_suggests_import(tmp_path):
    res = _cli("describe", NAME)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "no user module imported" in res.stderr and "--import MODULE" in res.stderr
    res = _cli("describe", "fedavgg", "--import", "userpkg")
    assert res.returncode == 2
    assert "Did you mean 'fedavg'" in res.stderr and "user modules imported: userpkg" in res.stderr
    cfg = tmp_path / "user.toml"                      # a user's factory named without its module
    cfg.write_text(USER_CFG)
    res = _cli("run", cfg)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert (f"user.toml, line 2: [problem] key 'factory': expected a problems factory, one of " in res.stderr
            and f'got "{FACTORY}"' in res.stderr)
    assert "no user module imported" in res.stderr and "fedtheory --import MODULE" in res.stderr
    cfg.write_text(USER_CFG.replace(f'"{FACTORY}"', '"userpkg_logcos"'))
    res = _cli("sweep", cfg, "--out", tmp_path / "res", "--import", "userpkg")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert f"Did you mean '{FACTORY}'?" in res.stderr and "user modules imported: userpkg" in res.stderr


def test_a_factory_name_is_registered_once_and_never_a_built_in_one(monkeypatch, capsys):
    from fedtheory.reporting.config import factories
    from fedtheory.registry import PROBLEMS, register_problem
    monkeypatch.setattr("fedtheory.registry.PROBLEMS", dict(PROBLEMS))

    def mine(seed=0):
        """A factory of this test."""

    register_problem(mine, name="test_mine")
    register_problem(mine, name="test_mine")                # the same function again: replaces itself
    with pytest.raises(ValueError, match="problem factory 'test_mine' is registered twice"):
        register_problem(lambda seed=0: None, name="test_mine")
    with pytest.raises(InvalidParameterError, match="The 'name' parameter of register_problem must be a non-empty"):
        register_problem(mine, name="")
    assert factories()["test_mine"] is mine
    register_problem(mine, name="quadratic")
    with pytest.raises(InvalidParameterError, match=r"must differ from the built-in factories \(breast_cancer, "):
        factories()
    assert main(["list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedtheory list: error: The 'name' parameter of register_problem")
    assert "Got 'quadratic' (for test_user_modules.test_a_factory_name" in err


def test_describe_and_list_the_user_package_from_the_command_line(forget_user_modules, capsys):
    assert main(["describe", NAME, "--import", "userpkg"]) == 0
    out = capsys.readouterr().out
    assert f"{NAME}: algorithm" in out and "beta = 0.3" in out
    assert "scalars logged in the history" in out and "server_step: ||x^{t+1} - x^t||" in out
    assert main(["describe", FACTORY, "--import", "userpkg"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{FACTORY}: problem factory (userpkg.logcosh.{FACTORY})"
    assert lines[1].startswith("  Log-cosh regression: each client fits")
    assert [line.strip() for line in lines[3:]] == ["n_clients = 3", "samples = 12", "dim = 3", "l2 = 0.01",
                                                    "shift = 1.0", "seed = 0"]
    assert main(["list", "--import", "userpkg.theory"]) == 0
    out = capsys.readouterr().out
    listed = {line.split(":")[0]: line.split(":", 1)[1].strip().split(", ") for line in out.splitlines()}
    assert NAME in listed["algorithms"] and FACTORY in listed["problems"] and THEOREM in listed["theorems"]


def test_run_the_user_algorithm_on_the_user_problem_from_the_command_line(tmp_path):
    """``fedtheory run``: the configuration names the module itself; the run is measured against the
    certified optimum of the user's log-cosh problem."""
    one = tmp_path / "one.toml"
    one.write_text('import = ["userpkg"]\n' + USER_CFG.replace("seed = [0, 1]", "seed = [3]"))
    res = _cli("run", one, "--out", tmp_path / "res", "--quiet")
    assert res.returncode == 0, res.stderr
    assert f"{NAME} on {FACTORY}, status max_rounds" in res.stdout
    assert "reference: F* = " in res.stdout and "certified to" in res.stdout
    df = pd.read_parquet(tmp_path / "res" / "results.parquet").sort_values("round")
    assert set(df.param_algorithm) == {NAME} and set(df.status) == {"max_rounds"}
    assert df["round"].tolist() == [0, 2, 4, 6]
    assert _decreasing(df.value) and _decreasing(df.suboptimality) and (df.suboptimality > 0).all()


@pytest.mark.xdist_group("user-dask-cluster")      # one worker starts the module's cluster
def test_sweep_on_loky_and_dask_workers_from_the_command_line(tmp_path, dask_cluster, forget_user_modules, capsys):
    """``fedtheory sweep -j 2`` (loky) and ``--backend dask`` (two worker processes of this module's
    cluster): every worker imports the user package named by --import, and both store the same runs;
    ``fedtheory plot`` draws them."""
    cluster, client = dask_cluster
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(USER_CFG)
    out = {}
    for backend, args in (("loky", ["-j", "2"]), ("dask", ["--backend", "dask", "--scheduler",
                                                          cluster.scheduler_address])):
        res = _cli("sweep", cfg, "--out", tmp_path / backend, *args, "--import", "userpkg", "--quiet")
        assert res.returncode == 0, res.stderr
        assert f"2 runs, {USER_ROWS} rows" in res.stdout
        df = pd.read_parquet(tmp_path / backend / "results.parquet")
        assert len(df) == USER_ROWS and df.run_id.nunique() == 2 and set(df.status) == {"max_rounds"}
        assert set(df.param_algorithm) == {NAME}
        for _, run in df.groupby("run_id"):
            assert _decreasing(run.sort_values("round").suboptimality), run
        out[backend] = df.sort_values(["run_id", "round"]).reset_index(drop=True)
    assert any(client.run(lambda: "userpkg.logcosh" in sys.modules).values())     # imported by the workers
    pd.testing.assert_frame_equal(out["loky"][["run_id", "round", "value", "suboptimality"]],
                                  out["dask"][["run_id", "round", "value", "suboptimality"]],
                                  check_exact=False, rtol=1e-12, atol=0)
    png = tmp_path / "rates.png"
    assert main(["plot", str(tmp_path / "loky"), "--out", str(png), "--x", "rounds", "--import", "userpkg"]) == 0
    assert capsys.readouterr().out.strip() == f"figure: {png}"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


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
    """sweep() from Python: the modules that registered the algorithm and the problem factory are
    found in the registries and imported by every loky worker, although no --import named them;
    the two workers give the values of a sweep in this process."""
    from fedtheory.registry import user_modules
    from fedtheory.reporting.sweep import sweep
    assert {"userpkg", "userpkg.logcosh"} <= set(user_modules())
    local = sweep(USER_CFG, tmp_path / "one", n_jobs=1, progress=False)
    two = sweep(USER_CFG, tmp_path / "two", n_jobs=2, progress=False, warm=False)
    assert len(two) == USER_ROWS and two.run_id.nunique() == 2 and set(two.status) == {"max_rounds"}
    assert set(two.param_problem_factory) == {FACTORY} and set(two.param_algorithm) == {NAME}
    cols = ["run_id", "round", "value", "suboptimality"]
    a = local[cols].sort_values(cols[:2]).reset_index(drop=True)
    b = two[cols].sort_values(cols[:2]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12, atol=0)
    for _, run in two.groupby("run_id"):
        assert _decreasing(run.sort_values("round").suboptimality), run


@pytest.mark.xdist_group("user-dask-cluster")      # one worker starts the module's cluster
def test_dask_workers_import_the_module(tmp_path, userpkg, dask_cluster):
    cluster, _ = dask_cluster
    from fedtheory.reporting.sweep import sweep
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


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_console_script_finds_a_configurations_import_in_the_current_directory(tmp_path, jobs):
    """A configuration's top-level ``import = ["userpkg"]``, with the module in the current directory
    and no --import: the console script searches the current directory for it as for --import,
    in a sweep's workers too."""
    import shutil
    exe = shutil.which("fedtheory")
    if exe is None:
        pytest.skip("the fedtheory console script is not installed")
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('import = ["userpkg"]\n' + CFG)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([exe, "sweep", str(cfg), "--out", str(tmp_path / "out"), "-j", jobs, "-q"],
                         capture_output=True, text=True, env=env, cwd=TESTS, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    import pandas as pd
    df = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert df.run_id.nunique() == 2 and set(df.status) == {"max_rounds"}


RELOAD_ALG = """
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fedtheory.algorithms.base import Algorithm
from fedtheory.registry import register


@register
@dataclass(frozen=True)
class ReloadSweep(Algorithm):
    name: ClassVar[str] = "reload_sweep_alg"
    constraints: ClassVar[dict] = {}

    def local_round(self, state, ctx):
        Y, fail = ctx.local_sgd(state["x"])
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        raise NotImplementedError

    def server_update(self, state, ctx, messages):
        x, w = state["x"], ctx.weights
        return {"x": x + FACTOR * (w @ messages["y"] - w.sum() * x)}
"""


def test_a_sweep_after_an_edit_and_reload_runs_the_new_code(tmp_path, monkeypatch):
    """The local pool's workers outlive a sweep; after the user edits their module and reloads it,
    the next sweep of the same process must run the new code (the workers are replaced), as the
    in-process run does."""
    import importlib

    import fedtheory as ft
    from fedtheory.reporting.config import build_problem, load, run_call
    from fedtheory.registry import ALGORITHMS
    from fedtheory.reporting.sweep import sweep
    src = tmp_path / "reload_sweep_mod.py"
    src.write_text(RELOAD_ALG.replace("FACTOR", "0.5"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cfg_text = CFG.replace(NAME, "reload_sweep_alg")
    try:
        importlib.import_module("reload_sweep_mod")
        finals = []
        for i, factor in enumerate(("0.5", "0.25")):
            if i:
                src.write_text(RELOAD_ALG.replace("FACTOR", factor))
                os.utime(src, ns=(10 ** 9 * (i + 1), 10 ** 9 * (i + 1)))
                importlib.reload(sys.modules["reload_sweep_mod"])
            cfg = load(cfg_text)
            df = sweep(cfg, tmp_path / f"out{i}", n_jobs=2, progress=False)
            for prob, rn in cfg.points():
                alg, kw, _ = run_call(rn)
                want = ft.run(build_problem(prob), alg, **kw).history["value"].to_numpy()
                got = df[df.seed == rn["seed"]].sort_values("round")["value"].to_numpy()
                assert np.array_equal(got, want), (factor, rn["seed"])
            finals.append(df.sort_values(["seed", "round"])["value"].to_numpy())
        assert not np.array_equal(finals[0], finals[1])
    finally:
        ALGORITHMS.pop("reload_sweep_alg", None)
        sys.modules.pop("reload_sweep_mod", None)


def test_a_resumed_sweep_over_runs_of_other_code_says_so(tmp_path, monkeypatch, capsys):
    """Resuming a sweep into the same directory after an edit of the user's module keeps the stored
    runs (their ids hash the configuration only) and warns that they come from another version of
    the code, naming the file; a resume with the code unchanged does not warn."""
    import importlib

    from fedtheory.registry import ALGORITHMS
    from fedtheory.reporting.sweep import sweep
    src = tmp_path / "resume_code_mod.py"
    src.write_text(RELOAD_ALG.replace("FACTOR", "0.5").replace("reload_sweep_alg", "resume_code_alg"))
    monkeypatch.syspath_prepend(str(tmp_path))
    base = CFG.replace(NAME, "resume_code_alg")
    try:
        importlib.import_module("resume_code_mod")
        sweep(base.replace("seed = [0, 1]", "seed = [0]"), tmp_path / "out", n_jobs=1, progress=False)
        sweep(base, tmp_path / "out", n_jobs=1, progress=False)           # resumed, same code
        assert "another version of your code" not in capsys.readouterr().err
        src.write_text(src.read_text().replace("0.5", "0.25"))
        sweep(base.replace("seed = [0, 1]", "seed = [0, 1, 2]"), tmp_path / "out", n_jobs=1, progress=False)
        err = capsys.readouterr().err
        assert "2 of 3 runs already stored" in err
        assert "computed with another version of your code (resume_code_mod.py changed since)" in err
    finally:
        ALGORITHMS.pop("resume_code_alg", None)
        sys.modules.pop("resume_code_mod", None)


def test_an_algorithm_or_factory_of_main_is_refused_before_workers_start(tmp_path):
    """A class or a problem factory defined in a script (``__main__``) cannot be imported by a worker:
    the sweep says so and what to do, before it starts any worker; n_jobs=1 runs it."""
    script = tmp_path / "script.py"
    script_cfg = USER_CFG.replace(FACTORY, "script_problem").replace('"problem.shift" = [0.5]', "")
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "import userpkg\n"
        "from dataclasses import dataclass\n"
        "from fedtheory.registry import register\n"
        "from fedtheory.reporting.sweep import sweep\n"
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
        "print('runs:', df.run_id.nunique())\n"
        "from fedtheory.registry import register_problem\n"
        "@register_problem\n"
        "def script_problem(**kw):\n"
        "    return userpkg.logcosh.userpkg_logcosh(**kw)\n"
        f"cfg = {script_cfg!r}\n"
        "try:\n"
        f"    sweep(cfg, {str(tmp_path / 'three')!r}, n_jobs=2, progress=False)\n"
        "except InvalidParameterError as e:\n"
        "    print('refused:', e)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert ("refused: Algorithm 'script_heavyball' is defined in '__main__', which worker processes cannot "
            "import by name") in res.stdout
    assert "runs: 2" in res.stdout
    assert ("refused: Problem factory 'script_problem' is defined in '__main__', which worker processes "
            "cannot import by name") in res.stdout
    for out in ("two", "three"):                                    # no run was started
        assert not list((tmp_path / out).glob("runs/*.parquet"))


def test_describe_verify_tightness_and_falsify_a_user_theorem_from_the_command_line(tmp_path, forget_user_modules,
                                                                                     capsys):
    """The user's theorem (tests/userpkg/theory.py) goes everywhere a built-in goes: one of its
    default cases is the user's log-cosh problem, and its PEP gives verify --tightness a row."""
    assert main(["describe", THEOREM, "--import", "userpkg.theory"]) == 0
    out = capsys.readouterr().out
    assert f"{THEOREM}: theorem (measures algorithm 'fedavg')" in out
    params = out.split("parameters (")[1].split("assumptions")[0]
    assert [line.strip() for line in params.splitlines()[1:] if line.strip()] == [
        "rounds = 30", "lr = None", "seeds = 1", "x0 = None"]
    assert "assumptions (from the problem's components): L-smoothness (smooth); mu-strong convexity" in out
    assert "conforming space (validation.falsify): One to four clients" in out
    assert "[stated] eta <= 1/L: 1 vs 1 (ok)" in out
    assert "tightness: validation.tightness (PEP registered)" in out
    assert main(["verify", "--theorem", THEOREM, "--import", "userpkg.theory", "--quick", "--tightness",
                 "--out", str(tmp_path / "v"), "--quiet"]) == 0
    capsys.readouterr()
    df = pd.read_csv(tmp_path / "v" / "verdicts.csv")
    assert df.case.tolist()[2] == "C3: log-cosh regression (the user's datafit), eta = 1/L"
    assert df.verdict.tolist() == ["holds (vacuous: bound > 1e3 x measured)", "holds", "holds",
                                   "holds, contraction factor as predicted", "OK: measured <= worst case <= bound"]
    assert 0 < df.measured[2] <= df.bound[2]               # measured against its certified optimum
    assert df.fitted_rate[3] < df.predicted_rate[3] and df.rate_ci[3].startswith("[")
    t = df.iloc[4]                                          # GD at eta = 1/L, mu = 0.1, 3 rounds
    assert t.kind == "tightness" and abs(t.worst_case_upper - 0.9 ** 6) < 1e-6 and abs(t.bound - 0.9 ** 3) < 1e-12
    assert t.measured <= t.worst_case_upper + 1e-6 and t.worst_case_lower <= t.bound
    report = (tmp_path / "v" / "report.md").read_text()
    assert "Fitted contraction factor" in report and "tightness_userpkg_gd_contraction.png" in report
    assert main(["falsify", THEOREM, "--import", "userpkg.theory", "--budget", "8", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "no counterexample found" in out, out


def test_tightness_says_why_a_user_theorem_gets_no_row(userpkg, monkeypatch):
    """A user's theorem with a PEP but no tightness configuration, or with no PEP: no row, and the
    reason (what verify --tightness prints on one line)."""
    import importlib
    from fedtheory.theory import SPECS
    from fedtheory.theory.tightness import TIGHTNESS_CASES, tightness_rows, uncovered
    importlib.import_module("userpkg.theory")
    assert uncovered([THEOREM]) == {}
    monkeypatch.delitem(TIGHTNESS_CASES, THEOREM)
    rows, lines = tightness_rows(quick=True, theorems=[THEOREM])
    assert rows == []
    why = uncovered([THEOREM])[THEOREM]
    assert why.startswith("a PEP but no configuration") and "tightness_case" in why and "\n" not in why
    assert f"* `{THEOREM}`: {why}" in lines
    monkeypatch.setattr(SPECS[THEOREM], "pep", "a test: the method has adaptive noise")
    assert uncovered([THEOREM]) == {THEOREM: "no PEP: a test: the method has adaptive noise"}


# ------------------------------------------------------------------ the user's datafit: ground truth
def _logcosh(r):
    """log cosh r, its derivative and second derivative: the test's own formulas."""
    return np.logaddexp(r, -r) - math.log(2.0), np.tanh(r), 1.0 / np.cosh(r) ** 2


def _scipy_min(blocks, l2, x0):
    """min_x sum_k w_k mean_j logcosh(a_kj^T x - b_kj) + l2/2 ||x||^2 over blocks (A_k, b_k, w_k), by
    scipy's trust-region Newton (exact Hessian), then full Newton steps (scipy stops where the
    value's rounding hides progress, near a gradient norm of 1e-10) to a gradient norm of 1e-12:
    (value, x). The value is then within ||g||^2 / (2 l2) < 1e-22 of the minimum."""
    from scipy.optimize import minimize

    def fun(x):
        v, g, H = 0.5 * l2 * x @ x, l2 * x, l2 * np.eye(x.size)
        for A, b, w in blocks:
            f, d1, d2 = _logcosh(A @ x - b)
            v, g, H = v + w * f.mean(), g + w * A.T @ d1 / len(b), H + w * (A * d2[:, None]).T @ A / len(b)
        return v, g, H

    x = minimize(lambda x: fun(x)[0], x0, jac=lambda x: fun(x)[1], hess=lambda x: fun(x)[2],
                 method="trust-exact", options={"gtol": 1e-13, "maxiter": 500}).x
    for _ in range(5):
        v, g, H = fun(x)
        if np.linalg.norm(g) <= 1e-13:
            break
        x = x - np.linalg.solve(H, g)
    v, g, _ = fun(x)
    assert np.linalg.norm(g) <= 1e-12, np.linalg.norm(g)
    return v, x


def test_user_datafit_problem_has_a_certified_optimum_that_scipy_confirms(userpkg):
    """The ground truth of the user's log-cosh problem (CVXPY from the datafit's own form, Newton
    polish) is certified, and F*, x* and every f_i* agree with scipy's Newton on the test's formulas;
    its constants come from the declared capabilities."""
    import validation
    from fedtheory.reporting.config import make_problem
    from fedtheory.components import capabilities
    p = make_problem({"factory": FACTORY, "n_clients": 3, "dim": 3, "shift": 0.5, "seed": 1})
    gt = validation.ground_truth(p, cache=False)
    assert gt.certified and gt.client_certified.all(), gt.summary()
    assert gt.info["stage1"] == "cvxpy" and gt.info["cvxpy_status"] == "optimal"
    A = [p.M[slice(*p.client_rows(i))] for i in range(p.n_clients)]
    b = [p.b[slice(*p.client_rows(i))] for i in range(p.n_clients)]
    f, x = _scipy_min([(a, t, 1.0 / p.n_clients) for a, t in zip(A, b)], 0.01, np.zeros(p.dim))
    assert abs(gt.f - f) <= 1e-9 * max(1.0, abs(f)), (gt.f, f)
    assert np.max(np.abs(gt.x - x)) <= 1e-7
    for i in range(p.n_clients):
        fi, _ = _scipy_min([(A[i], b[i], 1.0)], 0.01, np.zeros(p.dim))
        assert abs(gt.client_f[i] - fi) <= 1e-9 * max(1.0, abs(fi)), (i, gt.client_f[i], fi)
    caps = capabilities(p)
    assert caps["certified_smoothness"] and caps["bounded_slopes"] and caps["strongly_convex"]
    c = validation.constants(p, gt)
    M = np.vstack(A) / np.sqrt(p.n_clients * A[0].shape[0])     # curvature bound 1: L = lambda_max + l2
    assert abs(c.L - (np.linalg.norm(M, 2) ** 2 + 0.01)) <= 1e-12 * c.L and c.mu == 0.01


def test_user_datafit_passes_the_component_suite(userpkg):
    """NumPy, the numba backend (through the registry's fallback), torch and CVXPY agree on the user's
    datafit, alone and with a regularizer."""
    from fedtheory.components.suite import check_datafit, check_pair
    check_datafit(userpkg.logcosh.LogCosh)
    check_pair(userpkg.logcosh.LogCosh, "l1")


@pytest.mark.xdist_group("user-dask-cluster")      # one worker starts the module's cluster
def test_a_dask_worker_that_cannot_import_a_module_says_so(tmp_path, monkeypatch, dask_cluster, forget_user_modules):
    """A module the driver imported from a directory the workers do not search: the error said
    "No module named ... (the command line also searches the current directory)", as if the driver
    had failed, and pointed at the wrong machine."""
    from fedtheory import registry
    from fedtheory.reporting.sweep import sweep
    cluster, _ = dask_cluster
    (tmp_path / "only_on_the_driver_mod.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.import_modules(["only_on_the_driver_mod"])
    cfg = CFG.replace(f'algorithm = "{NAME}"', 'algorithm = "fedavg"')
    with pytest.raises(ImportError, match="on the Dask worker at .*make them importable on every worker"):
        sweep(cfg, tmp_path / "out", backend="dask", scheduler=cluster.scheduler_address, progress=False)
    monkeypatch.delitem(sys.modules, "only_on_the_driver_mod")


def test_dask_without_a_scheduler_starts_n_jobs_workers(tmp_path, monkeypatch):
    """``--backend dask`` without ``--scheduler`` ignored -j: its local cluster had one worker per CPU."""
    pytest.importorskip("distributed")
    from fedtheory.reporting import dask_sweep as ds
    from fedtheory.reporting import sweep as sw
    seen = []
    real = ds._connect

    def connect(address, n_jobs=None):
        client = real(address, n_jobs)
        client.wait_for_workers(1)
        seen.append(len(client.scheduler_info()["workers"]))
        return client

    monkeypatch.setattr(ds, "_connect", connect)
    cfg = CFG.replace(f'algorithm = "{NAME}"', 'algorithm = "fedavg"')
    df = sw.sweep(cfg, tmp_path / "out", n_jobs=1, backend="dask", progress=False)
    assert seen == [1] and df.run_id.nunique() == 2


def test_a_local_dask_cluster_takes_no_fixed_port(monkeypatch):
    """``--backend dask`` without a scheduler opened its dashboard on port 8787 ("Port 8787 is already
    in use" when another cluster, or a test, held it): the local cluster takes a free port."""
    pytest.importorskip("distributed")
    import socket
    import warnings

    from fedtheory.reporting.dask_sweep import _connect
    held = socket.socket()
    try:
        try:
            held.bind(("127.0.0.1", 8787))
            held.listen()
        except OSError:
            pass                                # held by another process already: the same situation
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            client = _connect(None, 1)
            client.close()
            client.cluster.close()
    finally:
        held.close()
    assert not [str(w.message) for w in caught if "already in use" in str(w.message)]
