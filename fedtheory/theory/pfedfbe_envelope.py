"""pFedFBE's forward-backward envelope (docs/papers/pfedfbe.md, §2): a client's personalized model
T_i(x), the envelope F_i and its gradient (eqs. 5-6), their averages F and grad F
(eq. 7), vectorised for quadratic clients, and min F.

What :mod:`fedtheory.theory.pfedfbe` (Theorem 1), its lemmas and the tests compare the registered
``pfedfbe``'s runs with.
"""
from __future__ import annotations

import numpy as np


def prox_point(problem, i, x, lam):
    """T_i(x) = prox_{h/lam}(x - grad f_i(x)/lam) (the personalized model).

    Parameters
    ----------
    problem : FederatedProblem
        A lasso problem.
    i : int
        The client.
    x : ndarray
        The point.
    lam : float
        The envelope's parameter.

    Returns
    -------
    ndarray
        T_i(x).
    """
    return problem.prox(x - problem.client_grad(i, x) / lam, 1.0 / lam)


def fbe_value(problem, i, x, lam):
    """F_i(x) by the closed form (5).

    Parameters
    ----------
    problem : FederatedProblem
        A lasso problem.
    i : int
        The client.
    x : ndarray
        The point.
    lam : float
        The envelope's parameter.

    Returns
    -------
    float
        F_i(x).
    """
    g = problem.client_grad(i, x)
    u = x - g / lam
    p = problem.prox(u, 1.0 / lam)
    M = problem.h_value(p) + lam / 2 * np.sum((p - u) ** 2)
    return float(problem.client_value(i, x) - g @ g / (2 * lam) + M)


def fbe_grad(problem, i, x, lam):
    """grad F_i(x) = lam R - H R with R = x - T_i(x) (eq. 6).

    Parameters
    ----------
    problem : FederatedProblem
        A lasso problem.
    i : int
        The client.
    x : ndarray
        The point.
    lam : float
        The envelope's parameter.

    Returns
    -------
    ndarray
        grad F_i(x).
    """
    R = x - prox_point(problem, i, x, lam)
    return lam * R - problem.client_hessian_vector(i, x, R)


def F_value(problem, x, lam):
    """F(x) = (1/n) sum_i F_i(x) (eq. 7).

    Parameters
    ----------
    problem : FederatedProblem
        A lasso problem.
    x : ndarray
        The point.
    lam : float
        The envelope's parameter.

    Returns
    -------
    float
        F(x).
    """
    return float(np.mean([fbe_value(problem, i, x, lam) for i in range(problem.n_clients)]))


def F_grad(problem, x, lam):
    """grad F(x) = (1/n) sum_i grad F_i(x) (eq. 6).

    Parameters
    ----------
    problem : FederatedProblem
        A lasso problem.
    x : ndarray
        The point.
    lam : float
        The envelope's parameter.

    Returns
    -------
    ndarray
        grad F(x).
    """
    return np.mean([fbe_grad(problem, i, x, lam) for i in range(problem.n_clients)], axis=0)


def F_grad_points(problem, X, lam):
    r"""grad F at every row of X (P, d) for quadratic f_i (eq. 6), vectorized.

    With :math:`\nabla f_i(x) = H_i x + \nabla f_i(0)` (f_i quadratic) this is :func:`F_grad` row by
    row, to rounding.

    Parameters
    ----------
    problem : FederatedProblem
        A lasso problem.
    X : ndarray of shape (P, d)
        The points.
    lam : float
        The envelope's parameter.

    Returns
    -------
    ndarray of shape (P, d)
        grad F at each row.

    Examples
    --------
    >>> import numpy as np, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(20, 4)) for _ in range(3)], [rng.normal(size=20) for _ in range(3)],
    ...                    l1=0.1)
    >>> X = rng.normal(size=(5, 4))
    >>> bool(np.allclose(F_grad_points(p, X, 30.0), [F_grad(p, x, 30.0) for x in X], rtol=1e-12, atol=1e-12))
    True
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    n, d = problem.n_clients, problem.dim
    z = np.zeros(d)
    out = np.zeros_like(X)
    rowwise = problem.reg_weight != 0 and not problem.regularizer.sign_support     # only the l1 prox acts entrywise
    for i in range(n):
        H = problem.client_hessian(i, z)
        G = X @ H.T + problem.client_grad(i, z)
        U = X - G / lam
        T = np.array([problem.prox(u, 1.0 / lam) for u in U]) if rowwise else problem.prox(U, 1.0 / lam)
        Rm = X - T
        out += lam * Rm - Rm @ H.T
    return out / n


def F_star(problem, lam, x0=None):
    """min F (convex for quadratic f_i when lam >= L): L-BFGS on the C^1 envelope.

    Parameters
    ----------
    problem : FederatedProblem
        A lasso problem.
    lam : float
        The envelope's parameter.
    x0 : ndarray, optional
        The starting point of L-BFGS.

    Returns
    -------
    tuple
        ``(min F, argmin F)``.
    """
    from scipy.optimize import minimize
    x0 = np.zeros(problem.dim) if x0 is None else x0
    res = minimize(lambda x: F_value(problem, x, lam), x0, jac=lambda x: F_grad(problem, x, lam), method="L-BFGS-B",
                   options=dict(gtol=1e-13, ftol=1e-15, maxiter=20000))
    return float(res.fun), res.x
