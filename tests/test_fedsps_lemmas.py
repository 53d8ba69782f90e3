"""FedSPS: the small-step proofs (Theorems 6(a), 6(b), 18) as lemmas on the theorems' own runs."""
import numpy as np
import pytest

import fedtheory as ft
import validation
from fedtheory.theory import CASES, SPECS, case
from fedtheory.theory import fedsps_theorem6 as fs6
from fedtheory.theory.fedsps_quantities import expectation

NEW = ("fedsps.step_27", "fedsps.lemma_17", "fedsps.step_36b", "fedsps.step_45_from_27", "fedsps.step_45")


def test_the_small_step_proofs_are_registered_in_order():
    assert validation.lemmas("fedsps.theorem_6b") == ["fedsps.step_27", "fedsps.lemma_17", "fedsps.step_36b"]
    assert validation.lemmas("fedsps.theorem_18") == ["fedsps.lemma_14", "fedsps.step_27", "fedsps.step_45_from_27",
                                                      "fedsps.step_45"]
    assert validation.lemmas("fedsps.theorem_6a")[-2:] == ["fedsps.step_27", "fedsps.lemma_17"]
    for name in NEW:
        assert "docs/papers/fedsps.md, §4.7" in SPECS[name].reference


@pytest.mark.parametrize("name", NEW)
def test_each_lemma_holds_on_its_conforming_cases(name):
    for c in CASES[name](True)[0]:
        p = c.build()
        for variant, ok in c.expect.items():
            v = validation.verify(name, p, variant=variant, **c.kwargs)
            assert v.verdict() in (("holds", "UNRESOLVED") if ok else ("VIOLATED",)), v.report()
            assert v.where is not None and {"round", "step"} <= set(v.where)


@pytest.mark.parametrize("theorem", ["fedsps.theorem_6b", "fedsps.theorem_18"])
def test_the_proof_runs_on_the_theorems_runs(theorem):
    c = case(theorem, 0)
    v = validation.verify(theorem, c.build(), lemmas=True, **c.kwargs)
    assert [lv.name for lv in v.lemmas] == validation.lemmas(theorem)
    for lv in v.lemmas:
        assert lv.runs[0] is v.runs[0], lv.name
        assert lv.verdict() in ("holds", "UNRESOLVED"), lv.report()
    assert v.first_failure is None


def test_theorem_6b_traces_without_changing_its_trajectory():
    c = case("fedsps.theorem_6b", 0)
    p = c.build()
    v = validation.verify("fedsps.theorem_6b", p, **c.kwargs)
    kw = dict(v.run_kwargs)
    assert kw["trace"] == ("local", "gammas") and "trace_rounds" not in kw       # small: every round
    untraced = ft.run(p, "fedsps", **dict(kw, trace=None))
    assert np.array_equal(untraced.x, v.runs[0].x) and len(v.runs[0].trace) == c.kwargs["rounds"]


def test_a_large_trace_of_theorem_6b_keeps_its_first_and_last_rounds(monkeypatch):
    monkeypatch.setattr(fs6, "TRACE_BUDGET_MB_6B", 0.02)          # about 50 rounds of this problem
    p = case("fedsps.theorem_6b", 0).build()
    v = validation.verify("fedsps.theorem_6b", p, rounds=400, local_steps=4, lemmas=True)
    traced = v.run_kwargs["trace_rounds"]
    assert traced[0] == 0 and traced[-1] == 399 and len(traced) < 400
    assert [rt.round for rt in v.runs[0].trace] == list(traced)
    untraced = ft.run(p, "fedsps", **dict(v.run_kwargs, trace=None, trace_rounds=None))
    assert np.array_equal(untraced.x, v.runs[0].x)
    for lv in v.lemmas:
        assert lv.runs[0] is v.runs[0] and lv.where["round"] in traced, lv.name
        assert "traced rounds" in lv.details["checked_on"] and lv.verdict() == "holds"


def test_lemma_17_is_checked_on_the_mean_over_the_seeds():
    c = CASES["fedsps.lemma_17"](True)[0][1]
    p = c.build()
    v = validation.verify("fedsps.lemma_17", p, **c.kwargs)
    assert v.verdict() == "holds" and set(v.where) == {"round", "step"} and v.details["seeds_averaged"] == 4
    # the measured value is the mean over the four runs of V_t at that step, from each run's trace
    r, k = v.where["round"], v.where["step"]
    V = [np.mean(np.sum((res.trace[r]["local"][:, k] - res.trace[r]["local"][:, k].mean(0)) ** 2, axis=1))
         for res in v.runs]
    assert len({res.x.tobytes() for res in v.runs}) == 4                 # four different runs
    assert np.isclose(v.measured, np.mean(V), rtol=1e-12)


