"""Every parameter checked the same way (fedtheory._argcheck.check_param), and no configuration
setting silently dropped (fedtheory.reporting.config).

Messages name the parameter, the caller, the accepted range and the value received; numbers are
taken as users write them (Python ints of any size, numpy scalars), booleans never as numbers.
"""
import numpy as np
import pytest

import fedtheory as ft
import problems
from fedtheory.reporting.config import ConfigError, load
from fedtheory.exceptions import InvalidParameterError
from fedtheory.runs.runner import check_arguments


@pytest.fixture(scope="module")
def quad():
    return problems.quadratic(4, 3, seed=0)


def _message(param, what, got):
    return f"The '{param}' parameter of run must be {what}. Got {got} instead."


# ----------------------------------------------------------------------------- numbers

@pytest.mark.parametrize("big", [2 ** 63, 2 ** 64, 2 ** 64 + 1, 10 ** 30])
def test_python_ints_of_any_size_are_ints(quad, big):
    """Ints >= 2**64 failed with numpy's "ufunc 'isfinite' not supported"; they are ints, and a
    seed (NumPy's SeedSequence takes any size) runs with them."""
    check_arguments(quad, "fedavg", seed=big)
    res = ft.run(quad, "fedavg", rounds=2, seed=big, clients_per_round=2)
    assert np.isfinite(res.x).all()


@pytest.mark.parametrize("param", ["rounds", "eval_every", "local_steps", "clients_per_round", "batch_size"])
@pytest.mark.parametrize("big", [2 ** 63, 2 ** 64, 10 ** 30])
def test_integers_past_int64_are_refused_in_one_line(param, big):
    """``rounds=2**64`` ended in Numba's "OverflowError: int too big to convert": an integer that an
    int64 cannot hold is refused by the parameter check, in one line naming the parameter."""
    p = problems.least_squares([np.eye(3)[:2], np.eye(3)[1:]], [np.ones(2), np.ones(2)])
    kw = {"batch_replacement": True} if param == "batch_size" else {}
    with pytest.raises(InvalidParameterError) as e:
        ft.run(p, "fedavg", **dict({"rounds": 2, param: big}, **kw))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"The '{param}' parameter of run must be ")
    assert "an int in the range [" in msg
    assert f"Got {big} instead." in msg


@pytest.mark.parametrize("param, bad", [("seed", -(2 ** 64)), ("clients_per_round", 2 ** 64),
                                        ("local_steps", -(10 ** 30))])
def test_out_of_range_big_ints_are_named(quad, param, bad):
    with pytest.raises(InvalidParameterError) as e:
        check_arguments(quad, "fedavg", **{param: bad})
    assert str(e.value).startswith(f"The '{param}' parameter of run must be ") and f"Got {bad} instead." in str(e.value)


def test_numpy_scalars_are_the_numbers_they_hold(quad):
    """np.int64 / np.uint32 where an int is expected, np.float32 where a float is: the run is the one
    with the Python numbers (0.5 and 0.25 are exact in float32)."""
    kw = dict(rounds=4, local_steps=2, eval_every=2, tol=0.0)
    ref = ft.run(quad, "fedavg", lr=0.5, seed=3, clients_per_round=2, trace_max_mb=5.0, **kw)
    res = ft.run(quad, "fedavg", lr=np.float32(0.5), seed=np.int64(3), clients_per_round=np.uint32(2),
                 trace_max_mb=np.float32(5.0), **dict(kw, rounds=np.int64(4), local_steps=np.int32(2),
                                                      eval_every=np.int16(2), tol=np.float64(0.0)))
    cols = [c for c in ref.history.columns if c != "time"]
    assert res.history[cols].equals(ref.history[cols]) and np.array_equal(res.x, ref.x)
    ft.run(quad, "fedavg", rounds=2, trace=True, trace_max_mb=np.float32(5.0))      # was rejected with trace


@pytest.mark.parametrize("param, value, what", [
    ("rounds", True, "an int in the range [0, 2**63 - 1]"),
    ("seed", np.bool_(True), "an int in the range [0, inf)"),
    ("lr", True, "a float in the range (0, inf)"),
    ("eval_every", False, "None or an int in the range [1, 2**63 - 1]"),
])
def test_booleans_are_not_numbers(quad, param, value, what):
    with pytest.raises(InvalidParameterError) as e:
        check_arguments(quad, "fedavg", **{param: value})
    assert str(e.value) == _message(param, what, repr(value))


@pytest.mark.parametrize("trace", [None, True])
@pytest.mark.parametrize("bad", [float("inf"), -1.0, 0, float("nan"), "big", True])
def test_trace_max_mb_is_checked_with_or_without_trace(quad, trace, bad):
    """Without trace it was not checked at all; with it, inf passed although the message says (0, inf)."""
    with pytest.raises(InvalidParameterError) as e:
        check_arguments(quad, "fedavg", trace=trace, trace_max_mb=bad)
    assert str(e.value) == _message("trace_max_mb", "a float in the range (0, inf)", repr(bad))


