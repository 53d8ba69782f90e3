"""pFedFBE (forward-backward envelope): the envelope's quantities at the points of a run, which the
lemmas of :mod:`fedtheory.theory.pfedfbe_lemmas` compare.

The gradients of the clients' forward-backward envelopes at given points (closed form for the
quadratic parts of a lasso client), the local points a run's trace records, and the constants of
Lemma 2 (gamma_F^2, sigma_F^2) as the lemmas read them.
"""
from __future__ import annotations

import numpy as np

from .pfedfbe import gamma_F_sq, measure, sigma_F_sq


# ------------------------------------------------------------- envelope quantities at points --
def _quadratic_parts(p):
    """Per client j: the Hessian H_j (l2 included) and grad f_j(0), f_j(0) (f_j is quadratic)."""
    z = np.zeros(p.dim)
    H = np.array([p.client_hessian(j, z) for j in range(p.n_clients)])
    g0 = np.array([p.client_grad(j, z) for j in range(p.n_clients)])
    f0 = np.array([p.client_value(j, z) for j in range(p.n_clients)])
    return H, g0, f0


def envelope_grads(p, X, lam, values=False):
    r"""grad F_j at every row of X (P, d) for every client j, shape (n, P, d) (eq. 6, f_j quadratic);
    with ``values`` also F_j (n, P) by the closed form (5) and the rounding scale of each F_j (the sum
    of the magnitudes of its terms) and of each gradient (lam ||x|| + ||grad f_j(x)||).

    Parameters
    ----------
    p : FederatedProblem
        A lasso problem (quadratic f_j).
    X : ndarray of shape (P, d)
        The points.
    lam : float
        The envelope's parameter.
    values : bool, default False
        Whether to return the values and rounding scales too.

    Returns
    -------
    ndarray or tuple
        The gradients (n, P, d); with ``values``, also F_j (n, P) and the rounding scales.

    Examples
    --------
    >>> import numpy as np, problems
    >>> from fedtheory.theory.pfedfbe_envelope import fbe_grad, fbe_value
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(20, 4)) for _ in range(3)], [rng.normal(size=20) for _ in range(3)],
    ...                    l1=0.1)
    >>> X = rng.normal(size=(5, 4))
    >>> G, F, _, _ = envelope_grads(p, X, 30.0, values=True)
    >>> bool(np.allclose(G[1], [fbe_grad(p, 1, x, 30.0) for x in X], rtol=1e-12, atol=1e-12))
    True
    >>> bool(np.allclose(F[2], [fbe_value(p, 2, x, 30.0) for x in X], rtol=1e-12, atol=1e-12))
    True
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    H, g0, f0 = _quadratic_parts(p)
    rowwise = p.reg_weight != 0 and not p.regularizer.sign_support      # only the l1 prox acts entrywise
    G, F, sF, sG = [], [], [], []
    xn = np.linalg.norm(X, axis=1)
    for j in range(p.n_clients):
        gf = X @ H[j].T + g0[j]
        U = X - gf / lam
        T = np.array([p.prox(u, 1.0 / lam) for u in U]) if rowwise else p.prox(U, 1.0 / lam)
        Rm = X - T
        G.append(lam * Rm - Rm @ H[j].T)
        gn = np.linalg.norm(gf, axis=1)
        sG.append(lam * xn + gn)
        if values:
            f = f0[j] + X @ g0[j] + 0.5 * np.einsum("pa,ab,pb->p", X, H[j], X)
            hT = np.array([p.h_value(t) for t in T])
            M = hT + lam / 2 * np.sum((T - U) ** 2, axis=1)
            F.append(f - gn ** 2 / (2 * lam) + M)
            sF.append(np.abs(f0[j]) + np.abs(X @ g0[j]) + 0.5 * np.abs(np.einsum("pa,ab,pb->p", X, H[j], X))
                      + gn ** 2 / (2 * lam) + np.abs(M))
    if values:
        return np.array(G), np.array(F), np.array(sF), np.array(sG)
    return np.array(G), np.array(sG)


def local_points(st, runs):
    """Every local iterate x_{i,k}^t (k < K) of the runs at which the run evaluates g_i: arrays ``x``
    (P, d), ``client`` (P,), ``where`` (dicts); non-finite points (a diverged run) are left out.

    Parameters
    ----------
    st : dict
        The check's setup.
    runs : dict
        The check's runs by label.

    Returns
    -------
    dict
        ``x``, ``client`` and ``where`` of every finite local iterate.
    """
    K = st["K"]
    X, C, W = [], [], []
    for s, res in enumerate(runs["main"]):
        for rt in res.trace:
            Y = rt["local"]
            for j, i in enumerate(rt.clients):
                for k in range(K):
                    if np.all(np.isfinite(Y[j, k])):
                        X.append(Y[j, k])
                        C.append(int(i))
                        W.append(dict(round=rt.round, client=int(i), step=k, **({"seed": s} if st["seeds"] > 1 else {})))
    d = st["problem"].dim
    return dict(x=np.array(X).reshape(-1, d), client=np.array(C, dtype=int), where=W)


def _base(st, runs):
    """The theorem's measurement (F*, the ball C and the constants on it) with its per-seed values
    renamed, so that a lemma's worst instance can take ``values``."""
    m = dict(measure(st, runs))
    m["theorem_values"] = m.pop("values")
    return m


def _gamma_F2(st, m, printed):
    c = m["constants"]
    return gamma_F_sq(c["gamma_G"], c["gamma_H"], c["B"], st["lam"], lemma2_as_square=not printed)


def _sigma_F2(st, m, coefficient):
    c, b = m["constants"], st["batch_size"]
    return sigma_F_sq(c["sigma_G"], c["sigma_H"], c["B"], st["lam"], b, b, coefficient)
