"""No regularizer: h = 0 (a smooth problem)."""
from .._kernels.regularizers import REG_NONE
from .base import Regularizer
from .catalog import register_regularizer


@register_regularizer
class NoRegularizer(Regularizer):
    """h = 0; its prox is the identity (Numba: ``prox_none``).

    Examples
    --------
    >>> import numpy as np
    >>> NoRegularizer().prox(np.array([1.0, -2.0]), 0.5).tolist(), NoRegularizer().is_zero
    ([1.0, -2.0], True)
    """

    name = "none"
    code = REG_NONE
    smooth = True

    def __init__(self):
        super().__init__(0.0)

    def params(self):
        return {}

    def h0(self, x):
        return 0.0

    def prox_t(self, u, t):
        return u.copy()

    def torch_prox_t(self, u, t):
        return u.clone()

    def cvxpy_h0(self, x):
        return 0.0 * x[0]

    def hash_extra(self):
        return b""          # the same objective as any h with weight 0

    @classmethod
    def example(cls, rng, dim):
        return cls()

