"""Rates: the measured left-hand side over several horizons T fitted in the form a theorem
predicts (:class:`RateStudy`, :func:`fit_rate`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from .._argcheck import check_param, Options
from ..exceptions import InvalidParameterError


#: The forms of a rate a :class:`RateStudy` fits: a power of T (sublinear) or a geometric factor per T (linear).
RATE_FORMS = ("power", "geometric")


@dataclass
class RateStudy:
    """The measured left-hand side over several horizons T, fitted in the form the theorem predicts.

    ``fedtheory verify`` runs the theorem at every T of ``Ts`` and fits the measurements
    (:func:`fit_rate`):

    * ``form="power"`` (a sublinear rate ``O(T^p)``): the log-log slope of the measured value
      against T over the last three T, beside ``predicted_slope``; the rate is as predicted
      when the fitted slope is at most ``predicted_slope + 0.25``;
    * ``form="geometric"`` (a linear rate ``O(q^T)``): the contraction factor per unit of T,
      ``exp(b)`` for the least-squares fit ``log measured = a + b T`` over every T whose
      measurement is above its resolution floor, with a 95% confidence interval from the
      slope's standard error (Student t), beside ``predicted_factor``; the rate is as predicted
      unless the whole interval lies above the predicted factor (measured contraction
      significantly slower).

    Each row of the verdict table shows the fitted rate, its confidence interval and the
    predicted rate; the report draws the measurements and every variant's bound against T.

    Parameters
    ----------
    label : str
        What the study is, shown in the report.
    build : callable
        ``build()`` returns the problem.
    Ts : list of int
        The horizons T (at least three).
    kwargs_for : callable
        ``kwargs_for(T)`` returns the theorem's parameters for horizon T.
    predicted_slope : float, default nan
        ``form="power"``: the theorem's order in T (e.g. -0.5 for a rate O(1/sqrt(T))).
    variants : tuple of str, default ("printed", "corrected")
        The bound variants drawn.
    note : str, default ""
        Shown beside the figure.
    form : {"power", "geometric"}, default "power"
        The form of the predicted rate (:data:`RATE_FORMS`).
    predicted_factor : float or callable, optional
        ``form="geometric"``: the predicted contraction factor per unit of T in (0, 1) (e.g.
        ``1 - mu eta``), or ``predicted_factor(verification) -> float`` computed from the
        check at the largest T (its ``details`` hold the setup's constants).

    Examples
    --------
    A sublinear and a linear rate:

    >>> import problems
    >>> from fedtheory.theory import RateStudy
    >>> build = lambda: problems.quadratic(1, 3, mu=0.2, seed=0)
    >>> RateStudy("O(1/T)", build, [10, 20, 40], lambda T: dict(rounds=T), -1.0).form
    'power'
    >>> r = RateStudy("gradient descent, eta = 1/L", build, [5, 10, 15, 20], lambda T: dict(rounds=T, lr=1.0),
    ...               variants=("printed",), form="geometric",
    ...               predicted_factor=lambda v: 1 - v.details["mu"] * v.details["lr"])
    >>> r.form, callable(r.predicted_factor)
    ('geometric', True)
    """

    label: str
    build: object
    Ts: list
    kwargs_for: object
    predicted_slope: float = float("nan")
    variants: tuple = ("printed", "corrected")
    note: str = ""
    form: str = "power"
    predicted_factor: object = None

    def __post_init__(self):
        check_param("form", self.form, [Options(*RATE_FORMS)], "RateStudy")
        Ts = list(self.Ts) if hasattr(self.Ts, "__len__") and not isinstance(self.Ts, str) else None
        if (Ts is None or len(Ts) < 3 or len(set(Ts)) != len(Ts)
                or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 1 for t in Ts)):
            raise InvalidParameterError(f"The 'Ts' parameter of RateStudy must be at least three distinct horizons T "
                                        f"(ints >= 1): a rate and its interval need three. Got {self.Ts!r} instead.")
        if self.form == "geometric" and self.predicted_factor is None:
            raise InvalidParameterError("The 'predicted_factor' parameter of RateStudy must be a float in (0, 1) or "
                                        "a callable for form='geometric'. Got None instead.")
        if self.form == "power" and not self.predicted_slope == self.predicted_slope:
            raise InvalidParameterError("The 'predicted_slope' parameter of RateStudy must be a float for "
                                        "form='power'. Got nan instead.")

    def predicted(self, verification=None):
        """The predicted rate: ``predicted_slope`` (power) or the contraction factor (geometric),
        computed from ``verification`` (the check at the largest T) when it is a callable."""
        if self.form == "power":
            return float(self.predicted_slope)
        f = self.predicted_factor
        return float(f(verification) if callable(f) else f)


class RateFit(NamedTuple):
    """A fitted rate (:func:`fit_rate`).

    Parameters
    ----------
    form : {"power", "geometric"}
        The form fitted.
    rate : float
        The log-log slope (power) or the contraction factor per unit of T (geometric).
    lo, hi : float
        Its 95% confidence interval (nan with fewer than three points).
    stderr : float
        Standard error of the fitted slope (of log T or of T).
    n : int
        The points used (positive, finite measurements).
    """
    form: str
    rate: float
    lo: float
    hi: float
    stderr: float
    n: int


def fit_rate(Ts, measured, form="power"):
    """Fit measurements against the horizon T in the form of a rate, by least squares.

    ``"power"``: ``log m = a + p log T``; returns the slope p. ``"geometric"``: ``log m = a + b T``;
    returns the contraction factor per unit of T, ``q = exp(b)``. Non-positive or non-finite
    measurements are left out (a logarithm is fitted), and so are T <= 0 for the power form (log T).
    Measurements at rounding level are not: a plateau at the resolution floor flattens the fit (a
    decay 0.7^T floored at 1e-16 fits 0.83), so pass only the resolved ones, as ``fedtheory
    verify`` does (:func:`fedtheory.reporting.verification.rate_fit`). The 95% confidence interval comes from
    the slope's standard error and Student's t with n - 2 degrees of freedom (nan with fewer
    than three points; a factor's interval is ``exp`` of the slope's).

    Parameters
    ----------
    Ts : sequence of float
        The horizons.
    measured : sequence of float
        The measured quantity at each horizon.
    form : {"power", "geometric"}, default "power"
        The form fitted.

    Returns
    -------
    RateFit
        ``(form, rate, lo, hi, stderr, n)``.

    Examples
    --------
    >>> from fedtheory.theory import fit_rate
    >>> f = fit_rate([1, 2, 3, 4], [0.5, 0.25, 0.125, 0.0625], "geometric")
    >>> round(f.rate, 6), f.n
    (0.5, 4)
    >>> round(fit_rate([10, 20, 40], [1.0, 0.5, 0.25]).rate, 6)
    -1.0
    """
    check_param("form", form, [Options(*RATE_FORMS)], "fit_rate")
    T = np.asarray(Ts, dtype=float)
    m = np.asarray(measured, dtype=float)
    if T.ndim != 1 or T.shape != m.shape:
        raise InvalidParameterError(f"The 'Ts' and 'measured' parameters of fit_rate must be 1-D, one measurement "
                                    f"per T. Got shapes {T.shape} and {m.shape} instead.")
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = np.isfinite(m) & (m > 0) & np.isfinite(T) & ((T > 0) if form == "power" else True)
    x = np.log(T[ok]) if form == "power" else T[ok]
    y = np.log(m[ok])
    n = int(ok.sum())
    nan = float("nan")
    if n < 2 or np.ptp(x) == 0:
        return RateFit(form, nan, nan, nan, nan, n)
    xc = x - x.mean()
    b = float(xc @ (y - y.mean()) / (xc @ xc))
    if n > 2:
        from scipy import stats
        resid = y - y.mean() - b * xc
        se = float(np.sqrt(resid @ resid / (n - 2) / (xc @ xc)))
        half = float(stats.t.ppf(0.975, n - 2)) * se
        lo, hi = b - half, b + half
    else:
        se = lo = hi = nan
    if form == "geometric":
        return RateFit(form, float(np.exp(b)), float(np.exp(lo)), float(np.exp(hi)), se, n)
    return RateFit(form, b, lo, hi, se, n)
