r"""Search a theorem's conforming space for a counterexample (``validation.falsify``).

A theorem is a property of every ``(problem, params)`` pair inside its function class and
conditions (its conforming space, :func:`fedtheory.testing.strategies.theorem_cases`). The search has
three phases, all within ``budget`` verifications (a case already evaluated is not run again),
and is deterministic for a seed (hypothesis seeded, no example database, none of the constants hypothesis
would harvest from the modules the process loaded: :func:`fedtheory.testing.draws.fixed_constants`):

1. **draws**: hypothesis draws pairs from that space, guided by ``target(log ratio)`` towards the
   largest measured/bound, and shrinks a violated case to a small one (half the budget; not with
   ``shrink=False``);
2. **edges**: every draw of the best case is a coordinate of the space
   (:class:`fedtheory.testing.strategies.Tape`); each is set in turn to the ends of its range (a
   step size at its cap, the smallest n, no noise, x^0 at x*, the longest horizon) and to each of
   its options, keeping what raises the ratio; then every pair of options is changed together
   from the best case (a corner that needs both changes);
3. **optimiser**: Nelder-Mead over the continuous coordinates (in the unit cube of their ranges,
   log scale where drawn so) from the best case, maximising log(measured/bound), until a case is
   VIOLATED or the budget is spent.

A case the edges or the optimiser find is a point of the same space (drawn at the changed
coordinates by :func:`fedtheory.testing.strategies.replay`), inside the same conditions.

Verdicts are the engine's: a case that is not applicable (a condition of the variant fails) is
not part of the space and is skipped; an UNRESOLVED case (measurement at rounding level) is never
a counterexample.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np

from .verdicts import NOT_APPLICABLE, VIOLATED
from .._argcheck import Bool, check_param, Interval, Options
from .._progress import bar as progress_bar
from . import CASES, SPECS, THEOREMS
from .engine import conforms


def _registered_counterexamples(name, variant):
    """Labels of the registered cases (:data:`fedtheory.theory.CASES`) on which ``variant`` of theorem
    ``name`` is documented to fail (``expect[variant]`` is False: its documented counterexamples)."""
    if name not in CASES:
        return []
    try:
        cases = CASES[name](True)[0]
    except Exception:                       # a user's case declaration that fails: no note, the search stands
        return []
    return [c.label for c in cases if c.expect.get(variant) is False]      # documented to fail there


@dataclass
class FalsifyCase:
    """One conforming case of a search: ``problem``, ``params`` (``validation.verify`` arguments),
    ``ratio`` (measured/bound), its ``verification``, the ``phase`` that found it ("draws",
    "edges" or "optimiser") and its ``coordinates`` in the space (a
    :class:`~fedtheory.testing.strategies.Tape`'s entries; empty for a strategy without the taped
    primitives).

    Parameters
    ----------
    problem : FederatedProblem
        The case's problem.
    params : dict
        Its ``validation.verify`` arguments.
    ratio : float
        measured/bound.
    verification : Verification
        The check.
    phase : {"draws", "edges", "optimiser"}
        The search phase that found it.
    coordinates : tuple
        Its coordinates in the space (a Tape's entries).
    """

    problem: object
    params: dict
    ratio: float
    verification: object = field(repr=False)
    phase: str = "draws"
    coordinates: tuple = field(default=(), repr=False)

    def describe(self):
        """The problem (its recipe when it has one) and the parameters, one line each, every number
        written so that it reads back exactly (a shrunk counterexample lies at the edge of the
        theorem's conditions, where a rounded step size may fall outside them or hold the bound)."""
        recipe = (self.problem.info or {}).get("recipe") if getattr(self.problem, "info", None) else None
        lines = [f"problem: {recipe or repr(self.problem)}"]
        for k, v in self.params.items():
            if isinstance(v, np.ndarray):
                v = np.array2string(v, separator=", ", floatmode="unique", threshold=v.size + 1,
                                    max_line_width=sys.maxsize)
            elif isinstance(v, (float, np.floating)):
                v = repr(float(v))
            lines.append(f"  {k} = {v}")
        return "\n".join(lines)


@dataclass
class Falsification:
    """Outcome of :func:`falsify`.

    Attributes
    ----------
    name, variant : str
        The theorem and the bound variant searched.
    budget, seed : int
        The most verifications allowed, and the seed of the search.
    shrink : bool
        Whether a counterexample found by the draws was shrunk (else it is reported as drawn).
    evaluations : int
        Verifications run (at most ``budget``).
    skipped : int
        Drawn cases that were not applicable to the variant (outside its conditions).
    worst : FalsifyCase or None
        The applicable case with the largest measured/bound (among those whose comparison does not
        rest on rounding, where there is one).
    counterexample : FalsifyCase or None
        A case where the variant is VIOLATED (shrunk, with ``shrink``); None when none was found.
    history : list of (ratio, verdict)
        Every evaluation in order (ratio nan for a skipped case).
    """

    name: str
    variant: str
    budget: int
    seed: int
    shrink: bool = True
    evaluations: int = 0
    skipped: int = 0
    worst: FalsifyCase | None = None
    counterexample: FalsifyCase | None = None
    history: list = field(default_factory=list, repr=False)

    def replay(self):
        """The Verification of the counterexample (else of the worst case), run again."""
        case = self.counterexample or self.worst
        if case is None:
            raise ValueError(f"falsify({self.name!r}) evaluated no applicable case: nothing to replay")
        return THEOREMS[self.name](case.problem, variant=self.variant, **case.params)

    def report(self):
        """A plain-text report: the search, the worst case, the counterexample."""
        head = (f"falsify {self.name} [{self.variant}]: {self.evaluations} evaluations (budget {self.budget}, "
                f"seed {self.seed}), {self.skipped} drawn cases not applicable")
        lines = [head]
        if self.counterexample is not None:
            v = self.counterexample.verification
            phase = self.counterexample.phase
            how = f"found by the {phase}" if phase != "draws" else ("shrunk" if self.shrink else "as drawn, not shrunk")
            lines += [f"COUNTEREXAMPLE ({how}): measured {v.measured:.4g} > bound {v.bound:.4g} "
                      f"(ratio {v.ratio:.4g})", self.counterexample.describe()]
        else:
            known = _registered_counterexamples(self.name, self.variant)
            lines.append("no counterexample found" + (
                "; not a proof: the registered counterexample(s) " + "; ".join(map(repr, known)) +
                f" of this variant lie(s) outside what the search drew (`fedtheory verify` runs them; "
                f"fedtheory.theory.case({self.name!r}, LABEL) returns one to replay)" if known else ""))
        if self.worst is not None and self.worst is not self.counterexample:
            lines += [f"largest measured/bound: {self.worst.ratio:.4g}", self.worst.describe()]
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def figure(self):
        """measured/bound of every evaluation in order (log scale), the counterexample marked.

        Returns
        -------
        matplotlib.figure.Figure
        """
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.2), layout="constrained")
        r = np.array([h[0] for h in self.history], dtype=float)
        k = np.arange(1, r.size + 1)
        ok = np.isfinite(r) & (r > 0)
        bad = np.array([h[1] == VIOLATED for h in self.history], dtype=bool)
        ax.scatter(k[ok & ~bad], r[ok & ~bad], s=12, color="tab:blue", label="holds / unresolved")
        if (ok & bad).any():
            ax.scatter(k[ok & bad], r[ok & bad], s=22, color="tab:red", marker="x", label="violated")
        if ok.any():
            ax.set_yscale("log")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xlabel("evaluation")
        ax.set_ylabel("measured / bound")
        ax.set_title(f"falsify {self.name} [{self.variant}], seed {self.seed}", fontsize=9)
        ax.legend(fontsize=7, frameon=False)
        return fig


