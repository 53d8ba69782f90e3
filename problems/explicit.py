"""Quadratics given by their matrices (for reproducing a paper's exact example)."""
import numpy as np

from fedtheory.components import Quadratic
from fedtheory._argcheck import Interval, check_param
from fedtheory.problem import FederatedProblem, _check_weights


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
    where = "problems.explicit_quadratic"
    C = np.atleast_2d(np.asarray(c, dtype=np.float64))
    n, d = C.shape
    Qa = np.asarray(Q, dtype=np.float64)
    if Qa.shape == (d, d):
        Qa = np.repeat(Qa[None], n, axis=0)
    if Qa.shape != (n, d, d):
        raise ValueError(f"The 'Q' parameter of {where} must have shape ({d}, {d}) or ({n}, {d}, {d}) "
                         f"to match c of shape {C.shape}. Got shape {np.shape(Q)} instead.")
    if not (np.all(np.isfinite(Qa)) and np.all(np.isfinite(C))):
        raise ValueError(f"{where}: Q and c must be finite.")
    if not np.allclose(Qa, Qa.transpose(0, 2, 1), rtol=0, atol=1e-12 * max(1.0, np.abs(Qa).max())):
        raise ValueError(f"The 'Q' parameter of {where} must be symmetric.")
    check_param("noise", noise, [Interval(float, 0, None, "left")], where)
    w = _check_weights(weights, n, where)
    eig_i = np.array([np.linalg.eigvalsh(q)[[0, -1]] for q in Qa])
    if eig_i[:, 0].min() < -1e-12 * max(1.0, eig_i[:, 1].max()):
        raise ValueError(f"The 'Q' parameter of {where} must be positive semi-definite for every "
                         f"client. Got a smallest eigenvalue {eig_i[:, 0].min():.3e} instead.")
    Qbar = np.einsum("i,ijk->jk", w, Qa)
    ev = np.linalg.eigvalsh(Qbar)
    if ev[0] <= 0:
        raise ValueError(f"{where}: the average Hessian must be positive definite (got smallest "
                         f"eigenvalue {ev[0]:.3e}), so that the minimiser is unique.")
    cbar = w @ C
    x_star = np.linalg.solve(Qbar, cbar)
    G = np.einsum("ijk,k->ij", Qa, x_star) - C
    shared = bool(np.all(Qa == Qa[0]))
    info = dict(L=float(ev[-1]), mu=float(ev[0]), x_star=x_star,
                f_star=float(0.5 * x_star @ Qbar @ x_star - cbar @ x_star),
                zeta_star_sq=float(w @ np.sum(G * G, axis=1)), sigma_sq=float(d * noise ** 2),
                L_i=eig_i[:, 1], mu_i=eig_i[:, 0], hessian="shared" if shared else "distinct",
                shared_minimizer=bool(np.abs(G).max() <= 1e-12 * max(1.0, np.abs(C).max())))
    return FederatedProblem.from_clients(list(Qa), list(C), Quadratic(), weights=w, noise=noise, name=name,
                                         info=info, caller=where)
