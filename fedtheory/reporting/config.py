"""TOML run and sweep configurations (docs/configuration.md; docs/user-guide.md: "Command line").

A configuration has three tables::

    [problem]                 # factory = a problems factory; every other key is its argument
    factory = "quadratic"
    n_clients = 10
    dim = 5

    [run]                     # arguments of fedtheory.run, the algorithm and its hyperparameters
    rounds = 200
    local_steps = 5
    lr = 0.1
    reference = true          # measure against the certified optimum (validation.ground_truth)

    [grid]                    # lists; the sweep runs their Cartesian product
    algorithm = ["fedavg", "scaffold"]
    seed = [0, 1, 2]
    "problem.heterogeneity" = [0.5, 2.0]    # a problem argument

Every setting is written once: a ``[grid]`` key spelled twice (``"problem.dim"`` and ``dim`` in
``[grid.problem]``), a grid axis also set in ``[problem]`` or ``[run]`` (one value would never
be used), a value listed twice in one axis and an integer outside TOML's 64-bit range are
errors naming both places.

``name`` is accepted instead of ``factory`` when no ``factory`` is given (then it cannot be an
argument); with ``factory`` given, ``name`` is an argument (the data set of ``libsvm``).
``factory = "vision.image_problem"`` builds a torch image problem; its ``model`` is the name of
a network of :mod:`fedtheory.backends.torch.models` or a table ``{name = "mlp", ...}`` of the
network's arguments.

:func:`load` checks every argument of every grid point before any run: the factory's
signature and its own checks (the problem is built), and ``fedtheory.run``'s checks of the run
arguments and of the algorithm's hyperparameters (:func:`fedtheory.runs.runner.check_arguments`).
Errors (:class:`ConfigError`) name the file, the line, the key, what is expected and what was
found.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .._argcheck import did_you_mean
from .toml_text import (_HEADER, _INT64, _KEY, _big_int, _default_type_error, _describe, _expectation, _flatten, _mentioned,
                        key_lines)
from .._progress import bar
from .results import canonical_value
from ..backends import require_torch
from ..exceptions import ConfigError, IncompatibleProblemError, InvalidParameterError
from .. import registry
from ..registry import algorithms, get_algorithm, import_hint, import_modules
from ..runs.runner import check_arguments, run

RUN_EXCLUDED = {"problem", "algorithm", "callback", "progress", "device"}
EXTRA_RUN_KEYS = {"reference"}
TABLES = ("problem", "run", "grid")
#: From this many grid points on, listing and checking them shows a progress bar (0.15-0.3 ms a
#: point measured on 2 cores, idle to loaded: a 1e6-point grid takes 2.5-5 minutes).
LARGE_GRID = 10_000
VISION = "vision.image_problem"


# ------------------------------------------------------------------------------- factories

def factories():
    """``{name: callable}``: the problem factories a configuration can name.

    The built-in factories of :mod:`problems` (and ``vision.image_problem``), then those
    registered with :func:`fedtheory.registry.register_problem` (a user's module, imported by
    ``--import`` or a configuration's ``import = [...]``).

    Returns
    -------
    dict
        ``{name: factory}``, the built-in ones first.

    Raises
    ------
    InvalidParameterError
        A registered factory has the name of a built-in one.

    Examples
    --------
    >>> from fedtheory.reporting.config import factories
    >>> factories()["quadratic"].__module__
    'problems.synthetic'
    """
    out = dict(_installed_factories())
    for name, fn in registry.PROBLEMS.items():     # (the registry's, as it is now)
        if name in out:
            raise InvalidParameterError(
                f"The 'name' parameter of register_problem must differ from the built-in factories "
                f"({', '.join(sorted(out))}). Got {name!r} (for {fn.__module__}.{fn.__qualname__}) instead.")
        out[name] = fn
    return out


@functools.lru_cache(maxsize=1)
def _factory_providers():
    """The functions of the installed packages that list their factories (entry point group
    ``fedtheory.problems``: the ``problems`` package of this project), found once per process."""
    from importlib.metadata import entry_points     # (scans the installed packages: only when a factory is named)
    return tuple(ep.load() for ep in sorted(entry_points(group="fedtheory.problems"), key=lambda e: e.name != "problems"))


def _installed_factories():
    """``{name: factory}`` of the installed packages, as their modules hold them now."""
    out = {}
    for provider in _factory_providers():
        out.update(provider())
    if not out:
        raise InvalidParameterError("No problem factories are installed: the 'problems' package declares them "
                                    "(entry point group 'fedtheory.problems'); install the project with "
                                    "pip install -e . from its checkout.")
    return out


def factory_call(name, fn):
    """How a factory is called in Python, for ``describe``: ``problems.quadratic``, or the module
    and name of a registered one (``mypkg.problems.robust_regression``).

    Parameters
    ----------
    name : str
        The factory's name.
    fn : callable
        The factory.

    Returns
    -------
    str
        The dotted name.
    """
    if registry.PROBLEMS.get(name) is fn:
        return f"{fn.__module__}.{getattr(fn, '__qualname__', name)}"
    return f"problems.{name}"


def _split_problem(problem_args):
    """``(factory name, arguments)`` of a problem dict (``factory`` key, or ``name`` without one)."""
    args = dict(problem_args)
    if "factory" in args:
        return args.pop("factory"), args
    return args.pop("name", None), args


def make_problem(problem_args):
    """Build the problem of a configuration point ``{"factory": ..., **arguments}``.

    ``{"name": factory, ...}`` (no ``factory`` key) is accepted as well.

    Parameters
    ----------
    problem_args : dict
        ``{"factory": name, **arguments}``.

    Returns
    -------
    FederatedProblem
        The problem.
    """
    name, args = _split_problem(problem_args)
    table = factories()
    if name not in table:
        raise ConfigError(f"unknown problems factory {name!r}; known: {', '.join(sorted(table))}."
                          f"{did_you_mean(name, table)}{import_hint()}")
    if name == VISION:
        args["model"] = _vision_model(args.get("model"))
    return table[name](**args)


@functools.lru_cache(maxsize=8)
def _problem(blob):
    return make_problem(json.loads(blob))


def build_problem(problem_args):
    """The problem of a configuration point (cached per process).

    Parameters
    ----------
    problem_args : dict
        ``{"factory": name, **arguments}``: a ``problems`` factory and its arguments (the
        ``[problem]`` table of a configuration); ``{"name": factory, ...}`` is accepted as well.

    Returns
    -------
    FederatedProblem
        The problem the point's factory builds.
    """
    return _problem(json.dumps(problem_args, sort_keys=True))


def _vision_model(spec):
    """The network of ``model = "mlp"`` or ``model = {name = "mlp", hidden = [8], ...}``."""
    require_torch("vision.image_problem")
    from ..backends.torch.models import MODELS      # (torch: an optional dependency)
    if not isinstance(spec, (str, dict)):
        return spec                                   # an nn.Module given from Python
    kw = {"name": spec} if isinstance(spec, str) else dict(spec)
    name = kw.pop("name", None)
    if name not in MODELS:
        raise ValueError(f"The 'model' parameter of vision.image_problem must be a str among "
                         f"{{{', '.join(map(repr, sorted(MODELS)))}}} or a table with such a 'name' and the "
                         f"network's arguments. Got {spec!r} instead.")
    params = inspect.signature(MODELS[name]).parameters
    unknown = sorted(set(kw) - set(params))
    if unknown:
        raise ValueError(f"The 'model' parameter of vision.image_problem: {unknown} are not arguments of "
                         f"network {name!r}; expected some of {sorted(params)}. Got {spec!r} instead.")
    kw = {k: tuple(map(tuple, v)) if isinstance(v, list) and v and isinstance(v[0], list)
          else tuple(v) if isinstance(v, list) else v for k, v in kw.items()}
    return MODELS[name](**kw)


@functools.lru_cache(maxsize=None)
def _run_keys():
    params = inspect.signature(run).parameters
    return frozenset(p for p in params if p not in RUN_EXCLUDED and params[p].kind != inspect.Parameter.VAR_KEYWORD)


def run_call(run_args):
    """``(algorithm, keyword arguments of fedtheory.run, reference wanted)`` of a run point.

    Parameters
    ----------
    run_args : dict
        The ``[run]`` arguments of a point.

    Returns
    -------
    tuple
        ``(algorithm, keyword arguments, reference wanted)``.
    """
    import numpy as np
    kw = dict(run_args)
    alg = kw.pop("algorithm")
    ref = bool(kw.pop("reference", False))
    if kw.get("x0") is not None:
        kw["x0"] = np.asarray(kw["x0"], dtype=float)
    return alg, kw, ref


# ------------------------------------------------------------------------------- the configuration

@dataclass
class Config:
    """A parsed configuration: ``problem`` args, ``run`` args, ``grid`` lists, source ``path``,
    and the user modules of its top-level ``import = [...]`` (imported by :func:`load`).

    ``problem`` is as written (``factory`` or ``name`` naming the factory); :meth:`points`
    returns canonical problem dicts ``{"factory": ..., **arguments}``.

    Parameters
    ----------
    problem : dict
        The ``[problem]`` table as written.
    run : dict
        The ``[run]`` table.
    grid : dict
        The ``[grid]`` lists.
    path : str, default "<config>"
        Where it was read from.
    text : str, default ""
        Its text (for the errors' line numbers).
    imports : list of str
        The user modules of its ``import = [...]``.
    """

    problem: dict
    run: dict
    grid: dict
    path: str = "<config>"
    text: str = ""
    imports: list = field(default_factory=list)

    # -- locations -------------------------------------------------------------------
    def line(self, table, key=None):
        """Line of ``key`` in ``[table]`` (or of the table's header, or of its closest parent)."""
        lines = key_lines(self.text)
        cands = [(table,)] if key is None else [(table, key), (table, *key.split("."))]
        for n in range(max(map(len, cands)), 0, -1):           # the longest known prefix
            for path in cands:
                if len(path) >= n and path[:n] in lines:
                    return lines[path[:n]]
        return None

    def error(self, table, key, what, value=None, in_grid=False):
        """A :class:`ConfigError` "FILE, line N: [table] key 'k' (grid value v): what"."""
        line = self.line(table, key)
        where = f"{self.path}, line {line}" if line else self.path
        k = f"[{table}] key {key!r}" if key else f"table [{table}]"
        if in_grid:
            k += f" (grid value {_describe(value)})"
        return ConfigError(f"{where}: {k}: {what}")

    def _spelling(self, path):
        """How the key ``path`` (table first) is written: ``"`dim` in [grid.problem] (line 14)"``."""
        lines = key_lines(self.text)
        for n in range(len(path), 0, -1):
            if path[:n] in lines:
                line = lines[path[:n]]
                break
        else:
            return f"{'.'.join(path[1:])!r} in [{path[0]}]"
        table, key = path[0], None
        for text in self.text.splitlines()[:line][::-1]:
            m = _HEADER.match(text)
            if m:
                table = m.group(2).strip()
                break
        m = _KEY.match(self.text.splitlines()[line - 1])
        key = m.group(1).strip() if m else ".".join(path[1:])
        return f"`{key}` in [{table}] (line {line})"

    def _duplicates(self, origins):
        """ConfigError for a grid entry spelled twice, or set both in [grid] and in [problem]/[run]
        (only one of the values would be used)."""
        for k, paths in origins.items():
            if len(paths) > 1:
                a, b = (self._spelling(("grid",) + p) for p in paths[:2])
                raise ConfigError(f"{self.path}: [grid] key {k!r} is given twice, as {a} and as {b}; "
                                  "only one would be used: keep one")
        for k in self.grid:
            section, arg = ("problem", k[len("problem."):]) if k.startswith("problem.") else ("run", k)
            table = self.problem if section == "problem" else self.run
            if "." not in arg and arg in table:
                a = self._spelling(("grid",) + origins.get(k, [(k,)])[0])
                b = self._spelling((section, arg))
                raise ConfigError(f"{self.path}: {section} argument {arg!r} is set twice, as {b} "
                                  f"({_describe(table[arg])}) and as {a} (a grid axis); the grid's values "
                                  f"would replace the [{section}] one: keep one")
            vals = self.grid[k]
            if isinstance(vals, list):
                seen = set()
                for v in vals:
                    key = json.dumps(canonical_value(v), sort_keys=True, default=str)     # 1 and 1.0 alike
                    if key in seen:
                        raise self.error("grid", k, f"value {_describe(v)} is listed twice (its grid points "
                                                    "would run once): list each value once")
                    seen.add(key)

    def _where(self, section, key):
        """``(table, key)`` where a problem (``section="problem"``) or run argument is set."""
        gkey = f"problem.{key}" if section == "problem" else key
        if gkey in self.grid:
            return "grid", gkey
        return section, key

    def _factory_key(self):
        """Which key names the factory: ``factory`` (table or grid) or else ``name``."""
        return "factory" if ("factory" in self.problem or "problem.factory" in self.grid) else "name"

    # -- grid points -----------------------------------------------------------------
    def size(self):
        """The number of grid points, without building them.

        Returns
        -------
        int
            The product of the grid axes' lengths (1 without a grid).

        Examples
        --------
        >>> from fedtheory.reporting.config import load
        >>> cfg = load('''
        ... [problem]
        ... factory = "quadratic"
        ... n_clients = 4
        ... dim = 3
        ... [run]
        ... algorithm = "fedavg"
        ... [grid]
        ... seed = [0, 1, 2]
        ... lr = [0.1, 0.2]
        ... ''', check=False)
        >>> cfg.size()
        6
        """
        return math.prod(len(v) for v in self.grid.values())

    def _bar(self, progress, what):
        n = self.size()
        return bar(progress if n >= LARGE_GRID else False, total=n, unit="point",
                   desc=f"{what} {n:,} grid points", leave=False)

    def points(self, progress=None):
        """The grid's Cartesian product as a list of ``(problem_args, run_args)``.

        Problem dicts are canonical, ``{"factory": name, **arguments}``. Names and keys are
        checked (cheap); :meth:`check` (called by :func:`load`) checks the values. A grid of
        :data:`LARGE_GRID` points or more shows a bar (``progress``: as in :func:`fedtheory.run`).
        """
        state = json.dumps([self.problem, self.run, self.grid], sort_keys=True, default=str)
        if self.__dict__.get("_listed", (None,))[0] == state:          # listed already (load, then sweep)
            return list(self._listed[1])
        keys = list(self.grid)
        combos = itertools.product(*(self.grid[k] for k in keys)) if keys else [()]
        fkey = self._factory_key()
        out, memo = [], {}
        with self._bar(progress, "listing") as bar:
            for values in combos:
                out.append(self._point(keys, values, fkey, memo))
                bar.update(1)
        self._listed = (state, out)
        return list(out)

    def _point(self, keys, values, fkey, memo):
        """One grid point ``(problem_args, run_args)`` with its names checked."""
        prob, rn = dict(self.problem), dict(self.run)
        for k, v in zip(keys, values):
            if k.startswith("problem."):
                prob[k[len("problem."):]] = v
            else:
                rn[k] = v
        factory = prob.pop(fkey, None)
        prob = {"factory": factory, **prob}
        self._check_names(prob, rn, fkey, memo)
        return prob, rn

    def _check_names(self, prob, rn, fkey, memo=None):
        memo = {} if memo is None else memo      # factories, signatures, algorithms: once per points()
        if "factories" not in memo:
            memo["factories"], memo["algorithms"] = factories(), algorithms()
        table = memo["factories"]
        name = prob["factory"]
        t, k = self._where("problem", fkey)
        if not isinstance(name, str) or name not in table:
            raise self.error(t, k, f"expected a problems factory, one of {', '.join(sorted(table))}; "
                                   f"got {_describe(name)}.{did_you_mean(name, table)}{import_hint()}",
                             name, t == "grid")
        if ("sig", name) not in memo:
            memo[("sig", name)] = inspect.signature(table[name]).parameters
        sig = memo[("sig", name)]
        var_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in sig.values())
        named = [p for p, v in sig.items() if v.kind not in (v.VAR_KEYWORD, v.VAR_POSITIONAL)]
        for key in prob:
            if key == "factory":
                continue
            if key not in sig and not var_kw:
                t, k = self._where("problem", key)
                hint = (" ('name' names the factory only when no 'factory' key is given)"
                        if key == "name" else "")
                spelled = [f"problem.{n}" for n in named] if t == "grid" else named
                raise self.error(t, k, f"is not an argument of problems factory {name!r}{hint}; expected "
                                       f"one of {', '.join(named)}.{did_you_mean(k, spelled)}")
            if key in sig:
                bad = _default_type_error(prob[key], sig[key].default)
                if bad:
                    t, k = self._where("problem", key)
                    raise self.error(t, k, bad + f" (argument of problems factory {name!r})", prob[key],
                                     t == "grid")
        missing = [p for p in named if sig[p].default is inspect.Parameter.empty and p not in prob]
        if missing:
            hint = ""
            if "name" in missing and fkey == "name":
                hint = f" (write factory = {name!r} and name = the data set: 'name' alone names the factory)"
            raise self.error("problem", None, f"problems factory {name!r} needs the argument(s) "
                                              f"{', '.join(map(repr, missing))}{hint}")
        alg = rn.get("algorithm")
        if not isinstance(alg, str) or alg not in memo["algorithms"]:
            t = "grid" if "algorithm" in self.grid else "run"
            raise self.error(t, "algorithm", f"expected a registered algorithm, one of "
                                             f"{', '.join(memo['algorithms'])}; got {_describe(alg)}."
                                             f"{did_you_mean(alg, memo['algorithms'])}{import_hint()}",
                             alg, t == "grid")
        if ("alg", alg) not in memo:
            memo[("alg", alg)] = _run_keys() | EXTRA_RUN_KEYS | set(get_algorithm(alg).hyperparameters())
        allowed = memo[("alg", alg)]
        for k in rn:
            if k != "algorithm" and k not in allowed:
                t = "grid" if k in self.grid else "run"
                if k in RUN_EXCLUDED:
                    raise self.error(t, k, "is an argument of fedtheory.run that a configuration file does not "
                                           "set (device: the machine that runs the sweep decides; callback, "
                                           "progress: Python objects; problem: the [problem] table); expected "
                                           f"one of {', '.join(sorted(allowed))}")
                raise self.error(t, k, f"is neither an argument of fedtheory.run nor a hyperparameter "
                                       f"of {alg!r}; expected one of {', '.join(sorted(allowed))}."
                                       f"{did_you_mean(k, allowed)}")
        if "reference" in rn and not isinstance(rn["reference"], bool):
            t, k = self._where("run", "reference")
            raise self.error(t, k, f"expected true or false; got {_describe(rn['reference'])}",
                             rn["reference"], t == "grid")

    # -- values ----------------------------------------------------------------------
    def check(self, points=None, progress=None):
        """Check every value of every grid point: build each distinct problem (the factory's own
        checks) and set up each run (:func:`fedtheory.runs.runner.check_arguments`), before any run.

        Raises :class:`ConfigError` naming the line and key of the first bad value.
        """
        points = self.points(progress) if points is None else points
        groups = {}                       # one build per distinct problem, one problem in memory at a time
        for prob, rn in points:
            groups.setdefault(json.dumps(prob, sort_keys=True, default=str), (prob, []))[1].append(rn)
        with self._bar(progress, "checking") as bar:
            for prob, runs in groups.values():
                self._check_group(prob, runs, bar)
        return points

    def _check_group(self, prob, runs, bar):
        """Build one problem and set up each of its runs (a bar step per run)."""
        problem = self._build(prob)
        for rn in runs:
            bar.update(1)
            alg, kw, _ = run_call(rn)
            try:
                check_arguments(problem, alg, **kw)
            except IncompatibleProblemError as e:
                t = "grid" if "algorithm" in self.grid else "run"
                raise self.error(t, "algorithm", str(e), alg, t == "grid") from None
            except (ValueError, TypeError) as e:
                raise self._blame("run", rn, e) from None

    def _build(self, prob):
        try:
            return build_problem(prob)
        except ImportError as e:
            raise self.error(*self._where("problem", self._factory_key()), str(e)) from None
        except (ValueError, TypeError, OSError, KeyError) as e:
            raise self._blame("problem", prob, e) from None

    def _blame(self, section, args, err):
        """The ConfigError of an argument check that failed with ``err`` (a check_param message
        names the parameter; otherwise the first argument the message mentions; else the table)."""
        param, what = _expectation(err, args)
        keys = [k for k in args if k not in ("factory", "algorithm")]
        if param not in keys:
            param = _mentioned(str(err), args, keys)
        if isinstance(err, OSError) and not isinstance(err, FileNotFoundError):
            what = f"{type(err).__name__}: {what}"
        if param is None:
            return self.error(section, None, what)
        t, k = self._where(section, param)
        return self.error(t, k, what, args[param], t == "grid")


def _read(path_or_text, path):
    """``(text, where)`` of a configuration given as a file path or as TOML text."""
    if path is not None:
        return str(path_or_text), str(path)
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        return path_or_text, "<config>"
    p = Path(path_or_text)
    if not p.exists():
        raise ConfigError(f"{p}: no such configuration file")
    if p.is_dir():
        raise ConfigError(f"{p}: is a directory, not a configuration file (a TOML file is expected)")
    try:
        return p.read_text(encoding="utf-8"), str(p)
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not a UTF-8 text file ({e.reason} at byte {e.start}); TOML is expected") from None
    except OSError as e:
        raise ConfigError(f"{p}: cannot be read ({e.strerror or e})") from None


def _repeated_key(text, lineno):
    """What tomllib's "Cannot overwrite a value" at line ``lineno`` means, naming the key, its table
    and the line that gave it first; None when that line assigns no plain key."""
    lines = text.splitlines()
    if not 1 <= lineno <= len(lines):
        return None
    key_of = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")
    table_of = re.compile(r"^\s*\[\[?([^\[\]]+)\]\]?\s*(#.*)?$")      # [table] and [[array of tables]]
    m = key_of.match(lines[lineno - 1])
    if not m:
        return None
    key = m.group(1).strip("\"'")
    table, first = None, None
    for i, ln in enumerate(lines[:lineno - 1], start=1):
        t = table_of.match(ln)
        if t:
            table, first = t.group(1).strip(), None
            continue
        k = key_of.match(ln)
        if k and k.group(1).strip("\"'") == key:
            first = i
    where = f"[{table}] " if table else ""
    return (f"{where}key {key!r} is given twice" + (f" (first at line {first})" if first else "")
            + "; TOML allows each key once in a table: keep one")


def load(path_or_text, path=None, check=True, progress=None):
    """Parse and check a configuration from a file path or a TOML string (a string with a newline).

    Raises :class:`ConfigError` naming the file, line and key for: a missing or unreadable file,
    TOML syntax errors, unknown tables or keys, grid values that are not non-empty lists,
    unknown factories or algorithms (the known ones listed), and with ``check`` (the default)
    every value a factory, ``fedtheory.run`` or the algorithm rejects (range, type, options),
    found by building each distinct problem and setting up each run (:meth:`Config.check`).

    Parameters
    ----------
    path_or_text : str or path-like
        A file path, or the TOML text itself (a string with a newline).
    path : str, optional
        When given, ``path_or_text`` is the TOML text and ``path`` the file name that errors
        cite (default: ``<config>`` for text, the path itself for a file).
    check : bool, default True
        Also check every value by building each distinct problem and setting up each run.
    progress : bool or None, default None
        A progress bar while a large grid (:data:`LARGE_GRID` points or more) is listed and
        checked; None: on a terminal only (as in :func:`fedtheory.run`).

    Returns
    -------
    Config
        The parsed configuration (``points()`` lists the grid's points).

    Examples
    --------
    >>> from fedtheory.reporting.config import load
    >>> cfg = load('''
    ... [problem]
    ... factory = "quadratic"
    ... n_clients = 4
    ... dim = 3
    ... [run]
    ... algorithm = "fedavg"
    ... rounds = 5
    ... [grid]
    ... seed = [0, 1]
    ... lr = [0.1, 0.2]
    ... ''')
    >>> len(cfg.points())
    4
    >>> load(cfg.text.replace("lr = [0.1, 0.2]", "lr = [0.1, -2]"))
    Traceback (most recent call last):
    ...
    fedtheory.exceptions.ConfigError: <config>, line 11: [grid] key 'lr' (grid value -2): expected a float in the range (0, inf) (argument of fedtheory.run); got -2
    """
    text, where = _read(path_or_text, path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            msg = msg[:m.start()].strip()
            twice = _repeated_key(text, int(m.group(1))) if "overwrite" in msg or "twice" in msg else None
            if twice is not None:
                raise ConfigError(f"{where}, line {m.group(1)}: {twice}") from None
            raise ConfigError(f"{where}, line {m.group(1)}, column {m.group(2)}: invalid TOML: {msg}") from None
        raise ConfigError(f"{where}: invalid TOML: {msg}") from None
    cfg = Config({}, {}, {}, where, text)
    for t in data:
        if t == "import":
            continue
        if t not in TABLES or not isinstance(data[t], dict):
            what = (f"unknown table; expected [problem], [run] and optionally [grid] and import = [...]."
                    f"{did_you_mean(t, (*TABLES, 'import'))}" if t not in TABLES
                    else f"must be a table; got {_describe(data[t])}")
            line = cfg.line(t)
            raise ConfigError(f"{where}{f', line {line}' if line else ''}: {t!r}: {what}")
    if "problem" not in data:
        raise ConfigError(f"{where}: missing table [problem] (with factory = a problems factory)")
    if "run" not in data:
        raise ConfigError(f"{where}: missing table [run] (with algorithm = a registered algorithm)")
    origins = {}
    cfg.problem, cfg.run = dict(data["problem"]), dict(data["run"])
    cfg.grid = _flatten(data.get("grid", {}), origins=origins)
    for t in TABLES:
        if isinstance(data.get(t), dict) and "import" in data[t]:
            raise cfg.error(t, "import", "import = [...] is a top-level key: write it at the top of the file, "
                                         "before the first table")
    if "import" in data:            # user modules first: they register the names the tables use
        mods = data["import"]
        line = key_lines(text).get(("import",))
        at = f"{where}, line {line}" if line else where
        if not isinstance(mods, list) or not all(isinstance(m, str) and m.strip() for m in mods):
            raise ConfigError(f"{at}: key 'import': expected a list of module names (e.g. import = "
                              f"[\"my_algorithms\"]); got {_describe(mods)}")
        try:
            import_modules(mods, where="import")
        except ImportError as e:
            raise ConfigError(f"{at}: key {e}") from None
        cfg.imports = list(mods)
    for t, table in (("problem", cfg.problem), ("run", cfg.run)):
        for k, v in table.items():
            big = _big_int(v)
            if big is not None:
                raise cfg.error(t, k, f"expected an integer in TOML's 64-bit range [{_INT64[0]}, {_INT64[1]}]; "
                                      f"got {big}")
    for k, v in cfg.grid.items():
        big = _big_int(v)
        if big is not None:
            raise cfg.error("grid", k, f"expected integers in TOML's 64-bit range [{_INT64[0]}, {_INT64[1]}]; "
                                       f"got {big}", big, True)
    cfg._duplicates(origins)
    for k, v in cfg.grid.items():
        if not isinstance(v, list) or not v:
            raise cfg.error("grid", k, f"expected a non-empty list of values; got {_describe(v)}")
        if not (k.startswith("problem.") or "." not in k):
            raise cfg.error("grid", k, "expected a run argument, a hyperparameter or 'problem.<argument>'")
    if not ({"factory", "name"} & set(cfg.problem) or {"problem.factory", "problem.name"} & set(cfg.grid)):
        raise cfg.error("problem", None, "missing key 'factory' (a problems factory, one of "
                                         f"{', '.join(sorted(factories()))})")
    if "algorithm" not in cfg.run and "algorithm" not in cfg.grid:
        raise cfg.error("run", None, f"missing key 'algorithm' (one of {', '.join(algorithms())})")
    points = cfg.points(progress)   # names and keys of every grid point
    if check:
        cfg.check(points, progress)  # values: the factories' and run's own checks
    return cfg
