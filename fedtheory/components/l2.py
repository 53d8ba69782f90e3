r"""The squared l2 penalty handled by its prox: :math:`h(x) = \frac{\tau}{2}\|x\|_2^2`.

Not the ridge ``l2`` of a datafit (inside every f_i, a smooth term handled by gradients): this
regularizer is the non-smooth-slot version, so proximal methods treat it exactly.
"""
from .._kernels.regularizers import REG_L2
from .base import Regularizer
from .catalog import register_regularizer


@register_regularizer
class L2(Regularizer):
    r""":math:`h_0(x) = \frac12\|x\|^2`; prox: :math:`u / (1 + t)` (Numba: ``prox_l2``).

    Parameters
    ----------
    weight : float, default 0
        The penalty's weight tau in h = tau h_0 (>= 0).

    Examples
    --------
    >>> import numpy as np
    >>> L2(weight=1.0).prox(np.array([2.0, -4.0]), 1.0).tolist()
    [1.0, -2.0]
    """

    name = "l2"
    code = REG_L2
    smooth = True
    strongly_convex = True
    convexity_modulus = 1.0

    def coercive(self):
        """tau/2 ||x||^2: coercive with a positive weight."""
        return self.weight > 0

    def h0(self, x):
        return 0.5 * (x @ x)

    def prox_t(self, u, t):
        return u / (1.0 + t)

    def torch_prox_t(self, u, t):
        return u / (1.0 + t)

    def cvxpy_h0(self, x):
        import cvxpy as cp
        return 0.5 * cp.sum_squares(x)
