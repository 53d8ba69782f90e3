r"""Explicit quadratics: :math:`f_i(x) = \frac12 x^\top Q_i x - c_i^\top x + \frac{\ell_2}{2}\|x\|^2`."""
import math

import numpy as np

from .._kernels.datafits import KIND_QUADRATIC
from .._argcheck import Bool, Interval, Options, check_param
from ..exceptions import DataError
from .base import Datafit
from .weights import client_weights
from .catalog import register_datafit


@register_datafit
class Quadratic(Datafit):
    r"""Client i's rows are the d rows of :math:`Q_i` (symmetric) and its targets :math:`c_i`; there are
    no samples, so minibatch rows are ignored (Numba: ``quadratic_rows``).

    Parameters
    ----------
    l2 : float, default 0
        Ridge weight inside every client objective, l2/2 ||x||^2 (>= 0).

    Examples
    --------
    >>> import numpy as np
    >>> Quadratic().block_grad(2 * np.eye(2), np.array([1.0, 0.0]), np.array([1.0, 1.0])).tolist()
    [1.0, 2.0]
    """

    name = "quadratic"
    code = KIND_QUADRATIC
    has_samples = False
    constant_hessian = True

    def check_data(self, data, caller):
        """Each client's block is a d x d matrix Q_i, symmetric and positive semi-definite (to
        1e-12 relative to its largest entry): the gradient Q_i x - c_i, the constants (eigenvalues of
        one triangle) and the ground truth all assume it, and a non-symmetric Q_i would make each
        of them silently wrong."""
        if np.any(data.client_sizes != data.dim):
            raise DataError(f"{caller}: each quadratic client needs a {data.dim}x{data.dim} Q_i.")
        for i in range(data.n_clients):
            A, _ = data.block(i)
            Q = np.asarray(A.toarray() if hasattr(A, "toarray") else A, dtype=np.float64)
            scale = max(float(np.abs(Q).max(initial=0.0)), np.finfo(float).tiny)
            asym = float(np.abs(Q - Q.T).max(initial=0.0))
            if asym > 1e-12 * scale:
                raise DataError(f"{caller}: Q_{i} of client {i} must be symmetric (largest |Q - Q^T| entry "
                                f"{asym:.3e}, largest |Q| entry {scale:.3e}); pass (Q + Q^T) / 2 for the same "
                                "quadratic form.")
            try:
                np.linalg.cholesky(Q + (1e-12 * scale * max(1, data.dim)) * np.eye(data.dim))
            except np.linalg.LinAlgError:
                lo = float(np.linalg.eigvalsh(Q)[0])
                raise DataError(f"{caller}: Q_{i} of client {i} must be positive semi-definite (f_i convex); its "
                                f"smallest eigenvalue is {lo:.3e} (largest |Q| entry {scale:.3e}).") from None

    def block_value(self, A, t, x):
        return 0.5 * x @ (A @ x) - t @ x

    def block_grad(self, A, t, x):
        return A @ x - t

    def block_hvp(self, A, t, x, v):
        return A @ v

    def block_hessian(self, A, t, x):
        return np.asarray(A.toarray() if hasattr(A, "toarray") else A, dtype=np.float64)

    def torch_block(self, A, t, y):
        return 0.5 * (y @ (A @ y)) - t @ y

    def cvxpy_block(self, A, t, x):
        import cvxpy as cp
        H = np.asarray(A.toarray() if hasattr(A, "toarray") else A, dtype=np.float64)
        return 0.5 * cp.quad_form(x, cp.psd_wrap(0.5 * (H + H.T))) - t @ x

    def client_quadratic(self, data, i):
        A, t = data.block(i)
        return self.block_hessian(A, t, None), np.asarray(t, dtype=np.float64), 0.0

    def _blocks(self, data):
        M = data.M.toarray() if data.sparse else np.asarray(data.M)
        return M.reshape(data.n_clients, data.dim, data.dim), data.b.reshape(data.n_clients, data.dim)

    def _sums(self, data):
        """(sum_i w_i Q_i, sum_i w_i c_i), computed once per data (kept on it, with the arrays they
        were computed from: replaced arrays or weights recompute them). The evaluation of a run
        calls the objective every evaluated round; the per-client contraction was most of it."""
        got = getattr(data, "_quadratic_sums", None)
        if got is None or got[0] is not data.M or got[1] is not data.b or got[2] is not data.weights:
            Q, c = self._blocks(data)
            got = (data.M, data.b, data.weights, np.einsum("i,ijk->jk", data.weights, Q), data.weights @ c)
            data._quadratic_sums = got
        return got[3], got[4]

    def evaluation_sums(self, data):
        """(sum_i w_i Q_i, sum_i w_i c_i): f evaluated with one product (:meth:`_sums`)."""
        return self._sums(data)

    def loss_value(self, data, x):
        H, cbar = self._sums(data)
        return 0.5 * (x @ (H @ x)) - cbar @ x

    def loss_grad(self, data, x):
        H, cbar = self._sums(data)
        return H @ x - cbar

    def loss_value_grad(self, data, x):
        H, cbar = self._sums(data)
        Hx = H @ x
        return 0.5 * (x @ Hx) - cbar @ x, Hx - cbar

    def loss_hessian(self, data, x):
        return self._sums(data)[0].copy()

    def cvxpy_loss(self, data, x):
        import cvxpy as cp
        H = self.loss_hessian(data, None)
        cbar = data.weights @ self._blocks(data)[1]
        return 0.5 * cp.quad_form(x, cp.psd_wrap(0.5 * (H + H.T))) - cbar @ x

    @classmethod
    def example(cls, rng, n_clients, dim, sparse=False):
        Q, c = [], []
        for _ in range(n_clients):
            B = rng.normal(size=(dim, dim))
            Q.append(B @ B.T / dim + 0.1 * np.eye(dim))
            c.append(rng.normal(size=dim))
        return cls(l2=0.05), Q, c


