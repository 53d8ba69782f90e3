"""Haddadpour & Mahdavi: LFD/NFSGD identities (spec/localdescent.md §5), topologies, Theorems 4.1-4.7 as specs
measured on ft.run of lfd / nfsgd (the code users run, not a simulator of its own)."""
import math
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fedtheory as ft
import problems
import validation
from fedtheory.exceptions import InvalidParameterError
from fedtheory.theory import localdescent as ld
from fedtheory.theory import localdescent_pl as ldp
from fedtheory.theory import localdescent_quantities as ldq
from fedtheory.theory import localdescent_nonconvex as ldn
from fedtheory.runs.topology import check_mixing, mixing_matrix, zeta


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



@pytest.mark.parametrize("literal_loop", [False, True])
@pytest.mark.parametrize("replicate", [False, True])
def test_lfd_fused_rounds_match_per_round(literal_loop, replicate):
    """The fused path (compiled rounds between evaluations) follows the per-round path exactly with the
    literal loop's short round 0 (K = 1, then E) and duplicate draws merged or replicated."""
    p = problems.quadratic(6, 3, heterogeneity=1.0, seed=0, hessian="distinct", noise=0.1)
    kw = dict(rounds=6, local_steps=3, lr=lambda t: 0.1 / (1 + 0.1 * t), clients_per_round=4, seed=2,
              literal_loop=literal_loop, replicate_duplicates=replicate, record_iterates=True, eval_every=2)
    fused = ft.run(p, "lfd", **kw)
    per_round = ft.run(p, "lfd", callback=lambda r, x: False, **kw)
    assert np.array_equal(fused.iterates, per_round.iterates)
    assert (fused.grad_evals, fused.comm_up, fused.comm_down) == (per_round.grad_evals, per_round.comm_up,
                                                                  per_round.comm_down)
    assert [list(a) for a in fused.sampled] == [list(a) for a in per_round.sampled]
    # each round's draws (duplicates kept): replicas run every draw, merged duplicates each client once;
    # the literal loop's round 0 has one local step; one message each way per distinct client
    Ks = [1 if (literal_loop and r == 0) else 3 for r in range(6)]
    runs = [len(a) if replicate else len(set(a)) for a in fused.sampled]
    assert all(len(a) == 4 for a in fused.sampled)
    assert fused.grad_evals == sum(K * m for K, m in zip(Ks, runs))
    assert fused.comm_up == fused.comm_down == sum(len(set(a)) for a in fused.sampled)


# ------------------------------------------------------------------ topologies (identity #15)
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
    lam = ldq.diversity_sup(p)
    L, mu = ldq.pl_constants(p)
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
    assert ldq.diversity_sup(p) == math.inf
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


@given(E=st.integers(1, 12), S=st.integers(1, 10), L=st.floats(0.1, 10), kappa=st.floats(1.0, 60),
       lam=st.floats(1, 10), C1=st.floats(0, 3), lo=st.floats(0.1, 5), hi=st.floats(5.5, 600))
def test_theorem_4_2_alpha_min_by_bisection_is_the_first_passing_grid_point(E, S, L, kappa, lam, C1, lo, hi):
    """The bisection of lfsgd_pl_alpha_min returns what a scan of the grid would: the first alpha
    whose corrected conditions all hold, or inf when none does (the conditions are monotone in alpha)."""
    mu = L / kappa
    grid = np.linspace(lo, hi, 60)
    ok = [all(c.ok for c in ldp.lfsgd_pl_corrected_conditions(float(a), E, S, L, mu, lam, C1)) for a in grid]
    first = next((float(a) for a, good in zip(grid, ok) if good), math.inf)
    assert ldp.lfsgd_pl_alpha_min(E, S, L, mu, lam, C1, grid=grid) == first
    if math.isfinite(first):
        assert all(ok[ok.index(True):]), "a condition fails again above the first passing alpha"


@given(S=st.integers(1, 16), E=st.integers(1, 64), L=st.floats(0.1, 10), lam=st.floats(1, 20),
       C1=st.floats(0, 3))
def test_corollary_4_5_root_of_condition_23(S, E, L, lam, C1):
    eta = ldn.lfsgd_nc_eta_max(S, E, L, lam, C1)
    assert abs(ldn.cond23(eta, S, E, L, lam, C1)) <= 1e-10 * eta / lam
    assert ldn.cond23(0.99 * eta, S, E, L, lam, C1) < 0 < ldn.cond23(1.01 * eta, S, E, L, lam, C1)


