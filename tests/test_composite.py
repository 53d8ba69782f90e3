"""Composite problems beyond l1 (spec/pfedfbe.md §4): group lasso, nuclear-norm matrix completion."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import fedtheory as ft
import problems
import validation
from fedtheory.exceptions import DataError
from fedtheory.theory import pfedfbe_envelope as env


def group_problem(seed=0, l1=0.5):
    rng = np.random.default_rng(seed)
    A = [rng.normal(size=(30, 8)) * (1 + 0.2 * i) for i in range(3)]
    b = [a @ np.r_[1, 1, 0, 0, 0, 0, 2, 2] + 0.1 * rng.normal(size=30) for a in A]
    return problems.group_lasso(A, b, l1=l1, groups=[0, 0, 1, 1, 2, 2, 3, -1]), A, b


def independent_prox_grad(grad, prox, L, x0, iters=200000):
    """Plain proximal gradient (ISTA), written independently of the library's polish."""
    x = x0.copy()
    for _ in range(iters):
        x_new = prox(x - grad(x) / L, 1.0 / L)
        if np.max(np.abs(x_new - x)) < 1e-15:
            break
        x = x_new
    return x


def test_group_lasso_ground_truth_agrees_with_independent_solver():
    p, A, b = group_problem()
    gt = validation.ground_truth(p, cache=False)
    n = len(A)

    def grad(x):
        return sum(a.T @ (a @ x - t) / len(t) for a, t in zip(A, b)) / n

    def prox(v, step):
        out = v.copy()
        for g in (0, 1, 2):
            m = slice(2 * g, 2 * g + 2)
            nv = np.linalg.norm(v[m])
            out[m] = 0 if nv <= step * 0.5 else v[m] * (1 - step * 0.5 / nv)
        m = slice(6, 7)                                        # group 3 is coordinate 6 alone
        nv = np.linalg.norm(v[m])
        out[m] = 0 if nv <= step * 0.5 else v[m] * (1 - step * 0.5 / nv)
        return out                                             # coordinate 7 unpenalized
    L = max(np.linalg.eigvalsh(sum(a.T @ a / len(a) for a in A) / n))
    x = independent_prox_grad(grad, prox, L, np.zeros(8))
    assert np.abs(x - gt.x).max() < 1e-9 and gt.residual < 1e-10
    assert p.value(x) == pytest.approx(gt.f, abs=1e-12)


def test_nuclear_ground_truth_agrees_with_independent_solver():
    p = problems.matrix_completion(n_clients=3, shape=(5, 4), samples=30, seed=2, shared_rank=2)
    gt = validation.ground_truth(p, cache=False)
    A = p.M
    w = p._row_w

    def grad(x):
        return A.T @ (w * (A @ x - p.b))

    def svt(v, step):
        U, s, Vt = np.linalg.svd(v.reshape(5, 4), full_matrices=False)
        return (U @ np.diag(np.maximum(s - step * 0.1, 0)) @ Vt).ravel()
    L = np.linalg.eigvalsh((A.T * w) @ A)[-1]
    x = independent_prox_grad(grad, svt, L, np.zeros(20))
    assert np.abs(x - gt.x).max() < 1e-8 and gt.residual < 1e-10
    assert p.value(x) == pytest.approx(gt.f, abs=1e-12)


