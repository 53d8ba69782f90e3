"""Synthetic quadratics with exactly controlled constants."""
from fedtheory.components import Quadratic
from fedtheory.components.quadratic import synthetic_quadratic
from fedtheory.problem import FederatedProblem


def quadratic(n_clients, dim, L=1.0, mu=0.1, heterogeneity=0.0, noise=0.0, seed=0,
              hessian="shared", shared_minimizer=False, weights=None):
    r"""Federated quadratic with exactly known constants.

    .. math:: f_i(x) = \tfrac12 x^\top Q_i x - c_i^\top x, \qquad F = \sum_i w_i f_i .

    The average Hessian :math:`\bar Q = \sum_i w_i Q_i = U\,\mathrm{diag}(s)\,U^\top` has
    eigenvalues ``s`` evenly spaced on [mu, L], so F is exactly L-smooth and mu-strongly
    convex. The minimiser x* is a random unit vector and

    .. math:: c_i = Q_i x^* + \sqrt{\zeta^2}\, v_i,\quad \sum_i w_i v_i = 0,\quad
              \sum_i w_i \|v_i\|^2 = 1,

    so that the heterogeneity at the optimum is exactly
    :math:`\zeta_*^2 = \sum_i w_i \|\nabla f_i(x^*)\|^2` = ``heterogeneity``. With
    ``hessian="shared"`` every Q_i equals :math:`\bar Q` and then
    :math:`\sum_i w_i\|\nabla f_i(x) - \nabla F(x)\|^2 = \zeta^2` for *every* x (FedSpeed's
    sigma_g^2). With ``hessian="distinct"``, :math:`Q_i = \bar Q + E_i` with centred
    symmetric E_i of spectral norm mu/2 (each Q_i is positive definite).

    Parameters
    ----------
    n_clients, dim : int
        Number of clients and dimension.
    L, mu : float
        Largest and smallest eigenvalue of the average Hessian, 0 < mu <= L (mu == L
        required when dim == 1), and mu >= 100 dim eps L (about 2.2e-14 dim L): the stored Hessian's
        eigenvalues are exact only to about dim eps L.
    heterogeneity : float, default 0
        The squared gradient dissimilarity at x*, zeta_*^2 >= 0. Must be 0 with
        ``shared_minimizer=True``.
    noise : float, default 0
        Std of the additive Gaussian gradient noise per coordinate (sigma^2 = dim noise^2).
    seed : int
        Seed of the construction.
    hessian : {"shared", "distinct"}
        Identical or client-specific Hessians.
    shared_minimizer : bool
        If True, x* minimises every f_i (interpolation): c_i = Q_i x*.
    weights : array of shape (n,), optional
        Client weights (uniform by default).

    Returns
    -------
    FederatedProblem
        ``problem.info`` holds the exact ``L``, ``mu``, ``x_star``, ``f_star``,
        ``zeta_star_sq``, ``sigma_sq`` and the client constants ``L_i``/``mu_i``.

    Examples
    --------
    >>> import problems
    >>> p = problems.quadratic(4, 3, L=2.0, mu=0.5, heterogeneity=1.0, seed=1)
    >>> round(p.info["L"], 12), round(p.info["zeta_star_sq"], 12)
    (2.0, 1.0)
    """
    Q, C, w, info = synthetic_quadratic(n_clients, dim, L, mu, heterogeneity, noise, seed, hessian,
                                        shared_minimizer, weights, caller="problems.quadratic")
    return FederatedProblem.from_clients(list(Q), list(C), Quadratic(), weights=w, noise=noise, name="quadratic",
                                         info=info, caller="problems.quadratic")
