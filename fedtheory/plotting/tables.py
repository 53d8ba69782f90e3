"""Results tables: filters, the parameters that vary, one curve per setting, readable names of
algorithms and parameters.

Part of :mod:`fedtheory.plotting`, which re-exports its public names."""
from __future__ import annotations

import numpy as np
import pandas as pd
from .._argcheck import did_you_mean
from .. import registry
from ..registry import algorithms


def _filter_title(filters):
    """A legend header naming the filters applied (None without filters)."""
    return f"runs with {describe_filters(filters)}" if filters else None


def default_metric(df):
    """Choose the metric to plot: suboptimality where it was measured, else the gradient mapping.

    ``suboptimality`` when the runs were measured against a certified optimum, else the squared
    gradient mapping norm.

    Parameters
    ----------
    df : pandas.DataFrame
        Results table.

    Returns
    -------
    str
        ``"suboptimality"`` or ``"grad_mapping_sq"``.
    """
    if "suboptimality" in df and df["suboptimality"].notna().any():
        return "suboptimality"
    return "grad_mapping_sq"


def _param(df, key):
    """The ``param_*`` column that ``key`` names ("lr", "param_lr", "problem.l2", "problem_l2")."""
    cands = [key, "param_" + key, "param_" + key.replace(".", "_")]
    for c in cands:
        if c in df.columns and c.startswith("param_"):
            return c
    names = sorted(c.removeprefix("param_") for c in df.columns if c.startswith("param_"))
    raise ValueError(f"Unknown parameter {key!r} in a filter: the table's parameters are {names}."
                     f"{did_you_mean(key.removeprefix('param_'), names)}")


def _matches(series, value):
    """Rows whose parameter equals ``value`` (a string from the command line, or any scalar)."""
    text = series.astype(str)
    hit = text == str(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        hit |= text.str.lower() == value.lower()
    try:
        num = float(value)
    except (TypeError, ValueError):
        return hit
    return hit | (pd.to_numeric(series, errors="coerce") == num)


def _filter_pairs(filters):
    """``[(key, value)]`` of filters given as a dict or as ``key=value`` strings."""
    pairs = []
    for f in (filters.items() if isinstance(filters, dict) else filters or ()):
        if isinstance(f, str):
            if "=" not in f:
                raise ValueError(f"A filter must be written key=value (e.g. algorithm=fedavg). Got {f!r} instead.")
            k, v = f.split("=", 1)
            pairs.append((k.strip(), v.strip()))
        else:
            pairs.append(tuple(f))
    return pairs


def algorithm_name(name):
    """The display name of a registered algorithm, for legends.

    Parameters
    ----------
    name : str
        A registered name (``"scaffold"``) or anything else.

    Returns
    -------
    str
        The name the algorithm's docstring opens with ("SCAFFOLD", "FedDyn"); ``name`` itself
        for an unregistered name or a docstring that does not open with "Name: ...".

    Examples
    --------
    >>> from fedtheory.plotting import algorithm_name
    >>> algorithm_name("scaffold"), algorithm_name("fedavg"), algorithm_name("my_method")
    ('SCAFFOLD', 'FedAvg', 'my_method')
    """
    algorithms()                                  # imports (registers) every algorithm
    cls = registry.ALGORITHMS.get(str(name))
    head = ((cls.__doc__ or "").strip().split(":", 1) if cls is not None else [""])[0]
    if cls is None or not head or "\n" in head or len(head) > 40:
        return str(name)
    return head.split("(")[0].strip() or str(name)


def param_name(column):
    """A parameter column as words, for legends.

    Parameters
    ----------
    column : str
        A ``param_*`` column, a parameter name or a filter key (``"problem.l2"``).

    Returns
    -------
    str
        Without ``param_`` and ``problem_`` / ``problem.``, underscores as spaces.

    Examples
    --------
    >>> from fedtheory.plotting import param_name
    >>> param_name("param_problem_heterogeneity"), param_name("local_steps"), param_name("problem.l2")
    ('heterogeneity', 'local steps', 'l2')
    """
    name = str(column).removeprefix("param_").replace(".", "_")
    name = name.removeprefix("problem_")
    return name.replace("_", " ")


def _value_text(v, exact=False):
    """A parameter value for a label: numbers with up to four significant digits (``exact``: the
    shortest text that reads back as the same float), text as is."""
    def num(f):
        return repr(float(f)) if exact else f"{f:.4g}"
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return v
        return v if not np.isfinite(f) else num(f)
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, float, np.integer, np.floating)):
        return num(v) if isinstance(v, (float, np.floating)) else str(v)
    return str(v)


def describe_filters(filters):
    """The filters in words, for a title or a legend header.

    Parameters
    ----------
    filters : dict or iterable of str
        As :func:`filter_table` takes them.

    Returns
    -------
    str
        ``"algorithm = SCAFFOLD, lr = 0.1"`` (a key given twice: "algorithm = FedAvg or
        FedDeper"); an empty string for no filter.

    Examples
    --------
    >>> from fedtheory.plotting import describe_filters
    >>> describe_filters(["algorithm=scaffold", "problem.heterogeneity=0.1"])
    'algorithm = SCAFFOLD, heterogeneity = 0.1'
    >>> describe_filters({"algorithm": "fedavg", "lr": 0.05})
    'algorithm = FedAvg, lr = 0.05'
    """
    by_key = {}
    for k, v in _filter_pairs(filters):
        name = param_name(k)
        text = algorithm_name(v) if name == "algorithm" else _value_text(v)
        by_key.setdefault(name, []).append(text)
    return ", ".join(f"{k} = {' or '.join(v)}" for k, v in by_key.items())


