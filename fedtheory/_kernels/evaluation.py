r"""The evaluation of a model in compiled code: F(x), the gradient mapping, the clients' values.

A run's history row holds F(x) = sum_i w_i f_i(x) + h(x) and the squared norm of the gradient
mapping G_s(x) = (x - prox_{s h}(x - s grad f(x))) / s (the gradient itself when h = 0). The
compiled rounds (:mod:`fedtheory._kernels.drivers`) compute a row due for evaluation with
:func:`metrics` inside the compiled loop, and an algorithm's own columns with its rules' ``extras``
(which call :func:`smooth_value_grad` and :func:`client_value`), so a run evaluated every round
never leaves the loop; the run's log calls the same compiled functions from Python for round 0 and
for a round a callback stops. Every row of a run on the numba backend is thus computed by one
implementation (the python and torch backends evaluate with the problem's NumPy methods, which
agree to rounding).
"""
import numpy as np
from numba import njit

from .oracles import client_value_grad, h0_value, loop_kernel, prox_vec


@loop_kernel
def smooth_value_grad(pk, x, g):
    """The smooth part f(x) = sum_i w_i f_i(x), its gradient written into ``g``.

    Parameters
    ----------
    pk : Pack
        The problem (:data:`fedtheory._kernels.rounds.Pack`).
    x : ndarray of shape (d,)
        The point.
    g : ndarray of shape (d,)
        Receives sum_i w_i grad f_i(x).

    Returns
    -------
    float
        f(x), the ridge term of every f_i included.
    """
    rows = np.zeros(0, dtype=np.int64)
    gi = np.empty(pk.dim)
    for j in range(pk.dim):
        g[j] = 0.0
    v = 0.0
    for i in range(pk.w.shape[0]):
        vi = client_value_grad(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr[i],
                               pk.ptr[i + 1], rows, x, pk.l2, gi)
        v += pk.w[i] * vi
        for j in range(pk.dim):
            g[j] += pk.w[i] * gi[j]
    return v


@loop_kernel
def client_value(pk, i, x):
    """f_i(x), client i's smooth objective over all its rows (ridge included).

    Parameters
    ----------
    pk : Pack
        The problem.
    i : int
        The client.
    x : ndarray of shape (d,)
        The point.

    Returns
    -------
    float
        The value.
    """
    gi = np.empty(pk.dim)
    return client_value_grad(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr[i],
                             pk.ptr[i + 1], np.zeros(0, dtype=np.int64), x, pk.l2, gi)


@njit(cache=True)
def smooth_metrics(pk, x):
    """``(f(x), ||grad f(x)||^2)`` for a problem without a regularizer (h = 0): :func:`metrics` without
    its composite part (compiled apart: the compiled rounds of a smooth problem never compile the
    regularizers' kernels).

    Parameters
    ----------
    pk : Pack
        The problem.
    x : ndarray of shape (d,)
        The point.

    Returns
    -------
    tuple of float
        F(x) = f(x) and ||grad f(x)||^2.
    """
    g = np.empty(pk.dim)
    F = smooth_value_grad(pk, x, g) + 0.0       # (h(x) = 0.0 added, as the NumPy evaluation adds it)
    gm = 0.0
    for j in range(pk.dim):
        gm += g[j] * g[j]
    return F, gm


@njit(cache=True)
def quadratic_metrics(H, c, l2, x):
    """``(f(x), ||grad f(x)||^2)`` for a smooth quadratic from its weighted sums H = sum_i w_i Q_i and
    c = sum_i w_i c_i: f(x) = x^T H x / 2 - c^T x + l2 ||x||^2 / 2, one product with H instead of one
    per client (the NumPy evaluation's form, ``Quadratic.evaluation_sums``).

    Parameters
    ----------
    H : ndarray of shape (d, d)
        sum_i w_i Q_i.
    c : ndarray of shape (d,)
        sum_i w_i c_i.
    l2 : float
        The ridge weight of every f_i.
    x : ndarray of shape (d,)
        The point.

    Returns
    -------
    tuple of float
        F(x) = f(x) and ||grad f(x)||^2.
    """
    d = x.shape[0]
    xHx, cx, ridge, gm = 0.0, 0.0, 0.0, 0.0
    for a in range(d):
        Hx = 0.0
        for b in range(d):
            Hx += H[a, b] * x[b]
        xHx += x[a] * Hx
        cx += c[a] * x[a]
        ridge += (0.5 * l2 * x[a]) * x[a]          # (l2 = 0: 0, where ||x||^2 overflows; as NumPy's form)
        g = Hx - c[a] + l2 * x[a]
        gm += g * g
    return (0.5 * xHx - cx + ridge) + 0.0, gm


@njit(cache=True)
def metrics(pk, x, step):
    """``(F(x), ||G_step(x)||^2)``: the objective and the squared gradient mapping (the squared
    gradient norm when h = 0), as a run's history records them.

    Parameters
    ----------
    pk : Pack
        The problem.
    x : ndarray of shape (d,)
        The point.
    step : float
        The gradient mapping's step s > 0 (1 / L for a composite problem).

    Returns
    -------
    tuple of float
        F(x) and ||G_s(x)||^2.
    """
    if pk.reg_weight == 0.0:                    # h = 0: F = f, G = grad f
        return smooth_metrics(pk, x)
    g = np.empty(pk.dim)
    F = smooth_value_grad(pk, x, g)
    gm = 0.0
    F += pk.reg_weight * h0_value(x, pk.reg, pk.groups, pk.m1, pk.m2)
    u = np.empty(pk.dim)
    for j in range(pk.dim):
        u[j] = x[j] - step * g[j]
    p = np.empty(pk.dim)
    prox_vec(u, step * pk.reg_weight, pk.reg, pk.groups, pk.m1, pk.m2, p)
    for j in range(pk.dim):
        G = (x[j] - p[j]) / step
        gm += G * G
    return F, gm
