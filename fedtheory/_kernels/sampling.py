"""Turn uniform random numbers into minibatch row indices (shared by every backend)."""
import numpy as np
from numba import njit


@njit(cache=True)
def minibatch_rows(u, starts, sizes, replace, out):
    """Fill ``out[s, k, :]`` with B row indices of client s from uniforms ``u`` (S, K, B).

    With replacement each row is ``start + floor(u * m)``. Without replacement Floyd's
    algorithm draws a uniformly random B-subset of the m rows from the same B uniforms
    (for t = m - B .. m - 1: pick floor(u (t + 1)), or t itself if already taken).
    """
    S, K, B = u.shape
    for s in range(S):
        m = sizes[s]
        st = starts[s]
        for k in range(K):
            if replace:
                for t in range(B):
                    out[s, k, t] = st + min(int(u[s, k, t] * m), m - 1)
            else:
                for t in range(B):
                    j = m - B + t
                    c = min(int(u[s, k, t] * (j + 1)), j)
                    for p in range(t):
                        if out[s, k, p] == st + c:
                            c = j
                            break
                    out[s, k, t] = st + c
    return out