def filter_table(df, filters):
    """The rows whose parameters match every filter.

    Parameters
    ----------
    df : pandas.DataFrame
        Results table.
    filters : dict or iterable of str
        ``{"algorithm": "fedavg", "lr": 0.1}`` or ``["algorithm=fedavg", "lr=0.1"]`` (the form of
        ``fedtheory plot --filter``); a key is a parameter name with or without ``param_``, problem
        arguments as ``problem.NAME`` or ``problem_NAME``; numbers match numerically (``0.1`` matches
        ``1e-1``). A key given twice matches either value.

    Returns
    -------
    pandas.DataFrame
        The matching rows; ValueError when none match or a key names no parameter.

    Examples
    --------
    >>> import pandas as pd
    >>> from fedtheory.plotting import filter_table
    >>> t = pd.DataFrame({"run_id": ["a", "b"], "param_algorithm": ["fedavg", "scaffold"], "param_lr": [0.1, 0.1]})
    >>> filter_table(t, ["algorithm=scaffold", "lr=1e-1"]).run_id.tolist()
    ['b']
    """
    pairs = _filter_pairs(filters)
    by_col = {}
    for k, v in pairs:
        by_col.setdefault(_param(df, k), []).append(v)
    keep = np.ones(len(df), dtype=bool)
    for col, values in by_col.items():
        keep &= np.logical_or.reduce([_matches(df[col], v).to_numpy() for v in values])
    if not keep.any():
        hints = ""
        for col, values in by_col.items():         # a value that no run has in that column: the close ones
            known = sorted({_key(v) for v in df[col]})
            for v in values:
                if not _matches(df[col], v).any():
                    hints += did_you_mean(str(v), known).replace(" Did you mean", f" For {col.removeprefix('param_')}, "
                                                                               "did you mean")
        raise ValueError(f"No run matches the filters {[f'{k}={v}' for k, v in pairs]}.{hints}")
    return df.loc[keep]


def _key(v):
    """A parameter value as grouping text; a missing value (None, NaN) is "None"."""
    return "None" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)


def varying_params(df, exclude=("param_seed",)):
    """The ``param_*`` columns that take more than one value (a missing value counts as one).

    Parameters
    ----------
    df : pandas.DataFrame
        Results table.
    exclude : tuple of str, default ("param_seed",)
        Columns never reported.

    Returns
    -------
    list of str
        The varying columns, in the table's order.
    """
    return [c for c in df.columns if c.startswith("param_") and c not in exclude
            and df[c].map(_key).nunique() > 1]


def curve_groups(df, by=None, exclude=("param_seed",), readable=False):
    """``[(label, rows)]``: one entry per setting (the runs that agree on every parameter in ``by``).

    ``by`` defaults to every ``param_*`` column that varies except those in ``exclude`` (the seed),
    so distinct settings are never averaged as if they were seeds. A parameter that a run does not
    have (NaN: e.g. FedDeper's ``star`` on a FedAvg run) is a value of its own, and is left out of
    that curve's label. Labels name the algorithm first, then the other varying parameters;
    ``readable=True`` writes them for a legend: the algorithm's display name
    (:func:`algorithm_name`) and "name = value" with the parameter in words (:func:`param_name`).

    Parameters
    ----------
    df : pandas.DataFrame
        Results table.
    by : list of str, optional
        Columns identifying a curve; default :func:`varying_params` of ``df``.
    exclude : tuple of str, default ("param_seed",)
        Columns left out of the default ``by``.
    readable : bool, default False
        Write the labels for a legend: the algorithms' display names and the parameters in words
        ("heterogeneity = 0.1" rather than "problem_heterogeneity=0.1").

    Returns
    -------
    list of (str, pandas.DataFrame)
        The label and the rows of each curve, sorted by setting.

    Examples
    --------
    >>> import pandas as pd
    >>> from fedtheory.plotting import curve_groups
    >>> t = pd.DataFrame({"run_id": list("abc"), "param_algorithm": ["feddeper"] * 3,
    ...                   "param_star": [None, True, None], "param_seed": [0, 0, 1]})
    >>> [(label, sorted(g.run_id)) for label, g in curve_groups(t)]
    [('feddeper', ['a', 'c']), ('feddeper, star=True', ['b'])]
    >>> [label for label, g in curve_groups(t, readable=True)]
    ['FedDeper', 'FedDeper, star = True']
    """
    by = varying_params(df, exclude) if by is None else list(by)
    by = sorted(by, key=lambda c: (c != "param_algorithm", c))
    alg = algorithm_name if readable else str
    if not by:
        algs = df["param_algorithm"].unique() if "param_algorithm" in df else []
        return [(alg(algs[0]) if len(algs) == 1 else "", df)]
    keys = [df[c].map(_key) for c in by]
    groups = []
    for key, g in df.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        parts = [(b.removeprefix("param_"), k) for b, k in zip(by, key) if k != "None"]
        if "param_algorithm" not in by and "param_algorithm" in g and g["param_algorithm"].nunique() == 1:
            parts.insert(0, ("algorithm", str(g["param_algorithm"].iloc[0])))
        groups.append((parts, g))

    def labels(exact):
        if readable:
            return [", ".join(alg(k) if b == "algorithm" else f"{param_name(b)} = {_value_text(k, exact)}"
                              for b, k in parts) or "(defaults)" for parts, _ in groups]
        return [", ".join(k if b == "algorithm" else f"{b}={k}" for b, k in parts) or "(defaults)"
                for parts, _ in groups]
    names = labels(False)
    if len(set(names)) < len(names):          # four digits merged two settings (0.1 and 0.100004)
        names = labels(True)
    return [(label, g) for label, (_, g) in zip(names, groups)]
