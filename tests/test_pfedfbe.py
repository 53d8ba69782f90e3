"""pFedFBE (spec/pfedfbe.md): update rule, FBE identities (§7), FedMiD/FedDualAvg rules, Theorem 1."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import fedtheory as ft
import problems
import validation
from fedtheory.theory import pfedfbe as th
from fedtheory.theory import pfedfbe_envelope as env


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
    F = env.fbe_value(p, i, x, lam)
    T = env.prox_point(p, i, x, lam)
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
    g = env.fbe_grad(p, 0, x, lam)
    h = 1e-6
    fd = np.array([(env.fbe_value(p, 0, x + h * e, lam) - env.fbe_value(p, 0, x - h * e, lam)) / (2 * h)
                   for e in np.eye(5)])
    assert np.allclose(g, fd, rtol=1e-5, atol=1e-6)


def test_equal_minimisers_per_client_and_lam_to_infinity():
    """lam > L: argmin F_i = argmin (f_i + h) (one client); F -> phi as lam -> infinity (O(1/lam))."""
    p1, A, b = lasso_problem(4, n=1)
    L = float(np.linalg.eigvalsh(A[0].T @ A[0] / 30)[-1])
    gt = validation.ground_truth(p1)
    Fs, xF = env.F_star(p1, 2 * L)
    assert np.linalg.norm(xF - gt.x) < 1e-6 and Fs == pytest.approx(gt.f, abs=1e-9)
    p, _, _ = lasso_problem(5)
    x = np.ones(5) * 0.3
    gaps = [abs(env.F_value(p, x, lam) - p.value(x)) for lam in (10.0, 100.0, 1000.0)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] * 1000 == pytest.approx(gaps[1] * 100, rel=0.05)


def test_perfect_personalization_for_lam0_identity_quadratic():
    """f_i = (lam0/2) ||x - c||^2 and lam = lam0: theta_i(w) = argmin (f_i + h) for every w."""
    lam0, c, tau = 3.0, np.array([1.0, -0.05, 0.4]), 0.1
    p = problems.explicit_quadratic(lam0 * np.eye(3), [lam0 * c], name="lam0")
    p = p.__class__(p.kind, p.M, p.b, p.client_ptr, l1=tau, name="lam0 l1")
    target = soft(c, tau / lam0)                       # argmin lam0/2 ||x - c||^2 + tau ||x||_1
    for w in (np.zeros(3), np.array([5.0, -3.0, 2.0])):
        assert np.allclose(env.prox_point(p, 0, w, lam0), target, atol=1e-14)


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
    roles = {c.name: c.role for c in v.conditions}
    assert roles["lambda > L"] == "stated" and roles["eta_l <= 1/(10 K L_F)"] == "stated"
    assert sorted(set(roles.values())) == ["hidden", "informational", "stated"]
    L = v.details["L"]
    bad = validation.verify("pfedfbe.theorem_1", p, rounds=5, local_steps=3, lam=0.5 * L, seeds=1)
    assert not bad.applicable and "lambda > L" in bad.reason
    big = validation.verify("pfedfbe.theorem_1", p, rounds=5, local_steps=3, lr=10 * v.details["lr"], seeds=1)
    assert not big.applicable and big.reason == "fails eta_l <= 1/(10 K L_F)"


def _paper_printed_rhs(v, p, R, K, b):
    """Theorem 1 exactly as printed, from the constants of Assumption 1 in ``v.details``: Lemma 2 defines
    gamma_F := 24 gamma_G^2 + 12 B^2 gamma_H^2/lam^2 (the theorem squares it), Lemma 3 prints the coefficient
    1 on sigma_G^2 sigma_H^2, the drift term has no L_F^2."""
    d = v.details
    lam, eta = d["lam"], d["lr"]
    gamma_F = 24 * d["gamma_G"] ** 2 + 12 * d["B"] ** 2 * d["gamma_H"] ** 2 / lam ** 2
    sigma_F2 = (12 * d["sigma_G"] ** 2 / b + 12 * d["B"] ** 2 * d["sigma_H"] ** 2 / (b * lam ** 2)
                + 1 * d["sigma_G"] ** 2 * d["sigma_H"] ** 2 / (b * b * lam ** 2))
    Delta = env.F_value(p, np.zeros(p.dim), lam) - d["F_star"]
    return (4 * Delta / (eta * K * R) + 1600 * eta ** 2 * K ** 2 * (gamma_F ** 2 + 4 * sigma_F2)
            + 8 * d["L_F"] * eta * (d["q_S"] * gamma_F ** 2 + sigma_F2) + 16 * d["r"] * d["sigma_G"] ** 2)


def test_theorem_1_printed_is_the_papers_formula():
    """Fix (e): "printed" is Theorem 1 with Lemmas 1-3 as the paper prints them (coefficient 1 in Lemma 3,
    gamma_F of Lemma 2 squared, no L_F^2), recomputed from the reported constants."""
    p, _, _ = lasso_problem(6)
    v = validation.verify("pfedfbe.theorem_1", p, rounds=20, local_steps=3, clients_per_round=2, batch_size=10,
                          seeds=1, variant="printed")
    assert v.bound == pytest.approx(_paper_printed_rhs(v, p, 20, 3, 10), rel=1e-12)


def test_theorem_1_printed_bound_by_hand():
    """gamma_F = 24 * 1 + 12 * 1 * 4 / 4 = 36, sigma_F^2 = 12 * 4/4 + 12 * 9/16 + 36/64 = 19.3125;
    RHS = 4/(0.01 * 10) + 1600e-4 * 4 * (36^2 + 4 * 19.3125) + 8 * 10 * 0.01 * (0.5 * 36^2 + 19.3125) + 16 * 0.1 * 4
        = 40 + 878.88 + 533.85 + 6.4 = 1459.13."""
    args = dict(Delta_F=1.0, eta=0.01, K=2, R=5, lam=2.0, L_F=10.0, B=1.0, gamma_G=1.0, gamma_H=2.0, sigma_G=2.0,
                sigma_H=3.0, q_S=0.5, r=0.1, b_g=4, b_H=4)
    b = th.theorem1_bound("printed", **args)
    assert b["terms"] == pytest.approx([40.0, 878.88, 533.85, 6.4], rel=1e-14)
    assert b["bound"] == pytest.approx(1459.13, rel=1e-14)
    # the named corrections: coefficient 3 adds 2 * 36/64 = 1.125 to sigma_F^2; Lemma 2 read as gamma_F^2 = 36;
    # L_F^2 = 100 multiplies the drift term
    assert th.theorem1_bound("lemma3_proof", **args)["sigma_F2"] == pytest.approx(20.4375, rel=1e-14)
    assert th.theorem1_bound("lemma2_corrected", **args)["gamma_F2"] == pytest.approx(36.0, rel=1e-14)
    assert th.theorem1_bound("theorem_L_F2", **args)["terms"][1] == pytest.approx(87888.0, rel=1e-14)
    c = th.theorem1_bound("corrected", **args)
    assert c["terms"] == pytest.approx([40.0, 64 * (36 + 4 * 20.4375), 0.8 * (18 + 20.4375), 6.4], rel=1e-14)
    assert set(th.SPEC.variants) == set(th.FIXES) and th.SPEC.default_variant == "corrected"
    assert all(var.description for var in th.SPEC.variants.values())


def test_theorem_1_measures_the_registered_algorithm():
    """The LHS is ||grad F||^2 at the per-step mean of the local paths of ft.run("pfedfbe") (recomputed here
    point by point with F_grad), the runs reproduce, and the ball C holds every traced iterate and prox point."""
    p, _, _ = lasso_problem(6)
    K, R = 3, 8
    v = validation.verify("pfedfbe.theorem_1", p, rounds=R, local_steps=K, clients_per_round=2, batch_size=10,
                          seeds=2)
    assert not hasattr(th, "simulate") and v.algorithm == "pfedfbe" and len(v.runs) == 2
    kw = v.run_kwargs
    assert (kw["lam"], kw["fd_eps"], kw["variant"], kw["hvp_batch"], kw["batch_replacement"], kw["sampling"]) == \
        (v.details["lam"], 0.0, "full", "independent", False, "uniform")
    assert np.array_equal(ft.run(p, v.algorithm, **kw).x, v.runs[0].x)
    lam, xF = v.details["lam"], v.details["measurement"]["x_F"]
    radius = 0.0
    for s, res in enumerate(v.runs):
        assert res.status == "max_rounds" and len(res.trace) == R
        g2 = []
        for rt in res.trace:
            Y = rt["local"]
            assert Y.shape == (2, K + 1, p.dim) and np.array_equal(Y[:, 0], np.repeat(rt.x[None], 2, 0))
            for k in range(K):
                g = env.F_grad(p, Y[:, k].mean(0), lam)
                g2.append(g @ g)
        assert v.details["measurement"]["values"][s] == pytest.approx(np.mean(g2), rel=1e-10)
        pts = np.concatenate([np.concatenate(rt["local"]) for rt in res.trace]
                             + [np.concatenate(rt["prox_point"][:, :K]) for rt in res.trace])
        radius = max(radius, np.linalg.norm(pts - xF, axis=1).max())
    assert radius == pytest.approx(v.details["measurement"]["radius"], rel=1e-14)
    assert v.measured == pytest.approx(np.mean(v.details["measurement"]["values"]), rel=1e-14)


def test_F_grad_points_matches_F_grad():
    p, _, _ = lasso_problem(9)
    X = np.random.default_rng(1).normal(size=(7, 5)) * 2
    assert np.allclose(env.F_grad_points(p, X, 25.0), [env.F_grad(p, x, 25.0) for x in X], rtol=1e-12, atol=1e-12)


def test_theorem_1_not_applicable_outside_its_setting():
    rng = np.random.default_rng(2)
    p = problems.lasso([rng.normal(size=(m, 4)) for m in (10, 20)], [rng.normal(size=m) for m in (10, 20)], l1=0.1,
                       weights=[0.3, 0.7])
    v = validation.verify("pfedfbe.theorem_1", p, rounds=3, local_steps=2, seeds=1)
    assert not v.applicable and "uniform client weights" in v.reason and not v.runs
    q = problems.logistic([rng.normal(size=(10, 3))], [np.sign(rng.normal(size=10))])
    w = validation.verify("pfedfbe.theorem_1", q, rounds=3, local_steps=2, seeds=1)
    assert not w.applicable and "quadratic f_i" in w.reason


def test_lemma_1_constant_bounds_the_measured_lipschitz_constant():
    p, _, _ = lasso_problem(7)
    lam = 30.0
    Fs, xF = env.F_star(p, lam)
    c = th.lemma_constants(p, lam, xF, 2.0)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(200):
        x, y = xF + rng.normal(size=5), xF + rng.normal(size=5)
        for i in range(p.n_clients):
            worst = max(worst, np.linalg.norm(env.fbe_grad(p, i, x, lam) - env.fbe_grad(p, i, y, lam)) / np.linalg.norm(x - y))
    assert worst <= c["L_F"]


@given(seed=st.integers(0, 1000), lam=st.floats(1.0, 1000.0))
def test_personalization_shift_bound(seed, lam):
    """|theta_i(x)_j - x_j| <= (|d_j f_i(x)| + tau)/lam for h = tau ||.||_1 (spec §2.4, check 10)."""
    p, _, _ = lasso_problem(seed % 20)
    x = np.random.default_rng(seed).normal(size=5)
    for i in range(p.n_clients):
        g = p.client_grad(i, x)
        shift = np.abs(env.prox_point(p, i, x, lam) - x)
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
    from fedtheory.runs.metrics import support_scores
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
