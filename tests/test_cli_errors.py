"""The command line: one-line errors (exit 2, no traceback), Ctrl-C (130), describe, --quiet."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fedtheory.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
CFG = """\
[problem]
factory = "quadratic"
n_clients = 4
dim = 3

[run]
algorithm = "fedavg"
rounds = 3
eval_every = 1
"""


def _cli(*args, **env):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    return subprocess.run([sys.executable, "-m", "fedtheory", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "ok.toml").write_text(CFG)
    (d / "bad.toml").write_text(CFG.replace("rounds = 3", "rounds = -3"))
    (d / "a_file").write_text("not a directory")
    (d / "empty.parquet").write_bytes(b"")
    (d / "typo_factory.toml").write_text(CFG.replace('"quadratic"', '"quadratik"'))
    (d / "typo_key.toml").write_text(CFG.replace("rounds = 3", "rounds = 3\nlrr = 0.1"))
    (d / "typo_alg.toml").write_text(CFG.replace('"fedavg"', '"fedavgg"'))
    (d / "typo_table.toml").write_text(CFG.replace("[run]", "[rnu]"))
    (d / "typo_grid.toml").write_text(CFG + '\n[grid]\n"problem.heterogenity" = [0.1, 1.0]\n')
    (d / "typo_option.toml").write_text(CFG.replace("dim = 3", 'dim = 3\nhessian = "distinc"'))
    (d / "no_runs" / "runs").mkdir(parents=True)
    (d / "separable.toml").write_text('[problem]\nfactory = "digits"\nn_clients = 4\nl2 = 0.0\n\n'
                                      '[run]\nalgorithm = "fedavg"\nrounds = 3\nreference = true\n')
    assert main(["sweep", str(d / "ok.toml"), "--out", str(d / "res"), "-j", "1", "--quiet"]) == 0
    return d


# (arguments, a fragment the one-line message must hold); {d} is the fixture's directory
ERRORS = [
    (["sweep", "{d}/bad.toml", "--out", "{d}/o"], "bad.toml, line 8: [run] key 'rounds': expected an int"),
    (["run", "{d}/bad.toml"], "bad.toml, line 8: [run] key 'rounds'"),
    (["run", "{d}/missing.toml"], "missing.toml: no such configuration file"),
    (["sweep", "{d}/missing.toml", "--out", "{d}/o"], "missing.toml: no such configuration file"),
    (["run", "{d}"], "is a directory, not a configuration file"),
    (["sweep", "{d}/ok.toml", "--out", "{d}/a_file"], "--out {d}/a_file: is a file; a directory is expected"),
    (["sweep", "{d}/ok.toml", "--out", "{d}/a_file/sub"], "a_file is a file; a directory is expected"),
    (["run", "{d}/ok.toml", "--out", "{d}/a_file"], "--out {d}/a_file: is a file"),
    (["verify", "--quick", "--out", "{d}/a_file"], "--out {d}/a_file: is a file"),
    (["verify", "--theorem", "nope"], "unknown theorem 'nope'; registered theorems: "),
    (["describe", "nope"], "'nope' is neither an algorithm (ditto, "),
    (["plot", "{d}/res", "--y", "bad"], "--y bad: no such metric in "),
    (["plot", "{d}/res", "--out", "{d}/res"], "is a directory; a file name is expected"),
    (["plot", "{d}/res", "--out", "{d}/nodir/x.png"], "the directory {d}/nodir does not exist"),
    (["plot", "{d}/res", "--out", "{d}/x.xyz"], "unknown figure format '.xyz'"),
    (["plot", "{d}/nothing"], "no results table at"),
    (["plot", "{d}/empty.parquet"], "not a results table"),
    (["plot", "{d}/no_runs"], "no runs stored yet"),
    (["plot", "{d}/res", "--filter", "nope=1"], "--filter: Unknown parameter 'nope' in a filter"),
    (["plot", "{d}/res", "--filter", "algorithm"], "--filter: A filter must be written key=value"),
    (["plot", "{d}/res", "--filter", "algorithm=nope"], "--filter: No run matches the filters"),
    (["plot", "{d}/res", "--y", "valeu"], "Did you mean 'value'?"),
    (["plot", "{d}/res", "--y", "grad_maping_sq"], "Did you mean 'grad_mapping_sq'?"),
    (["plot", "{d}/res", "--filter", "algoritm=fedavg"], "Did you mean 'algorithm'?"),
    (["plot", "{d}/res", "--filter", "algorithm=fedavgg"], "For algorithm, did you mean 'fedavg'?"),
    (["run", "{d}/separable.toml"], "reference = true needs the problem's optimum: ground_truth: problem 'digits:0' "
                                    "has no minimiser"),
    (["sweep", "{d}/ok.toml"], "the following arguments are required: --out"),
    (["sweep", "{d}/ok.toml", "--out", "{d}/o", "-j", "two"], "argument -j/--jobs: expected a nonzero int (workers), at least -"),
    (["sweep", "{d}/ok.toml", "--out", "{d}/o", "-j", "two"], "CPUs: -1 all of them, -2 all but one); got 'two'"),
    (["sweep", "{d}/ok.toml", "--out", "{d}/o", "-j", "-1000"], "got '-1000'"),
    (["verify", "-j", "-1000"], "argument -j/--jobs: expected a nonzero int (workers), at least -"),
    (["sweep", "{d}/ok.toml", "--out", "{d}/o", "-j", "0"], "argument -j/--jobs: expected a nonzero int"),
    (["demo", "--rounds", "-5"], "The 'rounds' parameter of demo must be an int in the range [1, 2**63 - 1]. Got -5 instead."),
    (["bogus"], "invalid choice: 'bogus'"),
    (["swep", "{d}/ok.toml"], "invalid choice: 'swep' (choose from 'list', "),
    (["swep", "{d}/ok.toml"], "Did you mean 'sweep'?"),
    (["run", "{d}/ok.toml", "--outt", "{d}/o"], "unrecognized arguments: --outt {d}/o Did you mean '--out'"),
    (["describe", "scafold"], "Did you mean 'scaffold'? ("),   # what was imported: test_user_modules
    (["describe", "quadratik"], "Did you mean 'quadratic'?"),
    (["describe", "fedspeed.theorem_44"], "Did you mean 'fedspeed.theorem_4_4'?"),
    (["verify", "--theorem", "fedsps.theorm_3a"], "Did you mean 'fedsps.theorem_3a'"),
    (["verify", "--theorem", "fedsps.theorm_3a"], "--import MODULE"),
    (["run", "{d}/typo_factory.toml"], "got \"quadratik\". Did you mean 'quadratic'?"),
    (["run", "{d}/typo_key.toml"], "[run] key 'lrr': is neither an argument of fedtheory.run nor a hyperparameter"),
    (["run", "{d}/typo_key.toml"], "Did you mean 'lr'?"),
    (["run", "{d}/typo_alg.toml"], "got \"fedavgg\". Did you mean 'fedavg'"),
    (["sweep", "{d}/typo_grid.toml", "--out", "{d}/o"], "[grid] key 'problem.heterogenity': is not an argument of "
                                                       "problems factory 'quadratic'; expected one of "),
    (["sweep", "{d}/typo_grid.toml", "--out", "{d}/o"], ". Did you mean 'problem.heterogeneity'?"),
    (["run", "{d}/typo_option.toml"], "got \"distinc\". Did you mean 'distinct'?"),
    (["run", "{d}/typo_table.toml"], "'rnu': unknown table; expected [problem], [run] and optionally [grid] and "
                                     "import = [...]. Did you mean 'run'?"),
    (["run", "{d}/ok.toml", "--out", ""], "--out '': an empty path; a directory name is expected"),
    (["sweep", "{d}/ok.toml", "--out", ""], "--out '': an empty path; a directory name is expected"),
    (["verify", "--quick", "--out", ""], "--out '': an empty path"),
    (["plot", "{d}/res", "--out", ""], "--out '': an empty path; a file name is expected"),
    (["plot", "{d}/res", "--out", "{d}/a_file/x.png"], "a_file is a file; a directory is expected"),
    ([], "the following arguments are required: cmd"),
]


@pytest.mark.parametrize("argv,fragment", ERRORS, ids=[" ".join(a).replace("{d}/", "") or "(none)" for a, _ in ERRORS])
def test_usage_mistakes_exit_2_with_one_line(files, capsys, argv, fragment):
    argv = [a.format(d=files) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert fragment.format(d=files) in lines[0], lines[0]
    known = argv and argv[0] in ("list", "describe", "run", "sweep", "verify", "plot", "demo")
    assert lines[0].startswith(f"fedtheory {argv[0]}: error: " if known else "fedtheory: error: "), lines[0]
    assert "Traceback" not in err


# two in the default run (a mistake found by a command's own module, one found reading a configuration);
# every mistake's one line is checked in this process by test_usage_mistakes_exit_2_with_one_line
@pytest.mark.parametrize("argv", [["plot", "{d}/res", "--y", "bad"], ["sweep", "{d}/bad.toml", "--out", "{d}/o"],
                                  *(pytest.param(a, marks=pytest.mark.slow) for a in (
                                      ["describe", "nope"], ["run", "{d}/missing.toml"], ["plot", "{d}/empty.parquet"],
                                      ["sweep", "{d}/ok.toml", "--out", "{d}/a_file"]))])
def test_usage_mistakes_in_a_real_process_print_no_traceback(files, argv):
    r = _cli(*[a.format(d=files) for a in argv])
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("cmd,target,argv", [
    ("run", "fedtheory.reporting.run_commands.run_point", ["run", "{d}/ok.toml"]),
    ("verify", "fedtheory.reporting.theory_commands.verify_all", ["verify", "--quick", "--out", "{d}/v"]),
    ("plot", "fedtheory.reporting.plot_command.results_figure", ["plot", "{d}/res", "--out", "{d}/r.png"]),
    ("describe", "fedtheory.reporting.theory_commands.describe", ["describe", "fedavg"]),
    ("list", "fedtheory.reporting.theory_commands.algorithms", ["list"]),
    ("demo", "problems.libsvm", ["demo"]),
])
def test_ctrl_c_exits_130_with_one_line_for_every_command(files, capsys, monkeypatch, cmd, target, argv):
    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(target, interrupted)
    assert main([a.format(d=files) for a in argv]) == 130
    err = capsys.readouterr().err
    assert err.strip() == f"fedtheory {cmd}: interrupted (Ctrl-C)", err


def test_sigint_to_a_running_verify_exits_130_without_traceback(tmp_path):
    """A real SIGINT while ``verify`` runs its cases (the process says when the cases start, so
    the signal lands inside the command, not before it)."""
    # (a process started in the background by a non-interactive shell inherits SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler: restore it, as a terminal would have it)
    code = ("import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "import sys\nimport fedtheory.reporting.verification as v\nrun_cases = v.run_cases\n"
            "def announced(*a, **k):\n    print('ready', flush=True)\n    return run_cases(*a, **k)\n"
            "v.run_cases = announced\nfrom fedtheory.__main__ import main\n"
            f"sys.exit(main(['verify', '--quick', '--out', {str(tmp_path / 'v')!r}]))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip() == "fedtheory verify: interrupted (Ctrl-C)", err


def test_describe_three_kinds_in_utf8(capsys):
    assert main(["describe", "fedspeed"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fedspeed: algorithm") and "lam = 10.0" in out and "§" in out and "\\u00a7" not in out
    assert main(["describe", "libsvm"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("libsvm: problem factory (problems.libsvm)")
    assert "Federated logistic regression on a LIBSVM binary data set." in out
    assert "    name (required)" in out and "    n_clients = 10" in out and "    partition = 'iid'" in out
    assert main(["describe", "fedspeed.theorem_4_4"]) == 0
    out = capsys.readouterr().out
    assert "theorem (measures algorithm 'fedspeed')" in out and "statement: (1/T) sum" in out
    assert "printed: eq. (6)-(7) as printed; requires the stated conditions" in out
    assert "derived: " in out and "corrected (default): " in out
    assert "[stated] S1: rho <= 1/(sqrt(6) alpha L)" in out and "[hidden] H1 (hidden)" in out
    assert "[informational] H2 as printed" in out
    assert main(["describe", "fedspeed", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"kind": "algorithm"' in out and "§" in out and "\\u00a7" not in out


def test_describe_in_a_real_process_prints_utf8_under_an_ascii_locale():
    r = _cli("describe", "fedspeed", PYTHONIOENCODING="ascii", LC_ALL="C")
    assert r.returncode == 0, r.stderr
    assert "§" in r.stdout


def test_describe_dict_for_factories_and_theorems():
    import fedtheory as ft
    d = ft.describe("quadratic")
    assert d["kind"] == "problem factory" and d["parameters"]["n_clients"] == "required"
    assert d["parameters"]["hessian"] == "shared" and d["doc"].startswith("Federated quadratic")
    t = ft.describe("fedsps.theorem_3a")
    assert t["kind"] == "theorem" and t["conditions"] and t["conditions_case"]
    assert {c["role"] for c in t["conditions"]} <= {"stated", "hidden", "informational"}
    assert set(t["variants"]) >= {"printed"} and all("requires" in v for v in t["variants"].values())


def test_quiet_and_environment_switch_turn_bars_off(monkeypatch):
    from fedtheory import _progress
    monkeypatch.delenv("FEDTHEORY_QUIET", raising=False)
    assert _progress.enabled(True) and not _progress.enabled(False)
    assert _progress.enabled(None) == sys.stderr.isatty()
    monkeypatch.setenv("FEDTHEORY_QUIET", "1")
    assert not _progress.enabled(True)
    monkeypatch.setenv("FEDTHEORY_QUIET", "0")
    assert _progress.enabled(True)


def test_progress_bars_go_to_stderr_when_asked(tmp_path, capsys, monkeypatch):
    """Sweeps, ground truth and verify draw bars (stderr) when asked; --quiet silences them."""
    import problems
    from fedtheory.reporting.sweep import sweep
    from fedtheory.truth import ground_truth
    monkeypatch.delenv("FEDTHEORY_QUIET", raising=False)
    sweep(CFG, tmp_path / "s", n_jobs=1, progress=True)
    ground_truth(problems.quadratic(4, 3, seed=7), cache=False, progress=True)
    from fedtheory.reporting.verification import run_cases
    run_cases(quick=True, theorems=["fedsps.theorem_3a"], progress=True)
    captured = capsys.readouterr()
    assert "sweep: 100%" in captured.err and "ground truth of quadratic" in captured.err
    assert "verify" in captured.err and "fedsps.theorem_3a" in captured.err and captured.out == ""
    # on a terminal the sweep draws its bar, unless --quiet
    (tmp_path / "ok.toml").write_text(CFG)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main(["sweep", str(tmp_path / "ok.toml"), "--out", str(tmp_path / "t"), "-j", "1"]) == 0
    assert "sweep: 100%" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "ok.toml"), "--out", str(tmp_path / "q"), "-j", "1", "--quiet"]) == 0
    assert "sweep:" not in capsys.readouterr().err


def test_version_prints_the_package_version(capsys):
    import fedtheory
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"fedtheory {fedtheory.__version__}"
    res = _cli("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"fedtheory {fedtheory.__version__}"


def test_python_api_unknown_names_suggest_the_close_ones():
    import problems
    import validation

    import fedtheory as ft
    from fedtheory.components.catalog import get_datafit
    from fedtheory.exceptions import InvalidParameterError
    p = problems.quadratic(4, 3, seed=0)
    with pytest.raises(InvalidParameterError, match=r"Got 'fedavgg' instead\. Did you mean 'fedavg'"):
        ft.run(p, "fedavgg")
    with pytest.raises(InvalidParameterError, match=r"Unknown hyperparameter\(s\) \['lrr'\].*Did you mean 'lr'\?"):
        ft.run(p, "fedavg", lrr=0.1)
    with pytest.raises(ValueError, match=r"Got 'fedsps.theorm_3a' instead\. Did you mean 'fedsps.theorem_3a'"):
        validation.verify("fedsps.theorm_3a", p)
    with pytest.raises(InvalidParameterError, match=r"Did you mean 'scaffold'\?"):
        ft.describe("scafold")
    with pytest.raises(InvalidParameterError, match=r"Got 'logistc' instead\. Did you mean 'logistic'\?"):
        get_datafit("logistc")
    with pytest.raises(InvalidParameterError) as e:     # nothing close: no suggestion
        ft.run(p, "zzzzzz")
    assert "Did you mean" not in str(e.value)


DIVERGING = CFG.replace("rounds = 3\neval_every = 1", "rounds = 40\nlocal_steps = 5\nlr = {lr}")


# (F at an overflowing iterate is inf or nan depending on the order of the evaluation's operations, or
# still finite and grown past DIVERGENCE_GROWTH times its start)
GROWN = r"F\(x\) (is not finite \((nan|inf)\)|= \S+ has grown past 1e\+20 times its start F\(x\^0\) = \S+ \(max\(\|F\(x\^0\)\|, 1\) scales it\))"


@pytest.mark.parametrize("lr,where", [(5.0, rf"round 40: F\(x\) = \S+ has grown past 1e\+20 times its start"),
                                      (30.0, rf"round \d+: {GROWN}"),
                                      (1e100, r"round 1: client 0 produced a non-finite local iterate at local step \d of 5")])
def test_a_diverged_run_exits_3_with_round_client_and_a_checked_smaller_step(tmp_path, capsys, lr, where):
    """lr = 5 ended with status max_rounds and F = 8e298 (finite, no warning): an objective grown by
    hundreds of orders of magnitude has diverged. The step size the hint names was run and did not
    diverge (it proposed lr / 10 unchecked)."""
    import math
    import re

    import pandas as pd
    cfg = tmp_path / "div.toml"
    cfg.write_text(DIVERGING.format(lr=lr))
    assert main(["run", str(cfg), "--out", str(tmp_path / "res"), "--quiet"]) == 3
    out, err = capsys.readouterr()
    m = re.search(rf"fedtheory run: diverged: {where}.*; lr = (?P<lr>\S+) \(((?P<frac>\S+) x lr = \S+|1/L, L = "
                  r"(?P<L>\S+) the smoothness constant of F computed from the data)\) ran this configuration "
                  r"without diverging \(status max_rounds\) \(exit status 3\)$", err.strip())
    assert err.count("\n") == 1 and m, err
    if m["frac"] is not None:                           # a fraction of lr, or 1/L (said which)
        assert float(m["lr"]) == pytest.approx(lr * float(m["frac"]), rel=1e-2)
    else:
        assert lr == 1e100 and float(m["lr"]) == pytest.approx(1 / float(m["L"]), rel=1e-2)
    assert "status diverged" in out
    numbers = [float(x) for x in re.findall(r"-?\d+\.\d+(?:e[+-]\d+)?", out)]
    assert numbers and all(math.isfinite(x) and abs(x) < 1e7 for x in numbers), out   # nothing astronomically large
    df = pd.read_parquet(tmp_path / "res" / "results.parquet")
    assert set(df.status) == {"diverged"}               # the finite rows are stored
    import fedtheory as ft
    import problems
    p = problems.quadratic(4, 3)                        # the hint's step size, checked here too
    assert ft.run(p, "fedavg", rounds=40, local_steps=5, lr=float(m["lr"])).status == "max_rounds"


def test_a_diverged_table_says_what_it_left_out(tmp_path, capsys):
    cfg = tmp_path / "div.toml"                 # every round evaluated: rows while the run blows up
    cfg.write_text(DIVERGING.format(lr=30.0).replace("rounds = 40", "rounds = 40\neval_every = 1"))
    assert main(["run", str(cfg), "--quiet"]) == 3
    out = capsys.readouterr().out
    import re
    assert re.search(r"later evaluations left out: from round \d+ the squared gradient mapping norm exceeds 1e\+06 "
                     r"times", out), out


def test_an_output_directory_that_cannot_be_written_is_one_line(files, tmp_path, capsys):
    """A read-only directory (or, for root, who may write anywhere, /sys, where the kernel refuses
    new directories): the path and the reason, exit 2, before any work, and nothing left behind."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if _mkdir_works(ro / "x"):                            # root
            ro = Path("/sys")
            if not ro.is_dir() or _mkdir_works(ro / "fedtheory-test"):
                pytest.skip("no directory here refuses writes to this user")
        before = sorted(ro.iterdir())
        for argv in (["run", str(files / "ok.toml"), "--out", str(ro / "res")],
                     ["sweep", str(files / "ok.toml"), "--out", str(ro / "res" / "sub")],
                     ["verify", "--quick", "--out", str(ro / "rep")],
                     ["plot", str(files / "res"), "--out", str(ro / "a.png")]):
            assert main(argv + ["--quiet"]) == 2, argv
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and f"--out {ro}/" in err and "cannot write there" in err, err
            assert "Errno" not in err and "Traceback" not in err
        assert sorted(ro.iterdir()) == before
    finally:
        (tmp_path / "ro").chmod(0o755)


