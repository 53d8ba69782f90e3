r"""One engine for every theorem: a theorem is a :class:`TheoremSpec`, the engine runs it.

A spec declares, once:

* the registered **algorithm** and the ``fedtheory.run`` arguments of its measurement
  (:attr:`TheoremSpec.run_kwargs`), with the **traces** it needs (``trace=...`` of the runner);
* its **setup**: the problem constants and resolved defaults (a :class:`NotApplicable` raised
  there says why the theorem does not apply to the problem at all);
* its **conditions**, each a :class:`~fedtheory.theory.Condition` with a role: ``"stated"``
  (in the theorem), ``"hidden"`` (needed by the proof, not stated) or ``"informational"``;
* its **bound** for each :class:`Variant` (which roles the variant requires, one sentence on
  what it is);
* its **left-hand side**, computed from the runs' histories and traces
  (:attr:`TheoremSpec.measure`).

:func:`check` turns a spec into a :class:`~fedtheory.theory.Verification`. Every measured
quantity comes from ``fedtheory.run`` of the registered algorithm, and the verification keeps
the runs: ``ft.run(problem, v.algorithm, **v.run_kwargs)`` reproduces ``v.runs[0].x`` bit for
bit. A bound that is not a finite non-negative number makes the check not applicable, with the
reason; so does a problem whose components do not declare an assumption of the theorem's
function class (:attr:`TheoremSpec.assumptions`). A verdict never rests on rounding: a
measurement above the bound by no more than its resolution floor (:attr:`TheoremSpec.floor`), or
one that cannot be resolved, is UNRESOLVED; a zero measurement under a zero bound holds. Register a spec with :func:`register_spec`; ``validation.verify(name, ...)`` then runs it.

``check(spec, problem, algorithm=OTHER)`` (``validation.verify(name, problem, algorithm=OTHER)``)
runs the same spec against another registered algorithm: the theorem's run arguments are kept, its
algorithm's hyperparameters go to ``OTHER`` where it has one of the same name, and the
conditions, measurement and bound are evaluated on ``OTHER``'s runs. A spec that reads a
hyperparameter ``OTHER`` does not have (:class:`ForeignHyperparameter`), or whose run arguments
``OTHER`` rejects, is NOT APPLICABLE with the reason. :func:`parameters` lists the parameters a
spec accepts (its setup's signature).

Examples
--------
A complete theorem: gradient descent (FedAvg with one client and one local step) on an
L-smooth, mu-strongly convex quadratic contracts the gap, f(x^T) - f* <= (1 - mu eta)^T (f(x^0) - f*)
for eta <= 1/L.

>>> import numpy as np, problems
>>> from fedtheory.theory import Condition
>>> from fedtheory.theory.engine import TheoremSpec, Variant, check
>>> def setup(problem, rounds=20, lr=0.5, seeds=1):
...     L, mu = problem.info["L"], problem.info["mu"]
...     return dict(T=rounds, lr=lr, L=L, mu=mu, seeds=seeds, f_star=problem.info["f_star"])
>>> spec = TheoremSpec(
...     name="example.gd_contraction", algorithm="fedavg", statement="f(x^T) - f* <= (1 - mu eta)^T f0",
...     setup=setup,
...     run_kwargs=lambda st: dict(rounds=st["T"], local_steps=1, lr=st["lr"], x0=np.ones(3)),
...     measure=lambda st, runs: dict(values=[st["problem"].value(r.x) - st["f_star"] for r in runs["main"]]),
...     conditions=lambda st, m: [Condition("eta <= 1/L", st["lr"], 1 / st["L"], st["lr"] <= 1 / st["L"])],
...     variants={"printed": Variant("as stated", lambda st, m: (1 - st["mu"] * st["lr"]) ** st["T"]
...                                  * (st["problem"].value(np.ones(3)) - st["f_star"]))})
>>> p = problems.quadratic(1, 3, L=1.0, mu=0.2, seed=0)
>>> v = check(spec, p, rounds=20, lr=0.5)
>>> v.applicable, v.holds, v.algorithm, len(v.runs)
(True, True, 'fedavg', 1)
>>> check(spec, p, rounds=20, lr=1.5).reason                     # a stated condition fails
'fails eta <= 1/L'
"""
from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from .floors import assumption_failures, comparison_floor, instance_floor, mean_stderr, propagated_floor
from .substitution import _algorithm_name, ForeignHyperparameter, _same, _Substitution
from .._argcheck import Bool, check_param, Options
from ..exceptions import IncompatibleProblemError, InvalidParameterError
from . import Condition, SPECS, THEOREMS, Verification
from ..runs.runner import SeededRuns, check_arguments

