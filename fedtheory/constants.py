r"""Smoothness and strong-convexity constants computed exactly from the data.

For least squares and quadratics the Hessian is constant; for logistic regression the
Hessian :math:`A^\top \mathrm{diag}(\omega\,\sigma'(z)) A + \ell_2 I` is largest (in the
Loewner order) at z = 0 where :math:`\sigma' = 1/4`, so the Hessian at x = 0 gives the exact
smoothness constant :math:`L = \sup_x \lambda_{\max}(\nabla^2 F(x))`.
"""
import numpy as np

from ._kernels.oracles import KIND_LOGISTIC


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
    """Global strong convexity mu = inf_x lambda_min(Hessian of the smooth part).

    Least squares / quadratic: lambda_min of the constant Hessian. Logistic: the logistic
    curvature vanishes at infinity, so mu = l2 (the ridge weight).
    """
    if problem.kind == KIND_LOGISTIC:
        return problem.l2
    return max(float(np.linalg.eigvalsh(problem.hessian(np.zeros(problem.dim)))[0]), 0.0)
