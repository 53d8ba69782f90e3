"""Helpers of the local-step loops: small vector operations (explicit loops: cheaper to compile than
array expressions) and the end of a local step (trace, divergence check)."""
import numpy as np
from numba import njit

from .trace import record


@njit(cache=True)
def copy_into(dst, src):
    """dst[j] = src[j]."""
    for j in range(dst.shape[0]):
        dst[j] = src[j]


@njit(cache=True)
def add_into(dst, src, sign):
    """dst[j] += sign * src[j] for sign = 1.0, dst[j] -= src[j] for sign = -1.0 (exact: no product)."""
    if sign > 0:
        for j in range(dst.shape[0]):
            dst[j] += src[j]
    else:
        for j in range(dst.shape[0]):
            dst[j] -= src[j]


@njit(cache=True)
def sum_sq(a):
    """sum_j a_j^2, accumulated in index order."""
    acc = 0.0
    for j in range(a.shape[0]):
        acc += a[j] * a[j]
    return acc


@njit(cache=True)
def total(a):
    """sum_j a_j in index order (a finiteness check: NaN or inf anywhere makes it non-finite)."""
    acc = 0.0
    for j in range(a.shape[0]):
        acc += a[j]
    return acc


@njit(cache=True)
def end_step(path, s, k, K, y, check, first_bad):
    """After local step k of client slot s: record y_{k+1} when ``path`` is not empty (traces) and
    return ``(first_bad, stop)``: ``stop`` when the iterate is not finite (``check``: the sum of its
    entries), ``first_bad`` the round's first failure s * K + k (kept when already set, >= 0)."""
    record(path, s, k + 1, y)
    if np.isfinite(check):
        return first_bad, False
    return (first_bad if first_bad >= 0 else s * K + k), True
