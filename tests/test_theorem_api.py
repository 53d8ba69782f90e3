"""The public theorem API with a user's theorem and a user's algorithm (``tests/userpkg``): a spec run
against another registered algorithm (``validation.verify(..., algorithm=)``), rate studies of a
geometric rate, ``describe`` of a theorem, and an algorithm's own scalars in the history."""
import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fedtheory as ft
import problems
import validation
from fedtheory.exceptions import InvalidParameterError
from fedtheory.theory import Condition, RateStudy, TheoremSpec, Variant, fit_rate

USER_THEOREM = "userpkg.gd_contraction"
USER_ALG = "userpkg_heavyball"


@pytest.fixture
def userpkg_theory(forget_user_modules):
    """The user package and its theorem module imported in this process, forgotten afterwards."""
    from fedtheory import registry
    registry.import_modules(["userpkg.theory"])
    yield sys.modules["userpkg.theory"]


def _problem():
    return problems.quadratic(2, 3, mu=0.2, heterogeneity=1.0, seed=0)


# ---------------------------------------------------------------- verify(..., algorithm=)
def test_a_user_theorem_against_a_user_algorithm(userpkg_theory):
    p = _problem()
    own = validation.verify(USER_THEOREM, p, rounds=25, lr=0.5)
    assert own.algorithm == "fedavg" and own.verdict() == "holds"
    # beta = 0: the heavy ball is FedAvg (its declared reduction): the same measurement, the conditions evaluated
    hb0 = validation.verify(USER_THEOREM, p, algorithm=USER_ALG, rounds=25, lr=0.5, beta=0.0)
    assert hb0.algorithm == USER_ALG and hb0.run_kwargs["beta"] == 0.0 and hb0.verdict() == "holds"
    assert hb0.measured == pytest.approx(own.measured, rel=1e-9) and hb0.bound == own.bound
    assert [c.name for c in hb0.conditions] == ["eta <= 1/L"] and hb0.conditions[0].ok
    assert np.array_equal(ft.run(p, hb0.algorithm, **hb0.run_kwargs).x, hb0.runs[0].x)
    # a heavy-ball term: another trajectory, measured on the algorithm actually run
    hb = validation.verify(USER_THEOREM, p, algorithm=USER_ALG, rounds=25, lr=0.5, beta=0.6)
    assert hb.algorithm == USER_ALG and hb.run_kwargs["beta"] == 0.6
    assert abs(hb.measured - own.measured) > 1e-6 * own.measured
    assert hb.details["algorithm_substituted"]["own"] == {"beta": 0.6}
    # the stated condition is evaluated for the algorithm run too
    out = validation.verify(USER_THEOREM, p, algorithm=USER_ALG, rounds=25, lr=2.5, beta=0.0)
    assert out.verdict() == "NOT APPLICABLE" and "eta <= 1/L" in out.reason and out.algorithm == USER_ALG


def _server_lr_spec():
    """A spec of FedAvg whose condition reads FedAvg's own hyperparameter server_lr."""
    def setup(problem, rounds=10, lr=0.5, server_lr=1.0, seeds=1):
        return dict(T=rounds, lr=lr, server_lr=server_lr, seeds=seeds, L=problem.info["L"],
                    f_star=problem.info["f_star"])
    return TheoremSpec(
        name="test.server_lr", algorithm="fedavg", statement="f(x^T) - f* <= f(x^0) - f* for eta_g <= 1",
        setup=setup,
        run_kwargs=lambda st: dict(rounds=st["T"], local_steps=1, lr=st["lr"], server_lr=st["server_lr"],
                                   x0=np.ones(3)),
        measure=lambda st, runs: dict(values=[st["problem"].value(r.x) - st["f_star"] for r in runs["main"]]),
        conditions=lambda st, m: [Condition("eta_g <= 1", st["server_lr"], 1.0, st["server_lr"] <= 1.0),
                                  Condition("eta <= 1/L", st["lr"], 1 / st["L"], st["lr"] <= 1 / st["L"])],
        variants={"printed": Variant("as stated", lambda st, m: st["problem"].value(np.ones(3)) - st["f_star"])})


