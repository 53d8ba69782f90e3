r"""Mixing matrices for decentralised methods (NFSGD, docs/papers/localdescent.md, §2.5, Definition 2).

A mixing matrix W for clients with weights q is row-stochastic, non-negative and reversible
with respect to q (:math:`q_i W_{ij} = q_j W_{ji}`), hence :math:`q^\top W = q^\top`; for uniform q
this is the paper's symmetric, doubly stochastic W. Its mixing rate is
:math:`\zeta = \max(|\lambda_2(W)|, |\lambda_n(W)|) < 1` (the spectral gap is 1 - zeta).

Graphs get Metropolis-Hastings weights :math:`W_{ij} = \min\{1/(d_i + 1),\ q_j/(q_i (d_j + 1))\}`
on edges (so :math:`1/(1 + \max(d_i, d_j))` for uniform q) and the rest on the diagonal; the
ring is then :math:`(I + P + P^\top)/3` with :math:`\zeta = (1 + 2\cos(2\pi/n))/3` (n >= 4).
"""
from __future__ import annotations

import numpy as np

TOPOLOGIES = ("ring", "complete", "torus", "erdos_renyi")


def _uniform(n, q):
    return np.full(n, 1.0 / n) if q is None else np.asarray(q, dtype=np.float64)


def ring_adjacency(n):
    """Cycle graph on n nodes.

    Parameters
    ----------
    n : int
        Number of nodes.

    Returns
    -------
    ndarray of bool, shape (n, n)
        The symmetric adjacency matrix (no self-loops).
    """
    A = np.zeros((n, n), dtype=bool)
    for i in range(n):
        A[i, (i + 1) % n] = A[(i + 1) % n, i] = True
    np.fill_diagonal(A, False)
    return A


def torus_adjacency(rows, cols):
    """2-D torus grid (each node linked to its 4 neighbours, with wrap-around).

    Parameters
    ----------
    rows, cols : int
        The grid's shape; node ``r * cols + c`` sits at row r, column c.

    Returns
    -------
    ndarray of bool, shape (rows * cols, rows * cols)
        The symmetric adjacency matrix (no self-loops).
    """
    n = rows * cols
    A = np.zeros((n, n), dtype=bool)
    for r in range(rows):
        for c in range(cols):
            i = r * cols + c
            for j in (((r + 1) % rows) * cols + c, r * cols + (c + 1) % cols):
                if j != i:
                    A[i, j] = A[j, i] = True
    return A


def erdos_renyi_adjacency(n, p, seed=0, max_tries=1000):
    """A connected Erdos-Renyi G(n, p) graph (resampled until connected).

    Parameters
    ----------
    n : int
        Number of nodes.
    p : float
        Probability of each edge.
    seed : int, default 0
        Seed of the draws.
    max_tries : int, default 1000
        Graphs drawn before giving up.

    Returns
    -------
    ndarray of bool, shape (n, n)
        The symmetric adjacency matrix of the first connected draw.

    Raises
    ------
    ValueError
        When no draw of ``max_tries`` is connected.
    """
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        U = rng.random((n, n)) < p
        A = np.triu(U, 1)
        A = A | A.T
        if _connected(A):
            return A
    raise ValueError(f"no connected Erdos-Renyi graph with n={n}, p={p} in {max_tries} draws; "
                     "increase p.")


def _connected(A):
    n = A.shape[0]
    seen, stack = {0}, [0]
    while stack:
        i = stack.pop()
        for j in np.flatnonzero(A[i]):
            if j not in seen:
                seen.add(int(j))
                stack.append(int(j))
    return len(seen) == n


def metropolis_hastings(adjacency, q=None):
    r"""Metropolis-Hastings mixing matrix of a graph, reversible with respect to q.

    :math:`W_{ij} = \min\{1/(d_i + 1),\ q_j/(q_i (d_j + 1))\}` on the graph's edges, the rest of
    each row on the diagonal.

    Parameters
    ----------
    adjacency : array_like of bool, shape (n, n)
        Symmetric adjacency matrix (the diagonal is ignored).
    q : array_like, shape (n,), optional
        Client weights (uniform by default).

    Returns
    -------
    ndarray, shape (n, n)
        The row-stochastic mixing matrix W with :math:`q_i W_{ij} = q_j W_{ji}`.
    """
    A = np.asarray(adjacency, dtype=bool)
    n = A.shape[0]
    q = _uniform(n, q)
    deg = A.sum(axis=1)
    W = np.zeros((n, n))
    for i in range(n):
        for j in np.flatnonzero(A[i]):
            if j != i:
                W[i, j] = min(1.0 / (deg[i] + 1), q[j] / (q[i] * (deg[j] + 1)))
        W[i, i] = 1.0 - W[i].sum()
    return W


