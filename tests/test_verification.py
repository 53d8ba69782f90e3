"""Verdict reports: what failed is named; a non-applicable case never reads VIOLATED; the engine keeps
the runs of the registered algorithm."""
import subprocess
import sys

import numpy as np
import pytest

import fedtheory as ft
import problems
import validation
from fedtheory.theory import CASES, THEOREMS, Condition, Verification
from fedtheory.reporting.verification import failing_conditions


def _na():
    conds = [Condition("S1: eta <= 1/L", 2.0, 1.0, False),
             Condition("H2 (hidden): drift", 0.5, 1.0, True, role="hidden"),
             Condition("H4 as printed", 3.0, 1.0, False, role="informational")]
    return Verification("x.theorem", "printed", False, "fails S1: eta <= 1/L", conds, 0.3, -5.0)


def test_not_applicable_report_names_failures_and_never_says_violated():
    v = _na()
    text = v.report()
    assert "NOT APPLICABLE" in text and "VIOLATED" not in text
    assert "fails S1: eta <= 1/L" in text.splitlines()[0]
    assert "[FAIL] (informational) H4 as printed" in text
    assert v.verdict() == "NOT APPLICABLE"
    assert v.failed_conditions == {"stated": ["S1: eta <= 1/L"], "informational": ["H4 as printed"]}


def test_condition_is_a_four_tuple_with_a_role():
    c = Condition("a", 1.0, 2.0, True, role="hidden")
    name, value, limit, ok = c
    assert (name, value, limit, ok) == ("a", 1.0, 2.0, True) and c.role == "hidden"
    assert Condition("b", 1.0, 0.0, False).role == "stated"


def test_table_lists_failing_conditions_with_roles():
    assert failing_conditions(_na().conditions) == "[stated] S1: eta <= 1/L; [info] H4 as printed"
    assert failing_conditions([Condition("a", 0.0, 1.0, True)]) == "-"


def test_run_cases_marks_not_applicable_rows(monkeypatch):
    """A case whose check is not applicable gets verdict NOT APPLICABLE, no bound and no ratio."""
    from fedtheory.reporting import verification
    from fedtheory.theory import Case

    def fake(problem, variant="printed", measurement=None, **kw):
        return _na()
    monkeypatch.setitem(THEOREMS, "x.theorem", fake)
    monkeypatch.setitem(CASES, "x.theorem", lambda quick: ([Case("c", "conforming", lambda: None, {},
                                                                  {"printed": True})], []))
    df, _ = verification.run_cases(theorems=["x.theorem"], progress=False)
    row = df.iloc[0]
    assert row.verdict.startswith("NOT APPLICABLE: fails S1")
    assert np.isnan(row.bound) and np.isnan(row.ratio)
    assert "[info] H4 as printed" in row.failing_conditions