ROLES = ("stated", "hidden", "informational")


class NotApplicable(Exception):
    """Raised by a spec's setup when the theorem does not apply to the problem.

    Parameters
    ----------
    reason : str
        Why (the message; also kept as ``reason``).
    conditions : iterable of Condition, optional
        The conditions that could be evaluated (kept as the list ``conditions``).
    """

    def __init__(self, reason, conditions=()):
        super().__init__(reason)
        self.reason = reason
        self.conditions = list(conditions)


@dataclass(frozen=True)
class Variant:
    """A bound variant: what it is (one sentence), which condition roles it requires, its bound.

    Parameters
    ----------
    description : str
        One sentence: what the variant is (``"printed"``: as in the paper; a corrected form says
        what changed).
    bound : callable
        ``bound(setup, measurement) -> float``: the right-hand side.
    requires : tuple of str, default ("stated",)
        The condition roles the variant needs (``"stated"``, ``"hidden"``).
    values : callable, optional
        ``values(setup, measurement) -> per-seed values``: the left-hand side this variant
        bounds (variants that bound different quantities of the same runs, e.g. an expectation
        and a pathwise form); by default the measurement's ``"values"``.
    quantity : str, optional
        Names the left-hand side this variant bounds when it differs from the quantity of the
        theorem (:attr:`TheoremSpec.quantity`).
    where : callable, optional
        For a lemma whose variants bound different quantities: ``where(setup, measurement) -> dict``,
        where this variant's worst instance is (default: the measurement's ``"where"``).
    floor : callable, optional
        ``floor(setup, measurement) -> float``: this variant's own resolution floor (default: the
        spec's, :attr:`TheoremSpec.floor`).
    unresolved : callable, optional
        ``unresolved(setup, measurement) -> str``: why this variant's comparison cannot be resolved
        ("" when it can; default: the measurement's ``"unresolved"``). :func:`instance_variant`
        sets the last four.
    """

    description: str
    bound: Callable
    requires: tuple = ("stated",)
    values: Callable | None = None
    quantity: str = ""
    where: Callable | None = None
    floor: Callable | None = None
    unresolved: Callable | None = None


def instance_variant(description, key=None, requires=("stated",), quantity=""):
    """A lemma's variant that bounds a worst instance of the measurement (:func:`worst_instance`):
    the measurement itself (``key`` None), or ``measurement[key]`` for a variant that compares other
    quantities of the same runs (a corrected lemma whose left-hand side differs). The bound, the
    values, where and the floor (the instance's own plus :func:`comparison_floor`) are that
    instance's.

    Parameters
    ----------
    description : str
        One sentence (:attr:`Variant.description`).
    key : str, optional
        The key of the measurement holding this variant's worst instance.
    requires : tuple of str, default ("stated",)
        The condition roles the variant needs.
    quantity : str, default ""
        Its left-hand side in words, where it differs from the lemma's.

    Returns
    -------
    Variant
        The variant.

    Examples
    --------
    >>> from fedtheory.theory.floors import worst_instance
    >>> v = instance_variant("the step used", key="step", requires=("stated", "hidden"))
    >>> m = {"step": worst_instance([0.5, 2.0], [3.0, 3.0], [dict(step=0), dict(step=1)])}
    >>> v.bound({}, m), v.values({}, m), v.where({}, m)
    (3.0, [2.0], {'step': 1})
    """
    def part(m):
        return m if key is None else m[key]

    return Variant(description, lambda st, m: part(m)["rhs"], tuple(requires), values=lambda st, m: part(m)["values"],
                   quantity=quantity, where=lambda st, m: part(m)["where"], floor=lambda st, m: instance_floor(st, part(m)),
                   unresolved=lambda st, m: str(part(m).get("unresolved") or ""))


