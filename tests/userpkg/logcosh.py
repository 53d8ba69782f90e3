r"""A user's datafit and problem factory, neither built in: log-cosh regression.

The datafit is the log-cosh loss of the residual r = a^T x - t,

.. math:: \ell(r) = \log\cosh r, \qquad \ell'(r) = \tanh r, \qquad \ell''(r) = 1 - \tanh^2 r,

smooth (0 < l'' <= 1, equal to 1 at r = 0), with bounded slopes (|l'| < 1) and non-negative, so it
declares ``curvature_bound = 1``, ``slope_bound = 1`` and ``sample_loss_floor = 0``. Its CVXPY form is
log cosh r = log(e^r + e^-r) - log 2, a log-sum-exp. The factory ``userpkg_logcosh`` builds it on
synthetic regression data with heavy-tailed noise; it is registered with
:func:`fedtheory.registry.register_problem`, so a configuration names it as ``factory =
"userpkg_logcosh"`` once ``userpkg`` is imported.
"""
import math

import numpy as np

from fedtheory._argcheck import Interval, check_param
from fedtheory.components import MarginDatafit, register_datafit
from fedtheory.problem import FederatedProblem
from fedtheory.registry import register_problem

LOG2 = math.log(2.0)


@register_datafit
class LogCosh(MarginDatafit):
    """log cosh(z - t) per sample (no Numba kernel: the kernels call its NumPy code)."""

    name = "userpkg_logcosh"
    curvature_bound = 1.0
    slope_bound = 1.0
    sample_loss_floor = 0.0

    def loss(self, z, t):
        a = np.abs(z - t)
        return a + np.log1p(np.exp(-2.0 * a)) - LOG2          # no overflow of cosh for large |r|

    def dloss(self, z, t):
        return np.tanh(z - t)

    def d2loss(self, z, t):
        return 1.0 - np.tanh(z - t) ** 2

    def torch_loss(self, z, t):
        import torch
        a = torch.abs(z - t)
        return a + torch.log1p(torch.exp(-2.0 * a)) - LOG2

    def cvxpy_loss_rows(self, z, t, w):
        import cvxpy as cp
        r = z - t
        return cp.sum(cp.multiply(w, cp.log_sum_exp(cp.vstack([r, -r]), axis=0))) - LOG2 * float(np.sum(w))


@register_problem
def userpkg_logcosh(n_clients=3, samples=12, dim=3, l2=0.01, shift=1.0, seed=0):
    r"""Log-cosh regression: each client fits a^T x to targets with Student-t noise (2 degrees of
    freedom), its rows' mean shifted by ``shift`` times a client-specific direction.

    .. math:: f_i(x) = \frac{1}{m}\sum_{j=1}^{m} \log\cosh(a_{ij}^\top x - b_{ij})
              + \frac{\ell_2}{2}\|x\|^2

    Parameters
    ----------
    n_clients, samples, dim : int, default 3, 12, 3
        Clients, rows per client, dimension (each >= 1).
    l2 : float, default 0.01
        Ridge weight (the strong convexity mu), >= 0.
    shift : float, default 1.0
        Heterogeneity of the clients' rows, >= 0.
    seed : int, default 0
        Seed of the data.

    Returns
    -------
    FederatedProblem

    Examples
    --------
    >>> p = userpkg_logcosh(n_clients=2, dim=4)
    >>> p.n_clients, p.dim, p.kind_name
    (2, 4, 'userpkg_logcosh')
    """
    where = "userpkg_logcosh"
    for pname, v in (("n_clients", n_clients), ("samples", samples), ("dim", dim)):
        check_param(pname, v, [Interval(int, 1, None)], where)
    check_param("l2", l2, [Interval(float, 0, None, "left")], where)
    check_param("shift", shift, [Interval(float, 0, None, "left")], where)
    check_param("seed", seed, [Interval(int, 0, None)], where)
    rng = np.random.default_rng(seed)
    x_true = rng.normal(size=dim)
    A, b = [], []
    for _ in range(n_clients):
        a = rng.normal(size=(samples, dim)) + shift * rng.normal(size=dim)
        A.append(a)
        b.append(a @ x_true + rng.standard_t(2, size=samples))
    return FederatedProblem.from_clients(A, b, LogCosh(l2=l2), name=where, caller=where)