def test_an_excess_of_a_mean_within_its_sampling_error_is_unresolved():
    import problems
    st = dict(problem=problems.quadratic(2, 2, noise=0.1, seed=0), batch_size=None)
    q = dict(V=np.zeros((3, 1, 2)), rounds=[0])
    lhs = np.array([[[0.0, 1.3]], [[0.0, 0.6]], [[0.0, 1.4]]])          # mean 1.1 against a bound of 1
    rhs, floor = np.ones_like(lhs), np.zeros_like(lhs)
    out = expectation(st, q, lhs, rhs, floor, "test")
    assert out["values"] == [pytest.approx(1.1)] and out["where"] == dict(round=0, step=1)
    assert "within 2 standard errors" in out["unresolved"]         # the engine's NOISE_SE
    far = expectation(st, q, lhs + 10.0, rhs, floor, "test")
    assert not far.get("unresolved")                                   # far outside: a violation
    one = expectation(st, dict(q, V=q["V"][:1]), lhs[:1], rhs[:1], floor[:1], "test")
    assert "one run of a random algorithm" in one["unresolved"]
    st["problem"] = problems.quadratic(2, 2, seed=0)                    # deterministic: exact comparison
    assert not expectation(st, q, lhs, rhs, floor, "test").get("unresolved")


def test_erratum_5_is_separated_at_the_step_from_27_to_45():
    (r,) = validation.errata(theorems="fedsps.theorem_18", tightness=False, progress=False)
    assert r["level"] == "fedsps.step_45_from_27" and r["separated"] and r["why_not"] == ""
    assert r["printed_verdict"] == "VIOLATED" and r["corrected_verdict"] == "holds"
    # the excess is the noise: k sigma^2 in (27)'s expectation against (45)'s sigma^2 per window
    assert r["printed_ratio"] > 1.2 and r["corrected_ratio"] < 1


def test_eq_45_itself_holds_as_printed_where_its_derivation_fails():
    """(45) is true about E V_t (the noise in the drift is a martingale): only the step shows the erratum."""
    c = case("fedsps.step_45", 0, quick=True)
    p = c.build()
    statement = validation.verify("fedsps.step_45", p, variant="printed", **c.kwargs)
    step = validation.verify("fedsps.step_45_from_27", p, variant="printed", **c.kwargs)
    assert statement.verdict() == "holds" and statement.ratio < 1 / 20
    assert step.verdict() == "VIOLATED" and step.where["step"] >= 2     # the window needs k >= 2 noisy steps


def test_the_steps_expectation_over_the_noise_is_the_mean_of_the_runs_own_draws():
    """The left side of the step from (27) to (45) takes E||grad F_i(xbar_j, xi)||^2 = (1/n) sum_i
    ||grad f_i(xbar_j)||^2 + sigma^2 given xbar_j; (27)'s right-hand side with the noise each client drew
    (from the trace) agrees with it within the sampling error of its mean over every seed and round."""
    from fedtheory.theory.fedsps_quantities import _window, rounds_of
    c = case("fedsps.step_45_from_27", 0, quick=True)
    p = c.build()
    v = validation.verify("fedsps.step_45_from_27", p, variant="printed", **c.kwargs)
    st = dict(SPECS["fedsps.step_45_from_27"].setup(p, **c.kwargs), problem=p)
    drawn = _window(rounds_of(st, {"main": v.runs}, grads=True)["GF2"])
    expected = _window(rounds_of(st, {"main": v.runs}, grads=True, drawn_noise=False)["GF2"] + st["sigma2"])
    for k in range(1, st["tau"]):
        a, e = drawn[..., k].ravel(), expected[..., k].ravel()
        se = np.std(a - e, ddof=1) / np.sqrt(a.size)
        assert abs(np.mean(a - e)) < 4 * se, (k, np.mean(a - e), se)
        assert np.mean(e) > st["sigma2"] * k                              # sigma^2 per step, not sigma^2/tau


@pytest.mark.parametrize("name", NEW)
def test_a_small_search_finds_no_counterexample(name):
    f = validation.falsify(name, budget=10, seed=0, progress=False)
    assert f.counterexample is None
