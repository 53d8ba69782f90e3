"""FedDeper's lemmas and proof steps (docs/papers/feddeper.md, §4.8): checked on the theorems' own runs."""
import numpy as np
import pytest

import fedtheory as ft
import problems
import validation
from fedtheory.theory import SPECS, case

LEMMAS = ("feddeper.step_triangle", "feddeper.lemma_5", "feddeper.lemma_6", "feddeper.step_telescope")


def test_the_proofs_are_registered_in_order():
    assert validation.lemmas("feddeper.theorem_1") == ["feddeper.lemma_5", "feddeper.lemma_6", "feddeper.step_telescope"]
    assert validation.lemmas("feddeper.theorem_2") == ["feddeper.step_triangle", "feddeper.lemma_5"]


@pytest.mark.parametrize("name", LEMMAS)
def test_each_lemma_holds_on_its_conforming_cases(name):
    from fedtheory.theory import CASES
    for k, c in enumerate(CASES[name](True)[0]):
        if c.kind != "conforming":
            continue
        v = validation.verify(name, c.build(), **c.kwargs)
        assert v.verdict() in ("holds", "UNRESOLVED"), v.report()
        assert v.where is not None and "round" in v.where


def _exact():
    return problems.quadratic(6, 3, L=1.0, mu=0.2, heterogeneity=1.0, seed=2)


@pytest.mark.parametrize("theorem", ["feddeper.theorem_1", "feddeper.theorem_2"])
def test_lemmas_true_reuses_the_runs_on_exact_gradients(theorem):
    v = validation.verify(theorem, _exact(), rounds=40, local_steps=4, lemmas=True, seeds=1)
    assert [lv.name for lv in v.lemmas] == validation.lemmas(theorem)
    for lv in v.lemmas:
        assert lv.runs[0] is v.runs[0], lv.name
        assert lv.verdict() == "holds", lv.report()
    assert v.first_failure is None


@pytest.mark.parametrize("theorem", ["feddeper.theorem_1", "feddeper.theorem_2"])
def test_lemmas_true_on_the_theorems_registered_cases(theorem):
    c = case(theorem, 0)
    v = validation.verify(theorem, c.build(), lemmas=True, **c.kwargs)
    assert v.first_failure is None
    for lv in v.lemmas:
        # with noise or partial participation the expectation steps say why they do not apply
        assert lv.verdict() in ("holds", "UNRESOLVED") or "its own expectation" in lv.reason
        if lv.name in ("feddeper.step_triangle", "feddeper.lemma_6", "feddeper.step_telescope"):
            assert lv.runs[0] is v.runs[0]


def test_the_trace_does_not_change_theorem_1s_run():
    p = _exact()
    v = validation.verify("feddeper.theorem_1", p, rounds=20, local_steps=5, seeds=1)
    assert v.run_kwargs["trace"] == "personal"          # traced where the proof steps apply
    kw = {k: x for k, x in v.run_kwargs.items() if k != "trace"}
    assert np.array_equal(ft.run(p, v.algorithm, **kw).x, v.runs[0].x)
    assert np.array_equal(ft.run(p, v.algorithm, **v.run_kwargs).x, v.runs[0].x)


def test_erratum_4_2_is_separated_at_the_telescoping_step():
    c = case("feddeper.step_telescope", 0)
    p = c.build()
    printed = validation.verify("feddeper.step_telescope", p, variant="printed", **c.kwargs)
    corrected = validation.verify("feddeper.step_telescope", p, variant="corrected",
                                  measurement=printed.details["measurement"], **c.kwargs)
    assert all(x.ok for x in printed.conditions)
    assert printed.verdict() == "VIOLATED" and 1 < printed.ratio < 1 + 1e-6
    assert printed.measured - printed.bound > 1e4 * printed.floor            # far above the rounding
    assert corrected.verdict() == "holds" and corrected.ratio <= 1
    assert printed.where == {"round": 1499}
    # the theorem itself holds on this case (its other terms absorb the dropped one)
    assert validation.verify("feddeper.theorem_1", p, variant="printed", **c.kwargs).verdict() == "holds"


def test_the_errata_row_compares_at_the_step():
    e = next(x for x in SPECS["feddeper.theorem_1"].errata if x.label == "§4.2")
    assert e.level == "feddeper.step_telescope" and e.why_not == ""
    assert {"printed", e.variant} <= set(SPECS[e.level].variants)


@pytest.mark.parametrize("name", LEMMAS)
def test_a_small_search_finds_no_counterexample(name):
    f = validation.falsify(name, budget=4, seed=0, progress=False)
    assert f.counterexample is None, f.report()
    assert f.skipped == 0