def test_conditions_on_the_algorithm_s_hyperparameters_are_reevaluated_or_not_applicable(userpkg_theory):
    from fedtheory.theory import check
    spec, p = _server_lr_spec(), _problem()
    # FedProx has a server_lr: the condition reads the value FedProx runs with
    v = check(spec, p, algorithm="fedprox", server_lr=1.5, mu=0.1)
    assert v.algorithm == "fedprox" and v.run_kwargs["server_lr"] == 1.5 and v.run_kwargs["mu"] == 0.1
    assert v.conditions[0].value == 1.5 and not v.conditions[0].ok and v.verdict() == "NOT APPLICABLE"
    assert check(spec, p, algorithm="fedprox", server_lr=0.5).verdict() == "holds"
    # the user's heavy ball has none: the theorem reads a hyperparameter the algorithm does not have
    w = check(spec, p, algorithm=USER_ALG, beta=0.2)
    assert w.verdict() == "NOT APPLICABLE" and w.algorithm == USER_ALG
    assert w.reason == ("the theorem reads hyperparameter 'server_lr' of 'fedavg' (its conditions, measurement or "
                        f"bound depend on it), which '{USER_ALG}' does not have")
    assert "server_lr" not in w.run_kwargs and w.run_kwargs["beta"] == 0.2 and len(w.runs) == 1


@pytest.mark.parametrize("reads", ["paper_name", "namespace", "dict_copy"])
def test_a_hyperparameter_the_bound_reads_under_another_name_or_through_a_copy_is_not_applicable(
        userpkg_theory, reads):
    """The setup key that feeds a dropped hyperparameter is hidden whatever its name (the paper's
    ``eta_g`` passed as ``server_lr=st["eta_g"]``), and a bound that copies the setup
    (``SimpleNamespace(**st)``, ``dict(st)``) cannot read it either: NOT APPLICABLE, naming it. Both
    gave a false VIOLATED before: the bound used eta_g = 2 while the algorithm run had no server step."""
    from types import SimpleNamespace

    from fedtheory.theory import check
    key = "eta_g" if reads == "paper_name" else "server_lr"

    def setup_paper(problem, rounds=10, lr=0.5, eta_g=1.0, seeds=1):
        return dict(T=rounds, lr=lr, eta_g=eta_g, seeds=seeds, L=problem.info["L"], f_star=problem.info["f_star"])

    def setup_named(problem, rounds=10, lr=0.5, server_lr=1.0, seeds=1):
        return dict(T=rounds, lr=lr, server_lr=server_lr, seeds=seeds, L=problem.info["L"],
                    f_star=problem.info["f_star"])
    setup = setup_paper if key == "eta_g" else setup_named

    def bound(st, m):
        g = {"paper_name": lambda: st["eta_g"], "namespace": lambda: SimpleNamespace(**st).server_lr,
             "dict_copy": lambda: dict(st)["server_lr"]}[reads]()
        return (st["problem"].value(np.ones(3)) - st["f_star"]) / g

    spec = TheoremSpec(
        name="test.server_lr_renamed", algorithm="fedavg", statement="f(x^T) - f* <= (f(x^0) - f*) / eta_g",
        setup=setup,
        run_kwargs=lambda st: dict(rounds=st["T"], local_steps=1, lr=st["lr"], server_lr=st[key], x0=np.ones(3)),
        measure=lambda st, runs: dict(values=[st["problem"].value(r.x) - st["f_star"] for r in runs["main"]]),
        conditions=lambda st, m: [Condition("eta <= 1/L", st["lr"], 1 / st["L"], st["lr"] <= 1 / st["L"])],
        variants={"printed": Variant("as stated", bound)})
    p = _problem()
    assert check(spec, p, **{key: 2.0}).verdict() == "holds"         # on FedAvg itself
    w = check(spec, p, algorithm=USER_ALG, beta=0.0, **{key: 2.0})
    assert w.verdict() == "NOT APPLICABLE" and w.algorithm == USER_ALG, w.report()
    assert f"the theorem reads {'hyperparameter ' if key == 'server_lr' else ''}'{key}'" in w.reason
    assert f"which '{USER_ALG}' does not have" in w.reason
    if key == "eta_g":
        assert "which sets hyperparameter(s) 'server_lr' of 'fedavg'" in w.reason
    assert w.details["algorithm_substituted"]["dropped_hyperparameters"] == {"server_lr": 2.0}


