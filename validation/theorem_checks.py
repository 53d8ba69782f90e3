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
    from fedtheory.theory import is_lemma
    return sorted(n for n in THEOREMS if not is_lemma(n))


def verify(name, problem, algorithm=None, **kwargs):
    """Run the registered theorem check ``name`` on ``problem``.

    Parameters
    ----------
    name : str
        A registered theorem (:func:`theorems`), e.g. ``"fedspeed.theorem_4_4"``.
    problem : FederatedProblem
        The problem the theorem is checked on.
    algorithm : str, optional
        Run the theorem's spec against another registered algorithm (a user's too) instead of
        the one it was stated for. The spec's run arguments (rounds, local steps, step size,
        ``x0``, traces) are kept; hyperparameters of the theorem's algorithm go to the algorithm
        run where it has one of the same name and are dropped otherwise; keyword arguments the
        theorem does not take are that algorithm's hyperparameters (one the theorem also sets
        replaces its value, in the run and in what the conditions read). The conditions, measurement
        and bound are evaluated on the algorithm's run: a theorem that reads a dropped
        hyperparameter, or whose run arguments the algorithm rejects, is NOT APPLICABLE with
        the reason. ``Verification.algorithm`` names the algorithm run.
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

    The same spec against FedAvg, which does not record the sequences FedSpeed's bound reads:

    >>> w = validation.verify("fedspeed.theorem_4_4", p, algorithm="fedavg", rounds=20, local_steps=4)
    >>> w.algorithm, w.verdict()
    ('fedavg', 'NOT APPLICABLE')
    >>> w.reason.split(":")[0]
    "the theorem's run arguments do not apply to 'fedavg'"
    """
    if name not in THEOREMS:
        known = ", ".join(sorted(THEOREMS)) or "none registered yet"
        from fedtheory._argcheck import did_you_mean
        from fedtheory.registry import import_hint
        raise ValueError(f"The 'name' parameter of verify must be a registered theorem ({known}). "
                         f"Got {name!r} instead.{did_you_mean(name, THEOREMS)}{import_hint()}")
    if algorithm is not None:
        kwargs["algorithm"] = algorithm
    return THEOREMS[name](problem, **kwargs)