@dataclass(frozen=True)
class Erratum:
    r"""A documented erratum of a theorem: what the paper prints, the correction, and the variant of
    the spec that applies it (``fedtheory errata`` lists every declared one, ``validation.errata``).

    Attributes
    ----------
    variant : str
        The spec's variant that applies this correction (not ``"printed"``); it may apply others too.
    label : str
        The erratum's label on the theorem's docs/papers page (``"E3"``, ``"erratum 2"``, ``"§4.6"``).
    where : str
        Theorem, equation or step of the paper concerned (``"Theorem 6(a), eq. (37)"``).
    printed, corrected : str
        What the paper prints and the corrected form, as LaTeX math (no ``$``; rendered in
        ``errata.tex`` and, between ``$``, in ``errata.md``).
    why : str
        One sentence: what is wrong (plain text).
    level : str, default "theorem"
        Where printed and corrected are compared: ``"theorem"``, or the registered lemma or proof
        step the erratum is in (``"fedsps.lemma_8"``); that lemma's ``"printed"`` and ``variant``
        are compared on its registered cases.
    why_not : str, default ""
        Why no computation separates printed from corrected, where none does (a constant that is
        only loose, a correction that adds a condition the printed form already fails): shown in
        the errata table instead of a separation.
    """

    variant: str
    label: str
    where: str
    printed: str
    corrected: str
    why: str
    level: str = "theorem"
    why_not: str = ""