def test_a_run_argument_the_caller_overrides_is_what_the_conditions_read(userpkg_theory):
    """A theorem that sets server_lr = 1 itself (its setup does not take it): the caller's value for
    the algorithm run replaces it in the setup the conditions read."""
    from fedtheory.theory import check
    spec = _server_lr_spec()
    inner = spec.setup
    spec.setup = lambda problem, rounds=10, lr=0.5, seeds=1: inner(problem, rounds, lr, 1.0, seeds)
    p = _problem()
    assert check(spec, p, algorithm="fedprox").conditions[0].value == 1.0
    v = check(spec, p, algorithm="fedprox", server_lr=1.5)
    assert v.run_kwargs["server_lr"] == 1.5 and v.conditions[0].value == 1.5 and v.verdict() == "NOT APPLICABLE"
    assert v.details["server_lr"] == 1.5


def test_run_arguments_the_algorithm_rejects_make_it_not_applicable():
    # FedSpeed's bound reads the traces z, ghat, gbar, which FedAvg does not record
    p = problems.quadratic(2, 3, seed=0)
    w = validation.verify("fedspeed.theorem_4_4", p, algorithm="fedavg", rounds=5)
    assert w.verdict() == "NOT APPLICABLE" and w.algorithm == "fedavg"
    assert w.reason.startswith("the theorem's run arguments do not apply to 'fedavg': The 'trace' parameter of run")


def test_bad_algorithm_or_hyperparameter_names_the_parameter(userpkg_theory):
    p = _problem()
    with pytest.raises(InvalidParameterError, match=r"The 'algorithm' parameter of userpkg.gd_contraction must be"):
        validation.verify(USER_THEOREM, p, algorithm="no_such_alg")
    with pytest.raises(InvalidParameterError, match=r"'gamma' is neither a parameter of the theorem \(rounds, lr, "
                                                    r"seeds, x0\) nor a hyperparameter of 'userpkg_heavyball' \(beta\)"):
        validation.verify(USER_THEOREM, p, algorithm=USER_ALG, gamma=0.1)


# ---------------------------------------------------------------- rate studies
def test_fit_rate_recovers_known_rates_with_intervals():
    T = np.arange(2, 22, 2)
    f = fit_rate(T, 3.0 * 0.7 ** T, "geometric")
    assert f.form == "geometric" and f.rate == pytest.approx(0.7, rel=1e-10) and f.n == T.size
    noisy = 3.0 * 0.7 ** T * np.exp(np.random.default_rng(0).normal(0, 0.05, T.size))
    g = fit_rate(T, noisy, "geometric")
    assert g.lo < 0.7 < g.hi and g.hi - g.lo < 0.05
    h = fit_rate([10, 20, 40, 80], [1.0, 0.5, 0.25, 0.125])
    assert h.rate == pytest.approx(-1.0, rel=1e-12) and h.stderr == pytest.approx(0.0, abs=1e-12)
    bad = fit_rate([1, 2, 3], [1.0, 0.0, float("nan")], "geometric")       # one usable point: no fit
    assert bad.n == 1 and np.isnan(bad.rate)
    with pytest.raises(InvalidParameterError, match=r"The 'form' parameter of fit_rate must be a str among "):
        fit_rate(T, noisy, "exponential")


def test_rate_study_rejects_a_form_without_its_prediction():
    with pytest.raises(InvalidParameterError, match=r"'predicted_factor' parameter of RateStudy .* Got None"):
        RateStudy("x", _problem, [1, 2, 3], lambda T: {}, form="geometric")
    with pytest.raises(InvalidParameterError, match=r"'predicted_slope' parameter of RateStudy .* Got nan"):
        RateStudy("x", _problem, [1, 2, 3], lambda T: {})


