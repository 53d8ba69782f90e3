"""Numba kernels: the only package of fedtheory that imports numba.

Every kernel is a plain ``@njit(cache=True)`` function over contiguous float64/int64
arrays (no jitclass, no function arguments, no ``fastmath``: it would break the NaN
checks that detect divergence). Data are passed as a *data pack*::

    sparse (bool), A (m, d) dense or (0, 0), data/indices/indptr (CSR or empty),
    b (m,), kind (int), client_ptr (n + 1,)

Dense and CSR data take separate specialised loops (one branch per gradient call, never
per row: a per-row branch made the CSR gradient four times slower).

Caveat for developers: Numba's on-disk cache is invalidated by the timestamp of the file
that defines a cached function only. After editing a helper in ``oracles.py``, delete the
``*.nbi``/``*.nbc`` files under ``fedtheory/_kernels/__pycache__`` or kernels in other files
keep the old helper inlined.

``kind`` selects the smooth datafit: 0 least squares, 1 logistic, 2 explicit quadratic
(then the rows of client i are the d rows of Q_i and b holds c_i).
"""
from .oracles import KIND_LEAST_SQUARES, KIND_LOGISTIC, KIND_QUADRATIC  # noqa: F401