@dataclass
class TheoremSpec:
    """Declaration of a theorem check (see the module docstring).

    The parameters are kept as attributes of the same names.

    Parameters
    ----------
    name : str
        Registered name, ``"<paper>.theorem_<n>"``.
    algorithm : str
        Registered algorithm the measurement runs.
    statement : str
        The inequality checked, in words or LaTeX (shown by ``describe``).
    setup : callable
        ``setup(problem, **params) -> dict``: resolved parameters and constants (raise
        :class:`NotApplicable` when the theorem cannot apply). The dict must hold ``"seeds"``.
    run_kwargs : callable
        ``run_kwargs(setup) -> dict`` of ``fedtheory.run`` arguments (no ``seed``).
    measure : callable
        ``measure(setup, runs) -> dict`` with ``"values"`` (the left-hand side per seed) and any
        other measured term the bound or the conditions use.
    conditions : callable
        ``conditions(setup, measurement) -> list of Condition`` (roles set).
    variants : dict
        ``{variant name: Variant}``; ``"printed"`` is exactly what the paper prints.
    default_variant : str, default "printed"
        The variant checked when none is named.
    extra_runs : callable, optional
        ``extra_runs(setup) -> {label: (algorithm, run kwargs)}``: further runs of registered
        algorithms per seed (e.g. a full-participation round for a constant); passed to
        ``measure`` as ``runs[label]``.
    reference : str
        Paper, theorem and equations.
    details : callable, optional
        ``details(setup, measurement) -> dict`` merged into ``Verification.details`` (terms of
        the bound, diagnostics).
    pep : callable or str, optional
        ``pep(L=, mu=, local_steps=, rounds=, lr=, n_clients=, **kw) -> PEPForm``: the method's
        performance-estimation problem over the theorem's class, for ``validation.tightness``
        (:mod:`fedtheory.theory.tightness`); a string says why the theorem has none.
    errata : tuple of Erratum
        The documented errata of the printed theorem, each with the variant that corrects it
        (``validation.errata`` derives its table from them).
    quantity : str
        The measured left-hand side in words (``Verification.quantity``, the verify table's
        ``measured`` column names it).
    floor : callable, optional
        ``floor(setup, measurement) -> float``: the resolution floor of the measured quantity, in
        its units (its rounding level, from the problem's scale and machine epsilon; helpers
        :func:`gap_floor`, :func:`distance_floor`). A measurement above the bound by no more
        than the floor is UNRESOLVED, never VIOLATED. Default: :func:`comparison_floor`.
        A measurement may also set ``"unresolved"`` to a reason (a quantity it divides by is
        at rounding level): the verdict is then UNRESOLVED whatever the comparison.
    assumptions : tuple of str
        Capabilities the theorem's function class needs from the problem's components
        (``"smooth"``, ``"strongly_convex"``; :func:`fedtheory.components.capabilities`), each
        with the assumption's name: ``(("smooth", "A1 (L-smoothness)"), ...)``. A problem
        without one is NOT APPLICABLE, naming the assumption; no run is made.
    cases : callable, optional
        ``cases() -> hypothesis strategy`` of ``(problem, params)`` pairs inside the theorem's
        function class and conditions: its conforming space, searched by
        ``validation.falsify`` (:mod:`fedtheory.testing.strategies`).
    rounding : callable, optional
        ``rounding(setup, measurement) -> {(where, key): delta}``: the rounding of the bound's own
        inputs (``where`` is ``"setup"`` or ``"measure"``; e.g. f(x^0) - f*, resolved to
        :func:`gap_floor`, or a squared gradient norm, to :func:`grad_sq_floor`). The floor grows
        by how far those deltas move the variant's bound (:func:`propagated_floor`): a bound whose
        f(x^0) - f* term is rounding is not a bound of 0 (nor a negative one).
    proof : tuple of str
        For a theorem: the lemmas and proof steps its proof rests on, in proof order
        (``validation.lemmas(name)``; :func:`register_spec` with ``proof_of=`` appends to it).
        ``validation.verify(name, ..., lemmas=True)`` checks each on the same runs.

    Notes
    -----
    A lemma or a proof step is declared the same way, named ``"<paper>.lemma_<n>"`` or
    ``"<paper>.step_<label>"``: its measurement is the worst instance over rounds, clients and local
    steps (:func:`worst_instance`), and its ``"where"`` says where that was
    (``Verification.where``).
    """

    name: str
    algorithm: str
    statement: str
    setup: Callable
    run_kwargs: Callable
    measure: Callable
    conditions: Callable
    variants: dict
    default_variant: str = "printed"
    extra_runs: Callable | None = None
    reference: str = ""
    details: Callable | None = None
    pep: Callable | str | None = None
    errata: tuple = ()
    quantity: str = ""
    floor: Callable | None = None
    assumptions: tuple = ()
    cases: Callable | None = None
    rounding: Callable | None = None
    proof: tuple = ()


def _runs(problem, spec, setup, measurement, algorithm=None, adapt=None):
    """The measurement runs (reused from a previous variant's measurement when given).

    ``algorithm`` replaces the theorem's algorithm (in its extra runs too); ``adapt(kwargs)`` turns
    the theorem's run arguments into that algorithm's (:func:`_Substitution.adapt`)."""
    if measurement is not None and "runs" in measurement:
        return measurement["runs"], measurement["run_kwargs"]
    alg = spec.algorithm if algorithm is None else algorithm
    adapt = adapt or dict
    kwargs = adapt(spec.run_kwargs(setup))
    given = (measurement or {}).get("shared_runs")
    if given is not None and alg == given[0] and _same_kwargs(kwargs, given[1]) and set(given[2]) >= {"main"}:
        return {label: given[2][label] for label in given[2] if label == "main"}, kwargs     # the theorem's runs
    runs = {"main": _seeded_runs(problem, alg, kwargs, setup["seeds"])}
    if spec.extra_runs is not None:
        for label, (extra, kw) in spec.extra_runs(setup).items():
            if extra == spec.algorithm:
                extra, kw = alg, adapt(kw)
            runs[label] = _seeded_runs(problem, extra, kw, setup["seeds"])
    return runs, kwargs


def _seeded_runs(problem, alg, kwargs, seeds):
    """The runs of seeds 0 .. seeds - 1. A run that drew nothing from its seed's random streams
    (full participation, exact gradients, no noise: ``RunResult._seed_free``) is the run of every
    seed: the others are copies of it with their seed, not run again."""
    runs = SeededRuns(problem, alg, **kwargs)              # (set up once, for every seed)
    first = runs.run(0)
    if getattr(first, "_seed_free", False):
        return [first] + [_with_seed(first, s) for s in range(1, seeds)]
    return [first] + [runs.run(s) for s in range(1, seeds)]