# ------------------------------------------------------------------ theorems
THEOREMS = ("localdescent.theorem_4_1", "localdescent.theorem_4_2", "localdescent.theorem_4_4",
            "localdescent.theorem_4_7")


def _small_case(name):
    """A quick applicable configuration of each theorem (sampled LFD for 4.1-4.4, ring NFSGD for 4.7)."""
    if name == "localdescent.theorem_4_1":
        return shared_quadratic(n=6, d=4, seed=1), dict(rounds=6, local_steps=3, clients_per_round=3, seeds=2,
                                                        x0=np.ones(4))
    p = shared_quadratic(n=6, d=4, seed=1, noise=0.2)
    if name == "localdescent.theorem_4_7":
        return p, dict(rounds=64, local_steps=1, topology="ring", seeds=2, x0=np.ones(4))
    return p, dict(rounds=24, local_steps=2, clients_per_round=3, seeds=2, x0=np.ones(4))


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


def test_theorem_4_1_printed_bound_is_the_printed_exponential():
    """Fix (d): "printed" is eq. (20), exp(-mu eta T) f0, as Theorem 4.1 prints it; the proof's
    (1 - mu eta)^T f0 of eq. (45) is the variant "proof" (same condition (19)) and "corrected"
    ((43) instead of (19))."""
    p = shared_quadratic(n=6, d=4, seed=3)
    L, mu = ldq.pl_constants(p)
    lam = ldq.diversity_sup(p)
    E, x0 = 4, np.full(4, 2.0)
    eta = ld.lfgd_eta_max(L, mu, lam, E, "19")                # (19) holds: printed and proof apply
    kw = dict(rounds=15, local_steps=E, clients_per_round=3, seeds=3, x0=x0, lr=eta)
    printed = validation.verify("localdescent.theorem_4_1", p, variant="printed", **kw)
    f0 = p.value(x0) - p.info["f_star"]
    t = printed.details["worst_round"] * E
    assert t > 0 and printed.applicable
    assert printed.bound == pytest.approx(math.exp(-mu * eta * t) * f0, rel=1e-12)
    proof = validation.verify("localdescent.theorem_4_1", p, variant="proof",
                              measurement=printed.details["measurement"], **kw)
    assert proof.applicable and proof.measured == printed.measured
    assert proof.bound == pytest.approx((1 - mu * eta) ** t * f0, rel=1e-12)
    assert proof.bound < printed.bound
    from fedtheory.theory import SPECS
    variants = SPECS["localdescent.theorem_4_1"].variants
    assert set(variants) == {"printed", "proof", "corrected"}
    for name, var in variants.items():                          # one sentence each
        assert re.search(r"\.\s+[A-Z]", var.description) is None and var.description.endswith("."), name
    assert "(20)" in variants["printed"].description and "(45)" in variants["proof"].description
    assert variants["printed"].requires == variants["proof"].requires == ("stated",)
    # at the step size of (43), (19) fails: printed and proof do not apply, corrected does
    kw43 = dict(kw, lr=ld.lfgd_eta_max(L, mu, lam, E, "43"))
    for variant, applies in (("printed", False), ("proof", False), ("corrected", True)):
        v = validation.verify("localdescent.theorem_4_1", p, variant=variant, **kw43)
        assert v.applicable == applies, v.report()
        assert v.bound == pytest.approx((math.exp(-mu * kw43["lr"] * v.details["worst_round"] * E)
                                         if variant == "printed" else
                                         (1 - mu * kw43["lr"]) ** (v.details["worst_round"] * E)) * f0, rel=1e-12)


def test_theorem_4_2_counterexample_reproduced():
    """spec §4.2: all stated conditions (i)-(iv) hold, eta_0 L ~ 17, f - f* ~ 1e29 vs bound 5e-4."""
    p = ldp.counterexample_4_2()
    kw = dict(rounds=5, local_steps=10, alpha=0.1, clients_per_round=2, seeds=1, x0=2 * np.ones(3))
    printed = validation.verify("localdescent.theorem_4_2", p, variant="printed", **kw)
    assert printed.applicable and all(c.ok for c in printed.conditions if c.role == "stated")
    assert [c.role for c in printed.conditions[:4]] == ["stated"] * 4
    assert printed.details["eta0_L"] > 15
    assert printed.measured > 1e20 and printed.bound < 1e-3 and not printed.holds
    corrected = validation.verify("localdescent.theorem_4_2", p, variant="corrected", **kw)
    assert not corrected.applicable and "Lemma B.6" in corrected.reason