def _orthogonal(rng, d):
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return q * np.sign(np.diag(r))


def synthetic_quadratic(n_clients, dim, L=1.0, mu=0.1, heterogeneity=0.0, noise=0.0, seed=0, hessian="shared",
                        shared_minimizer=False, weights=None, caller="synthetic_quadratic"):
    r"""The client quadratics of :func:`problems.quadratic` (its parameters, checked; see there for the
    construction): ``(Q, C, w, info)`` with Q (n, d, d), C (n, d), normalised weights w and ``info``
    holding the exact constants (L, mu, x*, f*, zeta_*^2, sigma^2, L_i, mu_i).

    Parameters
    ----------
    n_clients, dim : int
        Number of clients and dimension.
    L, mu : float
        Largest and smallest eigenvalue of the average Hessian.
    heterogeneity : float
        The squared gradient dissimilarity at x*.
    noise : float
        Std of the additive Gaussian gradient noise per coordinate.
    seed : int
        Seed of the construction.
    hessian : {"shared", "distinct"}
        Identical or client-specific Hessians.
    shared_minimizer : bool
        Whether x* minimises every f_i.
    weights : array of shape (n,) or None
        Client weights (uniform for None).
    caller : str
        The name the errors cite.

    Returns
    -------
    tuple
        ``(Q, C, w, info)``.

    Examples
    --------
    >>> Q, C, w, info = synthetic_quadratic(3, 2, L=2.0, mu=0.5, seed=0)
    >>> Q.shape, C.shape, round(info["L"], 12), info["hessian"]
    ((3, 2, 2), (3, 2), 2.0, 'shared')
    """
    c = caller
    check_param("n_clients", n_clients, [Interval(int, 1, None)], c)
    check_param("dim", dim, [Interval(int, 1, None)], c)
    check_param("L", L, [Interval(float, 0, None, "neither")], c)
    check_param("mu", mu, [Interval(float, 0, L, "right")], c)
    check_param("heterogeneity", heterogeneity, [Interval(float, 0, None, "left")], c)
    check_param("noise", noise, [Interval(float, 0, None, "left")], c)
    check_param("hessian", hessian, [Options("shared", "distinct")], c)
    check_param("shared_minimizer", shared_minimizer, [Bool()], c)
    check_param("seed", seed, [Interval(int, 0, math.inf)], c)
    if 0 < mu < 100 * dim * np.finfo(float).eps * L:
        # the stored Hessian U diag(s) U^T carries rounding errors of about d eps L in its eigenvalues
        raise ValueError(f"{c}: 'mu' must be at least 100 d eps L = {100 * dim * np.finfo(float).eps * L:.3g} "
                         f"(d = {dim}, L = {L}): the eigenvalues of the stored Hessian are exact only to about "
                         f"d eps L, so a smaller mu is not the problem's strong convexity; got mu={mu}.")
    if dim == 1 and mu != L:
        raise ValueError(f"{c}: with dim=1 the Hessian has one eigenvalue, so mu must equal L; "
                         f"got mu={mu}, L={L}.")
    if shared_minimizer and heterogeneity != 0:
        raise ValueError(f"{c}: shared_minimizer=True means every grad f_i(x*) = 0, so "
                         f"'heterogeneity' must be 0; got {heterogeneity}.")
    if heterogeneity > 0 and n_clients < 2:
        raise ValueError(f"{c}: 'heterogeneity' > 0 needs n_clients >= 2; got n_clients=1.")
    w = client_weights(weights, n_clients, c)
    if heterogeneity > 0 and np.count_nonzero(w) < 2:
        raise ValueError(f"{c}: 'heterogeneity' > 0 needs two clients of positive weight (zeta_*^2 = "
                         f"sum_i w_i ||grad f_i(x*)||^2 with sum_i w_i grad f_i(x*) = 0 is 0 when one "
                         f"client carries all the weight); got weights={weights!r}.")
    rng = np.random.default_rng(seed)
    n, d = n_clients, dim
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
    return Q, C, w, info


