"""FedSpeed's proof steps (docs/papers/fedspeed.md, §4.9): checked on Theorem 4.4's own runs."""
import math

import numpy as np
import pytest

import fedtheory as ft
import validation
from fedtheory.theory import SPECS, case
from fedtheory.theory.fedspeed import spec_problem

STEPS = ("fedspeed.step_R2", "fedspeed.step_descent")
THEOREM = "fedspeed.theorem_4_4"


def test_the_proof_is_registered_in_order():
    assert validation.lemmas(THEOREM) == list(STEPS)


@pytest.mark.parametrize("name", STEPS)
def test_each_step_holds_on_its_conforming_cases(name):
    from fedtheory.theory import CASES
    for c in CASES[name](True)[0]:
        if c.kind != "conforming":
            continue
        v = validation.verify(name, c.build(), **c.kwargs)
        assert v.verdict() in ("holds", "UNRESOLVED"), v.report()
        assert v.where is not None and "round" in v.where


def _exact_params(shift):
    eta = 0.5 / (32 * math.sqrt(12))
    p, C = spec_problem(10, 1.0, 0.0)
    return p, dict(rounds=30, local_steps=4, lr=eta, lam=eta / 0.6, alpha=0.5, rho=0.5 / (math.sqrt(6) * 0.5),
                   x0=C.mean(0) + shift, seeds=1)


def test_lemmas_true_reuses_the_runs_on_exact_gradients():
    p, kw = _exact_params(1.0)
    v = validation.verify(THEOREM, p, lemmas=True, **kw)
    assert [lv.name for lv in v.lemmas] == list(STEPS)
    for lv in v.lemmas:
        assert lv.runs[0] is v.runs[0], lv.name
        assert lv.verdict() in ("holds", "UNRESOLVED"), lv.report()
    assert v.first_failure is None
    assert len(v.runs[0].trace) == kw["rounds"]                    # every round traced
    kw0 = {k: x for k, x in v.run_kwargs.items() if k not in ("trace", "trace_rounds")}
    assert np.array_equal(ft.run(p, v.algorithm, **kw0).x, v.runs[0].x)


def test_lemmas_true_on_the_theorems_noisy_case():
    c = case(THEOREM, 0)
    v = validation.verify(THEOREM, c.build(), lemmas=True, **dict(c.kwargs, rounds=200, seeds=1))
    assert v.first_failure is None
    for lv in v.lemmas:
        assert lv.runs[0] is v.runs[0]
        assert not lv.applicable and "exact gradients" in lv.reason


def test_erratum_e2_is_separated_at_the_per_round_inequality():
    c = case("fedspeed.step_descent", 0)
    p = c.build()
    printed = validation.verify("fedspeed.step_descent", p, variant="printed", **c.kwargs)
    derived = validation.verify("fedspeed.step_descent", p, variant="derived",
                                measurement=printed.details["measurement"], **c.kwargs)
    assert all(x.ok for x in printed.conditions if x.role != "informational")
    assert printed.verdict() == "VIOLATED" and printed.ratio > 1.3 and printed.where == {"round": 1}
    assert derived.verdict() == "holds" and derived.ratio < 0.1
    e = next(x for x in SPECS[THEOREM].errata if x.label == "E1, E2")
    assert e.level == "fedspeed.step_descent" and e.why_not == ""


def test_step_r2_is_the_identity_of_eq_13():
    p, kw = _exact_params(1.0)
    v = validation.verify("fedspeed.step_R2", p, **kw)
    # an identity: equal to rounding (UNRESOLVED where rounding puts the left side above), never VIOLATED
    assert v.verdict() in ("holds", "UNRESOLVED") and v.ratio == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("name", STEPS)
def test_a_small_search_finds_no_counterexample(name):
    f = validation.falsify(name, budget=4, seed=0, progress=False)
    assert f.counterexample is None, f.report()
    assert f.skipped == 0