def test_theorem_4_2_holds_with_direct_check():
    p = shared_quadratic(n=8, d=5, seed=9, noise=0.3)
    v = validation.verify("localdescent.theorem_4_2", p, rounds=150, local_steps=4, clients_per_round=2, seeds=8,
                          x0=np.full(5, 2.0))
    assert v.applicable and v.holds, v.report()
    # the left-hand side is f(x^R) - f* of the registered lfd runs with the step sizes 4/(mu (t + a))
    res = ft.run(p, v.algorithm, **dict(v.run_kwargs, seed=3))
    assert v.details["measurement"]["values"][3] == p.value(res.x) - p.info["f_star"]
    assert v.run_kwargs["lr"](0) == pytest.approx(4 / (v.details["mu"] * v.details["a"]))


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


def _virtual_average_grad_sq_by_hand(p, res, E):
    """(1/T) sum over rounds and k < E of ||grad f(sum_s w_s y_{s,k} / sum_s w_s)||^2 from a trace."""
    acc, T = 0.0, 0
    for rt in res.trace:
        Y, w = rt["local"], rt.weights
        for k in range(E):
            g = p.grad(w @ Y[:, k] / w.sum())
            acc += g @ g
            T += 1
    return acc / T


def test_theorem_4_4_measured_on_lfd_traces_with_duplicate_draws():
    """Fix (c): the left-hand side is computed from the registered lfd's traces; duplicate draws of a
    client run as independent replicas (their own noise), as Lemma E.2 assumes."""
    p = shared_quadratic(n=4, d=3, seed=4, noise=0.4)
    E = 3
    v = validation.verify("localdescent.theorem_4_4", p, rounds=20, local_steps=E, clients_per_round=4, seeds=2,
                          x0=np.ones(3))
    assert v.algorithm == "lfd" and v.run_kwargs["replicate_duplicates"] and v.run_kwargs["trace"] == "local"
    duplicates = 0
    for s in range(2):
        res = ft.run(p, v.algorithm, **dict(v.run_kwargs, seed=s))
        assert np.array_equal(res.x, v.runs[s].x)
        for rt in res.trace:
            _, counts = np.unique(rt.clients, return_counts=True)
            duplicates += int((counts > 1).sum())
            assert not any(np.array_equal(rt.noise[a], rt.noise[b]) for a in range(rt.S) for b in range(a))
        assert v.details["measurement"]["values"][s] == pytest.approx(_virtual_average_grad_sq_by_hand(p, res, E),
                                                                      rel=1e-12)
    assert duplicates > 10


def _identical_clients_noise_floor(var_factor, eta, T, d, s):
    """E of (1/T) sum_{t<T} ||x_t||^2 for x_{t+1} = (1 - eta) x_t - eta xi_t, x_0 = 0, xi_t ~ N(0, var_factor
    s^2 I): the virtual average of clients with f_j = ||x||^2 / 2 whose noises average to variance var_factor s^2."""
    r = (1 - eta) ** 2
    t = np.arange(T)
    return float(np.mean(d * eta ** 2 * s ** 2 * var_factor * (1 - r ** t) / (1 - r)))


