"""Property tests (hypothesis) of the identities of spec/fedspeed.md §5 (P1-P14).

P2-P11 are linear algebra of Alg. 1 lines 11, 13, 14, 16 and hold for *any* quasi-gradient
sequence. To feed the library arbitrary sequences, the tests use a problem whose gradient is
identically zero and hand the round an explicit "noise" array: the library's kernel then
sees exactly gt_{i,k} = (1 - alpha) xi_{i,k} + alpha xi_{i,k} (both gradients share the sample),
and the identities are checked on what the library's FedSpeed computes (kernel and server).
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import fedtheory as ft
import problems
from fedtheory.algorithms.context import RoundContext
from fedtheory.registry import get_algorithm
from fedtheory.theory import fedspeed as th

finite = st.floats(-10, 10, allow_nan=False)


def _zero_grad_problem(n, d):
    return problems.least_squares([np.zeros((2, d))] * n, [np.zeros(2)] * n)


def _close(a, b, rel=1e-10):
    scale = max(1.0, float(np.abs(a).max(initial=0)), float(np.abs(b).max(initial=0)))
    return float(np.abs(np.asarray(a) - np.asarray(b)).max(initial=0)) <= rel * scale


def _rounds(n, d, K, T, q, lam, alpha, seed, S=None):
    """Run T rounds of the library's FedSpeed on arbitrary gt; yield per-round records."""
    rng = np.random.default_rng(seed)
    p = _zero_grad_problem(n, d)
    alg = get_algorithm("fedspeed").create(lam=lam, alpha=alpha, rho=0.3, server="alg1")
    eta = q * lam
    state = alg.init(p, rng.normal(size=d))
    for t in range(T):
        clients = np.arange(n, dtype=np.int64) if S is None else np.sort(rng.choice(n, S, replace=False))
        Sn = clients.size
        xi = rng.normal(size=(Sn, K, d)) * rng.uniform(0.1, 10)
        ctx = RoundContext(p, t, clients, np.full(Sn, 1.0 / Sn), np.zeros((Sn, K, 0), dtype=np.int64),
                           xi, np.full(K, eta))
        before = {"x": state["x"].copy(), "ghat": state["ghat"].copy()}
        msgs = alg.local_round(state, ctx)
        gt = (1 - alpha) * xi + alpha * xi
        Y = msgs["y"].copy()
        state = alg.server_update(state, ctx, msgs)
        after = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
        yield dict(before=before, clients=clients, gt=gt, Y=Y, after=after, eta=eta)


params = dict(n=st.integers(1, 6), d=st.integers(1, 8), K=st.integers(1, 60),
              q=st.floats(0.01, 1.0), lam=st.floats(1e-2, 10.0), alpha=st.floats(0, 1),
              seed=st.integers(0, 2 ** 16))


@given(q=st.floats(1e-6, 1.99), K=st.integers(1, 60))
def test_P1_gamma_weights(q, K):
    gk = th.gamma_weights(q, K)
    assert _close(gk.sum(), th.gamma_total(q, K), 1e-12)
    assert _close((gk / gk.sum()).sum(), 1.0, 1e-12)
    if K > 1 and q < 1:
        assert _close(gk[:-1] / gk[1:], np.full(K - 1, 1 - q), 1e-12)
    if q <= 1:
        assert np.all(gk >= 0) and 0 < th.gamma_total(q, K) <= 1


def test_P1_gamma_exceeds_one_for_odd_K_beyond_q_one():
    """The paper's "gamma < 1 when eta_l <= 2 lambda" is false for odd K (spec A15)."""
    assert th.gamma_total(1.5, 3) == pytest.approx(1.125)
    assert th.gamma_weights(1.5, 3).min() < 0


@given(**{**params, "q": st.floats(0.01, 1.99), "T": st.integers(1, 3)})
def test_P2_P3_P4_local_offset_correction_upload(n, d, K, q, lam, alpha, seed, T):
    g = th.gamma_weights(q, K)
    gam = th.gamma_total(q, K)
    for rec in _rounds(n, d, K, T, q, lam, alpha, seed):
        x, gh_prev = rec["before"]["x"], rec["before"]["ghat"]
        for s, i in enumerate(rec["clients"]):
            wsum = np.einsum("k,kd->d", g, rec["gt"][s])                       # sum_k gamma_k gt_k
            off = rec["Y"][s] - x
            assert _close(off, -lam * wsum + gam * lam * gh_prev[i])           # eq. (2)
            assert _close(rec["after"]["ghat"][i], (1 - gam) * gh_prev[i] + wsum)   # eq. (3)
            xhat = rec["Y"][s] - lam * rec["after"]["ghat"][i]                 # line 14
            assert _close(xhat - x, -lam * (2 * wsum + (1 - 2 * gam) * gh_prev[i]))   # P4
            assert _close(xhat - x, 2 * off - lam * gh_prev[i])


