"""Helpers of the local-step loops: small vector operations (explicit loops: cheaper to compile than
array expressions) and the end of a local step (trace, divergence check)."""
import numpy as np
from numba import njit

from .paths import record


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


@njit(cache=True, inline="always")
def nonfinite(v):
    """1 when v is NaN or +-inf, else 0 (v - v is exactly 0.0 for every finite v).

    The local-step loops add it up over the entries they write: an integer count, which the
    compiler vectorises with the update; a float sum of the entries was a serial chain of additions
    (and flagged a finite iterate whose entries' sum overflows)."""
    return np.int64(v - v != 0.0)


@njit(cache=True)
def count_nonfinite(a):
    """The number of NaN or +-inf entries of ``a``."""
    n = np.int64(0)
    for j in range(a.shape[0]):
        n += nonfinite(a[j])
    return n


@njit(cache=True)
def end_step(path, s, k, K, y, nbad, first_bad):
    """After local step k of client slot s: record y_{k+1} when ``path`` is not empty (traces) and
    return ``(first_bad, stop)``: ``stop`` when the iterate is not finite (``nbad``: the number of
    its non-finite entries, :func:`nonfinite`), ``first_bad`` the round's first failure s * K + k
    (kept when already set, >= 0)."""
    record(path, s, k + 1, y)
    if nbad == 0:
        return first_bad, False
    return (first_bad if first_bad >= 0 else s * K + k), True
