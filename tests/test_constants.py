"""Problem constants computed from the data (checked against independent computations)."""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import problems
import validation
from fedtheory.truth.problem_constants import gradient_diversity


def test_quadratic_constants_are_the_declared_ones():
    p = problems.quadratic(6, 5, L=4.0, mu=0.5, heterogeneity=0.8, seed=3)
    c = validation.constants(p)
    assert abs(c.L - 4.0) < 1e-12 and abs(c.mu - 0.5) < 1e-12 and abs(c.kappa - 8.0) < 1e-11
    assert abs(c.zeta_star_sq - 0.8) < 1e-12
    assert c.sigma_g_sq_kind == "exact" and abs(c.sigma_g_sq - 0.8) < 1e-12
    assert c.gradient_diversity == np.inf and c.gradient_diversity_kind == "unbounded"
    noisy = problems.quadratic(2, 7, noise=0.3, seed=0)
    assert abs(validation.constants(noisy).sigma_sq - 7 * 0.09) < 1e-15


def test_logistic_smoothness_by_power_iteration():
    p = problems.breast_cancer(n_clients=4, l2=1e-3)
    c = validation.constants(p)
    X = p.M
    w = np.repeat(p.weights / p.client_sizes, p.client_sizes)
    v = np.ones(p.dim)
    for _ in range(3000):
        v = (X.T @ (w * (X @ v))) / 4 + 1e-3 * v
        lam = np.linalg.norm(v)
        v /= lam
    assert abs(c.L - lam) <= 1e-9 * lam
    assert c.mu == 1e-3 and c.mu_star > c.mu
    assert c.L_max >= c.L - 1e-12        # sup of a weighted average <= max of the parts
    assert c.sigma_g_sq_kind == "bound"
    # sigma_g^2 bound holds along random points
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.normal(size=p.dim) * 5
        sg = sum(p.weights[i] * np.sum((p.client_grad(i, x) - p.grad(x)) ** 2) for i in range(4))
        assert sg <= c.sigma_g_sq
    # Li et al.'s Gamma and FedSPS sigma_f^2 (l_i* = 0) orderings
    assert 0 <= c.gamma_gap <= c.sigma_f_sq_zero


def test_gradient_diversity_shared_minimiser_quadratic():
    """sup Lambda = lambda_max(Abar^-1 M Abar^-1) (spec/localdescent.md §3.1), approached by search."""
    p = problems.quadratic(5, 4, L=3.0, mu=0.5, seed=7, hessian="distinct", shared_minimizer=True)
    c = validation.constants(p)
    assert c.gradient_diversity_kind == "exact" and c.zeta_star_sq < 1e-25
    assert 1.0 <= c.gradient_diversity <= c.kappa + 1e-12
    rng = np.random.default_rng(0)
    xs = p.info["x_star"]
    best = 0.0
    for _ in range(3000):
        x = xs + rng.normal(size=4)
        G = np.array([p.client_grad(i, x) for i in range(5)])
        lam = gradient_diversity(G, p.weights)
        assert lam <= c.gradient_diversity * (1 + 1e-9)
        best = max(best, lam)
    assert best > 0.9 * c.gradient_diversity


def test_gradient_diversity_conventions():
    q = np.full(3, 1 / 3)
    assert gradient_diversity(np.zeros((3, 2)), q) == 1.0
    assert gradient_diversity(np.array([[1.0, 0], [-1.0, 0], [0, 0]]), q) == np.inf
    assert abs(gradient_diversity(np.eye(3), q) - 3.0) < 1e-15   # orthogonal: 1/sum q^2


def test_sigma_g_of_a_composite_problem_with_equal_client_hessians_is_the_brute_force_sup():
    """Equal client Hessians make grad f_i - grad F_smooth constant in x, and the exact sigma_g^2 is its
    weighted norm. It was zeta_*^2 = sum_i w_i ||grad f_i(x*)||^2, which adds ||grad F_smooth(x*)||^2:
    not 0 under an l1 term (0.096 too high on the lasso below). Checked at random points."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(6, 3))
    b = [rng.normal(size=6) for _ in range(4)]
    for p in (problems.least_squares([A] * 4, b), problems.lasso([A] * 4, b, l1=0.5)):
        c = validation.constants(p)
        assert c.sigma_g_sq_kind == "exact"
        w = p.weights
        for _ in range(5):
            x = rng.normal(size=3) * 3
            G = np.array([p.client_grad(i, x) for i in range(4)])
            brute = float(w @ np.sum((G - w @ G) ** 2, axis=1))
            assert abs(c.sigma_g_sq - brute) <= 1e-12 * max(1.0, brute), (p.name, c.sigma_g_sq, brute)


def test_feddeper_constants_refuse_unequal_client_weights():
    """FedDeper's constants average the clients uniformly (its theorems state F = (1/n) sum f_i):
    weights [0.9, 0.05, 0.05] gave the uniform problem's beta, B^2_min and G^2 without a word."""
    import pytest
    p = problems.quadratic(3, 2, heterogeneity=1.0, seed=0, weights=[0.9, 0.05, 0.05])
    with pytest.raises(ValueError, match="FedDeper's assumptions are stated for F = \\(1/n\\) sum_i f_i"):
        validation.feddeper_constants(p)
    assert validation.feddeper_constants(problems.quadratic(3, 2, heterogeneity=1.0, seed=0))["beta"] > 0