def test_the_user_theorem_s_geometric_rate_study_in_verify(userpkg_theory):
    from fedtheory.reporting.verification import run_cases
    table, studies = run_cases(quick=True, theorems=[USER_THEOREM], progress=False)
    assert list(table.kind) == ["conforming", "conforming", "conforming", "rate"]     # the third: log-cosh
    assert table.verdict[:3].tolist() == ["holds (vacuous: bound > 1e3 x measured)", "holds", "holds"]
    rate = table.iloc[3]
    # gradient descent on a quadratic contracts the gap by (1 - mu eta)^2 per round: faster than 1 - mu eta
    assert rate.predicted_rate == pytest.approx(1 - 0.2 * 0.5)
    assert rate.fitted_rate < rate.predicted_rate and rate.verdict == "holds, contraction factor as predicted"
    lo, hi = (float(x) for x in rate.rate_ci.strip("[]").split(","))
    assert lo <= rate.fitted_rate <= hi
    assert studies[0]["form"] == "geometric" and studies[0]["fit"]["n"] == 5


def test_a_geometric_rate_slower_than_predicted_is_reported(userpkg_theory):
    from fedtheory.theory import CASES
    from fedtheory.reporting.verification import run_cases
    study = RateStudy("predicted too fast", _problem, [4, 8, 12, 16, 20], lambda T: dict(rounds=T, lr=0.5),
                      variants=("printed",), form="geometric", predicted_factor=0.5)
    CASES[USER_THEOREM] = lambda quick: ([], [study])
    table, _ = run_cases(quick=True, theorems=[USER_THEOREM], progress=False)
    assert table.verdict.tolist() == ["holds, contraction factor SLOWER than predicted"]
    assert table.predicted_rate.tolist() == [0.5] and table.fitted_rate[0] > 0.5


# ---------------------------------------------------------------- describe
def test_describe_lists_a_theorem_s_parameters_and_space(userpkg_theory):
    d = ft.describe(USER_THEOREM)
    assert d["parameters"] == {"rounds": 30, "lr": None, "seeds": 1, "x0": None}
    assert d["quantity"] == "f(x^T) - f*" and d["algorithm"] == "fedavg"
    assert [a["capability"] for a in d["assumptions"]] == ["smooth", "strongly_convex"]
    assert d["conforming_space"].startswith("One to four clients sharing the Hessian")
    assert list(d["variants"]) == ["printed"] and d["conditions"][0]["name"] == "eta <= 1/L"
    assert ft.describe("fedavg")["scalars"] == {}
    assert ft.describe(USER_ALG)["scalars"] == {"server_step": "||x^{t+1} - x^t||, the server's step of the round "
                                                               "(nan before the first)"}
    spec = ft.describe("feddeper.theorem_2", conditions=False)
    assert spec["parameters"]["mix"] == 0.5 and spec["conforming_space"]


