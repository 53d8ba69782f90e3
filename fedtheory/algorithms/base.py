"""The algorithm contract and the per-round context handed to it by the runner.

An algorithm is a small frozen dataclass of its own hyperparameters plus three methods:

* ``init(problem, x0) -> state`` (a dict of arrays; ``state["x"]`` is the global model);
* ``local_round(state, ctx) -> messages`` (dict of arrays with one row per sampled client),
  computed by Numba kernels; ``local_round_reference`` is the NumPy twin that follows the
  paper's pseudo-code line by line and is used by the ``"python"`` backend and the tests;
* ``server_update(state, ctx, messages) -> state`` (NumPy; shared by both backends).

The runner owns the loop, the randomness and the bookkeeping (see :mod:`fedtheory.runs.runner`).
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._argcheck import Bool, Interval, NoneOk, Options, check_param  # noqa: F401  (for algorithms' constraints)
from ..runs.arrays import copy, to_numpy
from ..exceptions import InvalidParameterError, DeclarationError, IncompatibleProblemError
from .._argcheck import did_you_mean

_ROUND_METHODS = ("init", "local_round", "local_round_reference", "server_update")
_PARAMS = {}          # encoded name, and tuple of field names -> hyperparameter named-tuple class (Algorithm.params_class)
_NUMERIC = {bool: bool, int: int, float: float, "bool": bool, "int": int, "float": float}


def __getattr__(name):
    """The hyperparameter tuple class of the encoded name ``hp<base32 of the field names>`` (for
    unpickling: made from the name alone, in any process, whatever module defined the algorithm)."""
    if name.startswith("hp") and name != "hp":
        import base64
        try:
            raw = base64.b32decode(name[2:] + "=" * (-len(name[2:]) % 8)).decode()
        except (ValueError, UnicodeDecodeError):
            raise AttributeError(name) from None
        fields = raw.split(",") if raw else []
        if all(f.isidentifier() for f in fields):
            return _params_tuple(tuple(fields))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _params_tuple(fields):
    """The named-tuple class of hyperparameters with these field names (one per tuple of names,
    shared by every algorithm whose compiled rules read those fields)."""
    nt = _PARAMS.get(fields)
    if nt is None:
        import base64
        key = "hp" + base64.b32encode(",".join(fields).encode()).decode().rstrip("=")
        nt = _PARAMS.get(key)
        if nt is None:
            from collections import namedtuple
            nt = namedtuple("Params", fields)
            nt.__module__, nt.__qualname__ = __name__, key
            _PARAMS[key] = nt
        _PARAMS[fields] = nt            # (by the field names too: each tuple of names encoded once)
    return nt


_UNDECLARED = object()    # a class that does not set compiled_rules in its body


def _has_rules(mod):
    """Whether the module defines the compiled rules: ``local``, ``server``, ``State``, ``Messages``."""
    return all(callable(getattr(mod, f, None)) for f in ("local", "server")) and \
        all(hasattr(getattr(mod, t, None), "_fields") for t in ("State", "Messages"))


def _algorithm_classes(mod):
    """The algorithm classes defined in the module ``mod`` (not imported into it)."""
    return [c for c in vars(mod).values()
            if isinstance(c, type) and issubclass(c, Algorithm) and c.__module__ == mod.__name__]


def _prepare_rules(name):
    """``name``, after giving the rules module's named tuples their module-level names (pickle, and
    with it Numba's disk cache, finds them under that name)."""
    mod = sys.modules[name]
    for rule in ("local", "server"):           # the python backend never calls local: check its form here
        fn = getattr(getattr(mod, rule), "py_func", getattr(mod, rule))
        try:
            params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):        # pragma: no cover - a builtin or C function
            continue
        want = ["pk", "rd", "hp", "st", "rng"] if rule == "local" else ["pk", "rd", "hp", "st", "m"]
        if len(params) != 5:
            raise DeclarationError(f"the compiled rule {rule} of module {name!r} takes ({', '.join(params)}); it must "
                                   f"take five arguments, {rule}({', '.join(want)}) (section 3 of "
                                   "docs/add-your-own-algorithm.md).")
    for t, nt in list(vars(mod).items()):
        if isinstance(nt, type) and issubclass(nt, tuple) and hasattr(nt, "_fields") and \
                nt.__module__ == mod.__name__ and getattr(mod, nt.__qualname__, None) is not nt:
            nt.__qualname__ = t
    return name


