r"""The certified infimum of a problem whose minimum may not be attained (docs/ground-truth.md).

Logistic regression without ridge has no minimiser when its data are separable: along a direction
of recession v (:math:`t_r a_r^\top v \ge 0` on every row, > 0 on some) F decreases for ever.
:func:`ground_truth` refuses such a problem, since there is no x* to certify. Its infimum still
exists and is known exactly. Let R be the rows that some direction of recession separates
(:meth:`~fedtheory.components.base.Datafit.recession_rows`). Along the direction their losses
tend to 0, and the other rows' margins stay unchanged. As every loss is >= 0,

.. math:: \inf F = \min_x \sum_i w_i \frac{1}{m_i}\sum_{r \in \text{client } i,\ r \notin R} \ell(t_r a_r^\top x),

the minimum over the other rows, each keeping its weight :math:`w_i / m_i`. That smaller problem
has a minimiser (no direction separates any of its rows), and :func:`ground_truth` certifies it.
Complete separation (every row in R) gives inf F = 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..exceptions import UncertifiedOptimumError
from .optimum import ground_truth
from .record import GroundTruth
from ..problem import FederatedProblem


@dataclass
class Infimum:
    """The infimum of F, from :func:`infimum`.

    Attributes
    ----------
    f : float
        inf F, certified to ``error``.
    attained : bool
        Whether a minimiser exists (``x`` is then the certified one).
    x : ndarray or None
        The minimiser where ``attained``; None where none exists.
    separated : ndarray of bool
        The rows of ``problem.M`` that a direction of recession separates (none where attained).
    rows_removed : int
        Their number.
    reduced : GroundTruth or None
        The certified minimum over the rows not separated (all of them where ``attained``); None
        under complete separation.
    error : float
        Bound on abs(f - inf F) implied by the certificate (0 under complete separation).
    """

    f: float
    attained: bool
    x: np.ndarray | None
    separated: np.ndarray
    rows_removed: int
    reduced: GroundTruth | None
    error: float


def infimum(problem, cache=True, cache_dir=None, solver="CLARABEL", tol=1e-9):
    """Certified :math:`\\inf_x F(x)`, whether or not a minimiser exists.

    Where the minimum is attained this is :func:`ground_truth`'s F* (and its x*). Where it is not
    (logistic data without ridge that are linearly or quasi-separable), the rows that a direction
    of recession separates are removed and the minimum over the others is certified
    (module docstring). The rows are found by linear programs (HiGHS).

    Parameters
    ----------
    problem : FederatedProblem
        Without a regularizer when no minimiser exists.
    cache : bool, default True
        As in :func:`ground_truth` (used for the minimum over the remaining rows).
    cache_dir : str or Path, optional
        As in :func:`ground_truth`.
    solver : str, default "CLARABEL"
        As in :func:`ground_truth`.
    tol : float, default 1e-9
        As in :func:`ground_truth`.

    Returns
    -------
    Infimum
        The certified infimum ``f``, whether it is ``attained`` (then the minimiser ``x``), the
        rows a separating direction leaves out, and its error bound.

    Raises
    ------
    ValueError
        When no minimiser exists and the datafit does not know which rows leave the infimum, or
        the problem has a regularizer that is not coercive and a datafit without a minimiser
        (whether F attains its infimum is then not decided; a coercive one, e.g. L1 with a positive
        weight, gives a minimiser).
    UncertifiedOptimumError
        When a certificate fails (as in :func:`ground_truth`), or the separating direction the
        linear programs found does not hold on the unscaled data (features whose scales span more
        than nine decades).

    Examples
    --------
    Feature 0 is seen in positive rows only: F has no minimiser, and inf F is the loss of the two
    rows of feature 1, one positive and one negative (2 log 2 over the client's 3 rows):

    >>> import numpy as np, problems, validation
    >>> A = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    >>> p = problems.logistic([A], [np.array([1.0, 1.0, -1.0])])
    >>> inf = validation.infimum(p, cache=False)
    >>> inf.attained, inf.rows_removed, round(inf.f, 10), round(2 * float(np.log(2)) / 3, 10)
    (False, 1, 0.4620981204, 0.4620981204)
    """
    fit = problem.datafit
    # the separated rows' first LP is the attainment test: none found, a minimiser exists (the
    # datafit's own test, infimum_attained, only where it does not know the rows)
    sep = None if problem.is_composite else fit.recession_rows(problem)
    if sep is None and not problem.is_composite and not fit.infimum_attained(problem):
        raise ValueError(f"infimum: problem {problem.name!r} has no minimiser and its datafit {fit.name!r} does "
                         "not declare which rows a direction of recession separates (recession_rows).")
    if sep is None or not sep.any():
        gt = ground_truth(problem, cache=cache, cache_dir=cache_dir, solver=solver, clients=False, tol=tol)
        return Infimum(float(gt.f), True, gt.x, np.zeros(problem.M.shape[0] if hasattr(problem, "M") else 0, bool),
                       0, gt, _error(gt, 1.0))
    A, b, w = [], [], []
    for i in range(problem.n_clients):
        lo, hi = int(problem.client_ptr[i]), int(problem.client_ptr[i + 1])
        keep = np.flatnonzero(~sep[lo:hi]) + lo
        if keep.size and problem.weights[i] > 0:
            A.append(problem.M[keep])
            b.append(problem.b[keep])
            w.append(problem.weights[i] * keep.size / (hi - lo))     # each row keeps w_i / m_i
    if not A:                                       # complete separation: every loss tends to 0
        return Infimum(0.0, False, None, sep, int(sep.sum()), None, 0.0)
    total = float(np.sum(w))
    rest = FederatedProblem.from_clients(A, b, type(fit)(l2=0.0), weights=np.array(w) / total,
                                         name=f"{problem.name} without its {int(sep.sum())} separated rows")
    try:
        gt = ground_truth(rest, cache=cache, cache_dir=cache_dir, solver=solver, clients=False, tol=tol)
    except ValueError as e:
        if isinstance(e, UncertifiedOptimumError):
            raise
        raise UncertifiedOptimumError(
            f"infimum: the rows of {problem.name!r} that no direction of recession was found to separate still "
            f"have no minimiser ({e}); the linear programs missed a separated row. Rescale the features.") from None
    return Infimum(total * float(gt.f), False, None, sep, int(sep.sum()), gt, _error(gt, total))


def _error(gt, scale):
    """abs(F* - inf F) the certificate allows, times ``scale``: tol max(1, |F*|) and the rounding of F."""
    err = float(gt.f_eval_error) if np.isfinite(gt.f_eval_error) else 0.0
    return scale * (gt.tol * max(1.0, abs(float(gt.f))) + err)