class _Violated(Exception):
    def __init__(self, case):
        super().__init__("violated")
        self.case = case


def _key(problem, params):
    parts = []
    for k in sorted(params):
        v = params[k]
        parts.append((k, np.asarray(v).tobytes() if isinstance(v, (np.ndarray, list, tuple)) else repr(v)))
    pkey = (problem.data_hash(), repr(getattr(problem, "noise", None)), np.asarray(problem.weights).tobytes()) \
        if hasattr(problem, "data_hash") else id(problem)
    return pkey, tuple(parts)


def falsify(name, variant=None, budget=200, seed=0, cases=None, progress=None, shrink=True):
    """Search the conforming space of theorem ``name`` for the largest measured/bound.

    Parameters
    ----------
    name : str
        A registered theorem (``validation.theorems()``).
    variant : str, optional
        The bound variant searched (default: the theorem's default variant).
    budget : int, default 200
        The most verifications to run (generation, targeting and shrinking together).
    seed : int, default 0
        Seed of the search: the same seed gives the same search.
    cases : hypothesis strategy, optional
        Your own strategy of ``(problem, params)`` pairs (default: the theorem's conforming space,
        :func:`fedtheory.testing.strategies.theorem_cases`).
    progress : bool, optional
        A progress bar over the budget (default: when stderr is a terminal).
    shrink : bool, default True
        Shrink a counterexample the draws find to a small one (each step a verification, within
        the budget). False reports the first violated case as drawn: the same search up to it,
        without the verifications of the shrinking.

    Returns
    -------
    Falsification
        ``.evaluations``, ``.worst``, ``.counterexample`` (shrunk, or None), ``.replay()``,
        ``.report()``, ``.figure()``.

    Examples
    --------
    >>> import validation
    >>> f = validation.falsify("feddeper.theorem_2", variant="corrected", budget=5, seed=0, progress=False)
    >>> f.evaluations <= 5, f.counterexample is None
    (True, True)
    """
    from hypothesis import HealthCheck, Phase, given, settings, target
    from hypothesis import seed as hseed
    check_param("name", name, [Options(*sorted(THEOREMS))], "falsify")
    spec = SPECS.get(name)
    if spec is None:
        raise ValueError(f"theorem {name!r} is not a TheoremSpec: it has no conforming space to search")
    variant = spec.default_variant if variant is None else variant
    check_param("variant", variant, [Options(*spec.variants)], "falsify")
    check_param("budget", budget, [Interval(int, 1, None)], "falsify")
    check_param("seed", seed, [Interval(int, 0, math.inf)], "falsify")
    check_param("shrink", shrink, [Bool()], "falsify")
    from ..testing.draws import fixed_constants, recording, replay        # (hypothesis: the test extra)
    if cases is None:
        from ..testing.strategies import theorem_cases        # (hypothesis: the test extra)
        cases, base = theorem_cases(name, variant), spec.cases(variant)

        def inside(case):                            # the filter of theorem_cases, for a replayed case
            return conforms(spec, case[0], variant, **case[1]) is not False
    else:
        base, inside = cases, (lambda case: True)
    out = Falsification(name, variant, budget, seed, bool(shrink))
    seen, violated = {}, []
    pbar = progress_bar(progress, total=budget, desc=f"falsify {name}", unit="case")

    def evaluate(case, coordinates=(), phase="draws"):
        problem, params = case
        key = _key(problem, params)
        if key in seen:
            if isinstance(seen[key], Exception):     # the theorem raised on this case: the same again (a
                raise seen[key]                      # replay that passed made hypothesis report "flaky")
            return seen[key]
        if out.evaluations >= budget:
            return None
        out.evaluations += 1                         # a case that raises counts against the budget too
        pbar.update(1)
        try:
            v = THEOREMS[name](problem, variant=variant, **params)
        except Exception as e:
            e.fedtheory_case = f"problem {problem!r}, parameters {params!r}"
            seen[key] = e
            raise
        if not v.applicable:
            out.skipped += 1
            res = None
            out.history.append((float("nan"), NOT_APPLICABLE))
        else:
            res = FalsifyCase(problem, dict(params), float(v.ratio), v, phase, tuple(coordinates))
            out.history.append((res.ratio, v.verdict()))
            if out.worst is None or _above(res, out.worst):
                out.worst = res
        seen[key] = res
        if res is not None and v.verdict() == VIOLATED:
            violated.append(res)
        return res

    def stop_if_violated(res):
        """One place raises a violation (hypothesis tells failures apart by where they are raised)."""
        if res is not None and res.verification.verdict() == VIOLATED:
            raise _Violated(res)
        return res

    draws = max(1, budget // 3) if any(k in ("float", "log", "logint") for k in _kinds(base)) else budget

    @hseed(seed)
    @settings(max_examples=draws, database=None, deadline=None, derandomize=False, print_blob=False,
              phases=(Phase.generate, Phase.target) + ((Phase.shrink,) if shrink else ()), report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    @given(recording(cases))
    def search(drawn):
        case, coordinates = drawn
        if out.evaluations >= draws and not violated:    # the rest of the budget is the local phases'
            return                                         # (shrinking a violated case may use it)
        res = stop_if_violated(evaluate(case, coordinates))
        if res is None:
            return
        # the observation to 6 digits: the path of the search must not turn on the last bits of a ratio
        # (summation order, BLAS threads), which differ between processes and machines
        sc = _score(res)
        target(float(f"{sc:.6g}") if math.isfinite(sc) else (50.0 if sc > 0 else -50.0))

    def at(coordinates, phase):
        """Evaluate the case of the space at ``coordinates`` (None outside the conditions or the budget)."""
        case, drawn = replay(recording(base), [e[3] for e in coordinates])
        if not inside(case):
            return None
        return stop_if_violated(evaluate(case, drawn, phase))

    try:
        with fixed_constants():                 # the same search for a seed whatever this process loaded
            try:
                search()
            except _Violated as e:
                out.counterexample = e.case
            if out.counterexample is None and out.worst is not None and out.worst.coordinates:
                try:
                    _edges(at, out, budget, _starts([r for r in seen.values() if isinstance(r, FalsifyCase)]))
                    _optimise(at, out, budget)
                except _Violated as e:
                    out.counterexample = e.case
    except Exception as e:
        case = getattr(e, "fedtheory_case", None)
        if case is not None and not any(case in n for n in getattr(e, "__notes__", ())):
            e.add_note(f"falsify {name}: raised by the theorem on the drawn case {case}")
        raise
    finally:
        pbar.close()
    return out


def _kinds(strategy):
    """The kinds of draw of one case of ``strategy`` (the taped primitives it uses)."""
    from ..testing.draws import recording, replay        # (hypothesis: the test extra)
    try:
        return {e[0] for e in replay(recording(strategy), [])[1]}
    except Exception:                       # a strategy that cannot be drawn outside a search: no local phases
        return set()


def _informative(v):
    """Whether a verification's ratio says something: resolved, or unresolved by the sampling noise of
    its seeds only (more seeds resolve it). A comparison at rounding level (the bound or the
    measurement within its floor) says nothing, whatever its ratio: the search is not led there and
    it is not reported as the largest measured/bound while an informative case exists."""
    return bool(v.resolved or (not v.unresolved and v.noise > v.floor))


def _above(a, b):
    """Whether case ``a`` ranks above case ``b``: informative first, then the larger ratio."""
    ia, ib = _informative(a.verification), _informative(b.verification)
    return ia > ib or (ia == ib and _gt(a.ratio, b.ratio))


def _score(res):
    """log(measured/bound) of an evaluated case, -inf for one outside the space or the budget or whose
    comparison rests on rounding (:func:`_informative`)."""
    if res is None or not res.ratio > 0 or not _informative(res.verification):
        return -math.inf
    return math.log(res.ratio) if math.isfinite(res.ratio) else math.inf


def _starts(evaluated, most=3):
    """Where the edges start: the best evaluated case of each branch of the space's first choice
    (its families of problems: a ratio is compared fairly only within one), then the best of other
    shapes of draw (the kinds of its coordinates: which branches were taken), best first, at most
    ``most`` in all."""
    def branch(r):
        return next((e[3] for e in r.coordinates if e[0] == "choice"), None)

    def best_by(key):
        out = {}
        for r in evaluated:
            if r.coordinates and (key(r) not in out or _score(r) > _score(out[key(r)])):
                out[key(r)] = r
        return sorted(out.values(), key=_score, reverse=True)
    starts = best_by(branch)[:most]
    for r in best_by(lambda r: tuple(e[0] for e in r.coordinates)):
        if len(starts) < most and all(r is not s for s in starts):
            starts.append(r)
    return starts


def _edges(at, out, budget, starts):
    """From each case of ``starts`` (in turns, one coordinate each), set each coordinate in turn to
    the ends of its range and to each option, keeping the change that raises the ratio most
    (phase "edges")."""
    walks = [[best, 0] for best in starts]
    while out.evaluations < budget and any(i < len(best.coordinates) for best, i in walks):
        for walk in walks:
            best, i = walk
            if i >= len(best.coordinates) or out.evaluations >= budget:
                continue
            walk[1] += 1
            kind, lo, hi, u = best.coordinates[i]
            if kind == "int" and hi - lo > 64:              # a seed: its ends are no edge of anything
                continue
            tries = (lo, hi) if kind == "int" else range(lo, hi + 1) if kind == "choice" else (0.0, 1.0)
            for v in tries:
                if v == u or out.evaluations >= budget:
                    continue
                coords = list(best.coordinates)
                coords[i] = (kind, lo, hi, v)
                res = at(coords, "edges")
                if _score(res) > _score(walk[0]):
                    walk[0] = res
    _option_pairs(at, out, budget, max((w[0] for w in walks), key=_score, default=None))


def _option_pairs(at, out, budget, best):
    """From ``best``, every pair of options changed together (two choices at once: a corner that needs
    both, e.g. a deterministic run started at the minimum, which neither change reaches alone because
    each by itself lowers the ratio), while the budget lasts (phase "edges")."""
    if best is None:
        return
    choices = [i for i, e in enumerate(best.coordinates) if e[0] == "choice"]
    for a, i in enumerate(choices):
        for j in choices[a + 1:]:
            (ki, li, hi_, ui), (kj, lj, hj, uj) = best.coordinates[i], best.coordinates[j]
            for vi in range(li, hi_ + 1):
                for vj in range(lj, hj + 1):
                    if vi == ui or vj == uj:
                        continue
                    if out.evaluations >= budget:
                        return
                    coords = list(best.coordinates)
                    coords[i], coords[j] = (ki, li, hi_, vi), (kj, lj, hj, vj)
                    at(coords, "edges")


def _optimise(at, out, budget):
    """Nelder-Mead over the continuous coordinates of the best case, maximising log(measured/bound)
    (phase "optimiser"); the discrete ones stay as they are."""
    from scipy.optimize import minimize
    best = out.worst
    free = [i for i, e in enumerate(best.coordinates) if e[0] in ("float", "log", "logint")]
    if not free or out.evaluations >= budget:
        return
    start = np.array([best.coordinates[i][3] for i in free], dtype=float)
    template = list(best.coordinates)

    def objective(x):
        if out.evaluations >= budget:
            raise _Spent()
        coords = list(template)
        for j, i in enumerate(free):
            k, lo, hi, _ = coords[i]
            coords[i] = (k, lo, hi, float(min(max(x[j], 0.0), 1.0)))
        res = at(coords, "optimiser")
        sc = _score(res)
        # to 6 digits, as the draws' target: the path must not turn on the last bits of a ratio
        return -float(f"{sc:.6g}") if math.isfinite(sc) else (-1e3 if sc > 0 else 1e3)

    # a simplex of steps of 0.25 towards the middle of each range
    simplex = [start]
    for j in range(start.size):
        x = start.copy()
        x[j] += 0.25 if x[j] <= 0.5 else -0.25
        simplex.append(x)
    try:
        minimize(objective, start, method="Nelder-Mead",
                 options=dict(initial_simplex=np.array(simplex), maxfev=4 * budget, xatol=1e-3, fatol=1e-3))
    except _Spent:
        pass


class _Spent(Exception):
    """The budget is spent (ends the optimiser)."""


def _gt(a, b):
    if math.isnan(a):
        return False
    return math.isnan(b) or a > b
