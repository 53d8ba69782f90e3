"""Federated matrix completion with a nuclear-norm regularizer (pFedFBE §4.2, docs/papers/pfedfbe.md, §8.2)."""
import numpy as np

from fedtheory.components import LeastSquares, Nuclear
from fedtheory._argcheck import Interval, Options, check_param
from fedtheory.problem import ClientData, FederatedProblem


def matrix_completion(n_clients=30, shape=(32, 32), samples=128, l_nuc=0.1, shared_rank=4, normalization="half_mse",
                      noise_std=1.0, seed=0):
    r"""Least squares on linear measurements :math:`\langle X, W\rangle` of a matrix, :math:`h = \tau\|W\|_*`.

    Client j's truth is :math:`W_j = \mathrm{diag}(w_j)` with ``shared_rank`` shared ones and one
    client-specific 0.25 (position uniform among the rest): rank ``shared_rank + 1``. Its
    measurement matrices are :math:`X = M_j + \Delta` (i.i.d. N(0, 1) entries, M_j drawn once per
    client) and :math:`y = \langle W_j, X\rangle + \varepsilon`. The model is W flattened row-major
    (d = m1 m2).

    Parameters
    ----------
    n_clients : int, default 30
        Number of clients, >= 1.
    shape : (int, int), default (32, 32)
        Shape (m1, m2) of the matrices.
    samples : int, default 128
        Measurements per client, >= 1.
    l_nuc : float, default 0.1
        Weight tau >= 0 of the nuclear norm.
    shared_rank : int, default 4
        Number of shared unit singular values, in [1, min(m1, m2) - 1].
    normalization : {"half_mse", "mse"}
        "half_mse" is :math:`\frac{1}{2m}\|Xw - y\|^2` (the library's least squares), "mse" is
        :math:`\frac1m\|Xw-y\|^2` (measurements and responses scaled by sqrt 2), as in
        :func:`problems.federated_lasso`.
    noise_std : float, default 1
        Std of the measurement noise epsilon.
    seed : int, default 0
        Seed of the construction.

    Returns
    -------
    FederatedProblem
        ``reg="nuclear"``, ``mat_shape=shape``, ``info["W_clients"]`` (n, d) true matrices.

    Examples
    --------
    >>> import problems
    >>> p = problems.matrix_completion(n_clients=3, shape=(6, 6), samples=20, seed=0)
    >>> p.dim, p.reg, p.mat_shape
    (36, 'nuclear', (6, 6))
    """
    c = "problems.matrix_completion"
    check_param("n_clients", n_clients, [Interval(int, 1, None)], c)
    check_param("samples", samples, [Interval(int, 1, None)], c)
    check_param("l_nuc", l_nuc, [Interval(float, 0, None, "left")], c)
    check_param("normalization", normalization, [Options("half_mse", "mse")], c)
    check_param("noise_std", noise_std, [Interval(float, 0, None, "left")], c)
    if (not isinstance(shape, (tuple, list)) or len(shape) != 2
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 2 for v in shape)):
        raise ValueError(f"The 'shape' parameter of {c} must be a pair of ints (m1, m2), each >= 2 (a rank "
                         f"below min(m1, m2) is shared). Got {shape!r} instead.")
    m1, m2 = int(shape[0]), int(shape[1])
    r = min(m1, m2)
    if not 0 < shared_rank < r:
        raise ValueError(f"The 'shared_rank' parameter of {c} must be an int in [1, {r - 1}]. Got {shared_rank!r} instead.")
    rng = np.random.default_rng(seed)
    d = m1 * m2
    W = np.zeros((n_clients, d))
    rows, ys = [], []
    for j in range(n_clients):
        w = np.zeros(r)
        w[:shared_rank] = 1.0
        w[shared_rank + rng.integers(r - shared_rank)] = 0.25
        Wj = np.zeros((m1, m2))
        Wj[np.arange(r), np.arange(r)] = w
        W[j] = Wj.ravel()
        Mj = rng.normal(size=(m1, m2))
        X = Mj[None] + rng.normal(size=(samples, m1, m2))
        Xf = X.reshape(samples, d)
        rows.append(Xf)
        ys.append(Xf @ W[j] + noise_std * rng.normal(size=samples))
    s = np.sqrt(2.0) if normalization == "mse" else 1.0
    M = np.vstack(rows) * s
    b = np.concatenate(ys) * s
    ptr = np.arange(n_clients + 1, dtype=np.int64) * samples
    return FederatedProblem.from_components(ClientData(M, b, ptr, name="matrix_completion"), LeastSquares(),
                                            Nuclear(weight=l_nuc, shape=(m1, m2)), name="matrix_completion",
                                            info=dict(W_clients=W, normalization=normalization))