def _with_seed(res, seed):
    """A copy of a run's result under another seed (its history still built when first read)."""
    out = copy.copy(res)
    out.seed = seed
    return out


def _same_kwargs(a, b):
    """Whether two dicts of run arguments are the same (arrays by value)."""
    if set(a) != set(b):
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (np.shape(x) == np.shape(y) and np.array_equal(np.asarray(x), np.asarray(y))):
                return False
        elif not _same(x, y):
            return False
    return True


def check(spec, problem, variant=None, measurement=None, algorithm=None, lemmas=False, **params):
    """Run the theorem check declared by ``spec`` on ``problem``; returns a Verification.

    Parameters
    ----------
    spec : TheoremSpec
        The theorem (registered or not).
    problem : FederatedProblem
        The problem it is checked on.
    variant : str, optional
        One of ``spec.variants`` (default ``spec.default_variant``).
    measurement : dict, optional
        ``details["measurement"]`` of a previous check with the same parameters (another
        variant): its runs are reused.
    algorithm : str, optional
        Another registered algorithm (a user's too) to run the spec against, instead of
        ``spec.algorithm``. The spec's run arguments are kept; its algorithm's hyperparameters go
        to the algorithm run where it has one of the same name and are dropped otherwise.
        Parameters the theorem's setup does not take are passed to the algorithm as hyperparameters
        (one the theorem also sets replaces its value, in the run and in what the conditions read).
        The conditions, the measurement and the bound are evaluated on what is run: one that
        reads a dropped hyperparameter, run arguments the algorithm rejects (a trace it does not
        record, a sampling it does not support) make the check NOT APPLICABLE with the reason.
        ``Verification.algorithm`` names the algorithm run.
    lemmas : bool, default False
        Also check every lemma and proof step of the theorem's proof (``spec.proof``), in proof
        order, on the same runs where their run arguments are the theorem's (else on their own):
        ``Verification.lemmas`` lists them and ``Verification.first_failure`` names the first
        that is VIOLATED. Each lemma takes the parameters of the theorem it accepts and its
        variant of the same name (else its default).
    **params
        The theorem's parameters (``rounds``, ``local_steps``, ``seeds``, hyperparameters, ...).

    Returns
    -------
    Verification
        Not applicable (with the failing conditions named) when a condition the variant
        requires fails or the bound is not a finite positive number.
    """
    check_param("lemmas", lemmas, [Bool()], spec.name)
    v = _check(spec, problem, variant, measurement, algorithm, **params)
    if lemmas:
        shared = None
        if v.runs:
            shared = (v.algorithm, {k: x for k, x in v.run_kwargs.items() if k != "seed"}, {"main": list(v.runs)})
        for name in spec.proof:
            lspec = SPECS[name]
            takes = _setup_parameters(lspec)
            catch_all = any(k.startswith("**") for k in takes)
            # the theorem's parameters, and its resolved run arguments over them (a default the
            # theorem resolved, the rounds it simulates): the lemma's run is then the theorem's
            given = dict(params, **(shared[1] if shared else {}))
            lparams = {k: x for k, x in given.items() if (catch_all and k in params) or k in takes}
            lvariant = v.variant if v.variant in lspec.variants else lspec.default_variant
            v.lemmas.append(check(lspec, problem, variant=lvariant, algorithm=algorithm,
                                  measurement={"shared_runs": shared} if shared else None, **lparams))
    return v


