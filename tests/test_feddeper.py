"""FedDeper (spec/feddeper.md): update rule, identities C1-C5 (theorems: test_feddeper_theory.py)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import fedtheory as ft
import problems
from fedtheory.algorithms.context import RoundContext
from fedtheory.registry import get_algorithm
from test_update_rules import CASES, _data, _grad_fn, _problem


def feddeper_reference(g, n, d, R, K, lr, rho, lam, sampled=None):
    """spec §2.2 pseudo-code, literally (v_coupling = current, same minibatch)."""
    x = np.zeros(d)
    V = np.zeros((n, d))
    xs = [x.copy()]
    for t in range(R):
        S_t = range(n) if sampled is None else sampled[t]
        ys = []
        for i in S_t:
            y, v = x.copy(), V[i].copy()
            for _ in range(K):
                gy, gv = g(i, y), g(i, v)
                y_new = y - lr * gy - rho * (v + y - 2 * x)
                v_new = v - lr * gv
                y, v = y_new, v_new
            V[i] = (1 - lam) * v + lam * y
            ys.append(y)
        x = x + np.mean([y - x for y in ys], axis=0)
        xs.append(x.copy())
    return np.array(xs), V


@pytest.mark.parametrize("kind,sparse", CASES)
def test_feddeper_rule(kind, sparse):
    A, b = _data(kind, sparse, seed=31)
    g = _grad_fn(kind, A, b, 0.01)
    R, K, lr, rho, lam = 6, 4, 0.05, 0.1, 0.5
    ref, V = feddeper_reference(g, len(A), 4, R, K, lr, rho, lam)
    res = ft.run(_problem(kind, A, b, 0.01), "feddeper", rounds=R, local_steps=K, lr=lr, rho=rho, mix=lam,
                 record_iterates=True)
    assert np.abs(res.iterates - ref).max() <= 1e-12
    assert np.abs(res.state["v"] - V).max() <= 1e-12
    assert res.grad_evals == 2 * R * K * len(A)


def test_feddeper_rule_partial_participation():
    A, b = _data("logistic", False, seed=32, n=6)
    g = _grad_fn("logistic", A, b, 0.0)
    res = ft.run(_problem("logistic", A, b, 0.0), "feddeper", rounds=8, local_steps=3, lr=0.1, rho=0.05, mix=0.7,
                 clients_per_round=2, seed=4, record_iterates=True)
    ref, V = feddeper_reference(g, 6, 4, 8, 3, 0.1, 0.05, 0.7, sampled=res.sampled)
    assert np.abs(res.iterates - ref).max() <= 1e-12 and np.abs(res.state["v"] - V).max() <= 1e-12


@given(seed=st.integers(0, 10 ** 6), K=st.integers(1, 5), lam=st.floats(0, 1), S=st.integers(1, 6))
def test_C2_rho_zero_is_fedavg(seed, K, lam, S):
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    kw = dict(rounds=5, local_steps=K, lr=0.1, batch_size=3, clients_per_round=S, seed=seed, record_iterates=True)
    a = ft.run(p, "feddeper", rho=0.0, mix=lam, **kw).iterates
    b = ft.run(p, "fedavg", **kw).iterates
    assert np.abs(a - b).max() <= 1e-15


def test_C4_K1_lambda1_full_participation_is_sgd_and_C4b_not_with_sampling():
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    kw = dict(rounds=8, local_steps=1, lr=0.1, batch_size=3, seed=2, record_iterates=True)
    a = ft.run(p, "feddeper", rho=0.3, mix=1.0, **kw).iterates
    b = ft.run(p, "fedavg", **kw).iterates                  # K = 1, full participation: minibatch SGD
    assert np.abs(a - b).max() <= 1e-12
    a = ft.run(p, "feddeper", rho=0.3, mix=1.0, clients_per_round=3, **kw).iterates
    b = ft.run(p, "fedavg", clients_per_round=3, **kw).iterates
    assert np.abs(a - b).max() > 1e-6                       # stale v of non-sampled clients


def test_C1_surrogate_gradient_step():
    """One y-step is an SGD step on f_i^rho(y) = f_i(y) + rho/(2 eta) ||v + y - 2x||^2 (finite differences)."""
    p = problems.quadratic(3, 3, heterogeneity=1.0, seed=0, hessian="distinct")
    alg = get_algorithm("feddeper").create(rho=0.2, mix=0.5)
    state = alg.init(p, np.array([0.3, -0.2, 0.5]))
    state["v"][:] = np.array([1.0, 2.0, -1.0])
    eta = 0.1
    ctx = RoundContext(p, 0, np.arange(3, dtype=np.int64), np.full(3, 1 / 3), np.zeros((3, 1, 0), dtype=np.int64),
                       np.zeros((0, 0, 0)), np.full(1, eta))
    Y = alg.local_round(state, ctx)["y"]
    x, v = state["x"], state["v"][0]

    def f_rho(y):
        return p.client_value(0, y) + 0.2 / (2 * eta) * np.sum((v + y - 2 * x) ** 2)
    h = 1e-6
    grad = np.array([(f_rho(x + h * e) - f_rho(x - h * e)) / (2 * h) for e in np.eye(3)])
    assert np.allclose(Y[0], x - eta * grad, atol=1e-8)


@given(seed=st.integers(0, 10 ** 6), K=st.integers(1, 8), rho=st.floats(0, 0.9), lam=st.floats(0, 1))
def test_C5b_unrolled_recursion_for_any_gradient_sequence(seed, K, rho, lam):
    """y_K - x = -sum_k (1-rho)^{K-1-k} [eta g(y_k) + rho (v_k - x)] for arbitrary gradients (zero-gradient
    problem plus explicit noise = the gradients), and v_K = v_0 - eta sum_k g(v_k)."""
    rng = np.random.default_rng(seed)
    n, d = 3, 2
    p = problems.least_squares([np.zeros((2, d))] * n, [np.zeros(2)] * n)
    alg = get_algorithm("feddeper").create(rho=rho, mix=lam)
    state = alg.init(p, rng.normal(size=d))
    state["v"][:] = rng.normal(size=(n, d))
    eta = 0.1
    noise = rng.normal(size=(n, K, d))
    ctx = RoundContext(p, 0, np.arange(n, dtype=np.int64), np.full(n, 1 / n), np.zeros((n, K, 0), dtype=np.int64),
                       noise, np.full(K, eta))
    m = alg.local_round(state, ctx)
    x = state["x"]
    for i in range(n):
        vk = state["v"][i] - eta * np.concatenate([[np.zeros(d)], np.cumsum(noise[i], axis=0)])[:K]
        expect = -sum((1 - rho) ** (K - 1 - k) * (eta * noise[i, k] + rho * (vk[k] - x)) for k in range(K))
        assert np.allclose(m["y"][i] - x, expect, rtol=1e-10, atol=1e-12)
        assert np.allclose(m["v"][i], state["v"][i] - eta * noise[i].sum(0), rtol=1e-12, atol=1e-13)


def test_options_star_coupling_stale_and_independent():
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    r = ft.run(p, "feddeper", rounds=3, local_steps=6, lr=0.1, star=True)
    assert r.grad_evals == 3 * p.n_clients * 3 * 2                   # 3 rounds x n x (6 / 2 steps) x 2 gradients
    base = ft.run(p, "feddeper", rounds=4, local_steps=3, lr=0.1, rho=0.1).x
    for kw in ({"v_coupling": "next"}, {"v_coupling": "frozen"}, {"minibatch": "independent", "batch_size": 3}):
        other = ft.run(p, "feddeper", rounds=4, local_steps=3, lr=0.1, rho=0.1, **kw).x
        assert np.abs(other - base).max() > 1e-8, kw
    a = ft.run(p, "feddeper", rounds=4, local_steps=3, lr=0.1, rho=0.1, clients_per_round=2, seed=3).x
    b = ft.run(p, "feddeper", rounds=4, local_steps=3, lr=0.1, rho=0.1, clients_per_round=2, seed=3,
               stale_v="refresh").x
    assert np.abs(a - b).max() > 1e-8


# Theorems 1 and 2: tests/test_feddeper_theory.py


@pytest.mark.parametrize("backend", ["numba", "python"])
@pytest.mark.parametrize("alg, hp", [("feddeper", dict(rho=0.05, mix=0.5, minibatch="independent")),
                                     ("pfedfbe", dict(lam=20.0, hvp_batch="independent"))])
def test_the_independent_second_minibatch_is_drawn_from_the_clients_own_rows(alg, hp, backend):
    """The second minibatch of FedDeper (minibatch="independent") and pFedFBE (hvp_batch="independent")
    is drawn as the run draws the first: with replacement when batch_replacement=True. It was always
    drawn without, and with batch_size above a client's row count (allowed with replacement)
    Floyd's draw returned other clients' rows (and wrote out of bounds: a double free at B = 200).
    Only client 0 runs here, so client 2's data must not reach the model."""
    import problems

    def make(scale_last):
        rng = np.random.default_rng(0)
        sizes = [3, 3, 19]
        A = [rng.normal(size=(m, 2)) for m in sizes]
        b = [rng.normal(size=m) for m in sizes]
        A[2], b[2] = A[2] * scale_last, b[2] * scale_last
        return problems.least_squares(A, b, l2=0.01)

    for B in (2, 5, 40):
        xs = [ft.run(make(s), alg, rounds=4, local_steps=2, lr=0.05, batch_size=B, batch_replacement=True,
                     client_schedule=[[0]] * 4, seed=0, backend=backend, **hp).x for s in (1.0, 10.0)]
        assert np.array_equal(xs[0], xs[1]), (B, xs)
    # with replacement the draws are not Floyd's: the same seed without replacement gives another model
    kw = dict(rounds=4, local_steps=2, lr=0.05, batch_size=2, client_schedule=[[0]] * 4, seed=0, backend=backend, **hp)
    assert not np.array_equal(ft.run(make(1.0), alg, batch_replacement=True, **kw).x,
                              ft.run(make(1.0), alg, batch_replacement=False, **kw).x)


def test_minibatch_rows_refuses_a_draw_without_replacement_larger_than_a_client():
    from fedtheory._kernels.sampling import minibatch_rows
    u = np.full((1, 1, 4), 0.5)
    with pytest.raises(ValueError, match="larger than a client's rows"):
        minibatch_rows(u, np.array([0]), np.array([3]), False, np.empty((1, 1, 4), dtype=np.int64))
    out = minibatch_rows(u, np.array([0]), np.array([3]), True, np.empty((1, 1, 4), dtype=np.int64))
    assert out.min() >= 0 and out.max() < 3