@given(seed=st.integers(0, 10 ** 6), gamma=st.floats(1e-2, 5), tau=st.floats(1e-2, 2))
def test_prox_identities_group_and_nuclear(seed, gamma, tau):
    """Moreau decomposition v = prox_{g h}(v) + g prox_{h*/g}(v/g) (projection onto the dual ball),
    optimality (v - p)/g in dh(p), firm nonexpansiveness."""
    rng = np.random.default_rng(seed)
    gp = problems.group_lasso([np.eye(6)], [np.zeros(6)], l1=tau, groups=[0, 0, 1, 1, 2, 2])
    v, u = rng.normal(size=6) * 2, rng.normal(size=6) * 2
    p = gp.prox(v, gamma)
    proj = np.concatenate([blk * min(1, tau / max(np.linalg.norm(blk), 1e-300)) for blk in (v / gamma).reshape(3, 2)])
    assert np.allclose(v, p + gamma * proj, atol=1e-12)
    for blk_p, blk_v in zip(p.reshape(3, 2), v.reshape(3, 2)):
        s = (blk_v - blk_p) / gamma
        if np.linalg.norm(blk_p) > 0:
            assert np.allclose(s, tau * blk_p / np.linalg.norm(blk_p), atol=1e-10)
        else:
            assert np.linalg.norm(s) <= tau * (1 + 1e-12)
    q = gp.prox(u, gamma)
    assert np.sum((p - q) ** 2) <= (p - q) @ (v - u) + 1e-12
    npb = problems.matrix_completion(n_clients=1, shape=(4, 3), samples=2, l_nuc=tau, seed=0, shared_rank=2)
    V = rng.normal(size=12)
    P = npb.prox(V, gamma)
    U_, s_, Vt_ = np.linalg.svd((V / gamma).reshape(4, 3), full_matrices=False)
    proj = (U_ @ np.diag(np.minimum(s_, tau)) @ Vt_).ravel()                 # projection on the spectral ball
    assert np.allclose(V, P + gamma * proj, atol=1e-10)
    assert npb.h_value(P) <= npb.h_value(V) + 1e-12
    # optimality: S = (V - P)/gamma is a subgradient of tau ||.||_* at P: ||S||_2 <= tau, <S, P> = tau ||P||_*
    S_ = ((V - P) / gamma).reshape(4, 3)
    assert np.linalg.norm(S_, 2) <= tau * (1 + 1e-9) + 1e-12
    assert np.sum(S_ * P.reshape(4, 3)) == pytest.approx(npb.h_value(P), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", ["pfedfbe", "fedmirror", "feddual", "ditto", "pfedme", "pfedprox"])
def test_composite_kernels_match_numpy_twins(name):
    """The Numba prox (block soft thresholding, SVT) equals problem.prox: same iterates both backends."""
    gp, _, _ = group_problem(1)
    mc = problems.matrix_completion(n_clients=4, shape=(5, 4), samples=30, seed=1, shared_rank=2)
    kw = {"pfedfbe": dict(lam=60.0, lr=0.005), "fedmirror": dict(lr=0.02), "feddual": dict(lr=0.02),
          "ditto": dict(lr=0.02), "pfedme": dict(lr=0.02, eta_p=0.01, lam_p=2.0, inner=2),
          "pfedprox": dict(lr=0.02, mu=0.1)}[name]
    for p in (gp, mc):
        for extra in ({}, dict(batch_size=5, clients_per_round=2)):
            a = ft.run(p, name, rounds=4, local_steps=3, seed=2, record_iterates=True, **kw, **extra).iterates
            b = ft.run(p, name, rounds=4, local_steps=3, seed=2, record_iterates=True, backend="python", **kw,
                       **extra).iterates
            assert np.abs(a - b).max() <= 1e-11 * max(1, np.abs(a).max())


def test_fbe_identities_group_and_nuclear():
    """(5) is the minimum of (4) (T beats random perturbations) and (6) matches finite differences."""
    rng = np.random.default_rng(0)
    gp, _, _ = group_problem(2)
    mc = problems.matrix_completion(n_clients=2, shape=(4, 4), samples=30, seed=3, shared_rank=2)
    for p, lam in ((gp, 40.0), (mc, 200.0)):
        x = rng.normal(size=p.dim) * 0.5
        g = p.client_grad(0, x)
        T = env.prox_point(p, 0, x, lam)

        def inner(z):
            return p.client_value(0, x) + g @ (z - x) + p.h_value(z) + lam / 2 * np.sum((z - x) ** 2)
        F = env.fbe_value(p, 0, x, lam)
        assert F == pytest.approx(inner(T), rel=1e-12)
        assert all(inner(T + 0.05 * rng.normal(size=p.dim)) >= F - 1e-12 for _ in range(200))
        h = 1e-6
        fd = np.array([(env.fbe_value(p, 0, x + h * e, lam) - env.fbe_value(p, 0, x - h * e, lam)) / (2 * h)
                       for e in np.eye(p.dim)])
        assert np.allclose(env.fbe_grad(p, 0, x, lam), fd, rtol=1e-5, atol=1e-5)


def test_matrix_completion_metrics_and_errors():
    mc = problems.matrix_completion(n_clients=3, shape=(6, 6), samples=40, seed=0)
    W = mc.info["W_clients"]
    assert np.all([np.linalg.matrix_rank(w.reshape(6, 6)) == 5 for w in W])
    h = ft.run(mc, "pfedfbe", rounds=3, local_steps=2, lr=0.001, lam=200.0).history
    for col in ("pm_rank", "gm_rank", "pm_recovery", "gm_recovery"):
        assert col in h
    with pytest.raises(DataError, match="needs 'groups'"):
        problems.group_lasso([np.eye(3)], [np.zeros(3)], l1=0.1, groups=[0, 1])
    with pytest.raises(ValueError, match="'shared_rank' parameter"):
        problems.matrix_completion(shape=(4, 4), shared_rank=4)
