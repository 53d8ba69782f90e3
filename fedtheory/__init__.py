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
    """What a name is: an algorithm (hyperparameters with defaults, paper reference, communication,
    traceable sequences) or a registered theorem (algorithm measured, statement, variants with
    the condition roles each requires, reference).

    Examples
    --------
    >>> import fedtheory as ft
    >>> ft.describe("fedprox")["hyperparameters"]
    {'mu': 0.01, 'server_lr': 1.0}
    >>> sorted(ft.describe("fedspeed.theorem_4_4")["variants"])
    ['corrected', 'derived', 'printed']
    """
    from .theory import SPECS
    if name in SPECS:
        spec = SPECS[name]
        return {"name": spec.name, "kind": "theorem", "algorithm": spec.algorithm, "statement": spec.statement,
                "reference": spec.reference, "default_variant": spec.default_variant,
                "variants": {v: {"description": var.description, "requires": list(var.requires)}
                             for v, var in spec.variants.items()},
                "tightness": ("validation.tightness (PEP registered)" if callable(spec.pep)
                              else spec.pep or "no PEP registered")}
    cls = get_algorithm(name)
    return {"name": cls.name, "reference": cls.reference, "hyperparameters": cls.hyperparameters(),
            "communication_per_client": {"down": cls.comm[0], "up": cls.comm[1]},
            "traceables": {k: f"{src}: {text}" for k, (src, text) in cls.traceables.items()},
            "doc": (cls.__doc__ or "").strip().splitlines()[0]}
