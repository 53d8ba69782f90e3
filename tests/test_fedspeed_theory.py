"""Theorem 4.4 of FedSpeed as code (fedtheory.theory.fedspeed, validation.verify).

The cases are those of spec/fedspeed.md §4.6 on F_i(x) = 1/2 (x - c_i)^T A (x - c_i) with
A = diag(0.5, 0.7, 1.0, 0.6, 0.9) (L = 1) and additive N(0, 0.45^2 I) gradient noise.
"""
import math

import numpy as np
import pytest

import problems
import validation
from fedtheory.theory import fedspeed as th

A = np.diag([0.5, 0.7, 1.0, 0.6, 0.9])


def spec_case(n, het, s):
    C = np.random.default_rng(1).normal(size=(n, 5)) * het
    return problems.explicit_quadratic(A, C @ A, noise=s), C


def test_registered():
    assert "fedspeed.theorem_4_4" in validation.theorems()


def test_case_C2_printed_violated_corrected_holds():
    """n = 1, sigma_g = 0, q = 0.6, eta_l = 0.05/(32 sqrt(3K) L): every stated and hidden
    condition holds, the printed and derived bounds fail, the corrected one holds."""
    p, C = spec_case(1, 0.0, 0.45)
    K = 2
    eta = 0.05 / (32 * math.sqrt(3 * K))
    kw = dict(rounds=4000, local_steps=K, lr=eta, lam=eta / 0.6, x0=C.mean(0), seeds=2)
    printed = validation.verify("fedspeed.theorem_4_4", p, variant="printed", **kw)
    corrected = validation.verify("fedspeed.theorem_4_4", p, variant="corrected", **kw)
    derived = validation.verify("fedspeed.theorem_4_4", p, variant="derived", **kw)
    for v in (printed, corrected, derived):
        assert v.applicable, v.reason
        names = [c.name.split(":")[0] for c in v.conditions]
        assert {"S1", "S2a", "S2b", "S3", "S4", "H1 (hidden)", "H2 (hidden)", "H3 (hidden)",
                "H4 (hidden)"} <= set(names)
        assert all(c.ok for c in v.conditions)
    assert printed.measured == corrected.measured          # same seeds, same measurement
    assert not printed.holds and printed.ratio > 10       # the printed bound fails by > 10x
    assert not derived.holds
    assert corrected.holds
    # the dropped variance is the floor: the measured LHS is of its order (spec §4.6, E7)
    vm = corrected.details["bounds"]["v_missing"]
    assert 0.1 * vm < corrected.measured < vm


def test_case_C1_all_bounds_hold():
    """n = 10, heterogeneous, eta_l at half its cap, alpha = 0.5: every RHS holds (spec §4.6 C1)."""
    p, C = spec_case(10, 1.0, 0.45)
    K = 4
    eta = 0.5 / (32 * math.sqrt(3 * K))
    rho = 0.5 / (math.sqrt(6) * 0.5)
    for variant in th.VARIANTS:
        v = validation.verify("fedspeed.theorem_4_4", p, rounds=600, local_steps=K, lr=eta,
                              lam=eta / 0.6, alpha=0.5, rho=rho, x0=C.mean(0) + 1.0,
                              variant=variant, seeds=2)
        assert v.applicable and v.holds, v.report()
        assert v.details["sigma_g_sq"] == pytest.approx(2.09, abs=0.01)   # spec's sigma_g^2
        assert v.details["sigma_l_sq"] == pytest.approx(5 * 0.45 ** 2)


def test_case_C4_hidden_condition_fails():
    """q = 0.05 violates the drift recursion H2: the printed variant is applicable (stated
    conditions hold), the derived one is not, and says which condition fails."""
    p, C = spec_case(10, 1.0, 0.0)
    K = 20
    eta = 0.5 / (32 * math.sqrt(3 * K))
    kw = dict(rounds=50, local_steps=K, lr=eta, lam=eta / 0.05, alpha=0.5,
              rho=0.5 / (math.sqrt(6) * 0.5), x0=C.mean(0) + 1.0)
    printed = validation.verify("fedspeed.theorem_4_4", p, variant="printed", **kw)
    derived = validation.verify("fedspeed.theorem_4_4", p, variant="derived", **kw)
    assert printed.applicable
    assert not derived.applicable and "H2" in derived.reason


