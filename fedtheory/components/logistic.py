r"""Logistic regression: :math:`f_i(x) = \frac{1}{m_i}\sum_j \log(1 + e^{-y_{ij} a_{ij}^\top x})
+ \frac{\ell_2}{2}\|x\|^2`."""
import numpy as np
from scipy.special import expit

from .._kernels.datafits import KIND_LOGISTIC
from .base import MarginDatafit
from .catalog import register_datafit
from ..exceptions import UncertifiedOptimumError


@register_datafit
class Logistic(MarginDatafit):
    r"""Logistic loss of the margin, labels t in {-1, +1}: :math:`\ell(z, t) = \log(1 + e^{-t z})`
    (Numba: ``logistic_terms``). Its curvature :math:`\sigma(z)(1 - \sigma(z)) \le 1/4` vanishes at
    infinity, so the strong convexity constant is the ridge weight l2.

    Parameters
    ----------
    l2 : float, default 0
        Ridge weight inside every client objective, l2/2 ||x||^2 (>= 0).

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
        r"""Whether the minimum is attained: always with l2 > 0; with l2 = 0 exactly when no
        direction v has :math:`t_r a_r^\top v \ge 0` for every row and > 0 for some (the loss
        decreases along such a v for ever, towards an infimum it never reaches). Complete
        separation (every margin > 0) and quasi-complete separation (every margin >= 0, say with a
        zero row or a feature seen in positive rows only) are both such directions.

        An LP (HiGHS): maximise :math:`\sum_r t_r a_r^\top v` over :math:`0 \le t_r a_r^\top v \le 1`.
        Its value is 0 without such a direction and at least 1 with one (scale v until a margin
        reaches 1), so the test reads "value > 1/2", far from the solver's tolerances."""
        if self.l2 > 0:
            return True
        import scipy.sparse as sps
        YA = _signed_rows(problem)
        m = YA.shape[0]
        res = _linprog(-np.asarray(YA.sum(axis=0)).ravel(), sps.vstack([-YA, YA]),
                       np.concatenate([np.zeros(m), np.ones(m)]), "whether the minimum is attained")
        return bool(-res.fun <= 0.5)

    def infimum(self, problem):
        """The infimum of the loss part when it is not attained and known exactly: 0 under complete
        separation (some x has t_r a_r^T x >= 1 for every row: an LP), else None (quasi-complete
        separation: the infimum is that of the rows no direction separates, not computed here)."""
        YA = _signed_rows(problem)
        res = _linprog(np.zeros(problem.dim), -YA, -np.ones(YA.shape[0]), "whether the data are separable",
                       feasibility=True)
        return 0.0 if res.status == 0 else None

    def recession_rows(self, problem):
        r"""The rows that some direction of recession separates (l2 = 0): r with
        :math:`t_r a_r^\top v > 0` for some v with :math:`t_s a_s^\top v \ge 0` on every row s of
        positive weight. Along v their losses tend to 0 and the others stay, so inf F is the
        minimum over the other rows (:func:`fedtheory.truth.infimum`).

        One LP per pass (HiGHS on equilibrated columns): maximise the margins, capped at 1, of the
        rows not yet found, every margin >= 0; a pass whose value is below 1/2 (0 in exact
        arithmetic: no further direction) ends the search. The union of the directions found
        separates all the rows found at once; it is checked on the unscaled rows
        (:func:`_check_recession`), and a direction that does not hold there raises
        UncertifiedOptimumError. Rows of clients of weight 0 are never marked; with l2 > 0 none is.

        Returns
        -------
        ndarray of bool, shape (rows of ``problem.M``,)
        """
        import scipy.sparse as sps
        if self.l2 > 0:                  # the ridge grows along every direction: none is of recession
            return np.zeros(problem.M.shape[0], dtype=bool)
        YA = _signed_rows(problem)
        pos = np.flatnonzero(np.asarray(problem._row_w) > 0)
        m = YA.shape[0]
        found = np.zeros(m, dtype=bool)
        v = np.zeros(problem.dim)
        while not found.all():
            rest = np.flatnonzero(~found)
            res = _linprog(-np.asarray(YA[rest].sum(axis=0)).ravel(), sps.vstack([-YA, YA[rest]]),
                           np.concatenate([np.zeros(m), np.ones(rest.size)]),
                           "the rows a direction of recession separates")
            if -res.fun <= 0.5:                      # 0 without a further direction, >= 1 with one
                break
            new = rest[1.0 - res.ineqlin.residual[m:] > 1e-6]      # the capped margins t_r a_r^T v
            if new.size == 0:
                raise UncertifiedOptimumError("logistic (l2 = 0): the LP found a direction of recession but no "
                                              "row it separates by more than 1e-6; rescale the features.")
            found[new] = True
            v += res.v / np.abs(res.v).max()
        _check_recession(YA, v, found)
        out = np.zeros(problem.M.shape[0], dtype=bool)
        out[pos[found]] = True
        return out

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


