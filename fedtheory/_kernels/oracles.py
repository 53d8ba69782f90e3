"""Gradient oracles on client rows (dense or CSR), compiled with Numba."""
import numpy as np
from numba import njit

KIND_LEAST_SQUARES = 0
KIND_LOGISTIC = 1
KIND_QUADRATIC = 2


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
def _grad_rows_csr(data, indices, indptr, b, kind, start, end, rows, x, g):
    """g += mean over the selected CSR rows of l'(a_r^T x) a_r."""
    n_sel = rows.shape[0] if rows.shape[0] > 0 else end - start
    inv = 1.0 / n_sel
    for t in range(n_sel):
        r = rows[t] if rows.shape[0] > 0 else start + t
        p0, p1 = indptr[r], indptr[r + 1]
        z = 0.0
        for p in range(p0, p1):
            z += data[p] * x[indices[p]]
        c = inv * loss_derivative(kind, z, b[r])
        for p in range(p0, p1):
            g[indices[p]] += c * data[p]


@njit(cache=True)
def _grad_rows_dense(A, b, kind, start, end, rows, x, g):
    """g += mean over the selected dense rows of l'(a_r^T x) a_r."""
    d = x.shape[0]
    n_sel = rows.shape[0] if rows.shape[0] > 0 else end - start
    inv = 1.0 / n_sel
    for t in range(n_sel):
        r = rows[t] if rows.shape[0] > 0 else start + t
        z = 0.0
        for j in range(d):
            z += A[r, j] * x[j]
        c = inv * loss_derivative(kind, z, b[r])
        for j in range(d):
            g[j] += c * A[r, j]


@njit(cache=True)
def _quadratic_grad(sparse, A, data, indices, indptr, b, start, end, x, g):
    """g += Q_i x - c_i, the rows start:end being Q_i and b[start:end] being c_i."""
    d = x.shape[0]
    for r in range(start, end):
        z = 0.0
        if sparse:
            for p in range(indptr[r], indptr[r + 1]):
                z += data[p] * x[indices[p]]
        else:
            for j in range(d):
                z += A[r, j] * x[j]
        g[r - start] += z - b[r]


@njit(cache=True)
def client_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2, g):
    """Write into ``g`` the (minibatch) gradient of a client's smooth objective.

    With ``rows`` empty the full client gradient over rows ``start:end`` is computed:
    grad f_i(x) = (1/m_i) sum_j l'(a_j^T x) a_j + l2 x. Otherwise ``rows`` holds absolute
    row indices of a minibatch and the mean over those rows is used. For the explicit
    quadratic (kind 2) the gradient is Q_i x - c_i + l2 x and ``rows`` is ignored.
    """
    for j in range(x.shape[0]):
        g[j] = l2 * x[j]
    if kind == KIND_QUADRATIC:
        _quadratic_grad(sparse, A, data, indices, indptr, b, start, end, x, g)
    elif sparse:
        _grad_rows_csr(data, indices, indptr, b, kind, start, end, rows, x, g)
    else:
        _grad_rows_dense(A, b, kind, start, end, rows, x, g)


@njit(cache=True)
def loss_value(kind, z, target):
    """Per-sample loss at margin z: (z - b)^2 / 2 (least squares), log(1 + exp(-y z)) (logistic)."""
    if kind == KIND_LEAST_SQUARES:
        return 0.5 * (z - target) * (z - target)
    t = -target * z
    if t > 0.0:
        return t + np.log1p(np.exp(-t))
    return np.log1p(np.exp(t))


@njit(cache=True)
def client_value_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2, g):
    """Write the (minibatch) gradient of f_i into ``g`` and return the (minibatch) value.

    Value and gradient use the same rows: F_i(x, B) = mean_{r in B} loss(a_r^T x) + l2/2 ||x||^2
    (all client rows when ``rows`` is empty); for the quadratic kind
    1/2 x^T Q_i x - c_i^T x + l2/2 ||x||^2 (``rows`` ignored).
    """
    d = x.shape[0]
    val = 0.0
    for j in range(d):
        g[j] = l2 * x[j]
        val += 0.5 * l2 * x[j] * x[j]
    if kind == KIND_QUADRATIC:
        for r in range(start, end):
            z = 0.0
            if sparse:
                for p in range(indptr[r], indptr[r + 1]):
                    z += data[p] * x[indices[p]]
            else:
                for j in range(d):
                    z += A[r, j] * x[j]
            xr = x[r - start]
            val += 0.5 * z * xr - b[r] * xr
            g[r - start] += z - b[r]
        return val
    n_sel = rows.shape[0] if rows.shape[0] > 0 else end - start
    inv = 1.0 / n_sel
    for t in range(n_sel):
        r = rows[t] if rows.shape[0] > 0 else start + t
        z = 0.0
        if sparse:
            for p in range(indptr[r], indptr[r + 1]):
                z += data[p] * x[indices[p]]
        else:
            for j in range(d):
                z += A[r, j] * x[j]
        val += inv * loss_value(kind, z, b[r])
        c = inv * loss_derivative(kind, z, b[r])
        if sparse:
            for p in range(indptr[r], indptr[r + 1]):
                g[indices[p]] += c * data[p]
        else:
            for j in range(d):
                g[j] += c * A[r, j]
    return val


@njit(cache=True)
def client_hvp(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, v, l2, out):
    """Write the (minibatch) Hessian-vector product of f_i at x along v into ``out``.

    Least squares: mean_r a_r (a_r^T v); logistic: mean_r s_r (1 - s_r) a_r (a_r^T v) with
    s_r = sigmoid(a_r^T x); quadratic: Q_i v; plus l2 v.
    """
    d = x.shape[0]
    for j in range(d):
        out[j] = l2 * v[j]
    if kind == KIND_QUADRATIC:
        for r in range(start, end):
            z = 0.0
            if sparse:
                for p in range(indptr[r], indptr[r + 1]):
                    z += data[p] * v[indices[p]]
            else:
                for j in range(d):
                    z += A[r, j] * v[j]
            out[r - start] += z
        return
    n_sel = rows.shape[0] if rows.shape[0] > 0 else end - start
    inv = 1.0 / n_sel
    for t in range(n_sel):
        r = rows[t] if rows.shape[0] > 0 else start + t
        zv = 0.0
        zx = 0.0
        if sparse:
            for p in range(indptr[r], indptr[r + 1]):
                zv += data[p] * v[indices[p]]
                zx += data[p] * x[indices[p]]
        else:
            for j in range(d):
                zv += A[r, j] * v[j]
                zx += A[r, j] * x[j]
        w = 1.0
        if kind != KIND_LEAST_SQUARES:
            s = 1.0 / (1.0 + np.exp(-zx))
            w = s * (1.0 - s)
        c = inv * w * zv
        if sparse:
            for p in range(indptr[r], indptr[r + 1]):
                out[indices[p]] += c * data[p]
        else:
            for j in range(d):
                out[j] += c * A[r, j]