@given(**params, S=st.integers(1, 6))
def test_P5_alg1_server_partial_participation(n, d, K, q, lam, alpha, seed, S):
    S = min(S, n)
    g = th.gamma_weights(q, K)
    gam = th.gamma_total(q, K)
    for rec in _rounds(n, d, K, 3, q, lam, alpha, seed, S=S):
        x, gh_prev = rec["before"]["x"], rec["before"]["ghat"]
        terms = [2 * np.einsum("k,kd->d", g, rec["gt"][s]) + (1 - 2 * gam) * gh_prev[i]
                 for s, i in enumerate(rec["clients"])]
        assert _close(rec["after"]["x"] - x, -lam / len(terms) * np.sum(terms, axis=0))
        untouched = np.setdiff1d(np.arange(n), rec["clients"])
        assert np.array_equal(rec["after"]["ghat"][untouched], gh_prev[untouched])   # A6


@given(**params, T=st.integers(2, 8))
def test_P6_to_P9_auxiliary_sequences(n, d, K, q, lam, alpha, seed, T):
    """u^{t+1} = mean_i x_{i,K}^t (appendix indexing), eq. (4), x^t = u^t - lam gbar^{t-1},
    eq. (5) for z, and the closed form of z^t stored by the library."""
    g = th.gamma_weights(q, K)
    gam = th.gamma_total(q, K)
    recs = list(_rounds(n, d, K, T, q, lam, alpha, seed))
    u = [recs[0]["before"]["x"]] + [r["Y"].mean(axis=0) for r in recs]            # u^0..u^T
    for t, r in enumerate(recs):
        gh_prev = r["before"]["ghat"]
        inner = np.mean([np.einsum("k,kd->d", g, r["gt"][i]) + (1 - gam) * gh_prev[i] for i in range(n)], axis=0)
        assert _close(u[t + 1] - u[t], -lam * inner)                                # eq. (4)
        gbar = r["after"]["ghat"].mean(axis=0)                                      # gbar^t
        assert _close(r["after"]["x"], u[t + 1] - lam * gbar)                       # P7
        z_def = u[t + 1] + (1 - gam) / gam * (u[t + 1] - u[t])                      # z^{t+1}
        assert _close(r["after"]["z"], z_def, 1e-9)                                 # P9
        if t >= 1:
            step = np.mean([np.einsum("k,kd->d", g / gam, r["gt"][i]) for i in range(n)], axis=0)
            assert _close(r["after"]["z"] - recs[t - 1]["after"]["z"], -lam * step, 1e-9)   # eq. (5)


@given(**params, T=st.integers(1, 4))
def test_P11_jensen_step(n, d, K, q, lam, alpha, seed, T):
    """Lemma C.5: ||ghat^t||^2 <= (1-gamma)||ghat^{t-1}||^2 + sum_k gamma_k ||gt_k||^2, q in (0, 1]."""
    g = th.gamma_weights(q, K)
    gam = th.gamma_total(q, K)
    for rec in _rounds(n, d, K, T, q, lam, alpha, seed):
        for s, i in enumerate(rec["clients"]):
            lhs = np.sum(rec["after"]["ghat"][i] ** 2)
            rhs = (1 - gam) * np.sum(rec["before"]["ghat"][i] ** 2) + g @ np.sum(rec["gt"][s] ** 2, axis=1)
            assert lhs <= rhs * (1 + 1e-12) + 1e-300


def test_P11_fails_for_q_above_one_odd_K():
    """With q in (1, 2) and odd K, some gamma_k < 0 and the Jensen step fails (spec §5 P11)."""
    violated = 0
    for seed in range(50):
        for rec in _rounds(1, 3, 3, 1, 1.5, 1.0, 0.0, seed):
            g = th.gamma_weights(1.5, 3)
            lhs = np.sum(rec["after"]["ghat"][0] ** 2)
            rhs = g @ np.sum(rec["gt"][0] ** 2, axis=1)
            violated += lhs > rhs
    assert violated > 0


