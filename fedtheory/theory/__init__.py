"""Theorems as code: bounds, side conditions and verdicts, one module per paper (DESIGN.md §3).

Each paper module registers its checks with :func:`register_theorem`; they are run through
``validation.verify(name, problem, ...)`` and return a :class:`Verification`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

THEOREMS = {}
CASES = {}


class Condition(NamedTuple):
    """A named inequality ``value <= limit`` (or as the name says) and whether it holds."""

    name: str
    value: float
    limit: float
    ok: bool


@dataclass
class Verification:
    """Outcome of a theorem check (API.md "Ground truth and theory").

    Attributes
    ----------
    name, variant : str
        Theorem and bound variant ("printed" as in the paper, or a corrected one).
    applicable : bool
        False when a side condition of the variant fails; ``reason`` names which.
    reason : str
    conditions : list of Condition
        Every stated and hidden condition: (name, value, limit, ok).
    measured, bound, ratio : float
        Measured left-hand side (mean over seeds), right-hand side, measured / bound.
    stderr : float
        Standard error of ``measured`` over seeds (nan with one seed).
    holds : bool
        measured <= bound.
    details : dict
        Terms of the bound and the constants used.
    """

    name: str
    variant: str
    applicable: bool
    reason: str
    conditions: list
    measured: float
    bound: float
    stderr: float = float("nan")
    details: dict = field(default_factory=dict)

    @property
    def ratio(self):
        return self.measured / self.bound if self.bound not in (0.0,) else float("inf")

    @property
    def holds(self):
        return bool(self.measured <= self.bound)

    def report(self):
        """A plain-text summary: verdict, bound vs measured and every condition."""
        lines = [f"{self.name} [{self.variant}]: {'holds' if self.holds else 'VIOLATED'} "
                 f"(measured {self.measured:.4g} +- {self.stderr:.2g}, bound {self.bound:.4g}, "
                 f"ratio {self.ratio:.3g}); applicable: {self.applicable}"
                 + ("" if self.applicable else f" ({self.reason})")]
        for c in self.conditions:
            lines.append(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}: {c.value:.4g} vs {c.limit:.4g}")
        return "\n".join(lines)

    def __str__(self):
        return self.report()


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


def mean_stderr(values):
    """Mean and standard error of the mean (nan for a single value)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float(v.mean()), float("nan")
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


from . import feddeper, fedspeed, fedsps, localdescent, pfedfbe  # noqa: E402,F401  (registration)
