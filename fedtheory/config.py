"""TOML run and sweep configurations (API.md "Command line").

A configuration has three tables::

    [problem]                 # a factory of the problems package and its arguments
    name = "quadratic"
    n_clients = 10
    dim = 5
    heterogeneity = 1.0

    [run]                     # arguments of fedtheory.run, the algorithm and its hyperparameters
    algorithm = "fedavg"
    rounds = 200
    local_steps = 5
    lr = 0.1
    reference = true          # measure against the certified optimum (validation.ground_truth)

    [grid]                    # lists; the sweep runs their Cartesian product
    algorithm = ["fedavg", "scaffold"]
    seed = [0, 1, 2]
    "problem.heterogeneity" = [0.5, 2.0]    # a problem argument

Errors name the file, the line, the key and what is expected (:class:`ConfigError`).
"""
from __future__ import annotations

import hashlib
import functools
import inspect
import itertools
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

RUN_EXCLUDED = {"problem", "algorithm", "callback", "progress", "device"}
EXTRA_RUN_KEYS = {"reference"}
TABLES = ("problem", "run", "grid")


class ConfigError(ValueError):
    """A configuration file is invalid; the message names the file, line and key."""


@functools.lru_cache(maxsize=None)
def _run_keys():
    from .runner import run
    params = inspect.signature(run).parameters
    return frozenset(p for p in params if p not in RUN_EXCLUDED and params[p].kind != inspect.Parameter.VAR_KEYWORD)


def _line_of(text, table, key):
    """1-based line of ``key = ...`` inside ``[table]`` (or of the table header), or None."""
    current = None
    header_line = None
    pat = None if key is None else re.compile(r'^\s*("?)' + re.escape(key) + r'\1\s*=')
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*\[([^\]]+)\]\s*(#.*)?$", line)
        if m:
            current = m.group(1).strip()
            if current == table:
                header_line = n
            continue
        if current == table and pat is not None and pat.match(line):
            return n
    return header_line


@dataclass
class Config:
    """A parsed configuration: ``problem`` args, ``run`` args, ``grid`` lists, source ``path``."""

    problem: dict
    run: dict
    grid: dict
    path: str = "<config>"
    text: str = ""

    def error(self, table, key, what):
        line = _line_of(self.text, table, key)
        where = f"{self.path}, line {line}" if line else self.path
        k = f"[{table}] key {key!r}" if key else f"table [{table}]"
        return ConfigError(f"{where}: {k}: {what}")

    def points(self):
        """The grid's Cartesian product as a list of ``(problem_args, run_args)`` (validated)."""
        keys = list(self.grid)
        combos = itertools.product(*(self.grid[k] for k in keys)) if keys else [()]
        out = []
        for values in combos:
            prob, rn = dict(self.problem), dict(self.run)
            for k, v in zip(keys, values):
                if k.startswith("problem."):
                    prob[k[len("problem."):]] = v
                else:
                    rn[k] = v
            self._check_point(prob, rn)
            out.append((prob, rn))
        return out

    def _check_point(self, prob, rn):
        import problems
        from .registry import algorithms, get_algorithm
        name = prob.get("name")
        if name not in problems.available():
            table = "grid" if "problem.name" in self.grid else "problem"
            raise self.error(table, "name" if table == "problem" else "problem.name",
                             f"must be one of the problems factories {problems.available()}; got {name!r}")
        sig = inspect.signature(getattr(problems, name)).parameters
        for k in prob:
            if k != "name" and k not in sig:
                table = "grid" if f"problem.{k}" in self.grid else "problem"
                raise self.error(table, k if table == "problem" else f"problem.{k}",
                                 f"is not an argument of problems.{name}; expected one of "
                                 f"{sorted(p for p in sig if p != 'self')}")
        alg = rn.get("algorithm")
        if alg not in algorithms():
            table = "grid" if "algorithm" in self.grid else "run"
            raise self.error(table, "algorithm", f"must be a registered algorithm {algorithms()}; got {alg!r}")
        own = get_algorithm(alg).hyperparameters()
        allowed = _run_keys() | EXTRA_RUN_KEYS | set(own)
        for k in rn:
            if k != "algorithm" and k not in allowed:
                table = "grid" if k in self.grid else "run"
                raise self.error(table, k, f"is neither an argument of fedtheory.run nor a hyperparameter "
                                           f"of {alg!r}; expected one of {sorted(allowed)}")
        if "reference" in rn and not isinstance(rn["reference"], bool):
            raise self.error("run", "reference", f"must be true or false; got {rn['reference']!r}")


def load(path_or_text, path=None):
    """Parse and check a configuration from a file path or a TOML string.

    Raises :class:`ConfigError` naming the line and key for syntax errors, unknown tables or
    keys, grid values that are not non-empty lists, unknown problems or algorithms.

    Examples
    --------
    >>> from fedtheory.config import load
    >>> cfg = load('''
    ... [problem]
    ... name = "quadratic"
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
    """
    if path is None and isinstance(path_or_text, (str, Path)) and "\n" not in str(path_or_text) \
            and Path(path_or_text).exists():
        path = str(path_or_text)
        text = Path(path).read_text()
    else:
        text = str(path_or_text)
    where = path or "<config>"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: invalid TOML: {e}") from None
    cfg = Config({}, {}, {}, where, text)
    for t in data:
        if t not in TABLES or not isinstance(data[t], dict):
            raise cfg.error(t, None, "unknown table; expected [problem], [run] and optionally [grid]")
    if "problem" not in data:
        raise ConfigError(f"{where}: missing table [problem] (with name = a problems factory)")
    if "run" not in data:
        raise ConfigError(f"{where}: missing table [run] (with algorithm = a registered algorithm)")
    cfg.problem, cfg.run, cfg.grid = dict(data["problem"]), dict(data["run"]), dict(data.get("grid", {}))
    for k, v in cfg.grid.items():
        if not isinstance(v, list) or not v:
            raise cfg.error("grid", k, f"must be a non-empty list of values; got {v!r}")
    if "name" not in cfg.problem and "problem.name" not in cfg.grid:
        raise cfg.error("problem", None, "missing key 'name' (a problems factory)")
    if "algorithm" not in cfg.run and "algorithm" not in cfg.grid:
        raise cfg.error("run", None, "missing key 'algorithm' (a registered algorithm)")
    cfg.points()           # validates every grid point
    return cfg


def run_id(problem_args, run_args):
    """Hash of a run's full configuration (problem and run arguments), 16 hex digits."""
    blob = json.dumps({"problem": problem_args, "run": run_args}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