@dataclass(frozen=True)
class Algorithm:
    """Base class of every registered algorithm (a frozen dataclass of hyperparameters).

    Class attributes to set in a subclass:

    name : str
        Registered name.
    reference : str
        Paper, algorithm and equation implemented.
    constraints : dict
        ``{hyperparameter: [constraint, ...]}`` used for validation.
    comm : (int, int)
        d-vectors sent down / up per participating client per round.
    stateful_clients : bool
        The algorithm keeps per-client memory (forbids replicated duplicate draws).
    exact : bool
        With exact gradients and full participation x* is a fixed point under heterogeneity.
    default_sampling : str
        Client sampling used when ``clients_per_round`` is given and ``sampling`` is not.
    test_params : dict
        Fast, stable settings for the common test suite (runner arguments included).
    reductions : list of (dict, str, dict)
        Declared equivalences ``(own params, other algorithm, other params)``: the two runs
        must produce the same iterates.
    full_participation_only : bool
        The method is defined for full participation only (the runner rejects client sampling).
    round_coin : bool
        Whether the method reads the round's uniform coin (``rd.u`` in the compiled rules, ``ctx.u``
        round by round), which every round draws whether it is read or not. True by default; a
        method that never reads it says False, so that a run of it that draws nothing else (full
        participation, exact gradients, no noise) is known to be the run of every seed, and a
        theorem check runs such a case's seeds once (``RunResult`` copies for the others). Read from
        the class's own body only: a subclass that never reads it says so again.
    divergence_params : dict
        Overrides of the common suite's divergence check (lr=50, K=5) for methods whose
        server step is bounded (Adam-type), which need more local steps to overflow.
    released_options : tuple of str
        The released codes' run options the local step supports (``"weight_decay"``,
        ``"clip_norm"``; see :func:`fedtheory.run` and :meth:`RoundContext.released_step`);
        the runner rejects the others with ``released_options_reason``. An algorithm that lists
        ``"weight_decay"`` and has a hyperparameter of that name receives the option there.
    released_options_reason : str
        Why the algorithm rejects a run option it does not list (named in the error).
    traceables : dict
        Sequences that ``run(..., trace=...)`` can record, ``{name: (source, description)}``.
        ``source`` is ``"path"`` (a local path recorded by the round context: (S, K + 1, d) per
        round; every primitive records ``"local"``), ``"message"`` (the entry of the round's
        messages, one row per participating client) or ``"state"`` (the entry of the state after
        the server update). The default declares the local iterates ``"local"``.
    scalars : dict
        The algorithm's own scalars logged in the run's history, ``{name: description}`` (a
        server step, a step size chosen adaptively, ...). The state holds each under its name:
        ``init`` sets its initial value (``nan`` when it has none yet) and ``server_update``
        its value after each round. At every evaluated round the runner writes the value as the
        history column of that name, on every backend (a tensor is copied to the host). Empty by
        default: no column and no cost. ``fedtheory describe NAME`` lists them.
    compiled_rules : bool, str or None
        Not set by default. Which compiled rules the class runs (:meth:`rules_module`): ``True``
        those of its own module, a module's dotted name that module's, ``False`` or ``None`` none
        (the round-by-round form). Unset, a class that changes none of the round inherits its
        parent's choice, and one that defines a round method runs round by round.
    """

    name: ClassVar[str] = "algorithm"
    reference: ClassVar[str] = ""
    constraints: ClassVar[dict] = {}
    comm: ClassVar[tuple] = (1, 1)
    stateful_clients: ClassVar[bool] = False
    exact: ClassVar[bool] = False
    default_sampling: ClassVar[str] = "uniform"
    test_params: ClassVar[dict] = {}
    reductions: ClassVar[list] = []
    full_participation_only: ClassVar[bool] = False
    round_coin: ClassVar[bool] = True
    divergence_params: ClassVar[dict] = {}
    released_options: ClassVar[tuple] = ()
    released_options_reason: ClassVar[str] = "its local step is not a plain gradient step"
    traceables: ClassVar[dict] = {"local": ("path", "local iterates y_{i,k}, k = 0..K, of each participating "
                                                     "client (row s: client clients[s])")}
    scalars: ClassVar[dict] = {}
    #: the cost of :meth:`history_extras` at an evaluation, in the unit of the default evaluation
    #: schedule (per-sample gradients; ``fedtheory.runs.plan.EVAL_FIXED_COST`` is the rest of an
    #: evaluation's Python): the schedule keeps the evaluations within 25% of the training time
    eval_extra_cost: ClassVar[float] = 0.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            allowed = self.constraints.get(f.name)
            if not allowed:
                raise DeclarationError(
                    f"{type(self).__qualname__} declares the hyperparameter {f.name!r} without constraints: "
                    f"constraints[{f.name!r}] must list what it accepts, e.g. [Interval(float, 0, None, "
                    "'neither')] (docs/add-your-own-algorithm.md).")
            check_param(f.name, getattr(self, f.name), allowed, type(self).__name__)

    @classmethod
    def hyperparameters(cls):
        """Names and defaults of the algorithm's own hyperparameters."""
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def create(cls, run_parameters=(), **kwargs):
        """Build an instance, rejecting unknown hyperparameters with the list of known ones.

        Parameters
        ----------
        run_parameters : sequence of str, default ()
            The caller's own parameter names (the runner passes those of :func:`fedtheory.run`),
            offered too when a misspelled name is close to one of them.
        **kwargs
            The algorithm's hyperparameters.

        Returns
        -------
        Algorithm
            The instance.
        """
        known = cls.hyperparameters()
        unknown = sorted(set(kwargs) - set(known))
        if unknown:
            names = [*known, *run_parameters]
            raise InvalidParameterError(
                f"Unknown hyperparameter(s) {unknown} for algorithm {cls.name!r}; its own "
                f"hyperparameters are {sorted(known) or 'none'} (plus the runner's lr, "
                "local_steps, rounds, clients_per_round, batch_size, ...)."
                + (did_you_mean(unknown[0], names) if len(unknown) == 1 else
                   "".join(f" For {u!r}: did you mean{did_you_mean(u, names)[len(' Did you mean'):]}"
                           for u in unknown if did_you_mean(u, names))))
        return cls(**kwargs)

    def check_problem(self, problem):
        """Raise IncompatibleProblemError when the algorithm cannot run on ``problem``."""
        if problem.is_composite:
            raise IncompatibleProblemError(
                f"{self.name!r} handles smooth objectives only, but problem {problem.name!r} has "
                f"a non-smooth part h(x) = {problem.reg_weight} h_0(x), h_0 the regularizer "
                f"{problem.regularizer.name!r}; use a composite method.")

    def init(self, problem, x0):
        """Initial state: a dict with at least ``x``."""
        return {"x": copy(x0)}

    def local_round(self, state, ctx):
        raise NotImplementedError(self._missing_round("local_round"))

    def local_round_reference(self, state, ctx):
        raise NotImplementedError(self._missing_round("local_round_reference"))

    @classmethod
    def _missing_round(cls, method):
        """Why the round-by-round form's ``method`` is missing, and what to do."""
        text = f"{cls.name!r} ({cls.__qualname__}) defines no {method} and runs no compiled rules"
        off = next((k for k in cls.__mro__ if vars(k).get("compiled_rules", True) in (None, False)), None)
        if off is not None:
            return (f"{text}: {off.__qualname__} declares compiled_rules = {vars(off)['compiled_rules']!r} (the "
                    f"round-by-round form), which needs {method}: write it, or drop the declaration to run the "
                    "rules it would inherit (docs/add-your-own-algorithm.md).")
        for parent in cls.__mro__[1:]:
            if parent is not Algorithm and issubclass(parent, Algorithm) and parent.rules_module() is not None:
                changed = sorted({m for k in cls.__mro__[:cls.__mro__.index(parent)] for m in _ROUND_METHODS
                                  if m in vars(k)})
                return (f"{text}: it changes {', '.join(changed)} of {parent.__qualname__}, whose compiled rules (module "
                        f"{parent.rules_module()!r}) run the local steps and the server update together; a "
                        "subclass that changes part of the round writes its round-by-round form (local_round, "
                        "local_round_reference) or compiled rules of its own (docs/add-your-own-algorithm.md).")
        for klass in cls.__mro__:
            mod = sys.modules.get(klass.__module__)
            if klass is not Algorithm and issubclass(klass, Algorithm) and mod is not None and _has_rules(mod):
                others = ", ".join(c.__qualname__ for c in _algorithm_classes(mod))
                return (f"{text}: the compiled rules of its module {mod.__name__!r} are bound to none of the "
                        f"algorithm classes defined there ({others}); set compiled_rules = True in the body of "
                        "the class they implement (section 3 of docs/add-your-own-algorithm.md).")
        return f"{text}: write {method} or the compiled rules (docs/add-your-own-algorithm.md)."

    def torch_server_update(self, state, ctx, messages):
        """The server update the torch backend runs: :meth:`server_update` where the class (or a
        subclass of the one that binds its compiled rules) defines it, else the compiled rule
        ``server`` on tensors. A subclass with rules of its own that inherits its parent's
        ``server_update`` runs its own ``server``, as the numba and python backends do (it ran
        the parent's)."""
        owner = type(self)._rules_owner()
        definer = next((k for k in type(self).__mro__ if "server_update" in vars(k)), Algorithm)
        if owner is not None and definer is not owner and definer in owner.__mro__[1:]:
            return Algorithm.server_update(self, state, ctx, messages)
        return self.server_update(state, ctx, messages)

    def server_update(self, state, ctx, messages):
        """The server update on a round context's arrays (the torch backend): by default the
        module's compiled rule ``server`` run as plain Python on the context's
        :meth:`RoundContext.round_record` (``pk`` is None there: a rule that reads the problem
        pack overrides this method)."""
        import sys
        name = self.rules_module()
        if name is None:
            raise NotImplementedError(self._missing_round("server_update"))
        mod = sys.modules[name]
        m = mod.Messages(*(messages[f] for f in mod.Messages._fields))
        try:
            out = mod.server(None, ctx.round_record(), self.compiled_params(), self.state_tuple(state), m)
        except (TypeError, AttributeError) as e:
            raise TypeError(
                f"{self.name!r}: the torch backend runs the compiled rule server of {name!r} as plain Python on "
                f"tensors, with pk None, and it failed ({type(e).__name__}: {' '.join(str(e).split())}). A rule "
                "that calls NumPy "
                "functions on the state or reads the problem pack needs a server_update of its own for torch, "
                "written with fedtheory.runs.arrays (as FedAdam's).") from e
        return dict(out._asdict())

    def round_schedule(self, rnd, local_steps):
        """(local steps of round ``rnd``, global step counter of its first step).

        Every round runs ``local_steps`` steps by default (t0 = rnd * K); LFD's literal loop
        of Algorithm 1 runs one step in round 0 and K afterwards.
        """
        return local_steps, rnd * local_steps

    def oracle_calls_per_step(self):
        """Stochastic-gradient oracle calls per local step (2 for SAM-type ascent steps)."""
        return 1

    def round_comm(self, ctx, n_participants, state):
        """(down, up) d-vectors communicated in this round (the torch backend's counters): the rules
        module's ``comm`` hook when it has one, else ``comm`` per participant."""
        hook = self._rules_hook("comm")
        if hook is not None:
            return hook(None, ctx.round_record(), self.compiled_params(), self.state_tuple(state), n_participants,
                        self.comm[0], self.comm[1])
        return n_participants * self.comm[0], n_participants * self.comm[1]

    def round_extra_grads(self, ctx):
        """(oracle calls, per-sample gradients) a round spends outside the local steps (the torch
        backend's counters): the rules module's ``extra_grads`` hook, else (0, 0). The hook reads the
        problem only through ``pk.sizes``."""
        hook = self._rules_hook("extra_grads")
        if hook is not None:
            from types import SimpleNamespace
            sizes = np.asarray(ctx.problem.client_sizes)
            return hook(SimpleNamespace(sizes=sizes), ctx.round_record(), self.compiled_params())
        return 0, 0

    def _rules_hook(self, name):
        import sys
        mod = self.rules_module()
        return getattr(sys.modules[mod], name, None) if mod is not None else None

    def history_extras(self, state, problem):
        """Extra per-evaluation columns computed from the state and the problem (e.g. step-size
        statistics over the clients). A scalar kept in the state is declared in :attr:`scalars`
        instead.

        By default the values of the rules module's rule ``extras(pk, hp, st)`` under the names of
        its ``EXTRAS``, the rule run as plain Python (the numba backend runs it compiled:
        :meth:`compiled_extras`); empty without that rule.
        """
        rule = self._rules_hook("extras")
        if rule is None:
            return {}
        if getattr(problem, "is_deep", False):
            raise TypeError(f"{self.name!r}: the rule extras of {self.rules_module()!r} reads the problem pack, "
                            "which a DeepProblem does not have; define history_extras(state, problem) for it.")
        values = rule(problem.compiled_pack(), self.compiled_params(), self.state_tuple(state))
        return dict(zip(self._extras_names(), np.asarray(values, dtype=np.float64).tolist()))

    @classmethod
    def compiled_extras(cls):
        """The names of the columns :meth:`history_extras` adds when compiled code computes them, or
        None when only Python can.

        ``()`` for an algorithm without extras or scalars (the base :meth:`history_extras` and no
        rule ``extras``, no :attr:`scalars`); the rules module's ``EXTRAS`` when it defines the rule
        ``extras(pk, hp, st)`` (a float array, one entry per name) and the class computes its extras
        with it: the base :meth:`history_extras` (which runs the rule as plain Python), or a
        :meth:`history_extras` of the class that binds the rules, its twin for the backends without
        the problem pack (the same values to rounding). A subclass with extras of its own computes
        them in Python.
        The numba backend then evaluates the rounds in compiled code
        (:mod:`fedtheory._kernels.evaluation`), without leaving the compiled loop.
        """
        if cls.scalars:
            return None
        name = cls.rules_module()
        rule = getattr(sys.modules[name], "extras", None) if name is not None else None
        if rule is None:
            return () if cls.history_extras is Algorithm.history_extras else None
        if cls.history_extras is not Algorithm.history_extras and \
                vars(cls._rules_owner()).get("history_extras") is not cls.history_extras:
            return None                          # a subclass's own extras: Python computes them
        return cls._extras_names()

    @classmethod
    def _extras_names(cls):
        """The rules module's ``EXTRAS``, checked: the names of the values of its rule ``extras``."""
        name = cls.rules_module()
        names = getattr(sys.modules[name], "EXTRAS", None)
        if not (isinstance(names, (tuple, list)) and names and all(isinstance(k, str) for k in names)):
            raise TypeError(f"Module {name!r} defines the rule extras(pk, hp, st) but not EXTRAS, the names of "
                            f"its values (a tuple of str, one per entry of the array it returns); got {names!r}.")
        return tuple(names)

    def run_ended(self, state, problem):
        """Called once when a run ends, whatever ended it (the last round, ``tol``, a divergence, a
        callback), with the final state: a warning that the evaluations emit is emitted here too when
        no evaluation came after the round that raised it. Nothing by default."""

    # -- compiled rules (fedtheory._kernels.rounds, docs/add-your-own-algorithm.md) ----------
    @classmethod
    def rules_module(cls):
        """Dotted name of the module holding the algorithm's compiled rules, or None.

        The rules are module-level functions of the algorithm's file, in the NumPy subset Numba
        compiles: ``local(pk, rd, hp, st, rng) -> (messages, bad)`` (the glue around the local
        primitives of :mod:`fedtheory._kernels.rounds`) and ``server(pk, rd, hp, st, m) -> st``,
        over the named tuples ``State`` (the fields of :meth:`init`'s dict) and ``Messages``
        (those of :meth:`local_round_reference`'s dict). An algorithm without them runs through
        :meth:`local_round` and :meth:`server_update` round by round.

        Which rules a class runs is declared, never inferred from what a module holds. Walking
        its method resolution order from the class itself:

        * a class that sets ``compiled_rules`` in its body decides: ``True`` (the rules of its own
          module), a module's dotted name (that module's rules) or ``False`` / ``None`` (none: the
          round-by-round form);
        * else a class that defines a round method itself (``init``, ``local_round``,
          ``local_round_reference``, ``server_update``) runs round by round: it changed the round
          its parent's rules run;
        * else the search goes on with its parent (a subclass that changes none of the round
          inherits its parent's rules).
        """
        key = tuple(vars(k).get("compiled_rules", _UNDECLARED) for k in cls.__mro__)
        cached = cls.__dict__.get("_rules_module_cached")    # asked every round: found again only when a
        if cached is not None and cached[0] == key:          # declaration of the lineage changed
            return cached[1]
        found, owner = cls._find_rules()
        cls._rules_module_cached = (key, found, owner)
        return found

    @classmethod
    def _rules_owner(cls):
        """The class of the method resolution order whose compiled rules the algorithm runs (the one
        :meth:`rules_module` stops at), or None without rules (cached with :meth:`rules_module`)."""
        cls.rules_module()
        return cls.__dict__["_rules_module_cached"][2]

    @classmethod
    def _find_rules(cls):
        """``(rules module name or None, the class that binds it or None)``."""
        for klass in cls.__mro__:
            if klass is Algorithm:
                return None, None
            if not issubclass(klass, Algorithm):       # a mixin: it may change the round, not bind rules
                if any(m in vars(klass) for m in _ROUND_METHODS):
                    return None, None
                continue
            if "compiled_rules" in vars(klass):
                decl = vars(klass)["compiled_rules"]
                if decl is None or decl is False:
                    return None, None
                name = klass.__module__ if decl is True else decl
                if not isinstance(name, str):
                    raise TypeError(f"{klass.__qualname__}.compiled_rules must be True, False, None or a module's "
                                    f"dotted name; got {decl!r}.")
                if name not in sys.modules:
                    import importlib
                    try:
                        importlib.import_module(name)
                    except ImportError as e:
                        raise TypeError(f"{klass.__qualname__}.compiled_rules names the module {name!r}, which "
                                        f"cannot be imported ({type(e).__name__}: {e}).") from e
                if not _has_rules(sys.modules[name]):
                    raise TypeError(
                        f"{klass.__qualname__}.compiled_rules names the module {name!r}, which does not define the "
                        "compiled rules: module-level functions local and server and the named tuples State and "
                        "Messages (section 3 of docs/add-your-own-algorithm.md).")
                return _prepare_rules(name), klass
            if any(m in vars(klass) for m in _ROUND_METHODS):
                return None, None              # its own round, without rules bound to it: the per-round path
        return None, None                      # pragma: no cover - every algorithm derives from Algorithm

    @classmethod
    def params_class(cls):
        """The named-tuple class of :meth:`compiled_params`: one per tuple of field names.

        It lives in :mod:`fedtheory.algorithms.base` under a name that encodes the field names (the
        module's ``__getattr__`` rebuilds it from the name alone), so pickle, and with it Numba's
        disk cache of every compiled function whose signature holds it, finds it in any process: a
        subclass defined in a script or a notebook that runs a built-in's rules leaves that rules'
        cache readable by every other process. A class redefined with other fields (a reload) gets
        the tuple of its new fields."""
        return _params_tuple(tuple(cls.params_fields()))

    @classmethod
    def params_fields(cls):
        """The field names of :meth:`params_class`: the dataclass fields by default (an algorithm
        whose :meth:`compiled_params` holds other fields overrides this)."""
        return [f.name for f in dataclasses.fields(cls)]

    def compiled_params(self):
        """The hyperparameters as the compiled rules read them (``hp``): a named tuple of the
        dataclass fields, in declaration order (numbers and booleans; an algorithm with other
        hyperparameters overrides this)."""
        cls = type(self)
        nt = cls.params_class()
        vals = []
        for f in dataclasses.fields(cls):          # one numeric type per field: one compiled specialisation
            v = getattr(self, f.name)
            kind = _NUMERIC.get(f.type if not isinstance(f.type, str) else f.type.strip())
            if kind is None:                       # not annotated as a number: the default's type
                kind = next((t for t in (bool, float, int) if isinstance(f.default, t)), None)
            if kind is bool or isinstance(v, (bool, np.bool_)):
                v = bool(v)
            elif kind is not None:                 # ``step: float = 1`` reads 0.5 as 0.5, not int(0.5)
                v = kind(v)
            vals.append(v)
        return nt(*vals)

    def state_tuple(self, state):
        """The state dict of :meth:`init` as the rules' ``State`` named tuple."""
        st = sys.modules[self.rules_module()].State
        return st(*(state[f] for f in st._fields))

    def scalar_values(self, state):
        """The declared :attr:`scalars` in ``state`` as floats, ``{name: value}`` (the runner's
        history columns at an evaluated round)."""
        return {k: float(to_numpy(state[k])) for k in self.scalars}
