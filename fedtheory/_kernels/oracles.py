"""Gradient oracles on client rows (dense or CSR), compiled with Numba."""
import numpy as np
from numba import njit

KIND_LEAST_SQUARES = 0
KIND_LOGISTIC = 1
KIND_QUADRATIC = 2


@njit(cache=True)
def row_dot(sparse, A, data, indices, indptr, r, x):
    """Return a_r^T x for row ``r`` of a dense or CSR matrix."""
    s = 0.0
    if sparse:
        for p in range(indptr[r], indptr[r + 1]):
            s += data[p] * x[indices[p]]
    else:
        for j in range(A.shape[1]):
            s += A[r, j] * x[j]
    return s


@njit(cache=True)
def row_axpy(sparse, A, data, indices, indptr, r, coef, g):
    """g += coef * a_r for row ``r`` of a dense or CSR matrix."""
    if sparse:
        for p in range(indptr[r], indptr[r + 1]):
            g[indices[p]] += coef * data[p]
    else:
        for j in range(A.shape[1]):
            g[j] += coef * A[r, j]


@njit(cache=True)
def loss_derivative(kind, z, target):
    """Derivative of the per-sample loss with respect to the margin z = a^T x.

    Least squares: l(z) = (z - b)^2 / 2, l'(z) = z - b.
    Logistic: l(z) = log(1 + exp(-y z)), l'(z) = -y / (1 + exp(y z)).
    """
    if kind == KIND_LEAST_SQUARES:
        return z - target
    t = target * z
    if t > 0.0:
        e = np.exp(-t)
        return -target * e / (1.0 + e)
    return -target / (1.0 + np.exp(t))


@njit(cache=True)
def client_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2, g):
    """Write into ``g`` the (minibatch) gradient of a client's smooth objective.

    With ``rows`` empty the full client gradient over rows ``start:end`` is computed:
    grad f_i(x) = (1/m_i) sum_j l'(a_j^T x) a_j + l2 x. Otherwise ``rows`` holds absolute
    row indices of a minibatch and the mean over those rows is used. For the explicit
    quadratic (kind 2) the gradient is Q_i x - c_i + l2 x and ``rows`` is ignored.
    """
    d = x.shape[0]
    for j in range(d):
        g[j] = l2 * x[j]
    if kind == KIND_QUADRATIC:
        for r in range(start, end):
            g[r - start] += row_dot(sparse, A, data, indices, indptr, r, x) - b[r]
        return
    if rows.shape[0] == 0:
        inv = 1.0 / (end - start)
        for r in range(start, end):
            z = row_dot(sparse, A, data, indices, indptr, r, x)
            row_axpy(sparse, A, data, indices, indptr, r, inv * loss_derivative(kind, z, b[r]), g)
    else:
        inv = 1.0 / rows.shape[0]
        for t in range(rows.shape[0]):
            r = rows[t]
            z = row_dot(sparse, A, data, indices, indptr, r, x)
            row_axpy(sparse, A, data, indices, indptr, r, inv * loss_derivative(kind, z, b[r]), g)
