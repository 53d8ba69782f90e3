"""Quadratics given by their matrices (for reproducing a paper's exact example)."""
from fedtheory.components import Quadratic
from fedtheory.components.quadratic import explicit_quadratic_clients
from fedtheory.problem import FederatedProblem


def explicit_quadratic(Q, c, noise=0.0, weights=None, name="explicit_quadratic"):
    r"""Federated quadratic from given Hessians and linear terms.

    .. math:: f_i(x) = \tfrac12 x^\top Q_i x - c_i^\top x ,\qquad F = \sum_i w_i f_i .

    A paper's example :math:`f_i(x) = \frac12 (x - a_i)^\top A (x - a_i)` is
    ``explicit_quadratic(A, [A @ a_i for a_i in ...])`` (the constant is dropped; F* shifts
    accordingly, suboptimality does not).

    Parameters
    ----------
    Q : array (d, d) or (n, d, d)
        One shared symmetric positive semi-definite Hessian, or one per client; the average
        Hessian must be positive definite (so that x* is unique).
    c : array (n, d)
        Linear terms, one row per client.
    noise : float, default 0
        Std of the additive Gaussian gradient noise per coordinate (sigma^2 = d noise^2).
    weights : array (n,), optional
        Client weights (uniform by default).
    name : str
        Problem name.

    Returns
    -------
    FederatedProblem
        ``info`` holds the exact ``L`` (largest eigenvalue of the average Hessian), ``mu``,
        ``x_star``, ``f_star``, ``zeta_star_sq`` = sum_i w_i ||grad f_i(x*)||^2, ``sigma_sq``,
        ``L_i``, ``mu_i`` and ``hessian`` ("shared" or "distinct").

    Examples
    --------
    >>> import numpy as np, problems
    >>> A = np.diag([0.5, 1.0])
    >>> p = problems.explicit_quadratic(A, [A @ [1.0, 0.0], A @ [-1.0, 2.0]])
    >>> p.info["x_star"].tolist(), p.info["L"]
    ([0.0, 1.0], 1.0)
    """
    Qa, C, w, info = explicit_quadratic_clients(Q, c, noise, weights, caller="problems.explicit_quadratic")
    return FederatedProblem.from_clients(list(Qa), list(C), Quadratic(), weights=w, noise=noise, name=name,
                                         info=info, caller="problems.explicit_quadratic")
