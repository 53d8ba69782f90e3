"""Haddadpour & Mahdavi: LFD/NFSGD identities (spec/localdescent.md §5), topologies, Theorems 4.1-4.7."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fedtheory as ft
import problems
import validation
from fedtheory.exceptions import InvalidParameterError
from fedtheory.theory import localdescent as ld
from fedtheory.topology import check_mixing, mixing_matrix, zeta


def shared_quadratic(n=6, d=4, seed=0, noise=0.0, weights=None):
    return problems.quadratic(n, d, L=1.0, mu=0.25, shared_minimizer=True, hessian="distinct", seed=seed,
                              noise=noise, weights=weights)


# ------------------------------------------------------------------ algorithms (§5 #7-#9, #13, #14)
def test_nfsgd_complete_graph_equals_lfd_full_participation():
    """W = (1/n) 11^T: NFSGD == LFD with full participation, iterate by iterate (with minibatches)."""
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    n = p.n_clients
    kw = dict(rounds=8, local_steps=3, lr=0.1, batch_size=4, seed=2, record_iterates=True)
    a = ft.run(p, "nfsgd", W=np.full((n, n), 1.0 / n), **kw).iterates
    b = ft.run(p, "lfd", **kw).iterates
    assert np.abs(a - b).max() <= 1e-12


def test_nfsgd_averaging_identity_and_gossip():
    """x_j <- sum_i W_ji (x_i - eta g_i) on the ring, and the q-average moves by -eta sum_j q_j g_j (75)."""
    p = problems.quadratic(8, 3, heterogeneity=1.0, seed=1, hessian="distinct")
    W = mixing_matrix("ring", 8)
    r1 = ft.run(p, "nfsgd", rounds=3, local_steps=1, lr=0.2, topology="ring")
    r2 = ft.run(p, "nfsgd", rounds=4, local_steps=1, lr=0.2, topology="ring")
    X = r1.state["X"]
    G = np.array([p.client_grad(j, X[j]) for j in range(8)])
    assert np.abs(r2.state["X"] - W @ (X - 0.2 * G)).max() <= 1e-13
    assert np.abs(r2.x - (r1.x - 0.2 * G.mean(0))).max() <= 1e-13


def test_nfsgd_non_uniform_weights_metropolis_hastings_minimises_weighted_objective():
    """spec §7 item 9: with q-reversible (Metropolis-Hastings) W the run converges to argmin sum q_j f_j."""
    q = np.random.default_rng(0).dirichlet(np.ones(6))
    p = problems.quadratic(6, 3, L=1.0, mu=0.3, heterogeneity=1.0, seed=2, weights=q)
    res = ft.run(p, "nfsgd", rounds=3000, local_steps=1, lr=lambda t: 0.5 / (1 + t / 50), topology="ring")
    assert np.linalg.norm(res.x - p.info["x_star"]) < 2e-2
    Wsym = mixing_matrix("ring", 6)                       # symmetric, but not q-reversible
    with pytest.raises(InvalidParameterError, match="'W' parameter of NFSGD must be reversible"):
        ft.run(p, "nfsgd", rounds=1, W=Wsym)


def test_lfd_E1_sampled_is_client_sampled_sgd():
    """#8: E = 1, S draws with replacement: x - (eta/S) sum_{j in P} grad f_j(x)."""
    p = problems.quadratic(6, 3, heterogeneity=1.0, seed=3)
    res = ft.run(p, "lfd", rounds=6, local_steps=1, lr=0.1, clients_per_round=4, seed=5, record_iterates=True,
                 replicate_duplicates=True)
    for r, P in enumerate(res.sampled):
        x = res.iterates[r]
        assert len(P) == 4
        step = sum(p.client_grad(int(j), x) for j in P) / 4
        assert np.abs(res.iterates[r + 1] - (x - 0.1 * step)).max() <= 1e-14


