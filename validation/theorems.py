"""Registry of theorem checks (``validation.verify``), docs/how-a-theorem-is-checked.md.

Each paper's theorems live in their own module under :mod:`fedtheory.theory` and register
themselves there; this module exposes them.
"""
from fedtheory.theory import THEOREMS, Condition, Verification  # noqa: F401


def theorems():
    """Sorted names of the registered theorem checks.

    Returns
    -------
    list of str
        The built-in theorems and those registered with :func:`fedtheory.theory.register_spec`.

    Examples
    --------
    >>> import validation
    >>> "fedsps.theorem_3a" in validation.theorems()
    True
    """
    return sorted(THEOREMS)


def verify(name, problem, **kwargs):
    """Run the registered theorem check ``name`` on ``problem``.

    Parameters
    ----------
    name : str
        A registered theorem (:func:`theorems`), e.g. ``"fedspeed.theorem_4_4"``.
    problem : FederatedProblem
        The problem the theorem is checked on.
    **kwargs
        ``rounds``, ``local_steps``, ``variant`` ("printed" or a corrected one), ``seeds`` and
        the algorithm's hyperparameters; see the theorem's own docstring.

    Returns
    -------
    Verification
        ``applicable``, ``reason``, ``conditions`` [(name, value, limit, ok)], ``measured``,
        ``bound``, ``ratio``, ``holds``, ``stderr``, ``details``.

    Examples
    --------
    >>> import numpy as np, problems, validation
    >>> p = problems.explicit_quadratic(np.diag([0.5, 1.0]), [[1.0, 0.0], [0.0, 1.0]], noise=0.1)
    >>> v = validation.verify("fedspeed.theorem_4_4", p, rounds=200, local_steps=4)
    >>> v.applicable, v.holds
    (True, True)
    >>> [c.name.split(":")[0] for c in v.conditions][:5]
    ['S1', 'S2a', 'S2b', 'S3', 'S4']
    """
    if name not in THEOREMS:
        known = ", ".join(sorted(THEOREMS)) or "none registered yet"
        from fedtheory._validation import did_you_mean
        from fedtheory.registry import import_hint
        raise ValueError(f"The 'name' parameter of verify must be a registered theorem ({known}). "
                         f"Got {name!r} instead.{did_you_mean(name, THEOREMS)}{import_hint()}")
    return THEOREMS[name](problem, **kwargs)
