"""Turn uniform random numbers into minibatch row indices (shared by every backend)."""
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
                o = out[s, k]
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