def _check(spec, problem, variant, measurement, algorithm, **params):
    """:func:`check` of the spec itself (its lemmas apart)."""
    variant = spec.default_variant if variant is None else variant
    check_param("variant", variant, [Options(*spec.variants)], spec.name)
    var = spec.variants[variant]
    quantity = var.quantity or spec.quantity
    alg, sub = spec.algorithm, None
    takes = _setup_parameters(spec)
    outside = [k for k in params if k not in takes]
    if algorithm is not None and (_algorithm_name(algorithm, spec.name) != spec.algorithm or outside):
        # another algorithm, or the theorem's own named with its hyperparameters the setup does not take
        alg = _algorithm_name(algorithm, spec.name)
        own = {k: params.pop(k) for k in list(params) if k not in takes}
        sub = _Substitution(spec, alg, own)
        unknown = sorted(set(own) - set(sub.mine))
        if unknown:
            raise InvalidParameterError(
                f"{spec.name} with algorithm {alg!r}: {', '.join(map(repr, unknown))} is neither a parameter of the "
                f"theorem ({', '.join(takes)}) nor a hyperparameter of {alg!r} ({', '.join(sub.mine) or 'none'}).")

    if sub is None and outside and not any(k.startswith("**") for k in takes):
        raise InvalidParameterError(
            f"{spec.name}: {', '.join(map(repr, outside))} is not a parameter of the theorem ({', '.join(takes)}); "
            f"a hyperparameter of its algorithm {spec.algorithm!r} goes with algorithm={spec.algorithm!r}.")

    def not_applicable(reason, conds=()):
        return Verification(spec.name, variant, False, reason, list(conds), float("nan"), float("nan"),
                            algorithm=alg, quantity=quantity)
    missing = assumption_failures(problem, spec.assumptions)
    if missing:
        conds = [Condition(f"{name} (the problem's components do not declare it)", 0.0, 1.0, False)
                 for name in missing]
        return not_applicable("; ".join(f"fails {m}" for m in missing), conds)
    try:
        setup = spec.setup(problem, **params)
        setup.setdefault("problem", problem)
    except NotApplicable as e:
        return not_applicable(e.reason, e.conditions)
    if sub is not None:
        kwargs = sub.adapt(spec.run_kwargs(setup))
        try:
            check_arguments(problem, alg, **kwargs)
        except (InvalidParameterError, IncompatibleProblemError, TypeError) as e:
            return not_applicable(f"the theorem's run arguments do not apply to {alg!r}: {e}")
    runs, kwargs = _runs(problem, spec, setup, measurement, alg, sub.adapt if sub is not None else None)
    if sub is not None:
        setup = sub.retarget(setup)
    full = setup
    if sub is not None:
        setup = sub.hide(setup)
    try:
        if measurement is not None and "runs" in measurement:
            m = measurement
        else:
            m = dict(spec.measure(setup, runs))
            m["runs"], m["run_kwargs"] = runs, kwargs
        conds = list(spec.conditions(setup, m))
        for c in conds:
            if c.role not in ROLES:
                raise ValueError(f"{spec.name}: condition {c.name!r} has role {c.role!r}; roles are {ROLES}")
        failed = [c for c in conds if c.role in var.requires and not c.ok]
        mean, se = mean_stderr(var.values(setup, m) if var.values is not None else m["values"])
        bound = float(var.bound(setup, m))
        propagated = (propagated_floor(var.bound, setup, m, spec.rounding(setup, m))
                      if spec.rounding is not None and math.isfinite(bound) else 0.0)
    except (KeyError, AttributeError) as e:
        if isinstance(e, ForeignHyperparameter):
            why = e.args[0]
        elif sub is not None and sub.hidden_name(e) is not None:
            why = sub.reason(sub.hidden_name(e))
        else:
            raise
        v = not_applicable(why)
        v.runs, v.run_kwargs = list(runs["main"]), dict(kwargs, seed=0)
        v.details["algorithm_substituted"] = dict(spec_algorithm=spec.algorithm, algorithm=alg,
                                                  dropped_hyperparameters=dict(sub.dropped), own=dict(sub.own))
        return v
    setup = full
    reason = "; ".join(f"fails {c.name}" for c in failed)
    own = (float(var.floor(setup, m)) if var.floor is not None else float(spec.floor(setup, m))
           if spec.floor is not None else comparison_floor(mean, bound))
    own = max(own, comparison_floor(mean, bound)) if math.isfinite(bound) else own   # the measurement's
    floor = own + propagated
    computed = (mean, bound)
    # a bound within the rounding of its own inputs of 0 is 0 (terms that cancel, a difference of equal
    # values: the true bound lies in [0, 2 |bound|], which the floor keeps), and a measurement within its
    # own floor of 0 under it is 0: a zero measurement under a zero bound holds. (Neither floor speaks
    # for the other quantity: 5e-4 is no 0 beside f = 1e29, nor a distance of 1e-13 beside a bound's
    # rounding of 3e-13.)
    if math.isfinite(bound) and bound != 0.0 and abs(bound) <= propagated:
        floor += abs(bound)
        bound = 0.0
    if bound == 0.0 and math.isfinite(own) and mean != 0.0 and abs(mean) <= own:
        mean = 0.0
    # a bound below 0 by no more than the floor is 0 to rounding: the comparison goes on, and is
    # UNRESOLVED where it rests on that rounding
    if not failed and not (math.isfinite(bound) and bound >= -(floor if floor == floor else 0.0)):
        reason = (f"the bound is not a finite non-negative number ({bound:.4g}): a condition of the theorem "
                  "fails for these constants")
        failed = [None]
    details = {k: v for k, v in setup.items()}
    details["measurement"] = m
    details["variant_description"] = var.description
    if (mean, bound) != computed:           # zero to rounding: what was computed, for the record
        details["computed_measured_and_bound"] = computed
    if spec.details is not None:
        try:
            details.update(spec.details(setup if sub is None else sub.hide(setup), m))
        except (KeyError, AttributeError) as e:
            if not (isinstance(e, ForeignHyperparameter) or (sub is not None and sub.hidden_name(e) is not None)):
                raise
    if sub is not None:
        details["algorithm_substituted"] = dict(spec_algorithm=spec.algorithm, algorithm=alg,
                                                dropped_hyperparameters=dict(sub.dropped), own=dict(sub.own))
    return Verification(spec.name, variant, not failed, reason, conds, mean, bound, se, details,
                        runs=list(runs["main"]), algorithm=alg,
                        run_kwargs=dict(kwargs, seed=0), floor=floor,
                        unresolved=str((var.unresolved(setup, m) if var.unresolved is not None else m.get("unresolved"))
                                       or ""),
                        quantity=quantity, where=var.where(setup, m) if var.where is not None else m.get("where"))


