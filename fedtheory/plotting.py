"""Publication-quality rate plots from results tables (library code: returns Figures, never shows).

The tables are those of :func:`fedtheory.sweep.sweep` (``results.parquet``) or any frame with a
``run_id``, ``param_*`` columns and history metrics.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

X_LABELS = {"round": "communication rounds", "comm_up": "vectors sent to the server",
            "comm_down": "vectors sent to the clients", "grad_evals": "stochastic gradient evaluations",
            "sample_grads": "per-sample gradients"}
Y_LABELS = {"suboptimality": r"$F(x^t) - F^*$", "grad_mapping_sq": r"$\|G(x^t)\|^2$ (squared gradient mapping)",
            "dist_sq": r"$\|x^t - x^*\|^2$", "value": r"$F(x^t)$", "z_grad_sq": r"$\|\nabla F(z^t)\|^2$"}


def _figure(ax, figsize=(5.5, 4)):
    import matplotlib.pyplot as plt
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax


def default_metric(df):
    """``suboptimality`` when the runs were measured against a certified optimum, else the
    squared gradient mapping norm."""
    if "suboptimality" in df and df["suboptimality"].notna().any():
        return "suboptimality"
    return "grad_mapping_sq"


def varying_params(df, exclude=("param_seed",)):
    """The ``param_*`` columns that take more than one value (the curves' labels)."""
    return [c for c in df.columns if c.startswith("param_") and c not in exclude
            and df[c].astype(str).nunique() > 1]


def rate_plot(df, y=None, x="round", by=None, ax=None, spread="minmax", bound=None,
              bound_label="bound", logx=False, title=None):
    r"""Plot ``y`` against ``x`` for each configuration, mean over seeds with their spread.

    Parameters
    ----------
    df : pandas.DataFrame
        Results table (one row per evaluated round and run).
    y : str, optional
        Metric column; default :func:`default_metric`.
    x : {"round", "comm_up", "comm_down", "grad_evals", "sample_grads"}
        Horizontal axis (its mean over seeds at each round).
    by : list of str, optional
        Columns identifying a curve; default the varying ``param_*`` columns except the seed.
    ax : matplotlib Axes, optional
    spread : {"minmax", "std", None}
        Band drawn around the mean over seeds.
    bound : callable, pandas.Series or (x, y) arrays, optional
        A theorem's right-hand side overlaid as a dashed black line.
    logx : bool
        Logarithmic horizontal axis (the vertical axis is always logarithmic).

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
    if y not in df:
        raise ValueError(f"The 'y' parameter of rate_plot must be a column of the table "
                         f"{sorted(df.columns)}. Got {y!r} instead.")
    if x not in df:
        raise ValueError(f"The 'x' parameter of rate_plot must be a column of the table "
                         f"{sorted(df.columns)}. Got {x!r} instead.")
    by = varying_params(df) if by is None else list(by)
    fig, ax = _figure(ax)
    groups = df.groupby(by, sort=True) if by else [((), df)]
    floor = np.finfo(float).tiny
    for j, (key, g) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{b.removeprefix('param_')}={k}" for b, k in zip(by, key)) or y
        piv = g.pivot_table(index="round", columns="run_id", values=y, aggfunc="first")
        xs = g.groupby("round")[x].mean().reindex(piv.index)
        vals = piv.to_numpy(dtype=float)
        mean = np.nanmean(np.where(vals > 0, vals, np.nan), axis=1) if y != "value" else np.nanmean(vals, axis=1)
        color = f"C{j % 10}"
        ax.plot(xs, np.maximum(mean, floor), color=color, lw=1.6, label=label + (f" ({piv.shape[1]} seeds)" if piv.shape[1] > 1 else ""))
        if spread and piv.shape[1] > 1:
            if spread == "std":
                sd = np.nanstd(vals, axis=1)
                lo, hi = mean - sd, mean + sd
            else:
                lo, hi = np.nanmin(vals, axis=1), np.nanmax(vals, axis=1)
            ax.fill_between(xs, np.maximum(lo, floor), np.maximum(hi, floor), color=color, alpha=0.2, lw=0)
    if bound is not None:
        if callable(bound):
            xb = np.sort(df[x].unique())
            yb = np.array([bound(v) for v in xb])
        elif isinstance(bound, pd.Series):
            xb, yb = bound.index.to_numpy(), bound.to_numpy()
        else:
            xb, yb = map(np.asarray, bound)
        ax.plot(xb, yb, "k--", lw=1.3, label=bound_label)
    ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(X_LABELS.get(x, x))
    ax.set_ylabel(Y_LABELS.get(y, y))
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def results_figure(df, y=None, xs=("round", "comm_up", "grad_evals"), title=None):
    """One panel per horizontal axis (rounds, communication, gradient evaluations).

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
    fig, axes = plt.subplots(1, len(xs), figsize=(5 * len(xs), 4), squeeze=False)
    for j, (ax, x) in enumerate(zip(axes[0], xs)):
        rate_plot(df, y=y, x=x, ax=ax)
        if j > 0:
            ax.get_legend().remove()           # one legend (the curves are the same in every panel)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def bound_vs_T(T, measured, stderr=None, bounds=None, predicted_slope=None, ax=None, title=None):
    """Measured left-hand side against T with a theorem's right-hand side(s), log-log.

    ``bounds`` maps labels to arrays; ``predicted_slope`` draws the theorem's order through the
    last measured point. Returns the Figure.

    Examples
    --------
    >>> from fedtheory.plotting import bound_vs_T
    >>> fig = bound_vs_T([10, 20, 40], [1.0, 0.5, 0.25], bounds={"printed": [4, 2, 1]}, predicted_slope=-1)
    >>> len(fig.axes[0].lines) >= 3
    True
    """
    fig, ax = _figure(ax)
    T = np.asarray(T, float)
    m = np.asarray(measured, float)
    if stderr is not None:
        ax.errorbar(T, m, yerr=2 * np.nan_to_num(np.asarray(stderr, float)), fmt="o-", color="k",
                    label="measured (mean, 2 s.e.)")
    else:
        ax.plot(T, m, "o-", color="k", label="measured")
    for j, (lab, b) in enumerate((bounds or {}).items()):
        ax.plot(T, b, ["--", "-", ":"][j % 3], color=f"C{[3, 2, 0][j % 3]}", label=f"bound: {lab}")
    if predicted_slope is not None:
        ax.plot(T, m[-1] * (T / T[-1]) ** predicted_slope, color="0.5", lw=1,
                label=f"predicted order $T^{{{predicted_slope:g}}}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rounds T")
    ax.set_ylabel("left-hand side of the theorem")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
