"""Registry of algorithms: name -> class."""
from .exceptions import InvalidParameterError

ALGORITHMS = {}


def register(cls):
    """Class decorator adding an :class:`~fedtheory.algorithms.base.Algorithm` to the registry."""
    if cls.name in ALGORITHMS:
        raise ValueError(f"algorithm {cls.name!r} is registered twice")
    ALGORITHMS[cls.name] = cls
    return cls


def algorithms():
    """Sorted names of the registered algorithms."""
    from . import algorithms as _  # noqa: F401  (imports register every algorithm)
    return sorted(ALGORITHMS)


def get_algorithm(name):
    """Return the algorithm class registered as ``name``."""
    from . import algorithms as _  # noqa: F401
    if isinstance(name, str) and name in ALGORITHMS:
        return ALGORITHMS[name]
    raise InvalidParameterError(
        f"The 'algorithm' parameter of run must be a str among {{{', '.join(repr(n) for n in sorted(ALGORITHMS))}}}. "
        f"Got {name!r} instead.")