def test_unknown_theorem_exits_2_lists_theorems_and_writes_nothing(tmp_path):
    out = tmp_path / "report"
    r = subprocess.run([sys.executable, "-m", "fedtheory", "verify", "--theorem", "nope", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "unknown theorem 'nope'" in r.stderr and "fedspeed.theorem_4_4" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def test_verification_keeps_the_runs_and_reproduces_them():
    A = np.diag([0.5, 0.7, 1.0, 0.6, 0.9])
    p = problems.explicit_quadratic(A, np.random.default_rng(1).normal(size=(3, 5)) @ A, noise=0.3)
    v = validation.verify("fedspeed.theorem_4_4", p, rounds=50, local_steps=2, seeds=2)
    assert v.algorithm == "fedspeed" and len(v.runs) == 2
    again = ft.run(p, v.algorithm, **v.run_kwargs)
    assert np.array_equal(again.x, v.runs[0].x)
    assert not np.array_equal(v.runs[0].x, v.runs[1].x)


@pytest.mark.parametrize("name", sorted(THEOREMS))
def test_every_theorem_is_a_spec_measured_through_run(name):
    """Each registered theorem is declared as a TheoremSpec (no private simulator)."""
    assert hasattr(THEOREMS[name], "spec"), f"{name} is not declared as a TheoremSpec"
    spec = THEOREMS[name].spec
    assert spec.algorithm in ft.algorithms()
    assert "printed" in spec.variants


def test_describe_covers_theorems_and_rejects_unknown_names():
    d = ft.describe("localdescent.theorem_4_1")
    assert d["kind"] == "theorem" and d["algorithm"] == "lfd"
    assert {"printed", "proof", "corrected"} <= set(d["variants"])
    assert d["variants"]["printed"]["requires"] == ["stated"]
    r = subprocess.run([sys.executable, "-m", "fedtheory", "describe", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "fedspeed.theorem_4_4" in r.stderr
    r = subprocess.run([sys.executable, "-m", "fedtheory", "describe", "fedspeed.theorem_4_4"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "\\u00a7" not in r.stdout


# ------------------------------------------------------------------ honest rows --
def _v(variant, measured, bound, conds=None, applicable=True, reason="", stderr=float("nan"), **kw):
    conds = conds if conds is not None else [Condition("S1", 0.0, 1.0, True)]
    return Verification("x.theorem", variant, applicable, reason, conds, measured, bound, stderr,
                        quantity="f(x^T) - f*", **kw)


def _rows(monkeypatch, by_variant, expect, kind="conforming", variants=None):
    from types import SimpleNamespace
    from fedtheory.reporting import verification
    from fedtheory.theory import SPECS, Case

    def fake(problem, variant="printed", measurement=None, **kw):
        return by_variant[variant]
    monkeypatch.setitem(THEOREMS, "x.theorem", fake)
    monkeypatch.setitem(SPECS, "x.theorem", SimpleNamespace(variants=dict.fromkeys(variants or by_variant)))
    monkeypatch.setitem(CASES, "x.theorem", lambda quick: ([Case("c", kind, lambda: None, {}, expect)], []))
    df, _ = verification.run_cases(theorems=["x.theorem"], progress=False)
    return df


def test_every_variant_has_a_row_even_when_the_case_expects_one(monkeypatch):
    fails = [Condition("(19) as printed", 2.0, 1.0, False), Condition("(43)", 0.5, 1.0, True, role="hidden")]
    df = _rows(monkeypatch, {"printed": _v("printed", 1.0, 2.0, fails, False, "fails (19) as printed"),
                             "corrected": _v("corrected", 1.0, 3.0, fails)}, {"corrected": True})
    assert list(df.variant) == ["printed", "corrected"]
    assert df.verdict[0] == "NOT APPLICABLE: fails (19) as printed"
    # a stated condition fails: neither row is called conforming
    assert set(df.kind) == {"beyond stated conditions"} and df.verdict[1] == "holds"


def test_rows_name_the_quantity_mark_vacuous_bounds_and_show_no_spread_for_one_seed(monkeypatch):
    df = _rows(monkeypatch, {"printed": _v("printed", 1.0, 2e3), "corrected": _v("corrected", 1.0, 10.0, stderr=0.1)},
               {"printed": True, "corrected": True})
    assert list(df.quantity) == ["f(x^T) - f*"] * 2 and list(df.kind) == ["conforming"] * 2
    assert df.verdict[0] == "holds (vacuous: bound > 1e3 x measured)" and df.verdict[1] == "holds"
    from fedtheory.reporting.verify_report import format_table
    lines = format_table(df).splitlines()
    assert "nan" not in lines[2] and "0.1" in lines[3]


def test_identical_printed_and_corrected_rows_are_shown_once_labelled_as_both(monkeypatch):
    df = _rows(monkeypatch, {"printed": _v("printed", 1.0, 2.0), "corrected": _v("corrected", 1.0, 2.0),
                             "proof": _v("proof", 1.0, 1.5)}, {"printed": True, "corrected": True})
    assert list(df.variant) == ["printed = corrected", "proof"]


def test_unresolved_rows_give_the_reason_and_never_a_violation(monkeypatch):
    df = _rows(monkeypatch, {"printed": _v("printed", 1e-30, 0.0, floor=1e-27),
                             "corrected": _v("corrected", 2.0, 1.0, unresolved="plateaus at rounding level")},
               {"printed": True, "corrected": True})
    assert df.verdict[0].startswith("UNRESOLVED: measured exceeds the bound by 1e-30, within the resolution floor")
    assert df.verdict[1] == "UNRESOLVED: plateaus at rounding level"


def test_verdicts_at_the_resolution_floor():
    assert _v("printed", 0.0, 0.0).verdict() == "holds"                  # a zero bound with a zero measurement
    assert _v("printed", 1e-30, 0.0, floor=1e-27).verdict() == "UNRESOLVED"
    assert _v("printed", 1e-20, 0.0, floor=1e-27).verdict() == "VIOLATED"
    v = _v("printed", 1.5, 1.0, stderr=float("nan"))
    assert "+-" not in v.report() and "measured f(x^T) - f* 1.5" in v.report()


def test_cases_in_worker_processes_give_the_table_of_one_process():
    """``run_cases(jobs=2)`` checks the theorems in forked workers; the table and the rate studies are
    those of one process, row for row and in the same order (every case is deterministic)."""
    import pandas as pd
    from fedtheory.reporting.verification import run_cases
    names = ["fedsps.theorem_3a", "localdescent.theorem_4_1", "feddeper.theorem_1"]
    names = [n for n in names if n in CASES] + [n for n in sorted(CASES) if n not in names][:1]
    one, s1 = run_cases(quick=True, theorems=names, progress=False)
    two, s2 = run_cases(quick=True, theorems=names, progress=False, jobs=2)
    assert len(one) >= len(names)
    pd.testing.assert_frame_equal(one, two)
    assert [(s["theorem"], s["label"], s["measured"]) for s in s1] == [(s["theorem"], s["label"], s["measured"])
                                                                       for s in s2]


def test_workers_get_the_theorems_of_one_algorithm_together():
    """``run_cases(jobs=...)`` hands each worker whole groups of theorems that run one algorithm (their
    rounds compile once, in one worker); a theorem without a spec is a group of its own."""
    from fedtheory.theory import SPECS
    from fedtheory.reporting.verification import _by_algorithm
    names = sorted(CASES) + ["x.no_spec"]
    groups = _by_algorithm(names)
    assert sorted(n for g in groups.values() for n in g) == sorted(names)
    for group, members in groups.items():
        assert {getattr(SPECS.get(n), "algorithm", None) or n for n in members} == {group}
    assert groups["x.no_spec"] == ["x.no_spec"]
    assert {"fedsps.theorem_3a", "fedsps.theorem_6a", "fedsps.theorem_18"} <= set(groups["fedsps"])


def test_a_failing_case_in_a_worker_stops_the_parallel_run(monkeypatch):
    """An error in one worker's case reaches the caller (and the other workers are stopped)."""
    from fedtheory.reporting import verification
    from fedtheory.theory import Case

    def broken(problem, variant="printed", measurement=None, **kw):
        raise RuntimeError("a broken theorem check")
    monkeypatch.setitem(THEOREMS, "x.broken", broken)
    monkeypatch.setitem(CASES, "x.broken", lambda quick: ([Case("c", "conforming", lambda: None, {},
                                                                {"printed": True})], []))
    with pytest.raises(RuntimeError, match="a broken theorem check"):
        verification.run_cases(theorems=["x.broken", "fedsps.theorem_3a"], progress=False, jobs=2)


@pytest.mark.parametrize("seed", [0, 6])
@pytest.mark.parametrize("name, kw", [
    ("fedspeed.theorem_4_4", dict(variant="printed")), ("feddeper.theorem_1", {}), ("feddeper.theorem_2", {}),
    ("localdescent.theorem_4_7", dict(trajectory=False, rounds=16)), ("fedsps.theorem_18", {})])
def test_a_run_started_at_the_optimum_gets_no_verdict_from_rounding(name, kw, seed):
    """Noise-free, x^0 = x*: both sides are 0 in exact arithmetic. The left-hand side measured ~1e-32
    (rounding of the gradients) against a bound of exactly 0 was VIOLATED (the default floor scales
    with the values compared, ~1e-46), and where f(x^0) - f* rounded to -5.6e-17 (seed 6) the bound
    came out negative and the case NOT APPLICABLE, "a condition fails", with every condition
    holding (FedSPS Theorem 18's Delta0 alike). The specs now declare the floor of their measurement and the rounding of the bound's
    inputs (f(x^0) - f*, F(z^1) - F*, squared gradient norms): rounding, not a verdict."""
    q = problems.quadratic(3, 3, L=1.0, mu=0.3, heterogeneity=0.0, seed=seed)
    xs = np.array(q.info["x_star"], dtype=float)
    v = validation.verify(name, q, **dict(dict(rounds=10, local_steps=2, seeds=1, x0=xs), **kw))
    assert v.verdict() in ("holds", "UNRESOLVED"), (v.verdict(), v.reason, v.measured, v.bound, v.floor)
    assert all(c.ok for c in v.conditions if c.role == "stated")
    assert v.floor < 1e-9                       # a rounding floor, not a licence: far below any real bound


def test_a_rate_study_draws_no_bound_of_a_variant_that_is_not_applicable(tmp_path):
    """FedSpeed's rate figure drew "bound: corrected" as an ordinary line while its row said NOT
    APPLICABLE (H2 fails): such a variant is left out of the figure, and its title says why."""
    from fedtheory.theory.verdicts import is_not_applicable
    from fedtheory.reporting.verification import run_cases
    from fedtheory.reporting.verify_report import write_report
    df, studies = run_cases(True, ["fedspeed.theorem_4_4"])
    rates = df[df.kind == "rate"]
    na = set(rates.variant[rates.verdict.map(is_not_applicable)])
    assert na                                                       # the finding's setting: corrected fails H2
    for s in studies:
        assert not na & set(s["bounds"]) and set(s["not_applicable"]) == na
    import matplotlib.pyplot as plt
    drawn = []
    orig = plt.Figure.savefig

    def spy(fig, *a, **k):
        drawn.append([ln.get_label() for ax in fig.axes for ln in ax.lines] + [ax.get_title() for ax in fig.axes]
                     + [t.get_text() for t in fig.texts])
        return orig(fig, *a, **k)
    plt.Figure.savefig = spy
    try:
        write_report(df, studies, tmp_path, True, 1.0)
    finally:
        plt.Figure.savefig = orig
    rate = [labels for labels in drawn if any("bound: printed" in t for t in labels)]
    assert rate and all(not any(t == "bound: corrected" for t in labels) for labels in rate)
    assert all(any("NOT APPLICABLE: corrected" in t.replace("\n", " ") for t in labels) for labels in rate)


_LD41 = dict(rounds=12, local_steps=4, seeds=3, x0=np.array([-0.449, 1.292, 0.694]), eta_rule="43")


@pytest.mark.parametrize("name, recipe, kw", [
    ("localdescent.theorem_4_1", dict(n=3, mu=0.243, heterogeneity=0.0, seed=35, hessian="distinct",
                                      shared_minimizer=True), dict(_LD41, clients_per_round=None)),
    ("localdescent.theorem_4_1", dict(n=3, mu=0.243, heterogeneity=0.0, seed=35, hessian="distinct",
                                      shared_minimizer=True), dict(_LD41, clients_per_round=2)),
    ("fedsps.theorem_18", dict(n=5, mu=0.194, heterogeneity=1.18, seed=357, hessian="shared"),
     dict(rounds=26, local_steps=1, c=1.0, gamma_b=0.0102, seeds=3, x0=np.array([-0.34, 2.02, -0.21])))])
def test_the_seeds_of_a_case_that_draws_nothing_run_once(monkeypatch, name, recipe, kw):
    """A case whose runs draw nothing from their seed (full participation, exact gradients) runs
    its seeds once and gives the verification of running each (the same measurement and verdict);
    a sampled case runs every seed."""
    from fedtheory.runs.runner import SeededRuns          # how the theory runs the algorithm's seeds
    recipe = dict(recipe)
    p = problems.quadratic(recipe.pop("n"), 3, L=1.0, **recipe)
    calls = []
    real = SeededRuns.run

    def counted(self, seed):
        calls.append(seed)
        return real(self, seed)

    def every_seed(self, seed):
        res = real(self, seed)
        res._seed_free = False
        return res

    monkeypatch.setattr(SeededRuns, "run", counted)
    once = validation.verify(name, p, **kw)
    n_once = len(calls)
    monkeypatch.setattr(SeededRuns, "run", every_seed)
    each = validation.verify(name, p, **kw)
    assert once.applicable and once.verdict() == each.verdict()
    assert np.array_equal([once.measured, once.bound, once.stderr], [each.measured, each.bound, each.stderr],
                          equal_nan=True)
    assert [r.seed for r in once.runs] == [r.seed for r in each.runs] == [0, 1, 2]
    sampled = kw.get("clients_per_round") is not None
    assert (calls[:n_once].count(0) == n_once) != sampled, f"{name} {kw}: seeds run {calls[:n_once]}"