def test_lfd_identical_clients_is_gd():
    """#9: identical clients: LFD(E, S) = GD for R E steps, for any E and S."""
    Q = np.diag([1.0, 0.4, 0.2])
    p = problems.explicit_quadratic(Q, np.tile([1.0, -1.0, 0.5], (5, 1)))
    res = ft.run(p, "lfd", rounds=4, local_steps=3, lr=0.3, clients_per_round=2, seed=0)
    x = np.zeros(3)
    for _ in range(12):
        x = x - 0.3 * p.grad(x)
    assert np.abs(res.x - x).max() <= 1e-14


def test_lfd_literal_loop():
    """A1: the literal loop syncs after step t = 0, then every E steps (periods [1, E], ...)."""
    p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0, hessian="distinct")
    lit = ft.run(p, "lfd", rounds=3, local_steps=4, lr=0.1, literal_loop=True, record_iterates=True)
    gd1 = ft.run(p, "lfd", rounds=1, local_steps=1, lr=0.1, record_iterates=True).iterates[1]
    assert np.array_equal(lit.iterates[1], gd1)
    can = ft.run(p, "lfd", rounds=2, local_steps=4, lr=0.1, x0=gd1, record_iterates=True)
    assert np.abs(lit.iterates[2:] - can.iterates[1:]).max() <= 1e-15
    assert lit.grad_evals == (1 + 4 + 4) * 4
    # a schedule sees the literal global counter: round 1 covers t = 1..4
    seen = []
    ft.run(p, "lfd", rounds=2, local_steps=4, lr=lambda t: seen.append(t) or 0.1, literal_loop=True)
    assert seen == [0, 1, 2, 3, 4]


# ------------------------------------------------------------------ topologies (#15)
@pytest.mark.parametrize("n", [4, 8, 16, 32])
def test_ring_zeta_formula(n):
    assert zeta(mixing_matrix("ring", n)) == pytest.approx((1 + 2 * math.cos(2 * math.pi / n)) / 3, abs=1e-12)


def test_mixing_matrices_are_valid():
    for top in ("ring", "complete", "torus", "erdos_renyi"):
        W = mixing_matrix(top, 12)
        check_mixing(W)
        assert np.allclose(W, W.T) and np.allclose(W.sum(0), 1) and np.allclose(W.sum(1), 1)
    assert zeta(mixing_matrix("complete", 9)) < 1e-12


def test_check_mixing_errors():
    with pytest.raises(ValueError, match="row-stochastic"):
        check_mixing(np.eye(3) * 0.9)
    with pytest.raises(ValueError, match="symmetric and doubly stochastic"):
        check_mixing(np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]))
    with pytest.raises(ValueError, match="zeta"):
        check_mixing(np.eye(4))                                        # disconnected
    with pytest.raises(ValueError, match="non-negative"):
        check_mixing(np.array([[1.5, -0.5], [-0.5, 1.5]]))
    p = problems.quadratic(4, 2, seed=0)
    with pytest.raises(InvalidParameterError, match=r"The 'W' parameter of NFSGD must be a \(4, 4\)"):
        ft.run(p, "nfsgd", rounds=1, W=np.eye(3))


# ------------------------------------------------------------------ diversity (#4, #5, #6)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(2, 6), d=st.integers(1, 5))
def test_diversity_decomposition(seed, n, d):
    """Lambda = 1 + (1/2) sum_ij q_i q_j ||g_i - g_j||^2 / ||gbar||^2 >= 1."""
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(n, d))
    q = rng.dirichlet(np.ones(n))
    gbar = q @ G
    var = 0.5 * sum(q[i] * q[j] * np.sum((G[i] - G[j]) ** 2) for i in range(n) for j in range(n))
    lam = ld.diversity(G, q)
    assert lam >= 1 - 1e-12
    assert lam == pytest.approx(1 + var / (gbar @ gbar), rel=1e-10)


def test_diversity_orthogonal_gradients():
    q = np.array([0.5, 0.3, 0.2])
    assert ld.diversity(np.eye(3), q) == pytest.approx(1 / np.sum(q ** 2), rel=1e-14)


