"""Turn uniform random numbers into minibatch row indices (shared by every backend)."""
import numpy as np
from numba import njit


#: Largest client size for which Floyd's draw marks taken rows in a table of m flags (zeroed once per
#: call, O(1) per test); a larger client compares with the rows drawn so far (O(B) per test).
MARK_LIMIT = 1 << 16


@njit(cache=True)
def minibatch_rows(u, starts, sizes, replace, out):
    """Fill ``out[s, k, :]`` with B row indices of client s from uniforms ``u`` (S, K, B).

    With replacement each row is ``start + floor(u * m)``. Without replacement Floyd's
    algorithm draws a uniformly random B-subset of the m rows from the same B uniforms
    (for t = m - B .. m - 1: pick floor(u (t + 1)), or t itself if already taken). Whether a row is
    taken is read from a table of flags (set, then cleared after each draw) when every client has
    at most :data:`MARK_LIMIT` rows, else by comparing with the rows drawn so far: the same rows.
    """
    S, K, B = u.shape
    big = 0
    for s in range(S):
        big = max(big, sizes[s])
        if not replace and B > sizes[s]:      # Floyd's draw would index before the client's rows
            raise ValueError("minibatch_rows: a minibatch without replacement larger than a client's rows")
    use_mark = not replace and big <= MARK_LIMIT
    mark = np.zeros(big if use_mark else 0, dtype=np.bool_)
    for s in range(S):
        m = sizes[s]
        st = starts[s]
        for k in range(K):
            o = out[s, k]
            if replace:
                for t in range(B):
                    o[t] = st + min(int(u[s, k, t] * m), m - 1)
            elif use_mark:
                for t in range(B):
                    j = m - B + t
                    c = min(int(u[s, k, t] * (j + 1)), j)
                    if mark[c]:
                        c = j
                    mark[c] = True
                    o[t] = st + c
                for t in range(B):
                    mark[o[t] - st] = False
            else:
                for t in range(B):
                    j = m - B + t
                    c = st + min(int(u[s, k, t] * (j + 1)), j)
                    taken = False
                    for p in range(t):          # no early exit: the compiler vectorises the test
                        taken |= o[p] == c
                    o[t] = st + j if taken else c
    return out


@njit(cache=True)
def sample_clients(u, n, out):
    """Sorted uniformly random S-subset of range(n) from S uniforms (Floyd's algorithm).

    Writes the S client indices into ``out`` in increasing order and returns it.
    """
    S = u.shape[0]
    for t in range(S):
        j = n - S + t
        c = min(int(u[t] * (j + 1)), j)
        taken = False
        for p in range(t):
            taken |= out[p] == c
        out[t] = j if taken else c
    sort_small(out)
    return out


@njit(cache=True)
def sort_small(a):
    """Sort the integers ``a`` in place by insertion (a round's participants: a few; cheaper to
    compile than ``np.sort``)."""
    for t in range(1, a.shape[0]):
        v = a[t]
        p = t - 1
        while p >= 0 and a[p] > v:
            a[p + 1] = a[p]
            p -= 1
        a[p + 1] = v