def _signed_rows(problem):
    """The rows t_r a_r of positive weight as a CSR matrix (their products with x are the margins
    t_r a_r^T x). Rows of a client with weight w_i = 0 are not part of F: kept, they could make
    separable data look inseparable (and certify a minimiser that does not exist)."""
    import scipy.sparse as sps
    M, t = problem.M, problem.b
    YA = sps.csr_matrix(M.multiply(t[:, None]) if problem.sparse else M * t[:, None])
    keep = np.flatnonzero(np.asarray(problem._row_w) > 0)
    return YA if keep.size == YA.shape[0] else YA[keep]


def _check_recession(YA, v, found):
    """The direction v that the LPs found, checked on the unscaled rows: every margin t_r a_r^T v
    >= 0 and those of the rows ``found`` > 0, each beyond the rounding of its own sum (1e-9 of sum_j
    |t_r a_rj v_j|, 1e-6 for the positive ones). The LPs run on equilibrated columns, where HiGHS
    drops entries below 1e-9: a column spanning more than nine decades showed it a direction that
    the data do not have, and removing a row that no direction separates gives a wrong infimum."""
    margins = YA @ v
    size = abs(YA) @ np.abs(v)
    bad = np.flatnonzero((margins < -1e-9 * size) | (found & ~(margins > 1e-6 * size)))
    if bad.size:
        r = int(bad[0])
        raise UncertifiedOptimumError(
            f"logistic (l2 = 0): the direction of recession the linear programs found does not hold on the "
            f"unscaled data (row {r}: margin {margins[r]:.3g} against a scale of {size[r]:.3g}; {bad.size} rows "
            "in all), so the rows it separates are not certified. The columns' scales probably span more than "
            "nine decades: rescale the features, or add a ridge l2 > 0.")


def _linprog(c, A_ub, b_ub, what, feasibility=False):
    """HiGHS on the separability LPs over free v, with the columns of ``A_ub`` equilibrated (v = D u,
    D_jj = 1 / max_r |A_rj|: the same feasible margins and the same optimal value; badly scaled
    columns made HiGHS fail with "Solve error"). ``feasibility``: an infeasible LP is an answer
    (status 2), not a failure. Any other failure raises UncertifiedOptimumError."""
    import scipy.sparse as sps
    from scipy.optimize import linprog
    A_ub = sps.csr_matrix(A_ub)
    scale = np.asarray(abs(A_ub).max(axis=0).todense()).ravel() if A_ub.shape[0] else np.ones(A_ub.shape[1])
    d = 1.0 / np.where(scale > 0, scale, 1.0)
    res = linprog(np.asarray(c) * d, A_ub=A_ub @ sps.diags(d), b_ub=b_ub, bounds=[(None, None)] * A_ub.shape[1],
                  method="highs")
    if res.status == 0 or (feasibility and res.status == 2):
        res.v = None if res.x is None else d * res.x          # the solution in the unscaled variables
        return res
    raise UncertifiedOptimumError(f"logistic (l2 = 0): the linear program that decides {what} failed "
                                  f"(HiGHS status {res.status}: {res.message}); the optimum is not certified. "
                                  "Rescale the features, or add a ridge l2 > 0 (the minimum is then attained).")