@given(seed=st.integers(0, 1000))
def test_diversity_sup_closed_form_shared_minimizer(seed):
    """sup Lambda = lambda_max(Abar^-1 M Abar^-1) <= kappa, attained at the generalised eigenvector."""
    p = shared_quadratic(n=5, d=4, seed=seed)
    lam = ld.diversity_sup(p)
    L, mu = ld.pl_constants(p)
    assert 1 <= lam <= L / mu * (1 + 1e-12)
    xs = p.info["x_star"]
    rng = np.random.default_rng(seed)
    As = np.array([p.client_hessian(i, xs) for i in range(5)])
    Ab = np.einsum("j,jab->ab", p.weights, As)
    M = np.einsum("j,jab,jbc->ac", p.weights, As, As)
    Ai = np.linalg.inv(Ab)
    w, V = np.linalg.eigh(Ai @ M @ Ai)
    def lam_at(x):
        return ld.diversity(np.array([p.client_grad(i, x) for i in range(5)]), p.weights)
    samples = [lam_at(xs + rng.normal(size=4) * 10 ** rng.uniform(-3, 2)) for _ in range(200)]
    assert max(samples) <= lam * (1 + 1e-9)
    assert lam_at(xs + Ai @ V[:, -1]) == pytest.approx(lam, rel=1e-8)   # attained (d = Abar^-1 v)


def test_diversity_unbounded_for_distinct_minimizers():
    """#6: Lambda(x* + eps v) eps^2 tends to a constant; diversity_sup reports inf."""
    p = problems.quadratic(5, 3, L=1.0, mu=0.3, heterogeneity=1.0, seed=0)
    assert ld.diversity_sup(p) == math.inf
    xs, v = p.info["x_star"], np.array([1.0, 0.5, -0.3])
    vals = [ld.diversity(np.array([p.client_grad(i, xs + e * v) for i in range(5)]), p.weights) * e ** 2
            for e in (1e-3, 1e-4, 1e-5)]
    assert vals[1] == pytest.approx(vals[2], rel=1e-3) and vals[0] == pytest.approx(vals[2], rel=1e-2)


# ------------------------------------------------------------------ conditions (#17, #22)
@given(eta=st.floats(1e-4, 0.5), L=st.floats(0.5, 5), kappa=st.floats(1.0, 50), lam=st.floats(1, 10),
       E=st.integers(1, 50))
def test_condition_46_implies_43(eta, L, kappa, lam, E):
    mu = L / kappa
    if mu * eta >= 1:
        return
    assert ld.cond43(eta, L, lam, mu, E) <= ld.cond46(eta, L, lam, mu, E) * (1 + 1e-12)


def test_printed_condition_19_is_not_scale_invariant():
    """Scaling f by c (L, mu -> c L, c mu; eta -> eta / c) leaves (43), (46) unchanged, not (19);
    for mu > 1 (19) admits a step above (43)'s limit (spec §4.1)."""
    L, mu, lam, E, eta = 2.0, 0.5, 1.5, 5, 0.01
    for f in (ld.cond43, ld.cond46):
        assert f(eta, L, lam, mu, E) == pytest.approx(f(eta / 10, 10 * L, lam, 10 * mu, E), rel=1e-12)
    assert ld.cond19_printed(eta, L, lam, mu, E) != pytest.approx(ld.cond19_printed(eta / 10, 10 * L, lam, 10 * mu, E))
    L, mu, lam = 35.7, 10.0, 1.0
    assert ld.lfgd_eta_max(L, mu, lam, 5, "19") > ld.lfgd_eta_max(L, mu, lam, 5, "43")


@given(S=st.integers(1, 16), E=st.integers(1, 64), L=st.floats(0.1, 10), lam=st.floats(1, 20),
       C1=st.floats(0, 3))
def test_corollary_4_5_root_of_condition_23(S, E, L, lam, C1):
    eta = ld.lfsgd_nc_eta_max(S, E, L, lam, C1)
    assert abs(ld.cond23(eta, S, E, L, lam, C1)) <= 1e-10 * eta / lam
    assert ld.cond23(0.99 * eta, S, E, L, lam, C1) < 0 < ld.cond23(1.01 * eta, S, E, L, lam, C1)


