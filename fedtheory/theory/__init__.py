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

    A 4-tuple ``(name, value, limit, ok)`` with a ``role``: ``"stated"`` (in the
    theorem), ``"hidden"`` (needed by the proof but not stated) or ``"informational"``.
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
    """
    def deco(fn):
        THEOREMS[name] = fn
        return fn
    return deco


@dataclass
class Case:
    """A default configuration of a theorem check for ``fedtheory verify``.

    ``build()`` returns the problem, ``kwargs`` go to the theorem function; ``expect`` maps a
    variant to whether its bound is expected to hold (False: a documented counterexample).
    """

    label: str
    kind: str
    build: object
    kwargs: dict
    expect: dict
    note: str = ""


@dataclass
class RateStudy:
    """Measured left-hand side over several T, its fitted log-log slope vs the predicted order."""

    label: str
    build: object
    Ts: list
    kwargs_for: object
    predicted_slope: float
    variants: tuple = ("printed", "corrected")
    note: str = ""


def register_cases(name):
    """Decorator registering ``fn(quick) -> (list of Case, list of RateStudy)`` for theorem ``name``."""
    def deco(fn):
        CASES[name] = fn
        return fn
    return deco


from .engine import NotApplicable, TheoremSpec, Variant, check, mean_stderr, register_spec  # noqa: E402,F401

from . import feddeper, fedspeed, fedsps, localdescent, pfedfbe  # noqa: E402,F401  (registration)
