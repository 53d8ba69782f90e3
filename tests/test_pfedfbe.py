"""pFedFBE (spec/pfedfbe.md): update rule, FBE identities (§7), FedMiD/FedDualAvg rules, Theorem 1."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import fedtheory as ft
import problems
import validation
from fedtheory.theory import pfedfbe as th


def lasso_problem(seed=0, n=4, m=30, d=5, l1=0.1, scale=1.0):
    rng = np.random.default_rng(seed)
    A = [rng.normal(size=(m, d)) * scale * (1 + 0.3 * i) for i in range(n)]
    b = [a @ rng.normal(size=d) + 0.1 * rng.normal(size=m) for a in A]
    return problems.lasso(A, b, l1=l1), A, b


def soft(u, t):
    return np.sign(u) * np.maximum(np.abs(u) - t, 0)


def reference_rounds(A, b, R, K, step):
    """Plain-loop reference: R rounds of K local ``y = step(y, A_i, b_i, round, k)`` per client from the
    average, started at 0, with full participation and equal weights."""
    x = np.zeros(A[0].shape[1])
    for r in range(R):
        ys = []
        for a, t in zip(A, b):
            y = x.copy()
            for k in range(K):
                y = step(y, a, t, r, k)
            ys.append(y)
        x = np.mean(ys, axis=0)
    return x



@pytest.mark.parametrize("mode", ["exact", "cheap", "fd"])
def test_pfedfbe_rule_on_lasso(mode):
    """Deterministic pFedFBE follows eq. (9) with its own gradient and Hessian formulas."""
    p, A, b = lasso_problem(1)
    lam, eta, K, R, tau = 40.0, 0.01, 4, 6, 0.1

    def step(y, a, t, r, k):
        g = a.T @ (a @ y - t) / len(t)
        Rm = y - soft(y - g / lam, tau / lam)
        if mode == "exact":
            Hv = a.T @ (a @ Rm) / len(t)
        elif mode == "fd":
            dl = 1e-4 / np.linalg.norm(Rm)
            Hv = (a.T @ (a @ (y + dl * Rm) - t) / len(t) - g) / dl
        else:
            Hv = 0.0
        return y - eta * (lam * Rm - Hv)

    x = reference_rounds(A, b, R, K, step)
    kw = {"exact": {}, "cheap": {"variant": "cheap"}, "fd": {"fd_eps": 1e-4}}[mode]
    res = ft.run(p, "pfedfbe", rounds=R, local_steps=K, lr=eta, lam=lam, **kw)
    tol = 1e-10 if mode != "fd" else 1e-9
    assert np.abs(res.x - x).max() <= tol * max(1, np.abs(x).max())


def test_fedmirror_and_feddual_rules():
    p, A, b = lasso_problem(2)
    eta, K, R, tau = 0.05, 3, 5, 0.1
    x = reference_rounds(A, b, R, K, lambda y, a, t, r, k: soft(y - eta * a.T @ (a @ y - t) / len(t), eta * tau))
    assert np.abs(ft.run(p, "fedmirror", rounds=R, local_steps=K, lr=eta).x - x).max() <= 1e-12

    def dual_step(z, a, t, r, k):
        xk = soft(z, (eta * r * K + eta * k) * tau)
        return z - eta * a.T @ (a @ xk - t) / len(t)

    z = reference_rounds(A, b, R, K, dual_step)
    x = soft(z, eta * R * K * tau)
    assert np.abs(ft.run(p, "feddual", rounds=R, local_steps=K, lr=eta).x - x).max() <= 1e-12


def test_cheap_pfedfbe_equals_fedmirror_when_eta_lam_is_one():
    """spec §3.4: eta_l lam = 1 makes the cheap step a proximal-gradient step of length 1/lam (FedMiD)."""
    p, _, _ = lasso_problem(3)
    lam = 20.0
    kw = dict(rounds=8, local_steps=4, lr=1 / lam, batch_size=5, clients_per_round=2, seed=3, record_iterates=True)
    a = ft.run(p, "pfedfbe", lam=lam, variant="cheap", **kw).iterates
    b = ft.run(p, "fedmirror", **kw).iterates
    assert np.abs(a - b).max() <= 1e-13


@given(seed=st.integers(0, 1000), lam=st.floats(0.5, 100))
def test_fbe_value_is_the_minimum_of_4_and_bounded_by_phi(seed, lam):
    """(5) equals the minimum of (4), attained at T_i(x); F_i <= f_i + h."""
    p, _, _ = lasso_problem(seed % 20)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=5)
    i = int(rng.integers(4))
    g = p.client_grad(i, x)

    def inner(z):
        return p.client_value(i, x) + g @ (z - x) + p.l1 * np.abs(z).sum() + lam / 2 * np.sum((z - x) ** 2)
    F = th.fbe_value(p, i, x, lam)
    T = th.prox_point(p, i, x, lam)
    assert F == pytest.approx(inner(T), rel=1e-12, abs=1e-12)
    for _ in range(20):
        assert inner(T + 0.1 * rng.normal(size=5)) >= F - 1e-12
    assert F <= p.client_value(i, x) + p.l1 * np.abs(x).sum() + 1e-12


@given(seed=st.integers(0, 1000))
def test_fbe_gradient_6_matches_finite_differences(seed):
    p, _, _ = lasso_problem(seed % 20)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=5)
    lam = 50.0
    g = th.fbe_grad(p, 0, x, lam)
    h = 1e-6
    fd = np.array([(th.fbe_value(p, 0, x + h * e, lam) - th.fbe_value(p, 0, x - h * e, lam)) / (2 * h)
                   for e in np.eye(5)])
    assert np.allclose(g, fd, rtol=1e-5, atol=1e-6)


def test_equal_minimisers_per_client_and_lam_to_infinity():
    """lam > L: argmin F_i = argmin (f_i + h) (one client); F -> phi as lam -> infinity (O(1/lam))."""
    p1, A, b = lasso_problem(4, n=1)
    L = float(np.linalg.eigvalsh(A[0].T @ A[0] / 30)[-1])
    gt = validation.ground_truth(p1)
    Fs, xF = th.F_star(p1, 2 * L)
    assert np.linalg.norm(xF - gt.x) < 1e-6 and Fs == pytest.approx(gt.f, abs=1e-9)
    p, _, _ = lasso_problem(5)
    x = np.ones(5) * 0.3
    gaps = [abs(th.F_value(p, x, lam) - p.value(x)) for lam in (10.0, 100.0, 1000.0)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] * 1000 == pytest.approx(gaps[1] * 100, rel=0.05)


def test_perfect_personalization_for_lam0_identity_quadratic():
    """f_i = (lam0/2) ||x - c||^2 and lam = lam0: theta_i(w) = argmin (f_i + h) for every w."""
    lam0, c, tau = 3.0, np.array([1.0, -0.05, 0.4]), 0.1
    p = problems.explicit_quadratic(lam0 * np.eye(3), [lam0 * c], name="lam0")
    p = p.__class__(p.kind, p.M, p.b, p.client_ptr, l1=tau, name="lam0 l1")
    target = soft(c, tau / lam0)                       # argmin lam0/2 ||x - c||^2 + tau ||x||_1
    for w in (np.zeros(3), np.array([5.0, -3.0, 2.0])):
        assert np.allclose(th.prox_point(p, 0, w, lam0), target, atol=1e-14)


@given(seed=st.integers(0, 10 ** 6), gamma=st.floats(1e-3, 10), tau=st.floats(1e-3, 5))
def test_l1_prox_moreau_optimality_firm_nonexpansive(seed, gamma, tau):
    rng = np.random.default_rng(seed)
    v, w = rng.normal(size=6) * 3, rng.normal(size=6) * 3
    p = soft(v, gamma * tau)
    assert np.allclose(v, p + np.clip(v, -gamma * tau, gamma * tau), atol=1e-12)        # Moreau decomposition
    s = (v - p) / gamma                                                                   # in the subdifferential
    slack = 1e-12 * (1 + np.abs(v).max()) / gamma
    assert np.all(np.abs(s) <= tau + slack) and np.allclose(s[p != 0], tau * np.sign(p[p != 0]), atol=slack)
    q = soft(w, gamma * tau)
    assert np.sum((p - q) ** 2) <= (p - q) @ (v - w) + 1e-12                             # firm nonexpansiveness


def test_theorem_1_holds_and_conditions():
    p, _, _ = lasso_problem(6)
    for variant in ("printed", "corrected"):
        v = validation.verify("pfedfbe.theorem_1", p, rounds=20, local_steps=3, clients_per_round=2, batch_size=10,
                              seeds=2, variant=variant)
        assert v.applicable and v.holds, v.report()
    names = [c.name for c in v.conditions]
    assert "lambda > L" in names and "eta_l <= 1/(10 K L_F)" in names
    L = v.details["L"]
    bad = validation.verify("pfedfbe.theorem_1", p, rounds=5, local_steps=3, lam=0.5 * L, seeds=1)
    assert not bad.applicable and "lambda > L" in bad.reason


def test_lemma_1_constant_bounds_the_measured_lipschitz_constant():
    p, _, _ = lasso_problem(7)
    lam = 30.0
    Fs, xF = th.F_star(p, lam)
    c = th.lemma_constants(p, lam, xF, 2.0)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(200):
        x, y = xF + rng.normal(size=5), xF + rng.normal(size=5)
        for i in range(p.n_clients):
            worst = max(worst, np.linalg.norm(th.fbe_grad(p, i, x, lam) - th.fbe_grad(p, i, y, lam)) / np.linalg.norm(x - y))
    assert worst <= c["L_F"]


@given(seed=st.integers(0, 1000), lam=st.floats(1.0, 1000.0))
def test_personalization_shift_bound(seed, lam):
    """|theta_i(x)_j - x_j| <= (|d_j f_i(x)| + tau)/lam for h = tau ||.||_1 (spec §2.4, check 10)."""
    p, _, _ = lasso_problem(seed % 20)
    x = np.random.default_rng(seed).normal(size=5)
    for i in range(p.n_clients):
        g = p.client_grad(i, x)
        shift = np.abs(th.prox_point(p, i, x, lam) - x)
        assert np.all(shift <= (np.abs(g) + p.l1) / lam * (1 + 1e-12) + 1e-15)


def test_full_variant_diverges_when_a_client_has_L_above_lam():
    """spec §3.4 / check 3: the factor 1 - eta q (1 - q/lam) exceeds 1 for q > lam, for every eta > 0
    (here every client has curvature 3 > lam = 2.5 along e_1: F is unbounded below)."""
    Q = [np.diag([3.0, 1.0]), np.diag([3.0, 0.5])]
    p = problems.explicit_quadratic(Q, [[1.0, 0.0], [0.0, 1.0]])
    full = ft.run(p, "pfedfbe", rounds=3000, local_steps=2, lr=0.05, lam=2.5)
    assert full.status == "diverged" or np.linalg.norm(full.x) > 1e6
    ok = ft.run(p, "pfedfbe", rounds=3000, local_steps=2, lr=0.05, lam=4.0)
    assert ok.status == "max_rounds" and np.linalg.norm(ok.x) < 10


def test_federated_lasso_generator_and_support_metrics():
    p = problems.federated_lasso("II", n_clients=5, dim=30, samples=40, seed=1)
    W = p.info["w_clients"]
    assert W.shape == (5, 30) and np.all((W != 0).sum(1) == 10) and np.all(W[:, :8] == 1.0)
    q = problems.federated_lasso("II", n_clients=5, dim=30, samples=40, seed=1, normalization="mse")
    from fedtheory.constants import client_smoothness
    assert client_smoothness(q).max() == pytest.approx(2 * client_smoothness(p).max(), rel=1e-12)
    res = ft.run(p, "pfedfbe", rounds=5, local_steps=3, lr=1e-3, lam=500.0)
    for col in ("pm_precision", "pm_recall", "pm_f1", "gm_f1", "pm_shift_inf"):
        assert col in res.history
    from fedtheory.metrics import support_scores
    assert support_scores(W[0], W[0]) == (1.0, 1.0, 1.0)


def test_ditto_pfedme_pfedprox_rules():
    """Personalization baselines follow spec §5 (own loops, deterministic, lasso)."""
    p, A, b = lasso_problem(8)
    eta, K, R, tau = 0.02, 3, 4, 0.1
    g = [lambda x, a=a, t=t: a.T @ (a @ x - t) / len(t) for a, t in zip(A, b)]
    # Ditto (lam_d = 0.5): FedMiD global, personal prox steps pulled to x^t
    x, V = np.zeros(5), np.zeros((4, 5))
    for _ in range(R):
        ys = []
        for i in range(4):
            y, v = x.copy(), V[i].copy()
            for _ in range(K):
                y = soft(y - eta * g[i](y), eta * tau)
                v = soft(v - eta * (g[i](v) + 0.5 * (v - x)), eta * tau)
            ys.append(y)
            V[i] = v
        x = np.mean(ys, axis=0)
    r = ft.run(p, "ditto", rounds=R, local_steps=K, lr=eta, lam_d=0.5)
    assert np.abs(r.x - x).max() <= 1e-12 and np.abs(r.state["v"] - V).max() <= 1e-12
    # pFedMe (lam_p = 2, eta_p = 0.05, inner 3, beta = 0.8, weight decay 0.001)
    x, Th = np.zeros(5), np.zeros((4, 5))
    for _ in range(R):
        ws = []
        for i in range(4):
            w, th = x.copy(), x.copy()
            for _ in range(K):
                for _ in range(3):
                    th = soft(th - 0.05 * (g[i](th) + 2.0 * (th - w) + 0.001 * th), 0.05 * tau)
                w = w - eta * 2.0 * (w - th)
            ws.append(w)
            Th[i] = th
        x = 0.2 * x + 0.8 * np.mean(ws, axis=0)
    r = ft.run(p, "pfedme", rounds=R, local_steps=K, lr=eta, lam_p=2.0, eta_p=0.05, inner=3, beta=0.8)
    assert np.abs(r.x - x).max() <= 1e-12 and np.abs(r.state["theta"] - Th).max() <= 1e-12
    # personalized FedProx (mu = 0.3)
    x = np.zeros(5)
    for _ in range(R):
        ys = []
        for i in range(4):
            y = x.copy()
            for _ in range(K):
                y = soft(y - eta * (g[i](y) + 0.3 * (y - x)), eta * tau)
            ys.append(y)
        x = np.mean(ys, axis=0)
    r = ft.run(p, "pfedprox", rounds=R, local_steps=K, lr=eta, mu=0.3)
    assert np.abs(r.x - x).max() <= 1e-12
