"""fedtheory: a testbed for federated-optimization theory.

>>> import fedtheory as ft, problems
>>> p = problems.quadratic(8, 5, heterogeneity=0.5, seed=0)
>>> res = ft.run(p, "scaffold", rounds=10, local_steps=5, lr=0.1)
>>> "fedavg" in ft.algorithms()
True
"""
from . import algorithms as _algorithm_files  # noqa: F401  (registers; rebound below)
from .exceptions import DataError, IncompatibleProblemError, InvalidParameterError
from .problem import FederatedProblem
from .registry import algorithms, get_algorithm
from .runner import RunResult, run
from .registry import algorithms  # noqa: F811  (the function, not the subpackage)

__version__ = "0.1.0"
__all__ = ["run", "RunResult", "algorithms", "get_algorithm", "FederatedProblem",
           "InvalidParameterError", "IncompatibleProblemError", "DataError", "describe"]


def describe(name):
    """Hyperparameters with defaults, and the paper reference, of a registered algorithm."""
    cls = get_algorithm(name)
    return {"name": cls.name, "reference": cls.reference, "hyperparameters": cls.hyperparameters(),
            "communication_per_client": {"down": cls.comm[0], "up": cls.comm[1]},
            "traceables": {k: f"{src}: {text}" for k, (src, text) in cls.traceables.items()},
            "doc": (cls.__doc__ or "").strip().splitlines()[0]}