# ---------------------------------------------------------------- an algorithm's own scalars
BACKENDS = ["numba", "python", pytest.param("torch", marks=pytest.mark.skipif(
    not __import__("importlib").util.find_spec("torch"), reason="torch is not installed"))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_algorithm_s_scalar_is_a_history_column_on_every_backend(userpkg_theory, backend):
    p = _problem()
    kw = dict(rounds=6, local_steps=2, lr=0.1, beta=0.5, eval_every=2, seed=0)
    ref = ft.run(p, USER_ALG, **kw)
    h = ft.run(p, USER_ALG, backend=backend, **kw).history
    assert h["round"].tolist() == [0, 2, 4, 6] and np.isnan(h.server_step[0])
    np.testing.assert_allclose(h.server_step[1:], ref.history.server_step[1:], rtol=1e-10, atol=0)
    # the value is the length of the server's step of the evaluated round
    it = ft.run(p, USER_ALG, backend=backend, record_iterates=True, **kw).iterates
    np.testing.assert_allclose(h.server_step[1:], np.linalg.norm(it[[2, 4, 6]] - it[[1, 3, 5]], axis=1),
                               rtol=1e-10, atol=0)


@pytest.mark.parametrize("backend", ["numba", "python"])
def test_fedsps_global_logs_its_global_step(backend):
    p = problems.quadratic(4, 3, mu=0.2, heterogeneity=1.0, seed=0)
    kw = dict(rounds=6, local_steps=2, eval_every=2, lower_bound=-10.0, gamma_b=50.0, seed=0)
    res = ft.run(p, "fedsps_global", backend=backend, **kw)
    h = res.history
    assert {"gamma_global", "gamma_a", "gamma_b_agg", "gamma_c"} <= set(h.columns)
    assert h.gamma_global.iloc[-1] == res.state["gamma"]          # aggregation 'a': the step of the next round
    np.testing.assert_allclose(h.gamma_global[1:], h.gamma_a[1:], rtol=1e-12, atol=0)
    assert 0 < h.gamma_global.iloc[-1] < 50.0 and np.isnan(h.gamma_c).all()
    ref = ft.run(p, "fedsps_global", **kw).history
    np.testing.assert_allclose(h.gamma_global, ref.gamma_global, rtol=1e-10, atol=0)


def test_a_declared_scalar_missing_from_the_state_is_an_error(userpkg_theory):
    import userpkg
    from fedtheory.registry import ALGORITHMS, register

    @register
    @dataclass(frozen=True)
    class Forgetful(userpkg.ServerHeavyBall):
        name: ClassVar[str] = "test_forgetful"
        scalars: ClassVar[dict] = {"momentum": "never set"}
    try:
        with pytest.raises(ValueError, match=r"Algorithm 'test_forgetful' declares the scalars \['momentum'\] .* "
                                             r"init must set each"):
            ft.run(_problem(), "test_forgetful", rounds=2, lr=0.1)
    finally:
        ALGORITHMS.pop("test_forgetful", None)


def test_rate_study_rows_judge_each_variant_on_its_own_checks():
    """A rate study's row of a variant is that variant's verdicts over its T: NOT APPLICABLE when the
    theorem does not apply (it was judged VIOLATED from the measurements), and a variant bounding
    another quantity (``Variant.values``) compared with its own measurement (the printed row showed
    the other variant's measurement and was VIOLATED); a ratio of a measurement <= 0 under a zero
    bound is 0 (it was inf, the falsifier's "worst case")."""
    from fedtheory.theory import CASES, SPECS, THEOREMS, Verification, register_cases
    from fedtheory.theory.engine import register_spec
    from fedtheory.theory.floors import gap_floor
    from fedtheory.reporting.verification import run_cases

    def setup(problem, rounds=30, lr=1.0, seeds=1):
        L, mu, xs = problem.info["L"], problem.info["mu"], problem.info["x_star"]
        x0 = xs + 1.0
        return dict(T=rounds, lr=lr, L=L, mu=mu, seeds=seeds, x0=x0, f_star=problem.info["f_star"],
                    f0=problem.value(x0) - problem.info["f_star"], d0=float(np.sum((x0 - xs) ** 2)))

    def dist(st, m):
        return [float(np.sum((r.x - st["problem"].info["x_star"]) ** 2)) for r in m["runs"]["main"]]

    name = "test.rate_rows"
    register_spec(TheoremSpec(
        name=name, algorithm="fedavg", statement="f(x^T) - f* <= (1 - mu eta)^T (f(x^0) - f*), eta <= 1/L",
        setup=setup, run_kwargs=lambda st: dict(rounds=st["T"], local_steps=1, lr=st["lr"], x0=st["x0"]),
        measure=lambda st, runs: {"values": [st["problem"].value(r.x) - st["f_star"] for r in runs["main"]]},
        conditions=lambda st, m: [Condition("eta <= 1/L", st["lr"], 1 / st["L"], st["lr"] <= 1 / st["L"])],
        variants={"printed": Variant("as stated", lambda st, m: (1 - st["mu"] * st["lr"]) ** st["T"] * st["f0"]),
                  "dist": Variant("distance", lambda st, m: (1 - st["mu"] * st["lr"]) ** st["T"] * st["d0"],
                                  values=dist, quantity="||x^T - x*||^2")},
        quantity="f(x^T) - f*", floor=lambda st, m: gap_floor(st["f_star"], st["f0"] + st["f_star"])))
    one_d = lambda: problems.quadratic(1, 1, L=0.1, mu=0.1, seed=0)       # noqa: E731
    two_d = lambda: problems.quadratic(1, 2, L=1.0, mu=0.1, seed=0)       # noqa: E731

    @register_cases(name)
    def cases(quick=False):
        return [], [RateStudy("outside", two_d, [2, 4, 6], lambda T: dict(rounds=T, lr=2.5), variants=("printed",),
                              form="geometric", predicted_factor=0.9),
                    RateStudy("two quantities", one_d, [5, 10, 15], lambda T: dict(rounds=T, lr=1.0),
                              variants=("printed", "dist"), form="geometric", predicted_factor=0.9)]
    try:
        table, studies = run_cases(quick=True, theorems=[name], progress=False)
        rows = {(r.case, r.variant): r for r in table.itertuples()}
        out = rows["outside", "printed"]
        assert out.verdict.startswith("NOT APPLICABLE: fails eta <= 1/L (T = 2, 4, 6)") and np.isnan(out.ratio)
        for variant in ("printed", "dist"):
            r = rows["two quantities", variant]
            v = validation.verify(name, one_d(), variant=variant, rounds=15, lr=1.0)
            assert r.verdict.startswith("holds") and v.verdict() == "holds"
            assert r.measured == v.measured and r.bound == v.bound and r.quantity == v.quantity
        assert rows["two quantities", "printed"].measured != rows["two quantities", "dist"].measured
    finally:
        for table_ in (SPECS, THEOREMS, CASES):
            table_.pop(name, None)
    zero = Verification("t", "printed", True, "", [], -2.8e-17, 0.0)
    assert Verification("t", "printed", True, "", [], -5.6e-17, -3.3e-17).ratio == 0.0
    assert zero.ratio == 0.0 and zero.verdict() == "holds"
    assert Verification("t", "printed", True, "", [], 1e-3, 0.0).ratio == float("inf")


def test_an_unknown_theorem_parameter_is_named_and_the_own_algorithm_takes_its_hyperparameters(userpkg_theory):
    """A misspelt theorem parameter is an InvalidParameterError naming the theorem's parameters (it
    was a raw TypeError from the setup), and naming the theorem's own algorithm accepts its
    hyperparameters as naming another algorithm does (server_lr reaches the run)."""
    from fedtheory.theory import check
    spec, p = _server_lr_spec(), _problem()
    inner = spec.setup
    spec.setup = lambda problem, rounds=10, lr=0.5, seeds=1: inner(problem, rounds, lr, 1.0, seeds)
    with pytest.raises(InvalidParameterError, match=r"'round' is not a parameter of the theorem \(rounds, lr, seeds\)"):
        check(spec, p, round=5)
    with pytest.raises(InvalidParameterError, match="goes with algorithm='fedavg'"):
        check(spec, p, server_lr=0.5)
    v = check(spec, p, algorithm="fedavg", server_lr=0.5)
    assert v.algorithm == "fedavg" and v.run_kwargs["server_lr"] == 0.5 and v.conditions[0].value == 0.5
    assert np.array_equal(ft.run(p, "fedavg", **v.run_kwargs).x, v.runs[0].x)


def test_a_bound_below_zero_by_rounding_is_compared_not_refused(userpkg_theory):
    """A bound that is negative by less than the measurement's floor (terms that cancel to rounding)
    is compared with the measurement (holds, or UNRESOLVED at rounding level), never NOT APPLICABLE
    with "a condition fails" while every condition holds; a bound below 0 by more stays refused."""
    from fedtheory.theory import check
    spec, p = _server_lr_spec(), _problem()
    for shift, applicable in ((-1e-17, True), (-1.0, False)):
        spec.variants["printed"] = Variant("shifted", lambda st, m, s=shift: s)
        spec.floor = lambda st, m: 1e-14
        spec.measure = lambda st, runs: dict(values=[0.0 * len(runs["main"])])      # at the optimum, say
        v = check(spec, p, rounds=2)
        assert v.applicable is applicable and all(c.ok for c in v.conditions), v.report()
        if applicable:
            assert v.verdict() in ("holds", "UNRESOLVED") and v.ratio in (0.0, float("inf"))


def test_verify_exits_1_on_a_violated_row_that_no_expectation_covers(tmp_path):
    """A rate study whose bound is false gives VIOLATED rows (no Case expectation covers a rate
    study): `fedtheory verify` exits 1, as for UNEXPECTED (it exited 0)."""
    from fedtheory.__main__ import main
    from fedtheory.theory import CASES, SPECS, THEOREMS, register_cases
    from fedtheory.theory.engine import register_spec
    from fedtheory.theory.floors import gap_floor

    def setup(problem, rounds=30, lr=1.0, seeds=1):
        x0 = problem.info["x_star"] + 1.0
        return dict(T=rounds, lr=lr, mu=problem.info["mu"], seeds=seeds, x0=x0, f_star=problem.info["f_star"],
                    f0=problem.value(x0) - problem.info["f_star"])

    name = "test.false_rate"
    register_spec(TheoremSpec(
        name=name, algorithm="fedavg", statement="a false rate: (1 - mu eta)^(3T) (f(x^0) - f*)",
        setup=setup, run_kwargs=lambda st: dict(rounds=st["T"], local_steps=1, lr=st["lr"], x0=st["x0"]),
        measure=lambda st, runs: {"values": [st["problem"].value(r.x) - st["f_star"] for r in runs["main"]]},
        conditions=lambda st, m: [],
        variants={"printed": Variant("false", lambda st, m: (1 - st["mu"] * st["lr"]) ** (3 * st["T"]) * st["f0"])},
        quantity="f(x^T) - f*", floor=lambda st, m: gap_floor(st["f_star"], st["f0"] + st["f_star"])))

    @register_cases(name)
    def cases(quick=False):
        return [], [RateStudy("false", lambda: problems.quadratic(1, 2, L=1.0, mu=0.1, seed=0), [20, 30, 40],
                              lambda T: dict(rounds=T, lr=1.0), variants=("printed",), form="geometric",
                              predicted_factor=0.9)]
    try:
        assert main(["verify", "--theorem", name, "--quick", "--out", str(tmp_path / "v"), "-j", "1", "-q"]) == 1
        assert "VIOLATED" in (tmp_path / "v" / "report.md").read_text()
    finally:
        for table_ in (SPECS, THEOREMS, CASES):
            table_.pop(name, None)


def test_a_violation_within_the_seeds_sampling_noise_is_unresolved():
    """An expectation bound compared with a mean over a few seeds: an excess within 2 standard errors
    is sampling noise, UNRESOLVED (the falsifier's shrinker slid to such a case, 2 seeds, excess
    1e-4 against a spread of 8e-4, and reported it as a counterexample); beyond it, VIOLATED; one
    seed (no spread known) is judged against the rounding floor only."""
    from fedtheory.theory import NOISE_SE, Verification
    noisy = Verification("t", "corrected", True, "", [], 0.002112, 0.002004, stderr=0.0008)
    assert noisy.verdict() == "UNRESOLVED" and "sampling noise" in noisy.unresolved_reason
    assert noisy.noise == NOISE_SE * 0.0008
    assert Verification("t", "corrected", True, "", [], 0.002112, 0.002004, stderr=1e-5).verdict() == "VIOLATED"
    assert Verification("t", "corrected", True, "", [], 0.002112, 0.002004).verdict() == "VIOLATED"
    assert Verification("t", "corrected", True, "", [], 0.002, 0.002004, stderr=0.0008).verdict() == "holds"


def test_rate_fit_gives_no_verdict_without_an_interval_and_ignores_rounding():
    """With two horizons above the floor the geometric fit has no interval, and `not (nan > p)` called a
    contraction of 0.99 'as predicted' against 0.5. Measurements below their floor entered the power
    fit (a slope ~0 from three rounding-level values: 'SLOWER than predicted')."""
    from types import SimpleNamespace as NS
    import problems
    from fedtheory.theory import RateStudy
    from fedtheory.reporting.verification import rate_fit
    build = lambda: problems.quadratic(1, 3, mu=0.2, seed=0)          # noqa: E731
    geo = RateStudy("geo", build, [5, 10, 15, 20], lambda T: dict(rounds=T), variants=("printed",),
                    form="geometric", predicted_factor=0.5)
    T = np.array(geo.Ts, float)
    meas = 0.99 ** T
    r = rate_fit(geo, meas, [NS(measured=m, floor=f) for m, f in zip(meas, [0, 0, 1, 1])])
    assert r["n"] == 2 and r["as_predicted"] is None
    r = rate_fit(geo, meas, [NS(measured=m, floor=0.0) for m in meas])       # resolved: slower, and said so
    assert r["as_predicted"] is False
    pw = RateStudy("pow", build, [10, 20, 40, 80, 160], lambda T: dict(rounds=T), -1.0, variants=("printed",))
    meas = np.array([1e-1, 5e-2, 2.1e-16, 1.9e-16, 2.0e-16])
    r = rate_fit(pw, meas, [NS(measured=m, floor=1e-15) for m in meas])
    assert r["n"] == 2 and r["rate"] == pytest.approx(-1.0, abs=1e-12) and r["as_predicted"] is True
    for Ts in ([10], [10, 20], [10, 10, 20], [0, 10, 20], "abc"):
        with pytest.raises(ft.InvalidParameterError, match="'Ts' parameter of RateStudy"):
            RateStudy("pow", build, Ts, lambda T: dict(rounds=T), -1.0)


_SNAP = {}


def _snap_spec():
    """A theorem whose measured value, bound, measurement floor and bound rounding are given as
    parameters (one cheap run of the registered FedAvg stands behind it)."""
    from fedtheory.theory import SPECS, Condition, TheoremSpec, Variant, register_spec
    name = "test.zero_to_rounding"
    if name not in SPECS:
        def setup(problem, m=0.0, b=0.0, own=0.0, delta=0.0):
            return dict(problem=problem, m=m, b=b, own=own, delta=delta, seeds=1)
        register_spec(TheoremSpec(
            name=name, algorithm="fedavg", statement="m <= b", setup=setup,
            run_kwargs=lambda st: dict(rounds=1, local_steps=1, lr=0.1),
            measure=lambda st, runs: {"values": [st["m"]]}, conditions=lambda st, m: [],
            variants={"printed": Variant("b", lambda st, m: st["b"])}, quantity="m",
            floor=lambda st, m: st["own"], rounding=lambda st, m: {("setup", "b"): st["delta"]}))
    return name


@settings(max_examples=60, deadline=None)
@given(m=st.floats(-1e-12, 1e-12), b=st.floats(-1e-12, 1e-12), own=st.sampled_from([0.0, 1e-28, 1e-16, 1e-13]),
       delta=st.sampled_from([0.0, 1e-16, 1e-13, 1e-12]))
def test_a_verdict_at_rounding_level_never_contradicts_the_floors(m, b, own, delta):
    """Zero to rounding: a bound within its own rounding (delta) of 0 is 0, a measurement within its own
    floor of 0 under it is 0. No verdict may contradict what the floors allow: "holds" needs
    m - own <= b + delta, VIOLATED needs m - own > b + delta. (A distance of 1e-13 was zeroed by the
    bound's rounding of 3e-13, and a bound of 8e-16 within a rounding of 1e-15 read as a violation.)"""
    from fedtheory.theory import SPECS, THEOREMS
    name = _snap_spec()
    try:
        v = validation.verify(name, problems.quadratic(2, 2, seed=0), m=m, b=b, own=own, delta=delta)
    finally:
        SPECS.pop(name, None), THEOREMS.pop(name, None)
    if not v.applicable:                                   # a bound below 0 beyond its floor
        assert b < 0
        return
    if v.verdict() == "holds":
        assert m - own <= b + delta + 1e-30, (v.measured, v.bound, v.floor)
    elif v.verdict() == "VIOLATED":
        assert m - own > b + delta, (v.measured, v.bound, v.floor)
    if (v.measured, v.bound) != (m, b):
        assert v.details["computed_measured_and_bound"] == (m, b)
