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
         "algorithms": "algorithms"}


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


def describe(name, conditions=True):
    """What a name is, as a dict: an algorithm, a problem factory or a registered theorem.

    * an algorithm: ``kind`` "algorithm", hyperparameters with defaults, paper reference,
      communication per client, traceable sequences, the ``scalars`` it logs in the history
      (name: description), the docstring's summary;
    * a problem factory (``problems.<name>``, ``vision.image_problem`` or one registered with
      :func:`fedtheory.registry.register_problem`: the names a configuration's ``factory``
      accepts): ``kind`` "problem factory", how it is called in Python (``call``), its
      parameters with defaults (``"required"`` for those without one) and the docstring's
      summary;
    * a theorem or a lemma (a proof step): ``kind`` "theorem" or "lemma", its ``proof`` (the
      lemmas it rests on, in proof order) and ``proof_of`` (the theorems whose proof uses it),
      the algorithm it measures, the statement (its equations),
      the reference, the measured ``quantity``, the ``parameters`` it accepts with their
      defaults (from its setup function's signature: what ``validation.verify(name, problem,
      **params)`` takes; ``"required"`` for one without a default), the ``assumptions`` of its
      function class, its ``conforming_space`` (the summary of its declared space for
      ``validation.falsify``, None when it declares none), the variants with the condition
      roles each requires, its documented
      ``errata`` (label, where, the correcting variant, what is wrong), and with
      ``conditions`` every condition with its role, evaluated on the theorem's first default
      case of ``fedtheory verify --quick`` (named in ``conditions_case``; this runs it).

    Raises InvalidParameterError listing the known names when ``name`` is none of these.

    Parameters
    ----------
    name : str
        An algorithm (:func:`algorithms`), a problem factory or a registered theorem
        (:func:`validation.theorems`).
    conditions : bool, default True
        For a theorem, also evaluate every condition on its first default case (this runs it).

    Returns
    -------
    dict
        ``name``, ``kind`` and the fields of that kind listed above (what ``fedtheory describe
        NAME`` prints).

    Examples
    --------
    >>> import fedtheory as ft
    >>> ft.describe("fedprox")["hyperparameters"]
    {'mu': 0.01, 'server_lr': 1.0}
    >>> sorted(ft.describe("fedspeed.theorem_4_4", conditions=False)["variants"])
    ['corrected', 'derived', 'printed']
    >>> ft.describe("quadratic")["parameters"]["heterogeneity"]
    0.0
    >>> ft.describe("fedspeed.theorem_4_4", conditions=False)["parameters"]["local_steps"]
    4
    """
    from . import algorithms
    from .theory import SPECS
    if name in SPECS:
        return _describe_theorem(SPECS[name], conditions)
    from .registry import ALGORITHMS
    if name in algorithms():
        cls = ALGORITHMS[name]
        # ``comm`` may depend on the hyperparameters (a property, e.g. Mime's variant): its defaults'
        comm = cls.comm if isinstance(cls.comm, tuple) else cls().comm
        return {"name": cls.name, "kind": "algorithm", "reference": cls.reference,
                "hyperparameters": cls.hyperparameters(),
                "communication_per_client": {"down": comm[0], "up": comm[1]},
                "traceables": {k: f"{src}: {text}" for k, (src, text) in cls.traceables.items()},
                "scalars": dict(cls.scalars),
                "doc": _summary(cls.__doc__)}
    from .reporting.config import factories, factory_call
    table = factories()
    if name in table:
        import inspect
        fn = table[name]
        params = {}
        for p, par in inspect.signature(fn).parameters.items():
            if par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD):
                params[("*" if par.kind == par.VAR_POSITIONAL else "**") + p] = "more arguments"
            else:
                params[p] = "required" if par.default is inspect.Parameter.empty else par.default
        return {"name": name, "kind": "problem factory", "call": factory_call(name, fn),
                "parameters": params, "doc": _summary(fn.__doc__)}
    from ._argcheck import did_you_mean
    from .registry import import_hint
    raise InvalidParameterError(
        f"{name!r} is neither an algorithm ({', '.join(algorithms())}), a problem factory "
        f"({', '.join(sorted(table))}) nor a theorem ({', '.join(sorted(SPECS))})."
        f"{did_you_mean(name, [*algorithms(), *table, *SPECS])}{import_hint()}")


def _summary(doc):
    """The first paragraph of a docstring, on one line."""
    paras = (doc or "").strip().split("\n\n")
    return " ".join(line.strip() for line in paras[0].splitlines()) if paras else ""


def _describe_theorem(spec, conditions):
    from .theory.engine import parameters
    space = None
    if spec.cases is not None:
        space = _summary(getattr(spec.cases, "__doc__", "")) or "declared (its function has no docstring)"
    from .theory import SPECS, is_lemma
    out = {"name": spec.name, "kind": "lemma" if is_lemma(spec.name) else "theorem", "algorithm": spec.algorithm,
           "statement": spec.statement, "proof": list(spec.proof),
           "proof_of": sorted(n for n, s in SPECS.items() if spec.name in s.proof),
           "reference": spec.reference, "quantity": spec.quantity or "(not named)",
           "parameters": parameters(spec),
           "assumptions": [{"capability": cap, "name": text} for cap, text in spec.assumptions],
           "conforming_space": space, "default_variant": spec.default_variant,
           "variants": {v: {"description": var.description, "requires": list(var.requires)}
                        for v, var in spec.variants.items()},
           "tightness": ("validation.tightness (PEP registered)" if callable(spec.pep)
                         else spec.pep or "no PEP registered"),
           "errata": [{"label": e.label, "where": e.where, "variant": e.variant, "why": e.why} for e in spec.errata]}
    if not conditions:
        return out
    from .theory import CASES, THEOREMS
    cases = CASES[spec.name](True)[0] if spec.name in CASES else []
    if not cases:
        out["conditions"], out["conditions_case"] = [], "(no default case registered)"
        return out
    case = cases[0]
    v = THEOREMS[spec.name](case.build(), variant=spec.default_variant, **case.kwargs)
    out["conditions_case"] = case.label
    out["conditions"] = [{"name": c.name, "role": getattr(c, "role", "stated"), "value": float(c.value),
                          "limit": float(c.limit), "ok": bool(c.ok)} for c in v.conditions]
    return out
