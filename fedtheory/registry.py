"""Registries of algorithms (name -> class) and of users' problem factories (name -> function),
and the user modules that register more names.

A user's algorithm, problem factory, component (datafit, regularizer) or theorem is registered
when its module is imported. :func:`import_modules` imports such modules (``fedtheory --import
MODULE``, a configuration's ``import = [...]``) and remembers them; :func:`user_modules` lists
every module a process needs to import to know the same names as this one (those imported here
and the modules of every registered name that is not built in), which is what sweep workers
import before they look a name up.
"""
import importlib
import sys

from ._argcheck import did_you_mean
from .exceptions import DeclarationError, InvalidParameterError

ALGORITHMS = {}
#: Problem factories registered with :func:`register_problem` (the built-in ones are the
#: functions of :mod:`problems`; :func:`fedtheory.reporting.config.factories` lists both).
PROBLEMS = {}

_IMPORTED = []          # modules imported by import_modules, in order
_BUILTIN = ("fedtheory", "problems", "validation")


def register(cls):
    """Class decorator adding an :class:`~fedtheory.algorithms.base.Algorithm` to the registry.

    The class is registered under its ``name`` attribute; a name registered twice is a
    ValueError, except by the same class defined again (the same module and qualified name: a
    reloaded module, a re-run notebook cell), which replaces it. See
    ``docs/add-your-own-algorithm.md``.

    Returns
    -------
    type
        The class itself, unchanged (so ``@register`` can decorate it).
    """
    _check_declaration(cls)
    old = ALGORITHMS.get(cls.name)
    if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"algorithm {cls.name!r} is registered twice ({old.__module__}.{old.__qualname__} and "
                         f"{cls.__module__}.{cls.__qualname__})")
    ALGORITHMS[cls.name] = cls
    return cls


#: The named parameters of :func:`fedtheory.run` (a test keeps them equal to its signature): an
#: algorithm's hyperparameter may not take one of these names (:func:`_check_declaration`).
RUN_PARAMETERS = ("rounds", "local_steps", "lr", "clients_per_round", "batch_size", "seed", "x0", "record_iterates",
                  "backend", "device", "eval_every", "callback", "progress", "sampling", "q", "participation",
                  "batch_replacement", "reference", "tol", "trace", "trace_max_mb", "trace_rounds", "weight_decay",
                  "clip_norm", "client_schedule")


#: The columns of a run's history and of the results store that an algorithm's logged
#: ``scalars`` (and ``history_extras``) may not take: a clash silently replaced F(x), the run's seed...
HISTORY_COLUMNS = ("round", "value", "grad_mapping_sq", "suboptimality", "dist_sq", "reference_certified",
                   "grad_evals", "sample_grads", "comm_up", "comm_down", "time", "train_acc", "test_acc",
                   "test_loss", "run_id", "status", "seed", "version")


def reserved_column(name):
    """Whether ``name`` is a history or store column of its own (:data:`HISTORY_COLUMNS`, ``param_*``).

    Parameters
    ----------
    name : str
        A column name.

    Returns
    -------
    bool
        Whether the history or the store uses it.
    """
    return name in HISTORY_COLUMNS or str(name).startswith("param_")


def _check_declaration(cls):
    """A registered algorithm names itself and keeps its hyperparameters apart from run's own
    parameters: ``run(..., lr=0.3)`` sets the run's step size, so a hyperparameter ``lr`` could never
    be set (silently), and ``reference`` would be read as the run's. Two exceptions
    :func:`fedtheory.run` documents: ``weight_decay``, for an algorithm that lists it among its
    ``released_options``, and ``q``, the with-replacement sampling probabilities, which the run and
    the algorithm share (LFD's)."""
    import dataclasses

    from .algorithms.base import Algorithm      # (the algorithm registry's circle: the algorithms import this module)
    if not any("name" in vars(k) for k in cls.__mro__ if k is not Algorithm) or not isinstance(cls.name, str) \
            or not cls.name:
        raise DeclarationError(f"{cls.__qualname__} sets no name: give the class a name (name: ClassVar[str] = "
                               f"'my_method'), the key of fedtheory.run(problem, 'my_method', ...).")
    taken = [k for k in getattr(cls, "scalars", {}) if reserved_column(k)]
    if taken:
        raise DeclarationError(f"{cls.__qualname__} logs the scalar(s) {taken} under the name of a column of the "
                               f"run's history or of the results store ({', '.join(HISTORY_COLUMNS)}, param_*), "
                               "which they would replace. Rename them.")
    if not dataclasses.is_dataclass(cls):
        return
    run_params = set(RUN_PARAMETERS) - {"q"}
    clashes = [f.name for f in dataclasses.fields(cls) if f.name in run_params
               and not (f.name == "weight_decay" and "weight_decay" in getattr(cls, "released_options", ()))]
    if clashes:
        raise DeclarationError(f"{cls.__qualname__} declares the hyperparameter(s) {clashes}, which are parameters "
                               f"of fedtheory.run itself: run(..., {clashes[0]}=...) would set the run's, never the "
                               "algorithm's. Rename them (e.g. server_lr for a server step size).")


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
    from . import algorithms as _  # noqa: F401  (the algorithm registry's circle: importing them registers them)
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
    from . import algorithms as _  # noqa: F401  (the algorithm registry's circle: importing them registers them)
    if isinstance(name, str) and name in ALGORITHMS:
        return ALGORITHMS[name]
    raise InvalidParameterError(
        f"The 'algorithm' parameter of run must be a str among {{{', '.join(repr(n) for n in sorted(ALGORITHMS))}}}. "
        f"Got {name!r} instead.{did_you_mean(name, ALGORITHMS)}{import_hint()}")