@pytest.mark.parametrize("entry, shapes", [([0, [1]], "(), (1,)"), ([[0, 1], [2]], "(2,), (1,)")])
def test_ragged_client_schedule_entry_names_the_entry_and_its_shapes(quad, entry, shapes):
    """A ragged entry gave numpy's raw "inhomogeneous shape" ValueError."""
    with pytest.raises(InvalidParameterError) as e:
        ft.run(quad, "fedavg", rounds=3, client_schedule=[[0, 1, 2, 3], [0, 1, 2, 3], entry])
    assert str(e.value) == (f"The 'client_schedule' parameter of run must hold 1-d integer arrays of client "
                            f"indices. Got entry 2 = {entry!r}, a ragged sequence whose items have the shapes "
                            f"{shapes}, instead.")


# ----------------------------------------------------------------------------- tightness

TIGHT = dict(L=1.0, mu=0.1, local_steps=1, rounds=1, lr=0.3, n_clients=2)


@pytest.mark.parametrize("param, bad, what", [
    ("time_limit", 0, "a float in the range (0, inf)"),
    ("time_limit", -1.0, "a float in the range (0, inf)"),
    ("time_limit", float("inf"), "a float in the range (0, inf)"),
    ("rtol", -1e-3, "a float in the range [0, inf)"),
    ("rtol", float("nan"), "a float in the range [0, inf)"),
    ("max_nodes", 0, "an int in the range [1, 2**63 - 1]"),
    ("max_nodes", 2.5, "an int in the range [1, 2**63 - 1]"),
    ("max_nodes", True, "an int in the range [1, 2**63 - 1]"),
    ("threshold", "yes", "a bool"),
    ("threshold", 1, "a bool"),
])
def test_tightness_solver_options_are_checked(param, bad, what):
    """They were accepted (time_limit <= 0, rtol < 0, max_nodes <= 0, threshold='yes') and gave a loose
    bracket; they are checked before PEPit is needed."""
    from fedtheory.theory.tightness import tightness
    with pytest.raises(InvalidParameterError) as e:
        tightness("fedsps.theorem_3b", **TIGHT, **{param: bad})
    assert str(e.value) == f"The '{param}' parameter of tightness must be {what}. Got {bad!r} instead."


# ----------------------------------------------------------------------------- configurations

CFG = """\
[problem]
factory = "quadratic"
n_clients = 4
dim = 3

[run]
algorithm = "fedavg"
rounds = 3

[grid]
seed = [0, 1]
"""


def _error(text):
    with pytest.raises(ConfigError) as e:
        load(text)
    return str(e.value)


@pytest.mark.parametrize("second, spelled, line", [
    ("[grid.problem]\ndim = [5]", "`dim` in [grid.problem] (line 14)", 14),
    ('[grid]\nproblem.dim = [5]', "`problem.dim` in [grid] (line 14)", 14),
    ('[grid]\nproblem = {dim = [5]}', "`problem` in [grid] (line 14)", 14),
    ("[grid.'problem']\n'dim' = [5]", "`'dim'` in [grid.'problem'] (line 14)", 14),
])
def test_a_grid_axis_spelled_twice_is_an_error_naming_both(second, spelled, line):
    """ "problem.dim" = [3] and a [grid.problem] table with dim = [5] ran only dim 5, without a word."""
    text = CFG.replace("[grid]\nseed = [0, 1]\n", '[grid]\n"problem.dim" = [3]\n\n') + second + "\n"
    if second.startswith("[grid]"):                  # the same table: keys continue it
        text = CFG.replace("[grid]\nseed = [0, 1]\n", '[grid]\n"problem.dim" = [3]\n\n' + second[7:] + "\n")
        spelled = spelled.replace("(line 14)", "(line 13)")
    msg = _error(text)
    assert msg == (f"<config>: [grid] key 'problem.dim' is given twice, as `\"problem.dim\"` in [grid] (line 11) "
                   f"and as {spelled}; only one would be used: keep one"), msg


@pytest.mark.parametrize("table, key, value, grid_key", [
    ("run", "seed", "0", "seed"),
    ("run", "rounds", "3", "rounds"),
    ("problem", "dim", "3", '"problem.dim"'),
])
def test_a_setting_in_its_table_and_in_the_grid_is_an_error(table, key, value, grid_key):
    """The grid's list replaced the [run]/[problem] value without a word."""
    text = CFG.replace("[grid]\nseed = [0, 1]\n", f"[grid]\n{grid_key} = [1, 2]\n")
    if table == "run" and key == "seed":
        text = text.replace("rounds = 3\n", "rounds = 3\nseed = 0\n")
    line = {("run", "seed"): 9, ("run", "rounds"): 8, ("problem", "dim"): 4}[(table, key)]
    grid_line = 12 if key == "seed" else 11
    msg = _error(text)
    assert msg == (f"<config>: {table} argument {key!r} is set twice, as `{key}` in [{table}] (line {line}) "
                   f"({value}) and as `{grid_key}` in [grid] (line {grid_line}) (a grid axis); the grid's values "
                   f"would replace the [{table}] one: keep one"), msg


