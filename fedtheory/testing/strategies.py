r"""Hypothesis strategies for theorem checks: problems with exactly known constants, parameters
inside a theorem's conditions, and each registered theorem's conforming space.

A theorem is a property: for every problem of its function class and every parameter inside its
conditions, the measured left-hand side is at most the bound. Each
:class:`~fedtheory.theory.engine.TheoremSpec` declares that space (``spec.cases``) as a strategy
of ``(problem, params)`` pairs with ``validation.verify(name, problem, **params)`` applicable;
:func:`theorem_cases` returns it and ``validation.falsify`` searches it for the largest
measured/bound. The building blocks below are public so that a user can declare the space of a
theorem of their own (docs/how-a-theorem-is-checked.md).

Needs ``hypothesis`` (the ``test`` extra: ``pip install -e ".[test]"``).

Examples
--------
>>> from hypothesis import given, settings
>>> from fedtheory.testing import strategies as fts
>>> @settings(max_examples=3, database=None, deadline=None, derandomize=True)
... @given(fts.quadratics(n_clients=2, dim=fts.integers(2, 3), mu=fts.log_uniform(0.05, 0.5)))
... def test_mu(p):
...     assert 0.05 <= p.info["mu"] <= 0.5 and p.dim in (2, 3)
>>> test_mu()
"""
from __future__ import annotations

from .draws import (Tape, around, as_strategy, choice, integers, log_integers, log_uniform, quadratics,  # noqa: F401
                    recording, replay, uniform, unit_vectors)
from .._argcheck import check_param, Options
from ..theory import SPECS
from ..theory.engine import conforms
from .draws import _fresh

__all__ = ["as_strategy", "integers", "log_integers", "log_uniform", "uniform", "choice", "quadratics",
           "unit_vectors", "around", "theorem_cases", "Tape", "recording", "replay"]


def theorem_cases(name, variant=None):
    """The conforming space of theorem ``name``: a strategy of ``(problem, params)`` pairs inside its
    function class and stated conditions (``variant``: inside that variant's conditions too, when
    they differ), on which ``validation.verify(name, problem, variant=variant, **params)`` is
    applicable. The spec's draws (``TheoremSpec.cases``) are filtered by the conditions that can be
    decided before a run (:func:`fedtheory.theory.engine.conforms`).

    Parameters
    ----------
    name : str
        A registered theorem (``validation.theorems()``).
    variant : str, optional
        A variant of the theorem (default: its default variant).

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Of ``(problem, params)``.

    Examples
    --------
    A property test of the theorem on three cases of its space (every drawn case is applicable):

    >>> import validation
    >>> from hypothesis import given, settings
    >>> @settings(max_examples=3, deadline=None, database=None, derandomize=True)
    ... @given(theorem_cases("feddeper.theorem_2"))
    ... def test_applicable(case):
    ...     problem, params = case
    ...     assert validation.verify("feddeper.theorem_2", problem, **params).applicable
    >>> test_applicable()

    ``hypothesis.find(theorem_cases(name), condition)`` gives the smallest case of the space that
    meets a condition (it shrinks what it draws: seconds, as each shrunk case builds a problem).
    """
    check_param("name", name, [Options(*sorted(SPECS))], "theorem_cases")
    spec = SPECS[name]
    if spec.cases is None:
        raise ValueError(f"theorem {name!r} declares no conforming space (TheoremSpec.cases); declare one to "
                         "search it (docs/how-a-theorem-is-checked.md)")
    variant = spec.default_variant if variant is None else variant
    check_param("variant", variant, [Options(*spec.variants)], "theorem_cases")
    # the theorem's draws, kept inside every condition the variant requires that can be decided before a
    # run (a condition the theorem states, never a narrower space)
    return _fresh(spec.cases(variant)).filter(lambda case: conforms(spec, case[0], variant, **case[1]) is not False)
