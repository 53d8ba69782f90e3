"""Theorems as code: bounds, side conditions and verdicts, one module per paper (docs/how-a-theorem-is-checked.md).

Each paper module registers its checks with :func:`register_theorem`; they are run through
``validation.verify(name, problem, ...)`` and return a :class:`Verification`.

May import the run engine (:mod:`fedtheory.runs`, to run the registered algorithms it checks), the
ground truth, the constants, the testing strategies and draws (its searches), plotting (rate
figures) and the foundations; never the reporting layer, which calls it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rates import RATE_FORMS, RateFit, RateStudy, fit_rate  # noqa: F401
from .records import NOISE_SE, Condition, Verification, _Condition  # noqa: F401
from .._argcheck import check_param, Options
from ..exceptions import InvalidParameterError

THEOREMS = {}
CASES = {}
SPECS = {}


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
    if theorem is None:
        return sorted(n for n in SPECS if is_lemma(n))
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
    check_param("name", name, [Options(*sorted(CASES))], "case")
    cases = CASES[name](quick)[0]
    if isinstance(which, (int, np.integer)) and not isinstance(which, bool):
        if not 0 <= which < len(cases):
            raise InvalidParameterError(f"The 'which' parameter of case must be an int in the range [0, "
                                        f"{len(cases) - 1}] for {name}. Got {which!r} instead.")
        return cases[which]
    found = [c for c in cases if c.label == which] or [c for c in cases if c.label.startswith(str(which))]
    if len(found) != 1:
        labels = "; ".join(repr(c.label) for c in cases)
        raise InvalidParameterError(f"The 'which' parameter of case must be an index or the label of exactly one "
                                    f"case of {name} ({labels}). Got {which!r} instead.")
    return found[0]


def register_cases(name):
    """Decorator registering the default configurations of theorem ``name`` for ``fedtheory verify``.

    The decorated function ``fn(quick) -> (list of Case, list of RateStudy)`` returns the
    theorem's default :class:`Case` s (conforming configurations and documented
    counterexamples) and its :class:`RateStudy` s; ``quick`` is True for ``fedtheory verify
    --quick`` (fewer rounds and seeds). ``fedtheory verify`` (:func:`fedtheory.reporting.verification.run_cases`)
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


from .engine import (Erratum, NotApplicable, TheoremSpec, Variant, check, is_lemma, parameters,  # noqa: E402,F401
                     instance_variant, register_spec)
from .floors import instance_floor, mean_stderr, worst_instance  # noqa: E402,F401

from . import feddeper, fedspeed, fedsps, fedsps_theorem6, localdescent, localdescent_pl, localdescent_nonconvex, pfedfbe  # noqa: E402,F401  (registration)
from . import feddeper_lemmas, fedspeed_lemmas, fedsps_lemmas, localdescent_lemmas, pfedfbe_lemmas  # noqa: E402,F401,I001
# (registration: after the theorems whose proofs they are in)