def test_a_value_listed_twice_in_an_axis_is_an_error():
    msg = _error(CFG.replace("seed = [0, 1]", "seed = [0, 1, 0]"))
    assert msg == ("<config>, line 11: [grid] key 'seed': value 0 is listed twice (its grid points would run "
                   "once): list each value once"), msg
    # an int and a float of one value are one run (they ran it twice, under two run ids)
    msg = _error(CFG.replace("seed = [0, 1]", 'lr = [1, 1.0]'))
    assert msg.startswith("<config>, line 11: [grid] key 'lr': value 1.0 is listed twice"), msg


@pytest.mark.parametrize("where, text_of, message", [
    ("run", lambda big: CFG.replace("rounds = 3", f"rounds = 3\nseed = {big}").replace("seed = [0, 1]", "lr = [0.1]"),
     "<config>, line 9: [run] key 'seed': expected an integer in TOML's 64-bit range"),
    ("grid", lambda big: CFG.replace("seed = [0, 1]", f"eval_every = [1, {big}]"),
     "<config>, line 11: [grid] key 'eval_every' (grid value {big}): expected integers in TOML's 64-bit range"),
    ("problem", lambda big: CFG.replace("dim = 3", f"dim = 3\nseed = {big}"),
     "<config>, line 5: [problem] key 'seed': expected an integer in TOML's 64-bit range"),
])
def test_toml_integers_beyond_64_bits_name_the_key(where, text_of, message):
    """TOML integers are 64-bit: a larger one failed with numpy's "ufunc 'isfinite'" and no key."""
    big = 2 ** 64
    msg = _error(text_of(big))
    assert msg.startswith(message.format(big=big)) and msg.endswith(f"; got {big}"), msg


def test_toml_values_of_the_wrong_kind_name_the_key():
    assert _error(CFG.replace("rounds = 3", "rounds = true")) == (
        "<config>, line 8: [run] key 'rounds': expected an int in the range [0, 2**63 - 1] (argument of "
        "fedtheory.run); got true")
    assert _error(CFG.replace("rounds = 3", "rounds = 3\ntrace_max_mb = inf")) == (
        "<config>, line 9: [run] key 'trace_max_mb': expected a float in the range (0, inf) (argument of "
        "fedtheory.run); got inf")


def test_large_grids_report_their_size_and_progress(monkeypatch, capsys):
    """From LARGE_GRID points on, listing and checking show a bar with the grid's size (here
    lowered to 4 to keep the test fast; a 1e6-point grid takes minutes to check)."""
    import fedtheory.reporting.config as config
    text = CFG.replace("seed = [0, 1]", "seed = [0, 1, 2, 3]\nlr = [0.1, 0.2]")
    cfg = load(text, check=False)
    assert cfg.size() == 8 and len(cfg.points()) == 8
    monkeypatch.setattr(config, "LARGE_GRID", 4)
    load(text, progress=True)
    err = capsys.readouterr().err
    assert "listing 8 grid points" in err and "checking 8 grid points" in err and "0/8 [" in err
    load(text, progress=False)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(config, "LARGE_GRID", 9)
    load(text, progress=True)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("param, bad, what", [("time_limit", -1.0, "a float in the range (0, inf)"),
                                              ("rel_tol", 0.0, "a float in the range (0, inf)")])
def test_lr_threshold_options_are_checked(param, bad, what):
    from fedtheory.theory.tightness import lr_threshold
    with pytest.raises(InvalidParameterError) as e:
        lr_threshold("fedsps.theorem_3b", L=1.0, mu=0.1, local_steps=1, **{param: bad})
    assert str(e.value) == f"The '{param}' parameter of lr_threshold must be {what}. Got {bad!r} instead."


def test_numpy_integer_scalars_compile_nothing_new(quad):
    """np.uint32 clients_per_round, np.int16 eval_every and np.uint64 rounds were passed on as such:
    each compiled FedAvg's rounds anew for its type (3-4 s each)."""
    from fedtheory._kernels.drivers import driver
    kw = dict(local_steps=2, lr=0.5, seed=3)
    ft.run(quad, "fedavg", rounds=4, clients_per_round=2, eval_every=2, **kw)
    seg = driver("fedtheory.algorithms.fedavg").segment
    before = list(seg.signatures)
    ft.run(quad, "fedavg", rounds=np.uint64(4), clients_per_round=np.uint32(2), eval_every=np.int16(2),
           **dict(kw, seed=np.int64(3), local_steps=np.int8(2)))
    assert list(seg.signatures) == before