# ------------------------------------------------------------------------------- problem factories

def register_problem(factory=None, *, name=None):
    """Decorator adding a problem factory to the names a configuration's ``factory`` accepts.

    A factory is a function that takes keyword arguments (numbers, strings, lists: what a TOML
    ``[problem]`` table holds) and returns a :class:`~fedtheory.problem.FederatedProblem`, e.g.
    the user's own datafit on the user's data. Once registered it is named like a built-in
    factory of :mod:`problems`: ``factory = NAME`` in a configuration, ``fedtheory describe
    NAME``, ``fedtheory list``; sweep workers import its module (:func:`user_modules`). See
    ``docs/how-a-problem-is-built.md``.

    Parameters
    ----------
    factory : callable, optional
        The factory (``@register_problem`` without parentheses).
    name : str, optional
        The name to register it under (default: the function's ``__name__``). The same
        function defined again (a re-run cell or a re-imported module) replaces itself; another
        function of a taken name is a ValueError; the name of a built-in factory is an
        InvalidParameterError once the factories are listed (:func:`fedtheory.reporting.config.factories`).

    Returns
    -------
    callable
        The factory itself, unchanged (or, called with ``name`` only, the decorator).

    Examples
    --------
    >>> import numpy as np, problems
    >>> from fedtheory.registry import PROBLEMS, register_problem
    >>> @register_problem(name="my_ridge")
    ... def ridge(n_clients=2, dim=3, l2=0.1, seed=0):
    ...     rng = np.random.default_rng(seed)
    ...     A = [rng.normal(size=(10, dim)) for _ in range(n_clients)]
    ...     return problems.least_squares(A, [a @ np.ones(dim) for a in A], l2=l2)
    >>> from fedtheory.reporting.config import make_problem
    >>> make_problem({"factory": "my_ridge", "dim": 4}).dim
    4
    >>> del PROBLEMS["my_ridge"]
    """
    if factory is None:
        return lambda f: register_problem(f, name=name)
    if not callable(factory):
        raise InvalidParameterError(f"The 'factory' parameter of register_problem must be a callable "
                                    f"(a function returning a FederatedProblem). Got {factory!r} instead.")
    key = getattr(factory, "__name__", None) if name is None else name
    if not isinstance(key, str) or not key.strip():
        raise InvalidParameterError(f"The 'name' parameter of register_problem must be a non-empty str. "
                                    f"Got {key!r} instead.")
    old = PROBLEMS.get(key)
    if old is not None and _origin(old) != _origin(factory):
        raise ValueError(f"problem factory {key!r} is registered twice ({_origin(old)} and {_origin(factory)})")
    PROBLEMS[key] = factory
    return factory


def _origin(fn):
    return getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)


# ------------------------------------------------------------------------------- user modules

