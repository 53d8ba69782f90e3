"""What a theorem check returns: its conditions and its :class:`Verification` (the verdict,
the measured value against the bound, the runs it measured)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .verdicts import HOLDS, NOT_APPLICABLE, UNRESOLVED, VIOLATED

#: A mean over seeds above an (expectation) bound by no more than this many standard errors is
#: UNRESOLVED, not VIOLATED: the excess is within the sampling noise (:attr:`Verification.noise`).
NOISE_SE = 2.0


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
