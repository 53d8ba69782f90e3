"""Deterministic runs follow the papers' update rules to ~1e-12 (spec/fedspeed.md §3, spec/localdescent.md §2).

The reference loops below are written from the specs with their own gradient formulas
(not the library's oracles), for least squares and logistic regression, dense and CSR.
"""
import numpy as np
import pytest
import scipy.sparse as sp

import fedtheory as ft
import problems


def _data(kind, sparse, seed=0, n=5, d=4):
    rng = np.random.default_rng(seed)
    A, b = [], []
    for i in range(n):
        a = rng.normal(size=(12 + 3 * i, d)) + 0.5 * i
        if sparse:
            a = sp.csr_matrix(a * (rng.random(a.shape) < 0.5))
        A.append(a)
        t = a @ rng.normal(size=d) + rng.normal(size=a.shape[0])
        b.append(np.sign(t) + (t == 0) if kind == "logistic" else t)
    return A, b


def _grad_fn(kind, A, b, l2):
    def g(i, x):
        a = A[i].toarray() if sp.issparse(A[i]) else A[i]
        z = a @ x
        if kind == "least_squares":
            return a.T @ (z - b[i]) / a.shape[0] + l2 * x
        return -a.T @ (b[i] / (1 + np.exp(b[i] * z))) / a.shape[0] + l2 * x
    return g


def _problem(kind, A, b, l2):
    return problems.least_squares(A, b, l2=l2) if kind == "least_squares" else problems.logistic(A, b, l2=l2)


CASES = [(k, s) for k in ("least_squares", "logistic") for s in (False, True)]


@pytest.mark.parametrize("kind,sparse", CASES)
def test_fedavg_rule(kind, sparse):
    A, b = _data(kind, sparse)
    g = _grad_fn(kind, A, b, 0.01)
    lr, K, R, eta_g = 0.05, 4, 6, 0.7
    x = np.zeros(4)
    for _ in range(R):
        deltas = []
        for i in range(len(A)):
            y = x.copy()
            for _ in range(K):
                y = y - lr * g(i, y)
            deltas.append(y - x)
        x = x + eta_g * np.mean(deltas, axis=0)
    res = ft.run(_problem(kind, A, b, 0.01), "fedavg", rounds=R, local_steps=K, lr=lr, server_lr=eta_g)
    assert np.abs(res.x - x).max() <= 1e-12


@pytest.mark.parametrize("kind,sparse", CASES)
def test_fedprox_rule(kind, sparse):
    A, b = _data(kind, sparse, seed=1)
    g = _grad_fn(kind, A, b, 0.0)
    lr, K, R, mu = 0.05, 3, 5, 0.3
    x = np.zeros(4)
    for _ in range(R):
        ys = []
        for i in range(len(A)):
            y = x.copy()
            for _ in range(K):
                y = y - lr * (g(i, y) + mu * (y - x))
            ys.append(y)
        x = x + np.mean(ys, axis=0) - x
    res = ft.run(_problem(kind, A, b, 0.0), "fedprox", rounds=R, local_steps=K, lr=lr, mu=mu)
    assert np.abs(res.x - x).max() <= 1e-12


@pytest.mark.parametrize("kind,sparse", CASES)
def test_scaffold_option_ii_rule(kind, sparse):
    A, b = _data(kind, sparse, seed=2)
    n = len(A)
    g = _grad_fn(kind, A, b, 0.02)
    lr, K, R = 0.05, 3, 6
    x, c, ci = np.zeros(4), np.zeros(4), np.zeros((n, 4))
    for _ in range(R):
        dx, dc = [], []
        for i in range(n):
            y = x.copy()
            for _ in range(K):
                y = y - lr * (g(i, y) - ci[i] + c)
            new = ci[i] - c + (x - y) / (K * lr)
            dx.append(y - x)
            dc.append(new - ci[i])
            ci[i] = new
        x = x + np.mean(dx, axis=0)
        c = c + np.sum(dc, axis=0) / n
    res = ft.run(_problem(kind, A, b, 0.02), "scaffold", rounds=R, local_steps=K, lr=lr)
    assert np.abs(res.x - x).max() <= 1e-12
    assert np.abs(res.state["c"] - c).max() <= 1e-12
    assert np.abs(res.state["c_i"] - ci).max() <= 1e-12


@pytest.mark.parametrize("kind,sparse", CASES)
def test_lfgd_full_participation_rule(kind, sparse):
    """LFGD with clients_per_round=None: the q-weighted average of E local GD steps (weights = q)."""
    A, b = _data(kind, sparse, seed=3)
    n = len(A)
    q = np.arange(1, n + 1) / np.sum(np.arange(1, n + 1))
    g = _grad_fn(kind, A, b, 0.0)
    E, R = 3, 4
    sched = lambda t: 0.1 / (1 + 0.1 * t)  # noqa: E731  (a decreasing global-step schedule)
    x, t = np.zeros(4), 0
    for _ in range(R):
        ys = []
        for j in range(n):
            y = x.copy()
            for s in range(E):
                y = y - sched(t + s) * g(j, y)
            ys.append(y)
        x = q @ np.array(ys)
        t += E
    p = problems.least_squares(A, b, weights=q) if kind == "least_squares" else problems.logistic(A, b, weights=q)
    res = ft.run(p, "lfd", rounds=R, local_steps=E, lr=sched)
    assert np.abs(res.x - x).max() <= 1e-12