def mixing_matrix(topology, n, q=None, p=0.5, seed=0):
    r"""The mixing matrix of a named topology for n clients.

    Parameters
    ----------
    topology : {"ring", "complete", "torus", "erdos_renyi"}
        "complete" is :math:`\mathbf 1 q^\top` (one exact averaging step; 11^T/n for uniform q);
        "torus" needs n = rows * cols with rows = the largest divisor of n not above sqrt(n).
    n : int
        Number of clients.
    q : array (n,), optional
        Client weights (uniform by default).
    p : float
        Edge probability of "erdos_renyi".
    seed : int
        Seed of "erdos_renyi".

    Returns
    -------
    ndarray, shape (n, n)
        The mixing matrix (row-stochastic, reversible with respect to q).

    Raises
    ------
    ValueError
        For an unknown topology.

    Examples
    --------
    >>> from fedtheory.runs.topology import mixing_matrix, zeta
    >>> W = mixing_matrix("ring", 8)
    >>> round(zeta(W), 6), round(float((1 + 2 * np.cos(2 * np.pi / 8)) / 3), 6)
    (0.804738, 0.804738)
    """
    q = _uniform(n, q)
    if topology == "complete":
        return np.outer(np.ones(n), q)
    if topology == "ring":
        if n < 3:
            return np.outer(np.ones(n), q)
        return metropolis_hastings(ring_adjacency(n), q)
    if topology == "torus":
        rows = max(r for r in range(1, int(np.sqrt(n)) + 1) if n % r == 0)
        return metropolis_hastings(torus_adjacency(rows, n // rows), q)
    if topology == "erdos_renyi":
        return metropolis_hastings(erdos_renyi_adjacency(n, p, seed), q)
    raise ValueError(f"The 'topology' parameter must be one of {TOPOLOGIES}. Got {topology!r} instead.")


def zeta(W, q=None):
    r"""The mixing rate :math:`\zeta = \max(|\lambda_2|, |\lambda_n|)` of W.

    The eigenvalues are those of the q-symmetrised matrix :math:`D^{1/2} W D^{-1/2}`,
    :math:`D = \mathrm{diag}(q)` (W itself for uniform q).

    Parameters
    ----------
    W : array_like, shape (n, n)
        A mixing matrix reversible with respect to q.
    q : array_like, shape (n,), optional
        Client weights (uniform by default).

    Returns
    -------
    float
        zeta in [0, 1] for a mixing matrix; 0 for one client. The spectral gap is 1 - zeta.
    """
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    if n == 1:
        return 0.0
    s = np.sqrt(_uniform(n, q))
    Ms = (s[:, None] * W) / s[None, :]
    ev = np.linalg.eigvalsh(0.5 * (Ms + Ms.T))
    return float(max(abs(ev[0]), abs(ev[-2])))


def check_mixing(W, q=None, name="W", tol=1e-10):
    """Validate a user-given mixing matrix.

    Requirements (Definition 2 / Assumption 4, generalised to weights q): square (n, n),
    finite, non-negative, rows summing to 1, reversible with respect to q (symmetric for
    uniform q, hence doubly stochastic), and zeta < 1 (connected, aperiodic).

    Parameters
    ----------
    W : array_like, shape (n, n)
        The matrix to check.
    q : array_like, shape (n,), optional
        Client weights (uniform by default); n is its length when given.
    name : str, default "W"
        The parameter's name in the error message.
    tol : float, default 1e-10
        Tolerance of the sign, row-sum and reversibility checks.

    Returns
    -------
    ndarray, shape (n, n)
        ``W`` as a float array.

    Raises
    ------
    ValueError
        Naming the first requirement that fails and the value found.
    """
    q = None if q is None else np.asarray(q, dtype=np.float64)
    Wa = np.asarray(W, dtype=np.float64)
    n = q.shape[0] if q is not None else Wa.shape[0]
    if Wa.ndim != 2 or Wa.shape != (n, n):
        raise ValueError(f"The '{name}' parameter must be a ({n}, {n}) mixing matrix. Got shape {Wa.shape} instead.")
    if not np.all(np.isfinite(Wa)) or Wa.min() < -tol:
        raise ValueError(f"The '{name}' parameter must have finite, non-negative entries. "
                         f"Got a smallest entry {Wa.min():.3g} instead.")
    rows = np.abs(Wa.sum(axis=1) - 1).max()
    if rows > tol:
        raise ValueError(f"The '{name}' parameter must be row-stochastic (rows sum to 1). "
                         f"Got a row sum off by {rows:.3g} instead.")
    qq = _uniform(n, q)
    asym = np.abs(qq[:, None] * Wa - (qq[:, None] * Wa).T).max()
    if asym > tol:
        what = "symmetric and doubly stochastic" if np.allclose(qq, 1.0 / n) else \
            "reversible with respect to the client weights q (q_i W_ij = q_j W_ji)"
        raise ValueError(f"The '{name}' parameter must be {what}. Got an asymmetry of {asym:.3g} instead.")
    z = zeta(Wa, qq)
    if z >= 1 - 1e-12:
        raise ValueError(f"The '{name}' parameter must have zeta = max(|lambda_2|, |lambda_n|) < 1 (a connected, "
                         f"aperiodic graph). Got zeta = {z:.6g} instead.")
    return Wa