KEPT = [("fedtheory.constants", "feddeper_assumptions", [(), (2,)]),
        ("fedtheory.theory.fedspeed", "problem_constants", [(), (2, False), (2, True)]),
        ("fedtheory.theory.fedsps_quantities", "sample_constants", [()]),
        ("fedtheory.theory.fedsps_quantities", "client_minima", [()]),
        ("fedtheory.theory.localdescent_quantities", "diversity_sup", [()]),
        ("fedtheory.theory.localdescent_quantities", "_sigma2_B", [(None,), (2,), (2.0,)])]


def _same(a, b):
    if callable(a):                     # (FedDeper's G^2(B^2)): the same values
        return callable(b) and all(_same(a(v), b(v)) for v in (0.5, 1.0, 2.0, 30.0))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    return type(a) is type(b) and (a == b or (a != a and b != b))


@settings(max_examples=80, deadline=None)
@example(which=KEPT[-1], rows=True, n=2, shared=False, noise=0.0, change="noise", seed=0,
         calls=[(1, False, False), (2, False, False)])          # (an int, then the float of its value)
@given(which=st.sampled_from(KEPT), rows=st.booleans(), n=st.integers(2, 4), shared=st.booleans(),
       noise=st.sampled_from([0.0, 0.2]), change=st.sampled_from(["noise", "weights", "info", "copy"]),
       seed=st.integers(0, 50), calls=st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.booleans()),
                                                min_size=1, max_size=6))
def test_a_constant_kept_on_the_problem_is_the_one_computed_afresh(which, rows, n, shared, noise, change, seed,
                                                                    calls):
    """A constant kept on the problem (``constants.per_problem``) is what the function computes
    afresh, call after call: with other arguments (an int and the float of its value are two), after
    the noise level is set, the weights or ``info`` replaced, on a copy of the problem changed, after
    the caller changed the value it got, and on a copy of the problem pickled and read back."""
    import copy
    import importlib
    import pickle
    module, name, argsets = which
    fn = getattr(importlib.import_module(module), name)
    if rows:                            # logistic: per-sample losses, so minibatches change the constants
        rng = np.random.default_rng(seed)
        A = [rng.standard_normal((6, 3)) for _ in range(n)]
        p = problems.logistic(A, [np.where(a[:, 0] + rng.standard_normal(6) > 0, 1.0, -1.0) for a in A],
                              l2=0.1, noise=noise)
    else:
        p = problems.quadratic(n, 3, heterogeneity=0.0 if shared else 0.5, shared_minimizer=shared,
                               hessian="shared" if seed % 2 else "distinct", noise=noise, seed=seed)
    for pick, renoise, spoil in calls:
        args = argsets[pick % len(argsets)]
        if renoise and change == "noise":
            p.noise = 0.3 - p.noise                      # set: the next value is the new level's
        elif renoise and change == "weights":
            w = np.arange(1.0, p.n_clients + 1) if p.weights[0] == p.weights[-1] else np.ones(p.n_clients)
            p.weights = w / w.sum()                      # another array (the data keep theirs)
        elif renoise and change == "info":
            p.info = dict(p.info or {}, x_star=None)
            p.info.pop("x_star")
        elif renoise:
            p = copy.copy(p)                             # a copy, then changed
            p.noise = 0.3 - p.noise
        try:
            fresh = fn.__wrapped__(p, *args)
        except Exception as e:
            with pytest.raises(type(e)):
                fn(p, *args)
            continue
        got = fn(p, *args)
        assert _same(got, fresh)
        if spoil and isinstance(got, tuple) and any(isinstance(v, list) for v in got):
            next(v for v in got if isinstance(v, list)).append("changed by the caller")
        if spoil and isinstance(got, np.ndarray):
            got += 1.0
        assert _same(fn(p, *args), fresh)
    q = pickle.loads(pickle.dumps(p))
    assert "_per_problem" not in q.__dict__
    args = argsets[0]
    try:
        fresh = fn.__wrapped__(p, *args)
    except Exception as e:
        with pytest.raises(type(e)):
            fn(q, *args)
    else:
        assert _same(fn(q, *args), fresh)
