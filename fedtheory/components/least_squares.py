r"""Least squares: :math:`f_i(x) = \frac{1}{2 m_i}\|A_i x - b_i\|^2 + \frac{\ell_2}{2}\|x\|^2`."""
import numpy as np

from .._kernels.datafits import KIND_LEAST_SQUARES
from .base import MarginDatafit
from .catalog import register_datafit


@register_datafit
class LeastSquares(MarginDatafit):
    r"""Squared residual per sample, :math:`\ell(z, t) = \frac12 (z - t)^2` (Numba: ``least_squares_terms``).

    Parameters
    ----------
    l2 : float, default 0
        Ridge weight inside every client objective, l2/2 ||x||^2 (>= 0).

    Examples
    --------
    >>> import numpy as np
    >>> f = LeastSquares(l2=0.0)
    >>> float(f.block_value(np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([1.0, 0.0]), np.array([3.0, 1.0])))
    2.0
    """

    name = "least_squares"
    code = KIND_LEAST_SQUARES
    constant_hessian = True
    squared_residual = True
    curvature_bound = 1.0
    sample_loss_floor = 0.0

    def loss(self, z, t):
        return 0.5 * (z - t) ** 2

    def dloss(self, z, t):
        return z - t

    def d2loss(self, z, t):
        return np.ones_like(z)

    def torch_block(self, A, t, y):
        return 0.5 * ((A @ y - t) ** 2).mean()

    def torch_loss(self, z, t):
        return 0.5 * (z - t) ** 2

    def cvxpy_loss_rows(self, z, t, w):
        import cvxpy as cp
        return 0.5 * cp.sum_squares(cp.multiply(np.sqrt(w), z - t))
