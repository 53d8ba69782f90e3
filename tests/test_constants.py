"""Problem constants computed from the data (checked against independent computations)."""
import numpy as np

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