def test_theorem_4_4_duplicate_draws_have_independent_noise():
    """Fix (c): n = 4 identical clients f_j = ||x||^2 / 2, S = 4 draws with replacement. With independent
    noise per draw (Lemma E.2) the noise of the virtual average has variance s^2 / S; one noise draw
    shared by the duplicates of a client (the old simulator) gives s^2 (1/S + (1 - 1/S) sum_j q_j^2), a
    1.75x higher floor of (1/T) sum ||grad f(xbar)||^2. replicate_duplicates=False (a client drawn m
    times runs once with weight m/S) is that shared-noise floor."""
    n, d, s, S, E, R = 4, 4, 0.5, 4, 2, 512
    p = problems.explicit_quadratic(np.eye(d), np.zeros((n, d)), noise=s)
    T = R * E
    eta = math.sqrt(S / T)
    independent = _identical_clients_noise_floor(1 / S, eta, T, d, s)
    shared = _identical_clients_noise_floor(1 / S + (1 - 1 / S) / n, eta, T, d, s)
    assert shared / independent == pytest.approx(1.75)
    kw = dict(rounds=R, local_steps=E, clients_per_round=S, seeds=8, x0=np.zeros(d))
    v = validation.verify("localdescent.theorem_4_4", p, **kw)
    assert v.applicable and v.details["eta"] == pytest.approx(eta)
    assert abs(v.measured - independent) <= 4 * v.stderr, (v.measured, independent, v.stderr)
    assert abs(v.measured / independent - 1) < 0.15
    merged = validation.verify("localdescent.theorem_4_4", p, replicate_duplicates=False, **kw)
    assert abs(merged.measured - shared) <= 4 * merged.stderr, (merged.measured, shared, merged.stderr)


def test_theorem_4_7_printed_requires_exactly_the_stated_condition_28():
    """Fix (h): Theorem 4.7 states only (28); the condition on T comes from the informal Theorem 3.4
    (and misses a factor n, spec §4.4): it is informational, and printed applies when (28) holds."""
    p = problems.quadratic(16, 2, L=1.0, mu=1.0, shared_minimizer=True, seed=0)     # identical Hessians: lambda = 1
    v = validation.verify("localdescent.theorem_4_7", p, variant="printed", rounds=8, local_steps=1,
                          topology="complete", lr=0.05, seeds=1, x0=np.ones(2))
    assert v.applicable and v.reason == "", v.report()
    assert [c.name for c in v.conditions if c.role == "stated"] == ["(28): LHS - 1/lambda <= 0"]
    t_printed = next(c for c in v.conditions if "Theorem 3.4, informal, as printed" in c.name)
    assert t_printed.role == "informational" and not t_printed.ok and t_printed.limit == pytest.approx(16.0)
    from fedtheory.theory import SPECS
    assert SPECS["localdescent.theorem_4_7"].variants["printed"].requires == ("stated",)


def test_theorem_4_7_printed_T_condition_misses_factor_n():
    """spec §4.4: n = 16, lambda = 1, C1 = 0: the printed condition accepts T = 17 < 4 n."""
    p = problems.quadratic(16, 2, L=1.0, mu=1.0, shared_minimizer=True, seed=0)     # identical Hessians: lambda = 1
    v = validation.verify("localdescent.theorem_4_7", p, rounds=17, local_steps=1, topology="complete", seeds=1)
    printed = next(c for c in v.conditions if "Theorem 3.4, informal, as printed" in c.name)
    corrected = next(c for c in v.conditions if "missing factor n" in c.name)
    assert printed.ok and printed.limit == pytest.approx(16.0)
    assert not corrected.ok and corrected.limit == pytest.approx(256.0)


STATED = {"localdescent.theorem_4_1": ["(19)"], "localdescent.theorem_4_2": ["(i)", "(ii)", "(iii)", "(iv)"],
          "localdescent.theorem_4_4": ["(23) as printed"], "localdescent.theorem_4_7": ["(28)"]}


@pytest.mark.parametrize("name", THEOREMS)
def test_every_condition_has_a_role_and_names_carry_none(name):
    """Every Condition has its role (stated / hidden / informational); none says "(info)" in its name;
    the stated ones are exactly those the theorem prints."""
    from fedtheory.theory.engine import ROLES
    p, kw = _small_case(name)
    v = validation.verify(name, p, **kw)
    assert v.conditions and all(c.role in ROLES for c in v.conditions)
    assert not any("info)" in c.name for c in v.conditions)
    stated = [c.name for c in v.conditions if c.role == "stated"]
    assert len(stated) == len(STATED[name]) and all(n.startswith(k) for n, k in zip(stated, STATED[name]))
    assert any(c.role == "informational" and "lambda_traj" in c.name for c in v.conditions)


@pytest.mark.parametrize("name", THEOREMS)
def test_theorems_measure_the_registered_algorithm(name):
    """The runs behind a verdict are ft.run of lfd / nfsgd and reproduce bit for bit; no simulator is left."""
    from fedtheory.theory import SPECS
    assert not hasattr(ld, "trajectory_diversity") and not hasattr(ld, "_virtual_average_grad_sq")
    p, kw = _small_case(name)
    v = validation.verify(name, p, **kw)
    assert v.algorithm == SPECS[name].algorithm == ("nfsgd" if name.endswith("4_7") else "lfd")
    assert len(v.runs) == kw["seeds"]
    assert np.array_equal(ft.run(p, v.algorithm, **v.run_kwargs).x, v.runs[0].x)


