r"""Smoothness and strong-convexity constants computed from the data and the datafit's capabilities.

The datafit declares what bounds its curvature (:class:`fedtheory.components.Datafit`): a constant
Hessian gives the exact L; a margin datafit's ``curvature_bound`` c (sup of the loss's second
derivative, 1/4 for logistic) gives :math:`L = c\,\lambda_{\max}(\sum_r \omega_r a_r a_r^\top) + \ell_2`,
a certified upper bound on :math:`\sup_x \lambda_{\max}(\nabla^2 F(x))` that is exact when the samples
reach their bound at one common x (logistic at x = 0). A datafit that declares neither gets no L:
:func:`smoothness` raises a DataError naming the missing capability (never the Hessian at 0).
"""
import math

import numpy as np


def smoothness(problem):
    """L of the smooth part of F: sup_x lambda_max(Hessian), from the datafit's capabilities
    (:meth:`fedtheory.components.Datafit.smoothness`; cached on the problem).

    Raises DataError when the datafit declares neither a constant Hessian nor a curvature bound."""
    if "_L" not in problem.__dict__:
        problem._L = problem.datafit.smoothness(problem.data)
    return problem._L


def client_smoothness(problem):
    """L_i of every client objective f_i, array of shape (n,) (see :func:`smoothness`)."""
    if "_L_i" not in problem.__dict__:
        problem._L_i = np.array([problem.datafit.smoothness(problem.data, i) for i in range(problem.n_clients)])
    return problem._L_i


def strong_convexity(problem):
    """Global strong convexity mu = inf_x lambda_min(Hessian of the smooth part), from the datafit
    (:meth:`fedtheory.components.Datafit.strong_convexity`).

    Least squares / quadratic: lambda_min of the constant Hessian. Logistic: the logistic
    curvature vanishes at infinity, so mu = l2 (the ridge weight).
    """
    return problem.datafit.strong_convexity(problem)


def diversity(G, q):
    r"""Gradient diversity :math:`\sum_j q_j\|g_j\|^2/\|\sum_j q_j g_j\|^2` of the rows of G.

    Single-point (Definition 1) when the rows are gradients at one x, multi-point (what the
    proofs use) when row j is client j's gradient at its own iterate. 1 when the numerator is
    0, +inf when only the denominator is.
    """
    G = np.asarray(G, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    num = float(q @ np.sum(G * G, axis=1))
    gbar = q @ G
    den = float(gbar @ gbar)
    if num == 0:
        return 1.0
    return math.inf if den == 0 else num / den


def quadratic_diversity_sup(hessians, q):
    r""":math:`\sup_x \Lambda(x, q) = \lambda_{\max}(\bar A^{-1} M \bar A^{-1})` for clients
    :math:`\nabla f_j(x) = A_j (x - x^*)` sharing the minimiser :math:`x^*` (docs/papers/localdescent.md, §3.1),
    with :math:`\bar A = \sum_j q_j A_j` and :math:`M = \sum_j q_j A_j^2`.

    Examples
    --------
    >>> import numpy as np
    >>> quadratic_diversity_sup(np.array([np.eye(2), np.eye(2)]), np.array([0.5, 0.5]))   # identical clients
    1.0
    """
    Hs = np.asarray(hessians, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    top = float(np.abs(Hs).max(initial=0.0))
    if top > 0:
        Hs = Hs / top                                # Lambda is scale-invariant; M would overflow at 1e154
    Ab = np.einsum("j,jab->ab", q, Hs)
    M = np.einsum("j,jab,jbc->ac", q, Hs, Hs)
    # A singular Abar (zero or duplicated features): on its null space every A_j vanishes too
    # (PSD clients), so Lambda(x) depends only on the part of x - x* in the range of Abar; the sup
    # is taken there. Abar = 0: every gradient is 0 everywhere, and Lambda = 1 by convention.
    lam, V = np.linalg.eigh(0.5 * (Ab + Ab.T))
    keep = lam > (lam.size + 1) * np.finfo(float).eps * max(float(np.abs(lam).max(initial=0.0)), np.finfo(float).tiny)
    if not keep.any():
        return 1.0
    Vr = V[:, keep] / lam[keep]                      # Abar^+ restricted to its range
    return float(np.linalg.eigvalsh(Vr.T @ M @ Vr)[-1])