def explicit_quadratic_clients(Q, c, noise=0.0, weights=None, caller="explicit_quadratic_clients"):
    r"""The client quadratics of :func:`problems.explicit_quadratic`, checked, with their exact
    constants: ``(Q, C, w, info)``.

    :math:`f_i(x) = \tfrac12 x^\top Q_i x - c_i^\top x`: one shared symmetric positive semi-definite
    Hessian or one per client, whose weighted average is positive definite (x* is unique).

    Parameters
    ----------
    Q : array (d, d) or (n, d, d)
        One shared Hessian, or one per client.
    c : array (n, d)
        Linear terms, one row per client.
    noise : float
        Std of the additive Gaussian gradient noise per coordinate.
    weights : array of shape (n,) or None
        Client weights (uniform for None).
    caller : str
        The name the errors cite.

    Returns
    -------
    tuple
        ``(Q, C, w, info)``: Q of shape (n, d, d), C (n, d), the normalised weights and ``info`` with
        the exact ``L`` and ``mu`` of the average Hessian, ``x_star``, ``f_star``, ``zeta_star_sq``,
        ``sigma_sq``, ``L_i``, ``mu_i``, ``hessian`` ("shared" or "distinct") and ``shared_minimizer``.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.diag([0.5, 1.0])
    >>> Q, C, w, info = explicit_quadratic_clients(A, [A @ [1.0, 0.0], A @ [-1.0, 2.0]])
    >>> Q.shape, info["x_star"].tolist(), info["L"]
    ((2, 2, 2), [0.0, 1.0], 1.0)
    """
    where = caller
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
    w = client_weights(weights, n, where)
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
    return Qa, C, w, info
