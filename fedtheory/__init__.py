"""fedtheory: a testbed for federated-optimization theory.

>>> import fedtheory as ft, problems
>>> p = problems.quadratic(8, 5, heterogeneity=0.5, seed=0)
>>> res = ft.run(p, "scaffold", rounds=10, local_steps=5, lr=0.1)
>>> "fedavg" in ft.algorithms()
True
"""
from .exceptions import (DataError, IncompatibleProblemError, InvalidParameterError, UncertifiedOptimumError,
                         UncertifiedOptimumWarning)

__version__ = "0.1.0"

#: Public names loaded where first used (``import fedtheory`` stays light: no Numba, pandas or
#: SciPy until a run, a problem or the algorithm list needs them): name -> defining module.
_LAZY = {"run": "runs.runner", "RunResult": "runs.result", "FederatedProblem": "problem", "get_algorithm": "registry",
         "algorithms": "algorithms",
         "describe": "reporting.describe"}


def __getattr__(name):
    """Load a public name of :data:`_LAZY` from its module on first use (PEP 562)."""
    import importlib
    import importlib.util
    if name not in _LAZY:
        # a submodule (fedtheory.registry, fedtheory.runs.trace, ...): ``import fedtheory`` used to load them
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module 'fedtheory' has no attribute {name!r}")
    module = importlib.import_module(f".{_LAZY[name]}", __name__)
    # ``algorithms`` is the package itself (callable: it lists the registered names)
    value = module if name == "algorithms" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_LAZY})
__all__ = ["run", "RunResult", "algorithms", "get_algorithm", "FederatedProblem",
           "InvalidParameterError", "IncompatibleProblemError", "DataError", "UncertifiedOptimumError",
           "UncertifiedOptimumWarning", "describe"]
