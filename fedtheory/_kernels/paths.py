"""Recording of local iterates for ``run(..., trace=...)`` (theorem checks), compiled with Numba.

A kernel that supports traces takes a ``path`` array of shape (S, K + 1, d), or (0, 0, 0) when
nothing is recorded; it calls :func:`record` with the iterate of client slot s after local step
k (k = 0 is the starting point). Entries of steps after a divergence stay as allocated (NaN).
"""
from numba import njit


@njit(cache=True, inline="always")
def record(path, s, k, y):
    """path[s, k, :] = y when ``path`` is not empty."""
    if path.shape[0] > 0:
        d = y.shape[0]
        for j in range(d):
            path[s, k, j] = y[j]
