"""Theorems as code: bounds, side conditions and verdicts, one module per paper (docs/how-a-theorem-is-checked.md).

Each paper module registers its checks with :func:`register_theorem`; they are run through
``validation.verify(name, problem, ...)`` and return a :class:`Verification`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

THEOREMS = {}
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
    details : dict
        Terms of the bound and the constants used.
    runs : list of RunResult
        The runs of the registered algorithm behind the verdict, one per seed.
    algorithm : str
        The registered algorithm measured.
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

    @property
    def ratio(self):
        """measured / bound (0 for a zero measurement under a zero bound, inf for a positive one)."""
        if self.bound == 0.0:
            return 0.0 if self.measured == 0.0 else float("inf")
        return self.measured / self.bound

    @property
    def resolved(self):
        """False when the comparison of measured and bound rests on rounding (:attr:`floor`), or
        the measurement itself cannot be resolved (``unresolved`` names why)."""
        if self.unresolved:
            return False
        return bool(self.measured <= self.bound or self.measured - self.bound > self.floor)

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
        return (f"measured exceeds the bound by {self.measured - self.bound:.3g}, within the resolution floor "
                f"{self.floor:.3g} of the measurement (rounding level)")

    def verdict(self):
        """"holds", "VIOLATED", "UNRESOLVED" (the comparison rests on rounding: see
        :attr:`unresolved_reason`) or "NOT APPLICABLE" (never a violation when not applicable)."""
        if not self.applicable:
            return "NOT APPLICABLE"
        if not self.resolved:
            return "UNRESOLVED"
        return "holds" if self.holds else "VIOLATED"

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
        lines = [head]
        for c in self.conditions:
            lines.append(f"  [{'ok' if c.ok else 'FAIL'}] ({getattr(c, 'role', 'stated')}) {c.name}: "
                         f"{c.value:.4g} vs {c.limit:.4g}")
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def __repr__(self):
        """One line: theorem, variant, verdict, measured, bound, ratio and conditions met."""
        n_ok = sum(bool(c.ok) for c in self.conditions)
        return (f"Verification({self.name!r}, variant={self.variant!r}, verdict={self.verdict()!r}, "
                f"measured={self.measured:.4g}, bound={self.bound:.4g}, ratio={self.ratio:.3g}, "
                f"conditions {n_ok}/{len(self.conditions)} ok, {len(self.runs)} runs)")


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
    """A default configuration of a theorem check for ``fedtheory verify``.

    Parameters
    ----------
    label : str
        What the case is, shown in the verdict table.
    kind : {"conforming", "counterexample"}
        A case meeting the theorem's conditions, or a documented counterexample.
    build : callable
        ``build()`` returns the problem.
    kwargs : dict
        Arguments of the theorem function (``rounds``, ``local_steps``, ``seeds``, ...).
    expect : dict
        Maps a variant to whether its bound is expected to hold (False: a documented
        counterexample).
    note : str, default ""
        Shown beside the verdict.
    """

    label: str
    kind: str
    build: object
    kwargs: dict
    expect: dict
    note: str = ""


@dataclass
class RateStudy:
    """Measured left-hand side over several T, its fitted log-log slope vs the predicted order.

    Parameters
    ----------
    label : str
        What the study is, shown in the report.
    build : callable
        ``build()`` returns the problem.
    Ts : list of int
        The horizons T.
    kwargs_for : callable
        ``kwargs_for(T)`` returns the theorem function's arguments for horizon T.
    predicted_slope : float
        The theorem's order in T (e.g. -0.5 for a rate O(1/sqrt(T))).
    variants : tuple of str, default ("printed", "corrected")
        The bound variants drawn.
    note : str, default ""
        Shown beside the figure.
    """

    label: str
    build: object
    Ts: list
    kwargs_for: object
    predicted_slope: float
    variants: tuple = ("printed", "corrected")
    note: str = ""


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
    from .._validation import Options, check_param
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
    """Decorator registering ``fn(quick) -> (list of Case, list of RateStudy)`` for theorem ``name``.

    ``fedtheory verify`` runs these default configurations (``quick`` for ``--quick``).

    Parameters
    ----------
    name : str
        A registered theorem.

    Returns
    -------
    callable
        The decorator; it returns ``fn`` unchanged.
    """
    def deco(fn):
        CASES[name] = fn
        return fn
    return deco


from .engine import Erratum, NotApplicable, TheoremSpec, Variant, check, mean_stderr, register_spec  # noqa: E402,F401

from . import feddeper, fedspeed, fedsps, localdescent, pfedfbe  # noqa: E402,F401  (registration)