@pytest.mark.parametrize("E", [1, 3, 10])
def test_lfgd_fixed_point_closed_form(E):
    """spec/localdescent.md identity #11: local GD with E steps converges to
    x_E = [sum_j q_j (I - (I - eta A_j)^E)]^{-1} sum_j q_j (I - (I - eta A_j)^E) b_j,
    with f_j = 1/2 (x - b_j)^T A_j (x - b_j); x_E = x* iff E = 1 (distinct minimisers)."""
    p = problems.quadratic(5, 4, L=1.0, mu=0.3, heterogeneity=0.5, seed=11, hessian="distinct")
    eta = 0.4
    M, rhs = np.zeros((4, 4)), np.zeros(4)
    for j in range(5):
        Q, c = p.client_data(j)
        P = np.eye(4) - np.linalg.matrix_power(np.eye(4) - eta * Q, E)
        M += p.weights[j] * P
        rhs += p.weights[j] * P @ np.linalg.solve(Q, c)
    x_E = np.linalg.solve(M, rhs)
    res = ft.run(p, "lfd", rounds=3000, local_steps=E, lr=eta, tol=1e-30)
    assert np.abs(res.x - x_E).max() < 1e-12
    gap = np.linalg.norm(x_E - p.info["x_star"])
    assert (gap < 1e-12) if E == 1 else (gap > 1e-4)


def test_the_public_checks_catch_a_twin_that_ignores_the_schedule_and_a_server_that_ignores_the_weights(
        forget_user_modules):
    """Two broken copies of the user package's server heavy ball, each passing every check before: a
    NumPy twin that uses the first step size at every local step (it agrees under a constant step
    size) and a server that averages without ctx.weights (every suite problem had uniform weights)."""
    from dataclasses import dataclass
    from typing import ClassVar

    import numpy as np
    import pytest

    from fedtheory import registry
    from fedtheory.testing.checks import check_backends_agree, check_client_weights_reach_the_iterates
    registry.import_modules(["userpkg"])
    heavy_ball = registry.get_algorithm("userpkg_heavyball")

    class FirstStepOnly:
        """The round context with every local step size replaced by the first."""
        def __init__(self, ctx):
            self._ctx, self.lrs = ctx, np.full_like(ctx.lrs, ctx.lrs[0])

        def __getattr__(self, name):
            return getattr(self._ctx, name)

    @dataclass(frozen=True)
    class FirstLrTwin(heavy_ball):
        name: ClassVar[str] = "test_first_lr_twin"
        reductions: ClassVar[list] = []

        def local_round_reference(self, state, ctx):
            return super().local_round_reference(state, FirstStepOnly(ctx))

    @dataclass(frozen=True)
    class MeanServer(heavy_ball):
        name: ClassVar[str] = "test_mean_server"
        reductions: ClassVar[list] = []

        def server_update(self, state, ctx, messages):
            x = state["x"]
            new = messages["y"].mean(axis=0) + self.beta * (x - state["x_prev"])
            return {**state, "x": new, "x_prev": x, "server_step": ((new - x) ** 2).sum() ** 0.5}
    registry.register(FirstLrTwin)
    registry.register(MeanServer)
    check_backends_agree("userpkg_heavyball")
    check_client_weights_reach_the_iterates("userpkg_heavyball")
    with pytest.raises(AssertionError, match="numba vs python differ"):
        check_backends_agree("test_first_lr_twin")
    with pytest.raises(AssertionError, match="the server does not weigh the clients by ctx.weights"):
        check_client_weights_reach_the_iterates("test_mean_server")


def test_an_invalid_declaration_fails_every_check_with_an_assertion_error():
    """A hyperparameter without constraints: the checks that run the algorithm report it as the
    failed check it is (AssertionError naming the algorithm and the hyperparameter), as the suite's
    contract says, not a TypeError; the class itself still raises a TypeError (DeclarationError)."""
    from dataclasses import dataclass
    from typing import ClassVar

    import pytest

    from fedtheory.exceptions import DeclarationError
    from fedtheory.registry import ALGORITHMS, get_algorithm, register
    from fedtheory.testing import yield_checks

    @dataclass(frozen=True)
    class Unconstrained(get_algorithm("fedprox")):
        extra: float = 1.0
        name: ClassVar[str] = "test_unconstrained"
        compiled_rules: ClassVar = None
        reductions: ClassVar[list] = []

    register(Unconstrained)
    try:
        with pytest.raises(TypeError, match="'extra' without constraints"):
            Unconstrained()
        assert issubclass(DeclarationError, TypeError)
        failed = []
        for check in yield_checks("test_unconstrained"):       # any other exception fails this test
            try:
                check("test_unconstrained")
            except AssertionError as e:
                assert "test_unconstrained" in str(e)
                failed.append(check.__name__)
        assert len(failed) >= 9, failed            # those that run it (the others have nothing to compare)
    finally:
        ALGORITHMS.pop("test_unconstrained", None)
