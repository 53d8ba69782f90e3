"""Theorems as code: bounds, side conditions and verdicts, one module per paper (docs/how-a-theorem-is-checked.md).

Each paper module registers its checks with :func:`register_theorem`; they are run through
``validation.verify(name, problem, ...)`` and return a :class:`Verification`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .verdicts import HOLDS, NOT_APPLICABLE, UNRESOLVED, VIOLATED

THEOREMS = {}
#: A mean over seeds above an (expectation) bound by no more than this many standard errors is
#: UNRESOLVED, not VIOLATED: the excess is within the sampling noise (:attr:`Verification.noise`).
NOISE_SE = 2.0
CASES = {}
SPECS = {}


class _Condition(NamedTuple):
    name: str
    value: float
    limit: float
    ok: bool


class Condition(_Condition):
    """A named inequality ``value <= limit`` (or as the name says) and whether it holds.

    A 4-tuple ``(name, value, limit, ok)`` with a ``role``.

    Parameters
    ----------
    name : str
        The condition as written in the paper (shown in reports).
    value : float
        Its left-hand side on this problem and these parameters.
    limit : float
        Its right-hand side.
    ok : bool
        Whether it holds.
    role : {"stated", "hidden", "informational"}, default "stated"
        In the theorem, needed by the proof but not stated, or only reported.
    """

    def __new__(cls, name, value, limit, ok, role="stated"):
        self = super().__new__(cls, name, value, limit, bool(ok))
        self.role = role
        return self

    def __getnewargs__(self):
        return (*tuple(self), self.role)


@dataclass
class Verification:
    """Outcome of a theorem check (docs/how-a-theorem-is-checked.md).

    Attributes
    ----------
    name, variant : str
        Theorem and bound variant ("printed" as in the paper, or a corrected one).
    applicable : bool
        False when a condition the variant requires fails, an assumption of the theorem's function
        class fails for the problem's components, or the bound is not a finite non-negative number;
        ``reason`` names which.
    reason : str
    conditions : list of Condition
        Every stated, hidden and informational condition: (name, value, limit, ok), ``.role``.
    measured, bound, ratio : float
        Measured left-hand side (mean over seeds), right-hand side, measured / bound.
    stderr : float
        Standard error of ``measured`` over seeds (nan with one seed).
    holds : bool
        measured <= bound (and the measurement is resolved).
    floor : float
        Resolution floor of the measurement (its rounding level, from the problem's scale and
        machine epsilon): a measurement that exceeds the bound by no more than this is UNRESOLVED.
    unresolved : str
        Non-empty when the measurement itself cannot be resolved (e.g. it compares two
        quantities at rounding level): the verdict is UNRESOLVED with this reason.
    quantity : str
        What ``measured`` is (the left-hand side, in words).
    where : dict or None
        For a lemma or proof step: where its worst instance is, ``dict(round=, client=, step=)``
        (the keys that apply); None for a theorem.
    lemmas : list of Verification
        With ``lemmas=True``: the verification of each lemma of the theorem's proof, in proof
        order, on the same runs (:attr:`first_failure`).
    details : dict
        Terms of the bound and the constants used.
    runs : list of RunResult
        The runs of the registered algorithm behind the verdict, one per seed.
    algorithm : str
        The registered algorithm run: the theorem's, or the one given to
        ``validation.verify(..., algorithm=...)`` (``details["algorithm_substituted"]`` then lists
        the theorem's hyperparameters dropped and the algorithm's own given).
    run_kwargs : dict
        ``fedtheory.run(problem, v.algorithm, **v.run_kwargs)`` reproduces ``v.runs[0].x``.
    """

    name: str
    variant: str
    applicable: bool
    reason: str
    conditions: list
    measured: float
    bound: float
    stderr: float = float("nan")
    details: dict = field(default_factory=dict, repr=False)
    runs: list = field(default_factory=list, repr=False)
    algorithm: str = ""
    run_kwargs: dict = field(default_factory=dict, repr=False)
    floor: float = 0.0
    unresolved: str = ""
    quantity: str = ""
    where: dict | None = None
    lemmas: list = field(default_factory=list, repr=False)

    @property
    def first_failure(self):
        """The name of the first lemma of :attr:`lemmas`, in proof order, whose verdict is VIOLATED
        (None when none is, or the lemmas were not checked)."""
        return next((v.name for v in self.lemmas if v.verdict() == VIOLATED), None)

    @property
    def ratio(self):
        """measured / bound; under a bound <= 0 (zero, or below it by rounding) 0 for a measurement
        at most the bound and inf for one above it, so that ratio <= 1 exactly when measured <= bound."""
        if self.bound <= 0.0:
            if self.measured != self.measured:
                return float("nan")
            return 0.0 if self.measured <= self.bound else float("inf")
        return self.measured / self.bound

    @property
    def noise(self):
        """The sampling noise a violation must exceed: :data:`NOISE_SE` standard errors of the mean
        over the seeds (0 with one seed, whose spread is unknown)."""
        return NOISE_SE * self.stderr if self.stderr == self.stderr else 0.0

    @property
    def resolved(self):
        """False when the comparison of measured and bound rests on rounding (:attr:`floor`) or on
        the seeds' sampling noise (:attr:`noise`: a mean over a few seeds above an expectation
        bound by less than that is not a violation), or the measurement itself cannot be resolved
        (``unresolved`` names why)."""
        if self.unresolved:
            return False
        return bool(self.measured <= self.bound or self.measured - self.bound > max(self.floor, self.noise))

    @property
    def holds(self):
        """measured <= bound (a zero measurement under a zero bound holds), resolved."""
        return bool(self.measured <= self.bound) and not self.unresolved

    @property
    def failed_conditions(self):
        """Names of the conditions that fail, by role: ``{"stated": [...], "hidden": [...], ...}``."""
        out = {}
        for c in self.conditions:
            if not c.ok:
                out.setdefault(getattr(c, "role", "stated"), []).append(c.name)
        return out

    @property
    def unresolved_reason(self):
        """Why the verdict is UNRESOLVED ("" when it is not)."""
        if not self.applicable or self.resolved:
            return ""
        if self.unresolved:
            return self.unresolved
        if self.measured != self.measured or self.bound != self.bound:
            return "the measurement or the bound is not a number"
        if self.noise > self.floor:
            return (f"measured exceeds the bound by {self.measured - self.bound:.3g}, within {NOISE_SE:g} standard "
                    f"errors ({self.noise:.3g}) of the mean over the seeds (sampling noise: more seeds resolve it)")
        return (f"measured exceeds the bound by {self.measured - self.bound:.3g}, within the resolution floor "
                f"{self.floor:.3g} of the measurement (rounding level)")

    def verdict(self):
        """"holds", "VIOLATED", "UNRESOLVED" (the comparison rests on rounding: see
        :attr:`unresolved_reason`) or "NOT APPLICABLE" (never a violation when not applicable)."""
        if not self.applicable:
            return NOT_APPLICABLE
        if not self.resolved:
            return UNRESOLVED
        return HOLDS if self.holds else VIOLATED

    def report(self):
        """A plain-text summary: verdict, bound vs measured and every condition with its role."""
        what = f" {self.quantity}" if self.quantity else ""
        spread = f" +- {self.stderr:.2g}" if self.stderr == self.stderr else ""
        if self.applicable:
            head = (f"{self.name} [{self.variant}]: {self.verdict()} (measured{what} {self.measured:.4g}{spread}, "
                    f"bound {self.bound:.4g}, ratio {self.ratio:.3g})")
            if not self.resolved:
                head += f": {self.unresolved_reason}"
        else:
            head = f"{self.name} [{self.variant}]: NOT APPLICABLE: {self.reason}"
            if self.measured == self.measured:
                head += f" (measured {self.measured:.4g}; no verdict)"
        if self.where:
            head += " at " + ", ".join(f"{k} {v}" for k, v in self.where.items())
        lines = [head]
        for c in self.conditions:
            lines.append(f"  [{'ok' if c.ok else 'FAIL'}] ({getattr(c, 'role', 'stated')}) {c.name}: "
                         f"{c.value:.4g} vs {c.limit:.4g}")
        if self.lemmas:
            lines.append(f"  proof, in order (first failure: {self.first_failure or 'none'}):")
            for v in self.lemmas:
                lines.append("    " + v.report().splitlines()[0])
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def __repr__(self):
        """One line: theorem, variant, verdict, measured, bound, ratio and conditions met."""
        n_ok = sum(bool(c.ok) for c in self.conditions)
        return (f"Verification({self.name!r}, variant={self.variant!r}, verdict={self.verdict()!r}, "
                f"measured={self.measured:.4g}, bound={self.bound:.4g}, ratio={self.ratio:.3g}, "
                f"conditions {n_ok}/{len(self.conditions)} ok, {len(self.runs)} runs)")


def lemmas(theorem=None):
    """Registered lemma and proof-step names, or the proof of ``theorem`` in proof order.

    Parameters
    ----------
    theorem : str, optional
        A registered theorem: its proof (the lemmas and steps it rests on, in order).

    Returns
    -------
    list of str
        ``"<paper>.lemma_<n>"`` and ``"<paper>.step_<label>"`` names.

    Examples
    --------
    >>> import validation
    >>> "fedsps.lemma_8" in validation.lemmas(), validation.lemmas("fedsps.theorem_3b")[:2]
    (True, ['fedsps.lemma_14', 'fedsps.lemma_8'])
    """
    from .engine import is_lemma
    if theorem is None:
        return sorted(n for n in SPECS if is_lemma(n))
    from .._argcheck import Options, check_param
    check_param("theorem", theorem, [Options(*sorted(n for n in SPECS if not is_lemma(n)))], "lemmas")
    return list(SPECS[theorem].proof)


def register_theorem(name):
    """Decorator registering ``fn(problem, **kwargs) -> Verification`` under ``name``.

    Contract: ``fn`` accepts ``variant`` and ``measurement`` (a previous Verification's
    ``details["measurement"]``, reused so that several variants share one set of runs).
    A theorem declared as a :class:`TheoremSpec` is registered with :func:`register_spec`
    instead, which builds that function.

    Parameters
    ----------
    name : str
        The theorem's name, ``"<paper>.theorem_<n>"`` (:func:`validation.verify` takes it).

    Returns
    -------
    callable
        The decorator; it returns ``fn`` unchanged.
    """
    def deco(fn):
        THEOREMS[name] = fn
        return fn
    return deco


@dataclass
class Case:
    """A default configuration of a theorem check, run by ``fedtheory verify``.

    A theorem's cases are registered with :func:`register_cases`: configurations meeting the
    theorem's conditions (``"conforming"``) and documented counterexamples. ``fedtheory verify``
    runs each once, evaluates every bound variant on the same runs and sets the verdict beside
    ``expect``: a documented counterexample that is violated as expected is not a failure, a
    verdict that differs from ``expect`` is UNEXPECTED (exit status 1).

    Parameters
    ----------
    label : str
        What the case is, shown in the verdict table.
    kind : {"conforming", "counterexample"}
        A case meeting the theorem's conditions, or a documented counterexample.
    build : callable
        ``build()`` returns the problem (called once per case: keep it cheap and deterministic).
    kwargs : dict
        Parameters of the theorem (:func:`fedtheory.theory.engine.parameters`: ``rounds``,
        ``local_steps``, ``seeds``, ...), as ``validation.verify(name, build(), **kwargs)`` takes
        them.
    expect : dict
        Maps a variant to whether its bound is expected to hold (False: a documented
        counterexample). A variant not named has no expectation (its verdict is shown as is).
    note : str, default ""
        Shown beside the verdict.

    Examples
    --------
    >>> import problems, validation
    >>> from fedtheory.theory import Case
    >>> c = Case("one client, eta = 1/L", "conforming", lambda: problems.quadratic(1, 3, mu=0.2, seed=0),
    ...          dict(rounds=40, local_steps=1, lr=1.0), {"printed": True})
    >>> c.kind, c.expect["printed"]
    ('conforming', True)
    """

    label: str
    kind: str
    build: object
    kwargs: dict
    expect: dict
    note: str = ""


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
        from .._argcheck import Options, check_param
        check_param("form", self.form, [Options(*RATE_FORMS)], "RateStudy")
        Ts = list(self.Ts) if hasattr(self.Ts, "__len__") and not isinstance(self.Ts, str) else None
        if (Ts is None or len(Ts) < 3 or len(set(Ts)) != len(Ts)
                or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 1 for t in Ts)):
            from ..exceptions import InvalidParameterError
            raise InvalidParameterError(f"The 'Ts' parameter of RateStudy must be at least three distinct horizons T "
                                        f"(ints >= 1): a rate and its interval need three. Got {self.Ts!r} instead.")
        if self.form == "geometric" and self.predicted_factor is None:
            from ..exceptions import InvalidParameterError
            raise InvalidParameterError("The 'predicted_factor' parameter of RateStudy must be a float in (0, 1) or "
                                        "a callable for form='geometric'. Got None instead.")
        if self.form == "power" and not self.predicted_slope == self.predicted_slope:
            from ..exceptions import InvalidParameterError
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
    verify`` does (:func:`fedtheory.verification.rate_fit`). The 95% confidence interval comes from
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
    from .._argcheck import Options, check_param
    check_param("form", form, [Options(*RATE_FORMS)], "fit_rate")
    T = np.asarray(Ts, dtype=float)
    m = np.asarray(measured, dtype=float)
    if T.ndim != 1 or T.shape != m.shape:
        from ..exceptions import InvalidParameterError
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


def case(name, which, quick=True):
    """A default case of ``fedtheory verify`` for theorem ``name`` (:data:`CASES`), e.g. to replay it.

    Parameters
    ----------
    name : str
        A theorem with registered cases.
    which : int or str
        Its position in the theorem's list of cases, or its label (or the start of exactly one label).
    quick : bool, default True
        The cases of ``fedtheory verify --quick`` (fewer rounds and seeds) or of the full run.

    Returns
    -------
    Case
        ``validation.verify(name, c.build(), variant=..., **c.kwargs)`` runs it.

    Examples
    --------
    >>> from fedtheory.theory import case
    >>> c = case("feddeper.theorem_2", 0)
    >>> c.kind, c.expect
    ('counterexample', {'printed': False, 'corrected': True})
    """
    from .._argcheck import Options, check_param
    check_param("name", name, [Options(*sorted(CASES))], "case")
    cases = CASES[name](quick)[0]
    if isinstance(which, (int, np.integer)) and not isinstance(which, bool):
        if not 0 <= which < len(cases):
            from ..exceptions import InvalidParameterError
            raise InvalidParameterError(f"The 'which' parameter of case must be an int in the range [0, "
                                        f"{len(cases) - 1}] for {name}. Got {which!r} instead.")
        return cases[which]
    found = [c for c in cases if c.label == which] or [c for c in cases if c.label.startswith(str(which))]
    if len(found) != 1:
        from ..exceptions import InvalidParameterError
        labels = "; ".join(repr(c.label) for c in cases)
        raise InvalidParameterError(f"The 'which' parameter of case must be an index or the label of exactly one "
                                    f"case of {name} ({labels}). Got {which!r} instead.")
    return found[0]


def register_cases(name):
    """Decorator registering the default configurations of theorem ``name`` for ``fedtheory verify``.

    The decorated function ``fn(quick) -> (list of Case, list of RateStudy)`` returns the
    theorem's default :class:`Case` s (conforming configurations and documented
    counterexamples) and its :class:`RateStudy` s; ``quick`` is True for ``fedtheory verify
    --quick`` (fewer rounds and seeds). ``fedtheory verify`` (:func:`fedtheory.verification.run_cases`)
    runs them, ``fedtheory describe NAME`` evaluates the conditions on the first case, and
    :func:`case` returns one to replay it. A user's theorem registers its cases in its own module,
    imported with ``fedtheory verify --import MODULE``.

    Parameters
    ----------
    name : str
        The theorem's registered name (:func:`fedtheory.theory.register_spec`).

    Returns
    -------
    callable
        The decorator; it returns ``fn`` unchanged.

    Examples
    --------
    >>> import problems
    >>> from fedtheory.theory import CASES, Case, RateStudy, register_cases
    >>> build = lambda: problems.quadratic(1, 3, mu=0.2, seed=0)
    >>> @register_cases("example.gd_contraction")
    ... def default_cases(quick=False):
    ...     rounds = 20 if quick else 60
    ...     cases = [Case("eta = 1/L", "conforming", build, dict(rounds=rounds, lr=1.0), {"printed": True})]
    ...     rates = [RateStudy("linear rate, eta = 1/L", build, [5, 10, 15, 20], lambda T: dict(rounds=T, lr=1.0),
    ...                        variants=("printed",), form="geometric",
    ...                        predicted_factor=lambda v: 1 - v.details["mu"] * v.details["lr"])]
    ...     return cases, rates
    >>> cases, rates = CASES["example.gd_contraction"](True)
    >>> cases[0].kwargs["rounds"], rates[0].form
    (20, 'geometric')
    >>> del CASES["example.gd_contraction"]
    """
    def deco(fn):
        CASES[name] = fn
        return fn
    return deco


from .engine import (Erratum, NotApplicable, TheoremSpec, Variant, check, is_lemma, mean_stderr, parameters,  # noqa: E402,F401
                     instance_floor, instance_variant, register_spec, worst_instance)

from . import feddeper, fedspeed, fedsps, localdescent, pfedfbe  # noqa: E402,F401  (registration)
from . import feddeper_lemmas, fedspeed_lemmas, fedsps_lemmas, localdescent_lemmas, pfedfbe_lemmas  # noqa: E402,F401,I001
# (registration: after the theorems whose proofs they are in)