# ------------------------------------------------------------------ theorems
def test_theorem_4_1_holds_on_conforming_quadratic():
    p = shared_quadratic(n=8, d=6, seed=6)
    for E, S in ((1, None), (5, 3), (20, 3)):
        v = validation.verify("localdescent.theorem_4_1", p, rounds=max(4, 60 // E), local_steps=E,
                              clients_per_round=S, seeds=8, x0=np.full(6, 2.0))
        assert v.applicable and v.holds and v.details["all_rounds_hold"], v.report()
        names = [c.name for c in v.conditions]
        assert any(n.startswith("(19) as printed") for n in names) and any(n.startswith("(43)") for n in names)


def test_theorem_4_1_not_applicable_with_distinct_minimizers():
    p = problems.quadratic(5, 3, heterogeneity=1.0, seed=0)
    v = validation.verify("localdescent.theorem_4_1", p, rounds=5)
    assert not v.applicable and "do not share a minimiser" in v.reason


def test_theorem_4_2_counterexample_reproduced():
    """spec §4.2: all stated conditions (i)-(iv) hold, eta_0 L ~ 17, f - f* ~ 1e29 vs bound 5e-4."""
    p = ld.counterexample_4_2()
    kw = dict(rounds=5, local_steps=10, alpha=0.1, clients_per_round=2, seeds=1, x0=2 * np.ones(3))
    printed = validation.verify("localdescent.theorem_4_2", p, variant="printed", **kw)
    assert printed.applicable and all(c.ok for c in printed.conditions[:4])
    assert printed.details["eta0_L"] > 15
    assert printed.measured > 1e20 and printed.bound < 1e-3 and not printed.holds
    corrected = validation.verify("localdescent.theorem_4_2", p, variant="corrected", **kw)
    assert not corrected.applicable and "Lemma B.6" in corrected.reason


def test_theorem_4_2_holds_with_direct_check():
    p = shared_quadratic(n=8, d=5, seed=9, noise=0.3)
    v = validation.verify("localdescent.theorem_4_2", p, rounds=150, local_steps=4, clients_per_round=2, seeds=8,
                          x0=np.full(5, 2.0))
    assert v.applicable and v.holds, v.report()


def test_theorems_4_4_and_4_7_hold_when_conditions_hold():
    p = shared_quadratic(n=8, d=5, seed=13, noise=0.3)
    v = validation.verify("localdescent.theorem_4_4", p, rounds=256, local_steps=4, clients_per_round=2, seeds=4,
                          x0=np.full(5, 2.0))
    assert v.applicable and v.holds, v.report()
    for top in ("complete", "ring"):
        v = validation.verify("localdescent.theorem_4_7", p, rounds=1024, local_steps=1, topology=top, seeds=3,
                              x0=np.full(5, 2.0))
        assert v.applicable and v.holds, v.report()
    v = validation.verify("localdescent.theorem_4_7", p, rounds=256, local_steps=8, topology="ring", seeds=1)
    assert not v.applicable and "(28)" in v.reason


def test_theorem_4_7_printed_T_condition_misses_factor_n():
    """spec §4.4: n = 16, lambda = 1, C1 = 0: the printed condition accepts T = 17 < 4 n."""
    p = problems.quadratic(16, 2, L=1.0, mu=1.0, shared_minimizer=True, seed=0)     # identical Hessians: lambda = 1
    v = validation.verify("localdescent.theorem_4_7", p, rounds=17, local_steps=1, topology="complete", seeds=1)
    printed = next(c for c in v.conditions if c.name.endswith("(as printed)"))
    corrected = next(c for c in v.conditions if "corrected: factor n" in c.name)
    assert printed.ok and printed.limit == pytest.approx(16.0)
    assert not corrected.ok and corrected.limit == pytest.approx(256.0)