def import_modules(modules, where="--import"):
    """Import the user modules ``modules`` (they register algorithms, components, theorems).

    Each is imported once per process (:func:`importlib.import_module`) and remembered, so that
    :func:`user_modules` names it and sweep workers import it too.

    Parameters
    ----------
    modules : iterable of str
        Dotted module names (``"my_algorithms"``, ``"mypkg.methods"``), importable from
        ``sys.path`` (the command line adds the current directory).
    where : str, default "--import"
        What named them, for the error message (``--import``, a configuration's ``import``).

    Returns
    -------
    list of str
        The modules imported by this call, in order.

    Raises
    ------
    InvalidParameterError
        A name that is not a non-empty str.
    ImportError
        A module that cannot be imported: the message names it, ``where`` and the reason.

    Examples
    --------
    >>> from fedtheory.registry import import_modules
    >>> import_modules(["json"])
    ['json']
    >>> import_modules(["no_such_module_xyz"])
    Traceback (most recent call last):
    ...
    ImportError: --import no_such_module_xyz: No module named 'no_such_module_xyz' (searched sys.path; ...)
    """
    if isinstance(modules, str):
        modules = [modules]
    done = []
    for m in modules:
        if not isinstance(m, str) or not m.strip():
            raise InvalidParameterError(f"The {where!r} parameter must be a list of module names (non-empty str). "
                                        f"Got {m!r} instead.")
        if "/" in m or "\\" in m or m.endswith(".py") or m.startswith("."):
            stem = m.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].removesuffix(".py")
            raise InvalidParameterError(f"The {where!r} parameter takes a module name, not a file path: "
                                        f"give {stem!r} (and run from its directory, or add it to PYTHONPATH). "
                                        f"Got {m!r}.")
        try:
            importlib.import_module(m)
        except ImportError as e:
            hint = ("searched sys.path; the command line also searches the current directory, "
                    "PYTHONPATH adds more" if isinstance(e, ModuleNotFoundError) else "its import failed")
            raise ImportError(f"{where} {m}: {e} ({hint})") from e
        if m not in _IMPORTED:
            _IMPORTED.append(m)
        done.append(m)
    return done


def _importable(module):
    """Whether another process can import ``module`` by name (not ``__main__``, not an exec'd namespace)."""
    if not module or module == "__main__" or module.split(".")[0] in _BUILTIN:
        return False
    mod = sys.modules.get(module)
    return mod is not None and getattr(mod, "__spec__", None) is not None


def user_modules():
    """The modules a worker imports to know every name this process knows.

    The modules imported by :func:`import_modules`, then the module of every registered
    algorithm, problem factory, datafit, regularizer and theorem that is not part of fedtheory
    (and that another process can import by name: not ``__main__``).

    Returns
    -------
    list of str
        The modules' names.

    Examples
    --------
    >>> from fedtheory.registry import user_modules
    >>> [m for m in user_modules() if m.startswith("fedtheory")]
    []
    """
    out = list(_IMPORTED)
    found = [cls.__module__ for cls in ALGORITHMS.values()] + [_origin(fn)[0] for fn in PROBLEMS.values()]
    comp = sys.modules.get("fedtheory.components.catalog")
    if comp is not None:
        found += [cls.__module__ for table in (comp.DATAFITS, comp.REGULARIZERS) for cls in table.values()]
    theory = sys.modules.get("fedtheory.theory")
    if theory is not None:
        found += [getattr(fn, "__module__", None) for fn in theory.THEOREMS.values()]
    for m in found:
        if m not in out and _importable(m):
            out.append(m)
    return out


def check_workers_can_import(names, where="sweep", factories=()):
    """Raise InvalidParameterError when an algorithm of ``names`` or a registered problem factory
    of ``factories`` is defined where another process cannot import it (``__main__``: a script or
    a notebook), before workers are started.

    Parameters
    ----------
    names : iterable of str
        Algorithm names (names that are not registered are left to the lookup's own error).
    where : str, default "sweep"
        What starts the workers, for the message.
    factories : iterable of str, default ()
        Problem factory names (built-in ones are importable).

    Examples
    --------
    >>> from fedtheory.registry import check_workers_can_import
    >>> check_workers_can_import(["fedavg", "scaffold"], factories=["quadratic"])
    """
    found = [(f"Algorithm {n!r}", ALGORITHMS[n].__module__) for n in sorted(set(names)) if n in ALGORITHMS]
    found += [(f"Problem factory {n!r}", _origin(PROBLEMS[n])[0]) for n in sorted(set(factories))
              if n in PROBLEMS]
    for what, mod in found:
        if mod is None or (mod.split(".")[0] not in _BUILTIN and not _importable(mod)):
            raise InvalidParameterError(
                f"{what} is defined in {mod!r}, which worker processes cannot import by name: "
                f"move it to a module of its own (and import that), or run the {where} with n_jobs=1 "
                "(in this process).")


def import_hint():
    """The end of an unknown-name error: which user modules were imported, and how to import one.

    Returns
    -------
    str
        The sentence.
    """
    mods = user_modules()
    have = f"user modules imported: {', '.join(mods)}" if mods else "no user module imported"
    return (f" ({have}; a name defined in your own module is known once it is imported: "
            "fedtheory --import MODULE, import = [\"MODULE\"] in a configuration, or import it in Python)")
