"""Haddadpour & Mahdavi: the lemmas and proof steps of Theorems 4.1-4.7, checked on the theorems' own runs."""
import numpy as np
import pytest

import validation
from fedtheory.theory import CASES, SPECS, case

THEOREMS = ("localdescent.theorem_4_1", "localdescent.theorem_4_2", "localdescent.theorem_4_4",
            "localdescent.theorem_4_7")
PROOFS = {"localdescent.theorem_4_1": ["localdescent.step_35", "localdescent.lemma_a5", "localdescent.lemma_a4"],
          "localdescent.theorem_4_2": ["localdescent.step_48", "localdescent.lemma_b6"],
          "localdescent.theorem_4_4": ["localdescent.step_65", "localdescent.step_165"],
          "localdescent.theorem_4_7": ["localdescent.step_79", "localdescent.step_87"]}
LEMMAS = [n for t in THEOREMS for n in PROOFS[t]]


def test_each_proof_names_its_lemmas_in_order():
    for t in THEOREMS:
        assert validation.lemmas(t) == PROOFS[t]


@pytest.mark.parametrize("name", LEMMAS)
def test_each_lemma_holds_on_its_conforming_cases(name):
    for c in CASES[name](True)[0]:
        if c.kind != "conforming":
            continue
        v = validation.verify(name, c.build(), **c.kwargs)
        assert v.verdict() in ("holds", "UNRESOLVED"), v.report()
        assert v.where is not None and "round" in v.where


@pytest.mark.parametrize("theorem", THEOREMS)
def test_the_proof_is_checked_on_the_theorems_runs(theorem):
    for i, c in enumerate(CASES[theorem](True)[0]):
        if c.kind != "conforming":
            continue
        v = validation.verify(theorem, c.build(), lemmas=True, **c.kwargs)
        assert [lv.name for lv in v.lemmas] == PROOFS[theorem]
        assert v.first_failure is None, (theorem, i)
        for lv in v.lemmas:
            assert lv.verdict() in ("holds", "UNRESOLVED", "NOT APPLICABLE"), lv.report()
            if lv.runs:
                assert lv.runs[0] is v.runs[0], lv.name          # the theorem's run, not a second one
        # the pathwise descent step applies to every run, sampled or not, noisy or not
        assert v.lemmas[0].verdict() in ("holds", "UNRESOLVED")


def test_lemma_a4_is_checked_pathwise_under_full_participation_only():
    c = case("localdescent.theorem_4_1", 0)
    assert c.kwargs["clients_per_round"] is not None
    v = validation.verify("localdescent.lemma_a4", c.build(), **c.kwargs)
    assert v.verdict() == "NOT APPLICABLE" and "draw" in v.reason
    c = case("localdescent.lemma_a4", 0)
    assert validation.verify("localdescent.lemma_a4", c.build(), **c.kwargs).verdict() == "holds"


def _separated(lemma):
    c = next(c for c in CASES[lemma](True)[0] if c.expect.get("printed") is False)
    p = c.build()
    printed = validation.verify(lemma, p, variant="printed", **c.kwargs)
    corrected = validation.verify(lemma, p, variant="corrected", **c.kwargs)
    return printed, corrected


@pytest.mark.parametrize("lemma, label", [("localdescent.step_165", "§4.3"), ("localdescent.step_87", "§4.4")])
def test_the_errata_are_separated_at_their_step(lemma, label):
    printed, corrected = _separated(lemma)
    assert printed.verdict() == "VIOLATED" and printed.ratio > 1 and printed.where is not None
    assert corrected.verdict() == "holds" and corrected.ratio <= 1 and corrected.where is not None
    (e,) = [e for t in THEOREMS for e in SPECS[t].errata if e.label == label]
    assert e.level == lemma and not e.why_not


def test_lemma_a5_fails_under_the_printed_condition_and_the_correction_rejects_the_case():
    printed, corrected = _separated("localdescent.lemma_a5")
    assert printed.verdict() == "VIOLATED" and round(printed.measured, 2) == 2.42   # (19) holds, (43) = 2.42 > 1
    assert all(c.ok for c in printed.conditions if c.role == "stated")
    assert corrected.verdict() == "NOT APPLICABLE" and "(46)" in corrected.reason
    (e,) = SPECS["localdescent.theorem_4_1"].errata
    assert e.level == "localdescent.lemma_a5" and "condition" in e.why_not


def test_the_separations_measure_what_the_documentation_says():
    printed, corrected = _separated("localdescent.step_87")
    assert np.isclose(printed.ratio, np.sqrt(8)) and np.isclose(corrected.ratio, 1.0)


def test_lemma_b6_fails_on_the_counterexample_and_the_correction_rejects_it():
    printed, corrected = _separated("localdescent.lemma_b6")
    assert printed.verdict() == "VIOLATED" and printed.ratio > 1e5 and printed.where == {"round": 0}
    assert corrected.verdict() == "NOT APPLICABLE" and corrected.reason.startswith("fails Lemma B.6")
    (e,) = SPECS["localdescent.theorem_4_2"].errata
    assert e.level == "localdescent.lemma_b6" and e.why_not


def test_the_descent_step_is_read_at_a_traced_step():
    c = case("localdescent.step_35", 1)
    p = c.build()
    v = validation.verify("localdescent.step_35", p, **c.kwargs)
    w = v.where
    rt = v.runs[w.get("seed", 0)].trace[w["round"]]
    wt = rt.weights / rt.weights.sum()
    x1 = np.einsum("s,sd->d", wt, rt["local"][:, w["step"] + 1])
    assert np.isclose(p.value(x1) - p.info["f_star"], v.measured, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", LEMMAS)
def test_a_short_search_finds_no_counterexample(name):
    f = validation.falsify(name, seed=0, budget=4, progress=False)
    assert f.counterexample is None, f.counterexample.report()
