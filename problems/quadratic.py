"""Synthetic quadratics with exactly controlled constants."""
import numpy as np

from fedtheory._kernels.oracles import KIND_QUADRATIC
from fedtheory._validation import Interval, Options, check_param
from fedtheory.problem import FederatedProblem


def _orthogonal(rng, d):
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return q * np.sign(np.diag(r))


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
        required when dim == 1).
    heterogeneity : float, default 0
        zeta_*^2 >= 0 (squared gradient dissimilarity at x*). Must be 0 with
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
    c = "problems.quadratic"
    check_param("n_clients", n_clients, [Interval(int, 1, None)], c)
    check_param("dim", dim, [Interval(int, 1, None)], c)
    check_param("L", L, [Interval(float, 0, None, "neither")], c)
    check_param("mu", mu, [Interval(float, 0, L, "right")], c)
    check_param("heterogeneity", heterogeneity, [Interval(float, 0, None, "left")], c)
    check_param("noise", noise, [Interval(float, 0, None, "left")], c)
    check_param("hessian", hessian, [Options("shared", "distinct")], c)
    if dim == 1 and mu != L:
        raise ValueError(f"{c}: with dim=1 the Hessian has one eigenvalue, so mu must equal L; "
                         f"got mu={mu}, L={L}.")
    if shared_minimizer and heterogeneity != 0:
        raise ValueError(f"{c}: shared_minimizer=True means every grad f_i(x*) = 0, so "
                         f"'heterogeneity' must be 0; got {heterogeneity}.")
    if heterogeneity > 0 and n_clients < 2:
        raise ValueError(f"{c}: 'heterogeneity' > 0 needs n_clients >= 2; got n_clients=1.")
    rng = np.random.default_rng(seed)
    n, d = n_clients, dim
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, float) / np.sum(weights)
    s = np.linspace(mu, L, d) if d > 1 else np.array([L])
    U = _orthogonal(rng, d)
    Qbar = (U * s) @ U.T
    Qbar = 0.5 * (Qbar + Qbar.T)
    Q = np.repeat(Qbar[None], n, axis=0)
    if hessian == "distinct" and n > 1:
        E = rng.normal(size=(n, d, d))
        E = 0.5 * (E + E.transpose(0, 2, 1))
        E -= np.einsum("i,ijk->jk", w, E)[None]
        norms = np.array([np.linalg.norm(e, 2) for e in E])
        E *= (0.5 * mu / max(norms.max(), 1e-300))
        Q = Q + E
    x_star = rng.normal(size=d)
    x_star /= np.linalg.norm(x_star)
    C = np.einsum("ijk,k->ij", Q, x_star)
    if heterogeneity > 0:
        V = rng.normal(size=(n, d))
        V -= w @ V
        V /= np.sqrt(w @ np.sum(V * V, axis=1))
        C = C + np.sqrt(heterogeneity) * V
    eig_i = np.array([np.linalg.eigvalsh(q)[[0, -1]] for q in Q])
    info = dict(L=float(L), mu=float(mu), x_star=x_star, f_star=float(-0.5 * x_star @ Qbar @ x_star),
                zeta_star_sq=float(heterogeneity), sigma_sq=float(d * noise ** 2),
                L_i=eig_i[:, 1], mu_i=eig_i[:, 0], hessian=hessian,
                shared_minimizer=bool(shared_minimizer))
    return FederatedProblem(KIND_QUADRATIC, Q.reshape(n * d, d), C.reshape(-1),
                            np.arange(n + 1, dtype=np.int64) * d, weights=w, noise=noise,
                            name="quadratic", info=info)
