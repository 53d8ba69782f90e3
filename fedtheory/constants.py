r"""Smoothness and strong-convexity constants computed exactly from the data.

For least squares and quadratics the Hessian is constant; for logistic regression the
Hessian :math:`A^\top \mathrm{diag}(\omega\,\sigma'(z)) A + \ell_2 I` is largest (in the
Loewner order) at z = 0 where :math:`\sigma' = 1/4`, so the Hessian at x = 0 gives the exact
smoothness constant :math:`L = \sup_x \lambda_{\max}(\nabla^2 F(x))`.
"""
import math

import numpy as np


def smoothness(problem):
    """Exact L of the smooth part of F: sup_x lambda_max(Hessian) (cached on the problem)."""
    if "_L" not in problem.__dict__:
        problem._L = float(np.linalg.eigvalsh(problem.hessian(np.zeros(problem.dim)))[-1])
    return problem._L


def client_smoothness(problem):
    """Exact L_i of every client objective f_i, array of shape (n,)."""
    if "_L_i" not in problem.__dict__:
        z = np.zeros(problem.dim)
        problem._L_i = np.array([np.linalg.eigvalsh(problem.client_hessian(i, z))[-1]
                                 for i in range(problem.n_clients)])
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
