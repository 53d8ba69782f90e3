"""Registry of algorithms: name -> class."""
from .exceptions import InvalidParameterError

ALGORITHMS = {}


def register(cls):
    """Class decorator adding an :class:`~fedtheory.algorithms.base.Algorithm` to the registry.

    The class is registered under its ``name`` attribute; a name registered twice is a
    ValueError. See ``docs/add-your-own-algorithm.md``.

    Returns
    -------
    type
        The class itself, unchanged (so ``@register`` can decorate it).
    """
    if cls.name in ALGORITHMS:
        raise ValueError(f"algorithm {cls.name!r} is registered twice")
    ALGORITHMS[cls.name] = cls
    return cls


def algorithms():
    """Sorted names of the registered algorithms.

    Returns
    -------
    list of str
        The built-in algorithms and those a user registered with
        :func:`~fedtheory.registry.register`.

    Examples
    --------
    >>> import fedtheory as ft
    >>> "scaffold" in ft.algorithms()
    True
    """
    from . import algorithms as _  # noqa: F401  (imports register every algorithm)
    return sorted(ALGORITHMS)


def get_algorithm(name):
    """Return the algorithm class registered as ``name``.

    Parameters
    ----------
    name : str
        A registered name (:func:`algorithms`).

    Returns
    -------
    type
        The :class:`~fedtheory.algorithms.base.Algorithm` subclass; InvalidParameterError
        listing the registered names when there is none of that name.
    """
    from . import algorithms as _  # noqa: F401
    if isinstance(name, str) and name in ALGORITHMS:
        return ALGORITHMS[name]
    raise InvalidParameterError(
        f"The 'algorithm' parameter of run must be a str among {{{', '.join(repr(n) for n in sorted(ALGORITHMS))}}}. "
        f"Got {name!r} instead.")
