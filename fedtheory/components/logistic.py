r"""Logistic regression: :math:`f_i(x) = \frac{1}{m_i}\sum_j \log(1 + e^{-y_{ij} a_{ij}^\top x})
+ \frac{\ell_2}{2}\|x\|^2`."""
import numpy as np
from scipy.special import expit

from .._kernels.datafits import KIND_LOGISTIC
from .base import MarginDatafit
from .registry import register_datafit


@register_datafit
class Logistic(MarginDatafit):
    r"""Logistic loss of the margin, labels t in {-1, +1}: :math:`\ell(z, t) = \log(1 + e^{-t z})`
    (Numba: ``logistic_terms``). Its curvature :math:`\sigma(z)(1 - \sigma(z)) \le 1/4` vanishes at
    infinity, so the strong convexity constant is the ridge weight l2.

    Examples
    --------
    >>> import numpy as np
    >>> round(float(Logistic().block_value(np.ones((1, 2)), np.array([1.0]), np.zeros(2))), 12)  # log 2
    0.69314718056
    """

    name = "logistic"
    code = KIND_LOGISTIC
    binary_targets = True
    curvature_bound = 0.25
    slope_bound = 1.0
    sample_loss_floor = 0.0

    def infimum_attained(self, problem):
        """False when l2 = 0 and some x has t_r a_r^T x >= 1 for every row (an LP, HiGHS): the loss
        then approaches its infimum 0 along that direction and never attains it."""
        if self.l2 > 0:
            return True
        from scipy.optimize import linprog
        M, t = problem.M, problem.b
        YA = M.multiply(t[:, None]).tocsr() if problem.sparse else M * t[:, None]
        res = linprog(np.zeros(problem.dim), A_ub=-YA, b_ub=-np.ones(M.shape[0]),
                      bounds=[(None, None)] * problem.dim, method="highs")
        return res.status != 0

    def loss(self, z, t):
        return np.logaddexp(0.0, -t * z)

    def dloss(self, z, t):
        return -t * expit(-t * z)

    def d2loss(self, z, t):
        s = expit(t * z)
        return s * (1.0 - s)

    def max_curvature(self, z, t, radius):
        """sigma(u)(1 - sigma(u)) is even and decreasing in |u|: its max over |u - z| <= radius is
        at |u| = max(|z| - radius, 0) (at most 1/4; tiny for saturated margins).

        Examples
        --------
        >>> import numpy as np
        >>> Logistic().max_curvature(np.array([0.0, 40.0]), np.array([1.0, -1.0]), 1.0)
        array([2.50000000e-01, 1.15482242e-17])
        """
        u = np.maximum(np.abs(np.asarray(z, dtype=np.float64)) - np.asarray(radius, dtype=np.float64), 0.0)
        return expit(u) * expit(-u)

    def torch_loss(self, z, t):
        import torch
        return torch.logaddexp(torch.zeros_like(z), -t * z)

    def cvxpy_loss_rows(self, z, t, w):
        import cvxpy as cp
        return cp.sum(cp.multiply(w, cp.logistic(-cp.multiply(t, z))))