@given(alpha=st.floats(0, 1), rho=st.floats(0, 0.5), seed=st.integers(0, 1000), i=st.integers(0, 3))
def test_P12_quasi_gradient_is_gradient_of_penalised_quadratic(alpha, rho, seed, i):
    """(1-a) grad F(x) + a grad F(x + rho grad F(x)) = (I + a rho Q)(Q x - c) on quadratics."""
    p = problems.quadratic(4, 3, L=1.0, mu=0.2, heterogeneity=1.0, seed=seed, hessian="distinct")
    alg = get_algorithm("fedspeed").create(lam=1.0, alpha=alpha, rho=rho)
    x = np.random.default_rng(seed).normal(size=3)
    state = alg.init(p, x)
    eta = 0.5
    ctx = RoundContext(p, 0, np.array([i], dtype=np.int64), np.ones(1), np.zeros((1, 1, 0), dtype=np.int64),
                       np.zeros((0, 0, 0)), np.full(1, eta))
    y = alg.local_round(state, ctx)["y"][0]
    gt = (x - y) / eta                                     # one step from x^t with ghat = 0
    Q, c = p.client_data(i)
    expect = (np.eye(3) + alpha * rho * Q) @ (Q @ x - c)
    assert _close(gt, expect, 1e-12)


@given(seed=st.integers(0, 10 ** 6), K=st.integers(1, 6), lam=st.floats(0.5, 5.0),
       lr=st.floats(0.01, 0.1), which=st.sampled_from(["alpha", "rho"]))
def test_P13_fedspeed_without_perturbation_is_feddyn(seed, K, lam, lr, which):
    """FedSpeed(alpha=0 or rho=0) == FedDyn(1/lam) == FedPD(p=0, eta=lam) == FedADMM(1/lam),
    iterate by iterate, with minibatches (shared random stream) and full participation;
    FedSpeed(server="dyn") == FedDyn under partial participation too."""
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    off = {"alpha": 0.0, "rho": 0.3} if which == "alpha" else {"alpha": 0.7, "rho": 0.0}
    kw = dict(rounds=6, local_steps=K, lr=lr, batch_size=4, seed=seed, record_iterates=True)
    ref = ft.run(p, "feddyn", alpha=1.0 / lam, **kw).iterates
    for server in ("alg1", "dyn"):
        it = ft.run(p, "fedspeed", lam=lam, server=server, **off, **kw).iterates
        assert _close(it, ref, 1e-12)
    assert _close(ft.run(p, "fedpd", eta=lam, p=0.0, **kw).iterates, ref, 1e-12)
    assert _close(ft.run(p, "fedadmm", rho=1.0 / lam, **kw).iterates, ref, 1e-12)
    part = dict(kw, clients_per_round=2)
    dyn = ft.run(p, "fedspeed", lam=lam, server="dyn", **off, **part).iterates
    assert _close(dyn, ft.run(p, "feddyn", alpha=1.0 / lam, **part).iterates, 1e-12)


def test_P13_alg1_differs_from_feddyn_under_partial_participation():
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    kw = dict(rounds=6, local_steps=3, lr=0.05, clients_per_round=2, seed=1, record_iterates=True)
    a = ft.run(p, "fedspeed", lam=2.0, alpha=0.0, server="alg1", **kw).iterates
    b = ft.run(p, "feddyn", alpha=0.5, **kw).iterates
    assert np.abs(a - b).max() > 1e-3


@pytest.mark.parametrize("alpha,rho", [(0.5, 0.1), (1.0, 0.2), (0.9375, 0.05)])
def test_P14_biased_fixed_point_with_perturbation(alpha, rho):
    """Deterministic, S = n: the limit solves sum_i (I + a rho Q_i)(Q_i x - c_i) = 0 (distinct Hessians)."""
    p = problems.quadratic(5, 3, L=1.0, mu=0.3, heterogeneity=1.0, seed=4, hessian="distinct")
    res = ft.run(p, "fedspeed", rounds=600, local_steps=5, lr=0.1, lam=1.0, alpha=alpha, rho=rho)
    Q = [p.client_data(i)[0] for i in range(5)]
    c = [p.client_data(i)[1] for i in range(5)]
    M = sum((np.eye(3) + alpha * rho * q) @ q for q in Q)
    v = sum((np.eye(3) + alpha * rho * q) @ ci for q, ci in zip(Q, c))
    x_pred = np.linalg.solve(M, v)
    assert np.linalg.norm(res.x - x_pred) < 1e-10
    assert np.linalg.norm(x_pred - p.info["x_star"]) > 1e-4      # a genuine bias (distinct Hessians)
