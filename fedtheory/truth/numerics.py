"""Small numerical helpers of the ground truth: norms, the gradient-mapping residual, the
smoothness scale the certificates use, one client's problem.

Part of the ground truth (:mod:`fedtheory.truth.optimum`)."""
from __future__ import annotations

import numpy as np

from ..constants import smoothness
from ..exceptions import DataError
from ..problem import FederatedProblem, ClientData


def _client_problem(problem, i):
    s, e = problem.client_rows(i)
    M = problem.M[s:e]
    if problem.sparse and (e - s) * problem.dim <= 500_000:
        M = M.toarray()                  # small clients: dense Newton steps are far cheaper
    data = ClientData(M, problem.b[s:e], np.array([0, e - s]), name=f"{problem.name}[client {i}]")
    # the problem's own components (a user's datafit included): client i alone, weight 1
    return FederatedProblem.from_components(data, problem.datafit, problem.regularizer,
                                            name=f"{problem.name}[client {i}]")


def _norm(v):
    """Euclidean norm without overflow or underflow of the squares (entries of size 1e200)."""
    top = float(np.max(np.abs(v), initial=0.0))
    return top * float(np.linalg.norm(v / top)) if 0 < top < np.inf else top


def _residual(problem, x, L):
    g = problem.grad(x)
    if not problem.is_composite:
        return _norm(g)
    return _norm(x - problem.prox(x - g / L, 1.0 / L)) * L


def _scale_L(problem, x):
    """The certified L where the datafit declares a curvature capability, else :func:`_local_L`."""
    try:
        return smoothness(problem)
    except DataError:
        return _local_L(problem, x)


def _local_L(problem, x):
    """lambda_max of the Hessian at x: the polish's scale for a datafit without a certified L."""
    with np.errstate(all="ignore"):
        return max(float(np.linalg.eigvalsh(problem.hessian(x))[-1]), np.finfo(float).tiny)
