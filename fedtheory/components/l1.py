r"""The lasso penalty :math:`h(x) = \tau \|x\|_1`."""
import numpy as np

from .._kernels.regularizers import REG_L1
from .base import Regularizer
from .catalog import register_regularizer


@register_regularizer
class L1(Regularizer):
    r""":math:`h_0(x) = \|x\|_1`; prox: soft thresholding :math:`\mathrm{sign}(u)\max(|u| - t, 0)`
    (Numba: ``prox_l1``).

    Parameters
    ----------
    weight : float, default 0
        The penalty's weight tau in h = tau h_0 (>= 0).

    Examples
    --------
    >>> import numpy as np
    >>> L1(weight=1.0).prox(np.array([3.0, -0.5]), 1.0).tolist()
    [2.0, -0.0]
    """

    name = "l1"
    code = REG_L1
    sign_support = True

    def coercive(self):
        """A norm of x: coercive with a positive weight."""
        return self.weight > 0

    def h0(self, x):
        return np.abs(x).sum()

    def prox_t(self, u, t):
        return np.sign(u) * np.maximum(np.abs(u) - t, 0.0)

    def torch_prox_t(self, u, t):
        import torch
        return torch.sign(u) * torch.clamp(u.abs() - t, min=0.0)

    def cvxpy_h0(self, x):
        import cvxpy as cp
        return cp.norm1(x)

    def hash_extra(self):
        return b""          # the hash of a problem with an l1 penalty predates the components