class _NoMeasurement(dict):
    def __missing__(self, key):
        raise KeyError(key)


def conforms(spec, problem, variant=None, **params):
    """Whether ``(problem, params)`` is inside the conditions ``variant`` requires, decided before
    any run: the assumptions, the setup and the conditions that do not read the measurement.

    Returns True (every such condition holds), False (one fails, or the setup says the theorem
    does not apply) or None (the conditions read the measurement: only a run can tell).

    Parameters
    ----------
    spec : TheoremSpec
        The theorem or lemma.
    problem : FederatedProblem
        The problem.
    variant : str, optional
        The variant (default: the theorem's own default variant).
    **params
        The check's parameters.

    Returns
    -------
    bool
        Whether every condition the variant requires holds.

    Examples
    --------
    >>> import problems
    >>> from fedtheory.theory import SPECS
    >>> p = problems.quadratic(3, 2, mu=0.1, heterogeneity=1.0, seed=0)
    >>> conforms(SPECS["feddeper.theorem_2"], p, rounds=5, mix=0.5), conforms(SPECS["feddeper.theorem_2"], p, mix=0.2)
    (True, False)
    """
    variant = spec.default_variant if variant is None else variant
    if assumption_failures(problem, spec.assumptions):
        return False
    try:
        setup = spec.setup(problem, **params)
    except NotApplicable:
        return False
    setup.setdefault("problem", problem)
    try:
        conds = list(spec.conditions(setup, _NoMeasurement()))
    except KeyError:
        return None
    return all(c.ok for c in conds if c.role in spec.variants[variant].requires)