def _mkdir_works(path):
    try:
        path.mkdir()
    except OSError:
        return False
    path.rmdir()
    return True


@pytest.mark.parametrize("source, line", [
    ("import math\nraise RuntimeError('typo in my module')\n",
     "raised RuntimeError: typo in my module at {f}, line 2: raise RuntimeError('typo in my module')"),
    ("import math\ndef f(:\n    pass\n", "raised SyntaxError: invalid syntax (broken_user_mod.py, line 2) at {f}, line 2: def f(:")])
def test_a_user_module_that_raises_on_import_exits_2_in_one_line_naming_the_line(tmp_path, monkeypatch, capsys,
                                                                                   source, line):
    """``--import`` of a module that raises (a bug in the user's file) or does not parse: one error line
    naming the file and the line, exit 2 (an input error). It exited 1 (the status of a failed check),
    then printed a 21-line traceback before its one line."""
    (tmp_path / "broken_user_mod.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["list", "--import", "broken_user_mod"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.strip() == ("fedtheory list: error: importing broken_user_mod (--import) "
                           + line.format(f=tmp_path / "broken_user_mod.py"))
    sys.modules.pop("broken_user_mod", None)


def test_output_piped_into_a_reader_that_leaves_is_not_an_error():
    """``fedtheory list | head -c 10``: "error: [Errno 32] Broken pipe" and exit 2 (an input error)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for args in (["list"], ["describe", "fedspeed"]):
        proc = subprocess.Popen([sys.executable, "-m", "fedtheory", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        proc.stdout.read(10)
        proc.stdout.close()                     # the reader leaves before the output ends
        err = proc.stderr.read().decode()
        proc.wait(timeout=300)
        assert proc.returncode == 0 and "Broken pipe" not in err and "Traceback" not in err, (args, err)


@pytest.mark.parametrize("given, stem", [("./mymod.py", "mymod"), ("mymod.py", "mymod"), ("pkg/mod", "mod")])
def test_import_of_a_file_path_says_to_give_the_module_name(given, stem):
    """``--import ./mymod.py`` printed a traceback ("the 'package' argument is required to perform a
    relative import") and blamed the module; ``mymod.py`` ran mymod, then failed with "'mymod' is
    not a package"."""
    res = _cli("describe", "fedavg", "--import", given)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip() == (f"fedtheory describe: error: The '--import' parameter takes a module name, not a "
                                  f"file path: give {stem!r} (and run from its directory, or add it to PYTHONPATH). "
                                  f"Got {given!r}.")


def test_demo_without_ridge_is_refused_in_one_line():
    """``fedtheory demo --l2 0``: a9a without ridge has no minimiser; the ValueError of the ground truth
    came out as a traceback with exit 1 (a failed check)."""
    res = _cli("demo", "--l2", "0", "--rounds", "2")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == ("fedtheory demo: error: The 'l2' parameter of demo must be a float in the range "
                                  "(0, inf). Got 0.0 instead.")
