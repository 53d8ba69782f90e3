"""FedSPS theorems as code (fedtheory.theory.fedsps): 3(a), 3(b), 6(a), 6(b), 18."""
import numpy as np
import pytest

import fedtheory as ft
import problems
import validation
from fedtheory.theory import fedsps as th
from test_update_rules import _data


def test_simulator_matches_library_at_round_ends():
    A, b = _data("logistic", False, seed=21)
    p = problems.logistic(A, b, l2=0.01)
    res = ft.run(p, "fedsps", rounds=6, local_steps=3, c=0.5, gamma_b=2.0, record_iterates=True)
    sim = th.simulate(p, 6, 3, 0.5, 2.0, 0.0, record_local=False)
    assert np.abs(sim["xbar"] - res.x).max() <= 1e-12


def test_theorem_3a_and_3b_hold_on_interpolating_quadratics():
    p = th.interpolating_quadratic(0)
    lb = [p.client_value(i, p.info["x_star"]) for i in range(4)]
    for variant in ("printed", "corrected"):
        v = validation.verify("fedsps.theorem_3a", p, rounds=30, local_steps=2, lower_bound=lb, seeds=2,
                              x0=np.ones(3), variant=variant)
        assert v.applicable and v.holds, v.report()
        assert any(c.name == "c >= 2 tau^2" for c in v.conditions)
    p = th.interpolating_quadratic(1)
    lb = [p.client_value(i, p.info["x_star"]) for i in range(4)]
    v = validation.verify("fedsps.theorem_3b", p, rounds=40, local_steps=2, gamma_b=1.0, lower_bound=lb, seeds=1,
                          x0=np.ones(3))
    assert v.applicable and v.holds, v.report()
    assert v.measured < 0.5 * v.details["D0"]     # Corollary 5: contraction towards x*


def test_theorem_3a_pathwise_on_logistic_minibatches():
    """The pathwise form (eq. 31) holds on every seed for ridge logistic regression with minibatches."""
    A, b = _data("logistic", False, seed=22, n=4)
    p = problems.logistic(A, b, l2=0.05)
    for tau in (1, 2):
        v = validation.verify("fedsps.theorem_3a", p, rounds=15, local_steps=tau, gamma_b=1.0, batch_size=4,
                              seeds=3, variant="corrected")
        assert v.applicable and v.holds, v.report()


def test_theorem_3_conditions_reported():
    p = th.interpolating_quadratic(0)
    v = validation.verify("fedsps.theorem_3a", p, rounds=5, local_steps=3, c=0.5, lower_bound=0.0, seeds=1)
    assert not v.applicable
    assert "c >= 2 tau^2" in v.reason and "ell_i* <= f_i*" in v.reason     # 0 is not a lower bound here
    v = validation.verify("fedsps.theorem_3b", p, rounds=5, local_steps=1, gamma_b=100.0,
                          lower_bound=[p.client_value(i, p.info["x_star"]) for i in range(4)], seeds=1)
    printed = validation.verify("fedsps.theorem_3b", p, rounds=5, local_steps=1, gamma_b=100.0, variant="printed",
                                lower_bound=[p.client_value(i, p.info["x_star"]) for i in range(4)], seeds=1)
    assert printed.applicable and not v.applicable and "gamma_b <= 1/(2 mu)" in v.reason


def test_theorem_6a_printed_fails_corrected_holds_on_rescaled_problem():
    """spec §8 erratum 2 / P13b: LHS 8.2e-5 > printed RHS 6.0e-5; the corrected (L^2) RHS holds."""
    p = th.rescaled_thm6_problem()
    kw = th._thm6_case(False)
    printed = validation.verify("fedsps.theorem_6a", p, variant="printed", **kw)
    corrected = validation.verify("fedsps.theorem_6a", p, variant="corrected", **kw)
    assert printed.details["periodic"] and printed.applicable and corrected.applicable
    assert printed.measured == pytest.approx(8.2e-5, rel=0.02)
    assert printed.bound == pytest.approx(6.0e-5, rel=0.02)
    assert not printed.holds and corrected.holds


def test_theorem_6a_is_fedavg_and_holds_on_least_squares():
    A, b = _data("least_squares", False, seed=23, n=3)
    p = problems.least_squares(A, b)
    v = validation.verify("fedsps.theorem_6a", p, rounds=20, local_steps=5, seeds=1)
    assert v.applicable and v.holds, v.report()
    res = ft.run(p, "fedsps", rounds=3, local_steps=5, c=0.5, gamma_b=v.details["gamma_b"],
                 lower_bound=v.details["ell"])
    assert (res.history.step_capped_frac.iloc[1:] == 1.0).all()       # pinned at gamma_b: FedAvg


def test_theorem_6b_plateau_shrinks_linearly():
    p = problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3, hessian="distinct", noise=0.0)
    v = validation.verify("fedsps.theorem_6b", p, rounds=3000, local_steps=4, seeds=1)
    assert v.applicable and v.holds, v.report()


def test_theorem_18_holds_and_is_not_applicable_elsewhere():
    p = problems.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=0.5, noise=0.5, seed=2)
    for variant in ("printed", "corrected"):
        v = validation.verify("fedsps.theorem_18", p, rounds=60, local_steps=5, seeds=4, x0=np.full(3, 2.0),
                              lower_bound=-10.0, variant=variant)
        assert v.applicable and v.holds and v.stderr > 0, v.report()
    d = problems.quadratic(4, 3, heterogeneity=0.5, seed=2, hessian="distinct")
    assert not validation.verify("fedsps.theorem_18", d, rounds=5).applicable
