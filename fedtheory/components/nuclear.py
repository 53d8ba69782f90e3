r"""The nuclear norm of the model as a matrix: :math:`h(x) = \tau \|X\|_*`, X = x.reshape(m1, m2)."""
import numpy as np

from .._kernels.regularizers import REG_NUCLEAR
from ..exceptions import DataError
from .base import Regularizer
from .catalog import register_regularizer


@register_regularizer
class Nuclear(Regularizer):
    r""":math:`h_0(x) = \sum_k \sigma_k(X)` with X = x.reshape(``shape``) row-major. Prox:
    singular-value thresholding :math:`U \mathrm{diag}(\max(s - t, 0)) V^\top` (Numba: ``prox_nuclear``).

    Parameters
    ----------
    weight : float, default 0
        The penalty's weight tau in h = tau h_0 (>= 0).
    shape : tuple of int
        The matrix shape of x (row-major).

    Examples
    --------
    >>> import numpy as np
    >>> Nuclear(weight=1.0, shape=(2, 2)).prox(np.array([3.0, 0.0, 0.0, 0.5]), 1.0).tolist()
    [2.0, 0.0, 0.0, 0.0]
    """

    name = "nuclear"
    code = REG_NUCLEAR

    def __init__(self, weight=0.0, shape=None):
        super().__init__(weight)
        self.shape = None if shape is None else (int(shape[0]), int(shape[1]))

    def check(self, dim, caller):
        if self.shape is None or int(np.prod(self.shape)) != dim:
            raise DataError(f"{caller}: reg='nuclear' needs 'mat_shape' (m1, m2) with m1 * m2 = {dim}; "
                            f"got {self.shape!r}.")

    def coercive(self):
        """A norm of x: coercive with a positive weight."""
        return self.weight > 0

    def h0(self, x):
        return np.linalg.svd(x.reshape(self.shape), compute_uv=False).sum()

    def prox_t(self, u, t):
        U, sv, Vt = np.linalg.svd(u.reshape(self.shape), full_matrices=False)
        return ((U * np.maximum(sv - t, 0.0)) @ Vt).ravel()

    def torch_prox_t(self, u, t):
        import torch
        U, sv, Vt = torch.linalg.svd(u.reshape(*self.shape), full_matrices=False)
        sv = torch.where(sv > t, sv - t, torch.zeros_like(sv))
        return ((U * sv) @ Vt).reshape(-1)

    def cvxpy_h0(self, x):
        import cvxpy as cp
        return cp.normNuc(cp.reshape(x, self.shape, order="C"))

    def kernel_args(self):
        return np.zeros(0, dtype=np.int64), self.shape[0], self.shape[1]

    def hash_extra(self):
        return f"|nuclear|{self.shape}".encode()

    @classmethod
    def example(cls, rng, dim):
        for m1 in range(2, dim):
            if dim % m1 == 0 and dim // m1 >= 2:
                return cls(weight=0.3, shape=(m1, dim // m1))
        return None
