"""Publication-quality rate plots from results tables (library code: returns Figures, never shows).

The tables are those of :func:`fedtheory.sweep.sweep` (``results.parquet``) or any frame with a
``run_id``, ``param_*`` columns and history metrics.

Conventions shared by every figure of the project (the command line, the ``fedtheory verify``
report and the scripts in ``figures/``):

* one curve per **setting**: runs that agree on every ``param_*`` column except the seed
  (:func:`curve_groups`); the curve is the mean over the setting's seeds, with a min-max band;
* curve ``j`` gets the colour/line-style pair :func:`curve_style` ``(j)``: ten colours, then the
  same ten colours with the next line style, so no pair repeats before 40 curves;
* a theorem's bound variant ("printed", "corrected", ...) always has the colour and line style of
  :data:`BOUND_STYLES` (:func:`bound_style`);
* accuracies are drawn on a linear axis, suboptimality, gradient norms and distances on a
  logarithmic one (:func:`log_axis`); legends sit outside the data.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

X_LABELS = {"round": "communication rounds", "comm_up": "vectors sent to the server",
            "comm_down": "vectors sent to the clients", "grad_evals": "stochastic gradient evaluations",
            "sample_grads": "per-sample gradients"}
Y_LABELS = {"suboptimality": r"$F(x^t) - F^*$", "grad_mapping_sq": r"$\|G(x^t)\|^2$ (squared gradient mapping)",
            "dist_sq": r"$\|x^t - x^*\|^2$", "value": r"$F(x^t)$", "z_grad_sq": r"$\|\nabla F(z^t)\|^2$",
            "train_acc": "training accuracy", "test_acc": "test accuracy"}
#: Names accepted by ``fedtheory plot --x`` and :func:`rate_plot`'s ``x``, and the column each draws.
X_ALIASES = {"rounds": "round", "comm": "comm_up", "grad_evals": "grad_evals"}
#: Metrics always drawn on a logarithmic axis (they decay over decades towards 0).
LOG_METRICS = ("suboptimality", "grad_mapping_sq", "dist_sq", "z_grad_sq")
#: Markers of the curves of :func:`rate_plot` (one per curve, placed at staggered points so that
#: curves that coincide stay visible).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h")
#: Line styles cycled after every ten colours (:func:`curve_style`).
LINESTYLES = ("-", "--", ":", "-.")
#: Colour and line style of each bound variant, in every figure of the project (verify report,
#: ``figures/`` scripts). Variants not listed get :data:`OTHER_BOUND_STYLES` in order of appearance.
BOUND_STYLES = {
    "measured": dict(color="black", linestyle="-"),
    "printed": dict(color="tab:red", linestyle="--"),
    "corrected": dict(color="tab:green", linestyle="-"),
    "derived": dict(color="tab:blue", linestyle="-."),
    "proof": dict(color="tab:purple", linestyle=":"),
    "lemma2_corrected": dict(color="tab:orange", linestyle="-."),
    "lemma3_proof": dict(color="tab:brown", linestyle=":"),
    "theorem_L_F2": dict(color="tab:pink", linestyle="-."),
    "lemmas_corrected": dict(color="tab:olive", linestyle="--"),
}
OTHER_BOUND_STYLES = (dict(color="tab:cyan", linestyle="--"), dict(color="tab:gray", linestyle="-."),
                      dict(color="gold", linestyle=":"))


def curve_style(j):
    """Colour and line style of the ``j``-th curve of a figure (keyword arguments of ``ax.plot``).

    Ten colours (matplotlib's ``tab10``), then the same colours with the next of :data:`LINESTYLES`:
    the first 40 curves have pairwise distinct (colour, line style) pairs, and two curves of the same
    colour always differ in line style.

    Parameters
    ----------
    j : int
        Index of the curve, >= 0.

    Returns
    -------
    dict
        ``{"color": ..., "linestyle": ...}``.

    Examples
    --------
    >>> from fedtheory.plotting import curve_style
    >>> curve_style(0), curve_style(10)
    ({'color': 'C0', 'linestyle': '-'}, {'color': 'C0', 'linestyle': '--'})
    >>> len({tuple(curve_style(j).values()) for j in range(40)})
    40
    """
    if j < 0:
        raise ValueError(f"The 'j' parameter of curve_style must be a non-negative integer. Got {j!r} instead.")
    return {"color": f"C{j % 10}", "linestyle": LINESTYLES[(j // 10) % len(LINESTYLES)]}


_OTHER_SEEN = {}


def bound_style(variant):
    """Colour and line style of a bound variant: :data:`BOUND_STYLES`, the same in every figure.

    Parameters
    ----------
    variant : str
        A variant name ("printed", "corrected", ...) or "measured"; any other name gets the next
        of a few spare styles, the same for that name for the rest of the session.

    Returns
    -------
    dict
        ``{"color": ..., "linestyle": ...}``.

    Examples
    --------
    >>> from fedtheory.plotting import bound_style
    >>> bound_style("printed")
    {'color': 'tab:red', 'linestyle': '--'}
    """
    if variant in BOUND_STYLES:
        return dict(BOUND_STYLES[variant])
    if variant not in _OTHER_SEEN:
        _OTHER_SEEN[variant] = OTHER_BOUND_STYLES[len(_OTHER_SEEN) % len(OTHER_BOUND_STYLES)]
    return dict(_OTHER_SEEN[variant])


def log_axis(y, values=None):
    """Whether metric ``y`` is drawn on a logarithmic axis.

    Accuracies (a name containing ``acc``) are linear; :data:`LOG_METRICS` and ``*_sq`` norms are
    logarithmic; any other metric is logarithmic only when its values are positive and span more
    than two decades.

    Parameters
    ----------
    y : str
        Metric name (a column of a results table).
    values : array_like, optional
        The metric's values; needed only for metrics that are neither accuracies nor known
        logarithmic ones.

    Returns
    -------
    bool
        True for a logarithmic axis.

    Examples
    --------
    >>> from fedtheory.plotting import log_axis
    >>> log_axis("test_acc"), log_axis("suboptimality"), log_axis("value", [0.7, 0.5, 0.3])
    (False, True, False)
    """
    if "acc" in y:
        return False
    if y in LOG_METRICS or y.endswith("_sq"):
        return True
    v = np.asarray(values if values is not None else [], dtype=float)
    v = v[np.isfinite(v)]
    return bool(v.size and (v > 0).all() and v.max() > 100 * v.min())


def value_ticks(ax, values, axis="x"):
    """Ticks of a logarithmic axis at the measured values, written as plain numbers (no minor labels).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes, changed in place.
    values : array_like
        The tick positions (duplicates are dropped).
    axis : {"x", "y"}, default "x"
        Which axis.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from fedtheory.plotting import value_ticks
    >>> fig, ax = plt.subplots()
    >>> _ = ax.loglog([10, 40, 160], [1.0, 0.5, 0.25]); value_ticks(ax, [10, 40, 160])
    >>> [t.get_text() for t in ax.get_xticklabels()]
    ['10', '40', '160']
    """
    from matplotlib.ticker import NullFormatter
    values = sorted(set(float(v) for v in values))
    getattr(ax, f"set_{axis}ticks")(values, [f"{v:g}" for v in values])
    getattr(ax, f"{axis}axis").set_minor_formatter(NullFormatter())


def log_ticks(ax, axis="y"):
    """Readable labels on a logarithmic axis: plain numbers at 1, 2 and 5 times the powers of ten
    when it spans less than two decades; powers of ten at a regular step of whole decades (at most
    about eight labels) when it spans many.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes, changed in place (nothing happens unless the axis limits are positive).
    axis : {"x", "y"}, default "y"
        Which axis.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from fedtheory.plotting import log_ticks
    >>> fig, ax = plt.subplots()
    >>> _ = ax.semilogy([1, 2], [0.12, 0.5]); log_ticks(ax)
    >>> [t.get_text() for t in ax.get_yticklabels() if t.get_text()][:3]
    ['0.1', '0.2', '0.5']
    """
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogFormatterSciNotation, LogLocator, NullFormatter
    lo, hi = getattr(ax, f"get_{axis}lim")()
    a = getattr(ax, f"{axis}axis")
    if not (lo > 0 and hi > lo):
        return
    decades = np.log10(hi / lo)
    if decades < 2:
        a.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        a.set_minor_formatter(NullFormatter())
    elif decades > 8:
        step = int(np.ceil(decades / 8))
        first, last = int(np.ceil(np.log10(lo) / step)) * step, int(np.floor(np.log10(hi)))
        a.set_major_locator(FixedLocator([10.0 ** k for k in range(first, last + 1, step)]))
        a.set_major_formatter(LogFormatterSciNotation())
        a.set_minor_formatter(NullFormatter())


def default_metric(df):
    """``suboptimality`` when the runs were measured against a certified optimum, else the
    squared gradient mapping norm.

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
    raise ValueError(f"Unknown parameter {key!r} in a filter: the table's parameters are {names}.")


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
    pairs = []
    for f in (filters.items() if isinstance(filters, dict) else filters or ()):
        if isinstance(f, str):
            if "=" not in f:
                raise ValueError(f"A filter must be written key=value (e.g. algorithm=fedavg). Got {f!r} instead.")
            k, v = f.split("=", 1)
            pairs.append((k.strip(), v.strip()))
        else:
            pairs.append(tuple(f))
    by_col = {}
    for k, v in pairs:
        by_col.setdefault(_param(df, k), []).append(v)
    keep = np.ones(len(df), dtype=bool)
    for col, values in by_col.items():
        keep &= np.logical_or.reduce([_matches(df[col], v).to_numpy() for v in values])
    if not keep.any():
        raise ValueError(f"No run matches the filters {[f'{k}={v}' for k, v in pairs]}.")
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


def curve_groups(df, by=None, exclude=("param_seed",)):
    """``[(label, rows)]``: one entry per setting (the runs that agree on every parameter in ``by``).

    ``by`` defaults to every ``param_*`` column that varies except those in ``exclude`` (the seed),
    so distinct settings are never averaged as if they were seeds. A parameter that a run does not
    have (NaN: e.g. FedDeper's ``star`` on a FedAvg run) is a value of its own, and is left out of
    that curve's label. Labels name the algorithm first, then the other varying parameters.

    Parameters
    ----------
    df : pandas.DataFrame
        Results table.
    by : list of str, optional
        Columns identifying a curve; default :func:`varying_params` of ``df``.
    exclude : tuple of str, default ("param_seed",)
        Columns left out of the default ``by``.

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
    """
    by = varying_params(df, exclude) if by is None else list(by)
    by = sorted(by, key=lambda c: (c != "param_algorithm", c))
    if not by:
        algs = df["param_algorithm"].unique() if "param_algorithm" in df else []
        return [(str(algs[0]) if len(algs) == 1 else "", df)]
    keys = [df[c].map(_key) for c in by]
    out = []
    for key, g in df.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        parts = [(b.removeprefix("param_"), k) for b, k in zip(by, key) if k != "None"]
        if "param_algorithm" not in by and "param_algorithm" in g and g["param_algorithm"].nunique() == 1:
            parts.insert(0, ("algorithm", str(g["param_algorithm"].iloc[0])))
        label = ", ".join(k if b == "algorithm" else f"{b}={k}" for b, k in parts) or "(defaults)"
        out.append((label, g))
    return out


def _figure(ax, figsize=(6.5, 4)):
    import matplotlib.pyplot as plt
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


def legend_outside(ax, **kw):
    """A legend to the right of the axes, outside the data.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes whose curves are listed.
    **kw
        Passed to ``ax.legend`` (overriding the placement and font size).

    Returns
    -------
    matplotlib.legend.Legend
    """
    return ax.legend(**{"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0,
                        "fontsize": 7, "frameon": False, **kw})


def rate_plot(df, y=None, x="round", by=None, ax=None, spread="minmax", bound=None,
              bound_label="bound", logx=False, logy=None, title=None, filters=None, legend=True):
    r"""Plot ``y`` against ``x`` for each setting, mean over seeds with their spread.

    Parameters
    ----------
    df : pandas.DataFrame
        Results table (one row per evaluated round and run).
    y : str, optional
        Metric column; default :func:`default_metric`.
    x : {"round", "comm_up", "comm_down", "grad_evals", "sample_grads", "rounds", "comm"}
        Horizontal axis (its mean over seeds at each round); ``"rounds"`` and ``"comm"`` are the
        command line's names of ``"round"`` and ``"comm_up"``.
    by : list of str, optional
        Columns identifying a curve; default every varying ``param_*`` column except the seed
        (:func:`curve_groups`).
    ax : matplotlib Axes, optional
        Draw into these axes; default a new figure.
    spread : {"minmax", "std", None}
        Band drawn around the mean over seeds.
    bound : callable, pandas.Series or (x, y) arrays, optional
        A theorem's right-hand side overlaid as a dashed black line.
    bound_label : str, default "bound"
        Legend entry of ``bound``.
    logx : bool
        Logarithmic horizontal axis.
    logy : bool, optional
        Logarithmic vertical axis; default :func:`log_axis` (linear for accuracies).
    title : str, optional
        Axes title.
    filters : dict or list of str, optional
        Keep only the matching runs (:func:`filter_table`).
    legend : bool
        Draw the legend (outside the data, to the right).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import fedtheory as ft, problems, pandas as pd
    >>> from fedtheory.plotting import rate_plot
    >>> p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
    >>> rows = []
    >>> for name in ("fedavg", "scaffold"):
    ...     for seed in (0, 1):
    ...         h = ft.run(p, name, rounds=30, local_steps=3, lr=0.1, seed=seed).history
    ...         rows.append(h.assign(run_id=f"{name}{seed}", param_algorithm=name, param_seed=seed))
    >>> fig = rate_plot(pd.concat(rows), y="grad_mapping_sq")
    >>> len(fig.axes[0].lines)
    2
    """
    y = y or default_metric(df)
    x = X_ALIASES.get(x, x)
    if y not in df:
        raise ValueError(f"The 'y' parameter of rate_plot must be a column of the table "
                         f"{sorted(df.columns)}. Got {y!r} instead.")
    if x not in df:
        raise ValueError(f"The 'x' parameter of rate_plot must be one of {sorted(X_ALIASES)} or a column of "
                         f"the table {sorted(df.columns)}. Got {x!r} instead.")
    if filters:
        df = filter_table(df, filters)
    logy = log_axis(y, df[y].to_numpy()) if logy is None else logy
    fig, ax = _figure(ax)
    groups = curve_groups(df, by)
    floor = np.finfo(float).tiny if logy else -np.inf
    for j, (label, g) in enumerate(groups):
        label = label or Y_LABELS.get(y, y)
        piv = g.pivot_table(index="round", columns="run_id", values=y, aggfunc="first", dropna=False)
        xs = g.groupby("round")[x].mean().reindex(piv.index)
        vals = piv.to_numpy(dtype=float)
        with np.errstate(all="ignore"):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)     # a round no seed evaluated: NaN
                mean = np.nanmean(np.where(vals > 0, vals, np.nan), axis=1) if logy else np.nanmean(vals, axis=1)
                lo, hi = np.nanmin(vals, axis=1), np.nanmax(vals, axis=1)
                if spread == "std":
                    sd = np.nanstd(vals, axis=1)
                    lo, hi = mean - sd, mean + sd
        style = curve_style(j)
        n_seeds = piv.shape[1]
        step = max(1, len(xs) // 6)                   # staggered markers: coinciding curves stay visible
        ax.plot(xs, np.maximum(mean, floor), lw=1.6, marker=MARKERS[j % len(MARKERS)], ms=3.5,
                markevery=(j % step, step), **style, label=label + (f" ({n_seeds} seeds)" if n_seeds > 1 else ""))
        if spread and n_seeds > 1:
            ax.fill_between(xs, np.maximum(lo, floor), np.maximum(hi, floor), color=style["color"], alpha=0.15, lw=0)
    if bound is not None:
        if callable(bound):
            xb = np.sort(df[x].unique())
            yb = np.array([bound(v) for v in xb])
        elif isinstance(bound, pd.Series):
            xb, yb = bound.index.to_numpy(), bound.to_numpy()
        else:
            xb, yb = map(np.asarray, bound)
        ax.plot(xb, yb, "k--", lw=1.3, label=bound_label)
    if logy:
        ax.set_yscale("log")
        log_ticks(ax, "y")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(X_LABELS.get(x, x))
    ax.set_ylabel(Y_LABELS.get(y, y))
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        legend_outside(ax)
    return fig


def results_figure(df, y=None, xs=("round", "comm_up", "grad_evals"), title=None, filters=None):
    """One panel per horizontal axis (rounds, communication, gradient evaluations), one legend
    outside the panels (the curves are the same in every panel).

    Parameters
    ----------
    df : pandas.DataFrame
        Results table (one row per evaluated round and run).
    y : str, optional
        Metric column; default :func:`default_metric`.
    xs : sequence of str, default ("round", "comm_up", "grad_evals")
        One panel per entry (the ``x`` of :func:`rate_plot`); the command line's names
        ``"rounds"`` and ``"comm"`` are accepted.
    title : str, optional
        Figure title.
    filters : dict or list of str, optional
        Keep only the matching runs (:func:`filter_table`).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> from fedtheory.plotting import results_figure
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> h = ft.run(p, "fedavg", rounds=10, lr=0.1).history.assign(run_id="a", param_algorithm="fedavg")
    >>> len(results_figure(h, y="grad_mapping_sq").axes)
    3
    """
    import matplotlib.pyplot as plt
    if filters:
        df = filter_table(df, filters)
    xs = [X_ALIASES.get(x, x) for x in ([xs] if isinstance(xs, str) else xs)]
    n_curves = len(curve_groups(df))
    fig, axes = plt.subplots(1, len(xs), figsize=(4.2 * len(xs) + 2.6, 3.6 + 0.05 * max(0, n_curves - 20)),
                             squeeze=False, layout="constrained")
    for ax, x in zip(axes[0], xs):
        rate_plot(df, y=y, x=x, ax=ax, legend=False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False,
               ncols=1 + len(labels) // 30)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def bound_vs_T(T, measured, stderr=None, bounds=None, predicted_slope=None, ax=None, title=None):
    """Measured left-hand side against T with a theorem's right-hand side(s), log-log.

    The legend sits to the right of the data.

    Parameters
    ----------
    T : array_like
        Horizons (rounds or local steps), one per measurement.
    measured : array_like
        Measured left-hand side at each T (mean over seeds).
    stderr : array_like, optional
        Standard error of each measurement; drawn as two-standard-error bars.
    bounds : dict of str to array_like, optional
        Right-hand side of each bound variant at each T, each drawn in its :func:`bound_style`.
    predicted_slope : float, optional
        The theorem's order in T (e.g. -0.5), drawn through the last measured point.
    ax : matplotlib.axes.Axes, optional
        Draw into these axes; default a new figure.
    title : str, optional
        Axes title.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> from fedtheory.plotting import bound_vs_T
    >>> fig = bound_vs_T([10, 20, 40], [1.0, 0.5, 0.25], bounds={"printed": [4, 2, 1]}, predicted_slope=-1)
    >>> len(fig.axes[0].lines) >= 3
    True
    """
    fig, ax = _figure(ax, figsize=(6.8, 3.8))
    T = np.asarray(T, float)
    m = np.asarray(measured, float)
    if stderr is not None:
        ax.errorbar(T, m, yerr=2 * np.nan_to_num(np.asarray(stderr, float)), fmt="o", ms=4,
                    label="measured (mean, 2 s.e.)", **bound_style("measured"))
    else:
        ax.plot(T, m, marker="o", ms=4, label="measured", **bound_style("measured"))
    for lab, b in (bounds or {}).items():
        ax.plot(T, b, lw=1.6, label=f"bound: {lab}", **bound_style(lab))
    if predicted_slope is not None:
        ax.plot(T, m[-1] * (T / T[-1]) ** predicted_slope, color="0.5", lw=1,
                label=f"predicted order $T^{{{predicted_slope:g}}}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    value_ticks(ax, T)                              # the measured T values, not crowded minor labels
    log_ticks(ax, "y")
    ax.set_xlabel("rounds T")
    ax.set_ylabel("left-hand side of the theorem")
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
    return fig