def _setup_parameters(spec):
    """The parameters ``spec.setup`` takes after the problem, ``{name: default}`` (``"required"``
    for one without a default; ``"**name"`` for a catch-all): a new dict each call, read from the
    function's signature once (:func:`_signature_parameters`)."""
    return dict(_signature_parameters(spec.setup))


@functools.lru_cache(maxsize=None)
def _signature_parameters(setup):
    import inspect
    out = {}
    for i, (p, par) in enumerate(inspect.signature(setup).parameters.items()):
        if i == 0:
            continue                            # the problem
        if par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD):
            out[("*" if par.kind == par.VAR_POSITIONAL else "**") + p] = "more arguments"
        else:
            out[p] = "required" if par.default is inspect.Parameter.empty else par.default
    return tuple(out.items())


def parameters(spec):
    """The parameters a theorem accepts with their defaults (from its setup function's signature).

    Parameters
    ----------
    spec : TheoremSpec or str
        A spec or the name of a registered one.

    Returns
    -------
    dict
        ``{parameter: default}`` in the order of the signature; ``"required"`` for a parameter
        without a default. ``validation.verify(name, problem, **params)`` takes these, plus
        ``variant`` and ``algorithm``.

    Examples
    --------
    >>> from fedtheory.theory.engine import parameters
    >>> p = parameters("fedspeed.theorem_4_4")
    >>> p["rounds"], p["local_steps"], p["seeds"]
    (1000, 4, 1)
    """
    if isinstance(spec, str):
        check_param("spec", spec, [Options(*sorted(SPECS))], "parameters")
        spec = SPECS[spec]
    return _setup_parameters(spec)


def is_lemma(name):
    """Whether ``name`` names a lemma or a proof step (``"<paper>.lemma_<n>"``, ``"<paper>.step_<label>"``).

    Parameters
    ----------
    name : str
        A registered name.

    Returns
    -------
    bool
        Whether it is a lemma or a proof step.

    Examples
    --------
    >>> is_lemma("fedsps.lemma_8"), is_lemma("fedsps.step_28"), is_lemma("fedsps.theorem_3b")
    (True, True, False)
    """
    tail = str(name).rsplit(".", 1)[-1]
    return tail.startswith(("lemma_", "step_"))


def register_spec(spec, proof_of=()):
    """Register ``spec`` so that ``validation.verify(spec.name, problem, **params)`` runs it.

    Parameters
    ----------
    spec : TheoremSpec
        The declaration; its ``name`` is the registered name. A lemma or proof step is named
        ``"<paper>.lemma_<n>"`` or ``"<paper>.step_<label>"`` (:func:`is_lemma`).
    proof_of : str or tuple of str, default ()
        For a lemma: the registered theorems whose proof rests on it; it is appended to each one's
        ``proof`` (proof order is the order of registration, or set ``TheoremSpec.proof``).

    Returns
    -------
    TheoremSpec
        ``spec`` itself.
    """
    for e in spec.errata:
        if not isinstance(e, Erratum):
            raise TypeError(f"{spec.name}: errata must be Erratum instances; got {type(e).__name__}")
        if e.variant == "printed" or e.variant not in spec.variants:
            others = ", ".join(v for v in spec.variants if v != "printed")
            raise ValueError(f"{spec.name}: erratum {e.label!r} names variant {e.variant!r}; it must be one of "
                             f"its theorem's variants other than 'printed' ({others})")

    def theorem(problem, variant=None, measurement=None, algorithm=None, **params):
        return check(spec, problem, variant=variant, measurement=measurement, algorithm=algorithm, **params)
    theorem.__name__ = spec.name.replace(".", "_")
    theorem.__doc__ = f"{spec.statement}\n\n{spec.reference}"
    theorem.spec = spec
    for name in ((proof_of,) if isinstance(proof_of, str) else tuple(proof_of)):
        if name not in SPECS:
            raise ValueError(f"{spec.name}: proof_of names {name!r}, which is not a registered theorem; register "
                             "the theorem first")
        if spec.name not in SPECS[name].proof:
            SPECS[name].proof = tuple(SPECS[name].proof) + (spec.name,)
    THEOREMS[spec.name] = theorem
    SPECS[spec.name] = spec
    return spec