def test_lambda_traj_uses_all_clients_of_a_full_participation_traced_run():
    """lambda_traj of a sampled LFSGD run: the multi-point diversity of all n clients at their own traced
    iterates, from the extra full-participation lfd runs ("agnostic" clients of the proofs)."""
    p, kw = _small_case("localdescent.theorem_4_4")
    v = validation.verify("localdescent.theorem_4_4", p, **kw)
    runs = v.details["measurement"]["runs"]
    assert len(runs["agnostic"]) == kw["seeds"]
    by_hand = []
    for res in runs["agnostic"]:
        lam = []
        for rt in res.trace:
            assert rt.S == p.n_clients and np.allclose(rt.weights, p.weights)
            for k in range(rt.K):
                G = np.array([p.client_grad(int(j), rt["local"][s, k]) for s, j in enumerate(rt.clients)])
                lam.append(ld.diversity(G, rt.weights))
        by_hand.append(np.percentile(lam, 99))
    assert v.details["lam_traj"] == pytest.approx(max(by_hand), rel=1e-10)
    full = validation.verify("localdescent.theorem_4_4", p, **dict(kw, clients_per_round=None))
    assert "agnostic" not in full.details["measurement"]["runs"]      # full participation traces its own


def test_traced_helpers_agree_with_pointwise_oracles():
    """virtual_averages, traced_diversity and client_gradients against the problem's own oracles,
    for sampled LFD with merged duplicates (varying S) and a logistic problem."""
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    res = ft.run(p, "lfd", rounds=4, local_steps=3, lr=0.1, clients_per_round=3, batch_size=2, seed=1,
                 trace="local")
    X, lam = ldq.virtual_averages(res.trace), ldq.traced_diversity(p, res.trace)
    assert X.shape == (12, p.dim) and lam.shape == (12,)
    for r, rt in enumerate(res.trace):
        for k in range(3):
            assert np.allclose(X[3 * r + k], rt.virtual_average()[k], rtol=1e-13, atol=1e-15)
            G = np.array([p.client_grad(int(j), rt["local"][s, k]) for s, j in enumerate(rt.clients)])
            assert lam[3 * r + k] == pytest.approx(ld.diversity(G, rt.weights), rel=1e-10)
    assert np.allclose(ldq.objective_gradients(p, X)[5], p.grad(X[5]), rtol=1e-12, atol=1e-14)


@given(seed=st.integers(0, 2 ** 31 - 1), m=st.integers(2, 6), data=st.data())
def test_minibatch_variance_with_and_without_replacement(seed, m, data):
    """docs/papers/localdescent.md §2.3: the minibatch gradient of B rows drawn i.i.d. has variance
    exactly V/B (Assumption 3 with equality), B distinct rows (the default) (m - B)/(m - 1) V/B <= V/B,
    with V the per-sample variance of client_grad; enumerated over every minibatch of the library's
    own minibatch gradient, not sampled."""
    import itertools
    B = data.draw(st.integers(1, m))
    rng = np.random.default_rng(seed)
    d = 3
    A = [rng.normal(size=(m, d)), rng.normal(size=(m + 1, d))]
    p = problems.least_squares(A, [rng.normal(size=m), rng.normal(size=m + 1)], l2=0.1)
    x = rng.normal(size=d)
    start = int(p.client_ptr[0])
    g = p.client_grad(0, x)
    per = np.array([p.client_grad(0, x, np.array([start + j])) for j in range(m)])
    V = np.mean(np.sum((per - g) ** 2, axis=1))

    def var(batches):
        return np.mean([np.sum((p.client_grad(0, x, start + np.array(b)) - g) ** 2) for b in batches])

    with_rep = var(itertools.product(range(m), repeat=B))
    without = var(itertools.combinations(range(m), B))
    scale = max(V, 1e-300)
    assert abs(with_rep - V / B) <= 1e-10 * scale
    assert abs(without - (m - B) / (m - 1) * V / B) <= 1e-10 * scale
    assert without <= V / B + 1e-10 * scale