def test_stated_conditions_values():
    stated, hidden, info = th.conditions(L=1.0, lam=1.0, eta=0.1, K=3, alpha=0.5, rho=2.0, n=4)
    by = {c.name.split(":")[0]: c for c in stated + hidden}
    assert not by["S1"].ok and by["S1"].limit == pytest.approx(1 / (math.sqrt(6) * 0.5))
    assert not by["S2a"].ok and by["S2a"].limit == pytest.approx(1 / (32 * 3))
    assert not by["S3"].ok and by["S3"].limit == pytest.approx(10.0)
    assert by["S4"].value == pytest.approx(0.5 - 3 * 0.25 * 4 - 1536 * 0.01 * 3)


def test_bounds_formulas_against_spec():
    """RHS as printed (6)-(7) and derived (§4.5), evaluated by hand for one set of inputs."""
    L, lam, eta, K, a, rho, n, T = 1.0, 0.01, 0.005, 4, 0.5, 0.1, 3, 100
    F1, A0, B0, sg, sl = 0.7, 0.3, 0.2, 2.0, 1.5
    b = th.bounds(L, lam, eta, K, a, rho, n, T, F1, A0, B0, sg, sl)
    kap = 0.5 - 3 * a * a * rho * rho - 1536 * eta * eta * K
    gam = 1 - (1 - 0.5) ** 4
    phi = (32 * lam * eta ** 2 * K * (16 * sg + sl) + lam * a * a * rho * rho * (3 * sg + sl)) / kap
    printed = 2 * F1 / (lam * kap * T) + 64 * eta * K * A0 / (kap * T) + 32 * lam ** 2 * B0 / (kap * T) + phi
    derived = (F1 / (lam * kap * T) + 32 * eta ** 2 * K * A0 / (kap * gam * T)
               + 4 * lam ** 2 * (1 - 2 * gam) ** 2 * B0 / (kap * gam ** 3 * T) + phi / lam)
    gk = 0.5 * 0.5 ** (3 - np.arange(4))
    S2 = np.sum((gk / gam) ** 2)
    assert b["printed"] == pytest.approx(printed, rel=1e-14)
    assert b["derived"] == pytest.approx(derived, rel=1e-14)
    assert b["corrected"] == pytest.approx(derived + lam * (1 + a * rho) ** 2 * sl * S2 / (2 * kap * n), rel=1e-14)


def test_not_applicable_problems():
    p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0, hessian="distinct")
    v = validation.verify("fedspeed.theorem_4_4", p, rounds=10, local_steps=2)
    assert not v.applicable and "distinct client Hessians" in v.reason
    rng = np.random.default_rng(0)
    ls = problems.least_squares([rng.normal(size=(5, 2)) for _ in range(3)], [rng.normal(size=5)] * 3)
    v = validation.verify("fedspeed.theorem_4_4", ls, rounds=10, local_steps=2)
    assert not v.applicable and "least squares" in v.reason


def test_logistic_constants_are_upper_bounds():
    """On logistic regression sigma_g^2 and sigma_l^2 are bounds: check them against the
    measured heterogeneity and minibatch variance at random points."""
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    L, sl, sg, notes = th.problem_constants(p, batch_size=4)
    rng = np.random.default_rng(0)
    n = p.n_clients
    for _ in range(20):
        x = rng.normal(size=p.dim) * 3
        G = np.array([p.client_grad(i, x) for i in range(n)])
        assert np.mean(np.sum((G - G.mean(0)) ** 2, axis=1)) <= sg
        i = int(rng.integers(n))
        m = p.client_sizes[i]
        s0 = p.client_ptr[i]
        draws = [p.client_grad(i, x, s0 + rng.choice(m, 4, replace=False)) for _ in range(400)]
        assert np.mean(np.sum((np.array(draws) - G[i]) ** 2, axis=1)) <= sl


def test_verify_rejects_bad_arguments():
    p, _ = spec_case(2, 1.0, 0.1)
    with pytest.raises(ValueError, match="'variant' parameter"):
        validation.verify("fedspeed.theorem_4_4", p, variant="loose")
    with pytest.raises(ValueError, match="'rounds' parameter"):
        validation.verify("fedspeed.theorem_4_4", p, rounds=1)
    with pytest.raises(ValueError, match="registered theorem"):
        validation.verify("fedspeed.theorem_9", p)
