r"""Numba kernels of the datafit components (:mod:`fedtheory.components`), one section per datafit.

A *margin* datafit has a per-sample loss :math:`\ell(z, t)` of the margin :math:`z = a^\top x` and
the target t; its kernel is one scalar function ``<name>_terms(op, z, t)`` giving the loss (for
``OP_VALUE_GRAD``) and the slope :math:`\ell'(z)` (:math:`\ell''(z)` for ``OP_HVP``); the row loops
over dense or CSR rows that call it are shared (:mod:`.oracles`). The explicit quadratic has no
samples: its kernel :func:`quadratic_rows` works on the client's block of Q_i rows directly.

Kernel ids (``kind`` in the data pack) and operation codes are defined here, next to the kernels;
the one place that dispatches on them is :mod:`.oracles`.
"""
import numpy as np
from numba import njit

KIND_LEAST_SQUARES = 0
KIND_LOGISTIC = 1
KIND_QUADRATIC = 2

OP_GRAD = 0          # out += gradient of the loss part
OP_VALUE_GRAD = 1    # the same, and return val + the loss value
OP_HVP = 2           # out += Hessian of the loss part times v


# --------------------------------------------------------------------------- least squares
@njit(cache=True, inline="always")
def least_squares_terms(op, z, t):
    """(loss, slope) of l(z) = (z - t)^2 / 2 at the margin z: the loss l(z) only for OP_VALUE_GRAD
    (else 0); the slope l'(z) = z - t, or l''(z) = 1 for OP_HVP."""
    if op == OP_HVP:
        return 0.0, 1.0
    val = 0.5 * (z - t) * (z - t) if op == OP_VALUE_GRAD else 0.0
    return val, z - t


# --------------------------------------------------------------------------- logistic
@njit(cache=True, inline="always")
def logistic_terms(op, z, t):
    """(loss, slope) of l(z) = log(1 + exp(-t z)) (labels t = +-1), as :func:`least_squares_terms`:
    l'(z) = -t / (1 + exp(t z)), l''(z) = s (1 - s) with s = sigmoid(z); no overflow for large |z|."""
    if op == OP_HVP:
        s = 1.0 / (1.0 + np.exp(-z))
        return 0.0, s * (1.0 - s)
    val = 0.0
    if op == OP_VALUE_GRAD:
        u = -t * z
        if u > 0.0:
            val = u + np.log1p(np.exp(-u))
        else:
            val = np.log1p(np.exp(u))
    u = t * z
    if u > 0.0:
        e = np.exp(-u)
        return val, -t * e / (1.0 + e)
    return val, -t / (1.0 + np.exp(u))


# --------------------------------------------------------------------------- explicit quadratic
@njit(cache=True, inline="always")
def _quadratic_row(op, i, z, x, br, out, val):
    """Row i of the quadratic's operation, z = (Q_i u)_i: out[i] += z (OP_HVP), else out[i] += z - c_i
    and, for OP_VALUE_GRAD, val + z x_i / 2 - c_i x_i. Returns ``val``."""
    if op == OP_HVP:
        out[i] += z
    else:
        if op == OP_VALUE_GRAD:
            xr = x[i]
            val += 0.5 * z * xr - br * xr
        out[i] += z - br
    return val


@njit(cache=True, inline="always")      # inlined: a call costs a refcount per array argument
def quadratic_rows(sparse, A, data, indices, indptr, b, op, start, end, x, v, out, val):
    """Loss part of f_i(x) = x^T Q_i x / 2 - c_i^T x on rows ``start:end`` (Q_i; ``b[start:end]`` = c_i).

    OP_GRAD: out += Q_i x - c_i; OP_VALUE_GRAD: the same and val + x^T Q_i x / 2 - c_i^T x;
    OP_HVP: out += Q_i v. Returns ``val``.
    """
    d = x.shape[0]
    u = v if op == OP_HVP else x
    r = start
    if not sparse:              # dense Q_i: four rows at a time (independent sums, each in the order j = 0..d-1)
        while r + 4 <= end:
            z0 = z1 = z2 = z3 = 0.0
            for j in range(d):
                uj = u[j]
                z0 += A[r, j] * uj
                z1 += A[r + 1, j] * uj
                z2 += A[r + 2, j] * uj
                z3 += A[r + 3, j] * uj
            val = _quadratic_row(op, r - start, z0, x, b[r], out, val)
            val = _quadratic_row(op, r + 1 - start, z1, x, b[r + 1], out, val)
            val = _quadratic_row(op, r + 2 - start, z2, x, b[r + 2], out, val)
            val = _quadratic_row(op, r + 3 - start, z3, x, b[r + 3], out, val)
            r += 4
    while r < end:
        z = 0.0
        if sparse and data.shape[0] == 0:        # binary CSR (every stored value 1.0)
            for p in range(indptr[r], indptr[r + 1]):
                z += u[indices[p]]
        elif sparse:
            for p in range(indptr[r], indptr[r + 1]):
                z += data[p] * u[indices[p]]
        else:
            for j in range(d):
                z += A[r, j] * u[j]
        val = _quadratic_row(op, r - start, z, x, b[r], out, val)
        r += 1
    return val
