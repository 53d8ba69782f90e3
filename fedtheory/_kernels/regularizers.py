r"""Numba kernels of the regularizer components (:mod:`fedtheory.components`): proxes and values.

Each prox kernel writes :math:`\mathrm{prox}_{t h_0}(u)` into ``out``, with :math:`h_0` the regularizer
without its weight (the caller passes t = step * weight); each value kernel returns :math:`h_0(u)`
(the compiled evaluation of a run multiplies by the weight). Kernel ids (``reg`` in
``problem.reg_pack()``) are defined here; :func:`fedtheory._kernels.oracles.prox_vec` and
:func:`fedtheory._kernels.oracles.h0_value` dispatch.
"""
import numpy as np
from numba import njit

REG_L1 = 0
REG_GROUP = 1
REG_NUCLEAR = 2
REG_L2 = 3
REG_NONE = 4


@njit(cache=True)
def _soft(u, t):
    if u > t:
        return u - t
    if u < -t:
        return u + t
    return 0.0


@njit(cache=True, inline="always")
def prox_l1(u, t, out):
    """Soft thresholding: out_j = sign(u_j) max(|u_j| - t, 0)."""
    for j in range(u.shape[0]):
        out[j] = _soft(u[j], t)


@njit(cache=True, inline="always")
def prox_group(u, t, groups, out):
    """Block soft thresholding of every group g (ids in ``groups``; id -1 is left unpenalized):
    out_g = u_g max(1 - t / ||u_g||, 0)."""
    d = u.shape[0]
    ng = 0
    for j in range(d):
        if groups[j] + 1 > ng:
            ng = groups[j] + 1
    nrm = np.zeros(ng)
    for j in range(d):
        if groups[j] >= 0:
            nrm[groups[j]] += u[j] * u[j]
    for j in range(d):
        gj = groups[j]
        if gj < 0:
            out[j] = u[j]
        else:
            n_ = np.sqrt(nrm[gj])
            out[j] = 0.0 if n_ <= t else u[j] * (1.0 - t / n_)


@njit(cache=True, inline="always")
def prox_nuclear(u, t, m1, m2, out):
    """Singular-value thresholding of U = u.reshape(m1, m2) (row-major): U diag(max(s - t, 0)) V^T."""
    X = np.empty((m1, m2))
    for a in range(m1):
        for c in range(m2):
            X[a, c] = u[a * m2 + c]
    U, sv, Vt = np.linalg.svd(X, full_matrices=False)
    r = sv.shape[0]
    for q in range(r):
        sv[q] = sv[q] - t if sv[q] > t else 0.0
    for a in range(m1):
        for c in range(m2):
            acc = 0.0
            for q in range(r):
                acc += U[a, q] * sv[q] * Vt[q, c]
            out[a * m2 + c] = acc


@njit(cache=True, inline="always")
def prox_l2(u, t, out):
    """Prox of t ||x||^2 / 2: out = u / (1 + t)."""
    for j in range(u.shape[0]):
        out[j] = u[j] / (1.0 + t)


@njit(cache=True, inline="always")
def prox_none(u, out):
    """h = 0: out = u."""
    for j in range(u.shape[0]):
        out[j] = u[j]


@njit(cache=True, inline="always")
def value_l1(u):
    """h0(u) = ||u||_1."""
    v = 0.0
    for j in range(u.shape[0]):
        v += abs(u[j])
    return v


@njit(cache=True, inline="always")
def value_group(u, groups):
    """h0(u) = sum over the group ids g >= 0 of ||u_g||_2 (id -1: unpenalized)."""
    G = 0
    for j in range(groups.shape[0]):
        G = max(G, groups[j] + 1)
    sq = np.zeros(G)
    for j in range(u.shape[0]):
        if groups[j] >= 0:
            sq[groups[j]] += u[j] * u[j]
    v = 0.0
    for g in range(G):
        v += np.sqrt(sq[g])
    return v


@njit(cache=True, inline="always")
def value_nuclear(u, m1, m2):
    """h0(u) = the sum of the singular values of u.reshape(m1, m2)."""
    X = np.empty((m1, m2))
    for a in range(m1):
        for c in range(m2):
            X[a, c] = u[a * m2 + c]
    sv = np.linalg.svd(X, full_matrices=False)[1]
    return sv.sum()


@njit(cache=True, inline="always")
def value_l2(u):
    """h0(u) = ||u||^2 / 2."""
    v = 0.0
    for j in range(u.shape[0]):
        v += u[j] * u[j]
    return 0.5 * v
