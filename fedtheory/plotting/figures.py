"""The figures: rate plots of results tables, the figure of a results store, a bound against the horizon T.

Part of :mod:`fedtheory.plotting`, which re-exports its public names."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .styles import MARKERS, PREDICTED_COLOR, X_ALIASES, X_LABELS, Y_LABELS, _nonnegative, bound_style, curve_style, log_axis
from .axes import _figure, _legend_entries, _usable_mask, legend_outside, linear_limits, log_limits, log_ticks, mark_off_axis, value_ticks
from .tables import _filter_title, curve_groups, default_metric, filter_table


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
        The figure, one curve per setting.

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
    numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]
    if y not in numeric or y == "round":
        raise ValueError(f"The 'y' parameter of rate_plot must be a numeric column of the table other than "
                         f"'round' {sorted(c for c in numeric if c != 'round')}. Got {y!r} instead.")
    if x not in numeric:
        raise ValueError(f"The 'x' parameter of rate_plot must be one of {sorted(X_ALIASES)} or a numeric column of "
                         f"the table {sorted(numeric)}. Got {x!r} instead.")
    if not len(df):
        raise ValueError("rate_plot: the table has no rows (nothing to plot).")
    if isinstance(by, str):
        by = [by]
    if by is not None:
        by = [b if b in df or f"param_{b}" not in df else f"param_{b}" for b in by]
        missing = [b for b in by if b not in df]
        if missing:
            raise ValueError(f"The 'by' parameter of rate_plot must name columns of the table (param_* names, with "
                             f"or without the prefix). Got {missing} instead.")
    if spread not in ("minmax", "std", None):
        raise ValueError(f"The 'spread' parameter of rate_plot must be one of {{'minmax', 'std', None}}. "
                         f"Got {spread!r} instead.")
    for col in ("round", "run_id"):
        if col not in df:
            raise ValueError(f"rate_plot needs a {col!r} column (one row per evaluated round and run, each run with "
                             f"its own run_id, as a sweep's results table has); the table has {sorted(df.columns)}.")
    if filters:
        df = filter_table(df, filters)
    twice = df.duplicated(["round", "run_id"])
    if twice.any():
        r = df.loc[twice].iloc[0]
        raise ValueError(f"rate_plot: run_id {r['run_id']!r} has several rows at round {r['round']}: each run (each "
                         "seed of a configuration too) needs its own run_id, so that no row is dropped or merged.")
    logy_asked = bool(logy)
    logy = log_axis(y, df[y].to_numpy()) if logy is None else logy
    fig, ax = _figure(ax)
    curves = []
    for label, g in curve_groups(df, by, readable=True):
        piv = g.pivot_table(index="round", columns="run_id", values=y, aggfunc="first", dropna=False)
        fin = np.isfinite(piv.to_numpy(dtype=float))
        last = np.array([piv.index[np.flatnonzero(c)[-1]] if c.any() else piv.index[0] for c in fin.T])
        ended = int(np.sum(last < piv.index[-1])) if piv.shape[1] > 1 else 0
        xs = pd.to_numeric(g.groupby("round")[x].mean(), errors="coerce").reindex(piv.index).to_numpy(dtype=float)
        vals = piv.to_numpy(dtype=float)
        import warnings
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)     # a round no seed evaluated: NaN
            mean = np.nanmean(vals, axis=1)
            lo, hi = np.nanmin(vals, axis=1), np.nanmax(vals, axis=1)
            if spread == "std":
                sd = np.nanstd(vals, axis=1)
                lo, hi = mean - sd, mean + sd
        label = label or Y_LABELS.get(y, y)
        # seeds evaluated at different rounds: a mean at a round over whichever seeds were evaluated
        # there jumps between the seeds (a shape no run has); keep the rounds every seed evaluated
        # (up to where its history ends)
        rows = g.assign(_row=1.0).pivot_table(index="round", columns="run_id", values="_row", aggfunc="size",
                                              fill_value=0).reindex(index=piv.index, columns=piv.columns,
                                                                    fill_value=0).to_numpy() > 0
        last_row = np.array([piv.index[np.flatnonzero(c)[-1]] if c.any() else piv.index[0] for c in rows.T])
        due = piv.index.to_numpy()[:, None] <= last_row[None, :]
        shared = np.all(rows | ~due, axis=1)
        if not shared.all():
            xs, mean, lo, hi = (a[shared] for a in (xs, mean, lo, hi))
            piv = piv.loc[shared]
            label += " (rounds every seed evaluated)"
        if ended:                  # a seed's history ends (it diverged): no mean over the survivors beyond
            t_end = last.min()
            cut = piv.index.to_numpy() > t_end
            mean, lo, hi = (np.where(cut, np.nan, a) for a in (mean, lo, hi))
            label += f" (mean up to round {t_end:g}, where {ended} of {piv.shape[1]} seeds end)"
        curves.append((label, xs, mean, lo, hi, piv.shape[1]))
    band_values = [a for c in curves for a in (c[3], c[4])] if spread else []
    xb = yb = None
    if bound is not None:
        if callable(bound):
            xb = np.sort(pd.to_numeric(df[x], errors="coerce").dropna().unique()).astype(float)
            yb = np.array([bound(v) for v in xb], dtype=float)
        elif isinstance(bound, pd.Series):
            xb, yb = bound.index.to_numpy(dtype=float), bound.to_numpy(dtype=float)
        else:
            try:
                xb, yb = (np.asarray(a, dtype=float) for a in bound)
            except (TypeError, ValueError):
                xb = yb = None
        if xb is None or xb.ndim != 1 or yb.shape != xb.shape:
            raise ValueError("The 'bound' parameter of rate_plot must be a function of x returning one number, "
                             "a pandas Series indexed by x, or a pair (x, y) of equal-length 1-D sequences. Got "
                             + (f"shapes {np.shape(xb)} and {np.shape(yb)}" if xb is not None else repr(bound))
                             + " instead.")
    drawn = [c[2] for c in curves] + band_values + ([yb] if yb is not None else [])
    limits = log_limits(*drawn) if logy else None
    if logy and limits is None:                  # no positive value: a log axis would show nothing
        import warnings
        if logy_asked:
            warnings.warn(f"rate_plot: logy=True but no value of {y!r} is positive; the axis is linear.",
                          UserWarning, stacklevel=2)
        logy = False
    # the limits are set before anything is drawn: matplotlib's autoscaling never sees the data
    # (over hundreds of decades its margins overflow)
    if logy:
        ax.set_yscale("log")
        ax.set_ylim(*limits)
    else:
        ax.set_ylim(*linear_limits(*drawn))
    xl = log_limits(*[c[1] for c in curves], margin=0.02) if logx else None
    if xl is not None:                               # (no positive x, e.g. round 0 alone: a linear axis)
        ax.set_xscale("log")
        ax.set_xlim(*xl)
    else:
        ax.set_xlim(*linear_limits(*[c[1] for c in curves], *([xb] if xb is not None else []), margin=0.02))
    for j, (label, xs, mean, lo, hi, n_seeds) in enumerate(curves):
        style = curve_style(j)
        step = max(1, len(xs) // 6)                   # staggered markers: coinciding curves stay visible
        shown = np.where(_usable_mask(mean) if logy else np.isfinite(mean), mean, np.nan)
        if np.isnan(mean).all():
            label += " (no value)"
        ax.plot(xs, shown, lw=1.6, marker=MARKERS[j % len(MARKERS)], ms=3.5, markevery=(j % step, step), **style,
                label=label + (f" ({n_seeds} seeds)" if n_seeds > 1 and "seeds end)" not in label else ""))
        if spread and n_seeds > 1:
            with np.errstate(invalid="ignore"):
                b_lo, b_hi = (np.clip(lo, *limits), np.clip(hi, *limits)) if logy else (lo, hi)
            ok = np.isfinite(xs) & np.isfinite(b_lo) & np.isfinite(b_hi)   # log: 0 and inf reach the edge
            if ok.any():
                ax.fill_between(xs, np.where(ok, b_lo, np.nan), np.where(ok, b_hi, np.nan), color=style["color"],
                                alpha=0.15, lw=0)
        alone = np.isfinite(shown) & ~np.isfinite(np.r_[np.nan, shown[:-1]]) & ~np.isfinite(np.r_[shown[1:], np.nan])
        if alone.any():                               # a point between gaps: no line reaches it
            ax.plot(xs[alone], shown[alone], linestyle="none", marker=MARKERS[j % len(MARKERS)], ms=3.5,
                    color=style["color"], label="_alone")
        if logy:
            mark_off_axis(ax, xs, mean, *limits, color=style["color"], level=j)
    if yb is not None:
        ax.plot(xb, np.where(_usable_mask(yb) if logy else np.isfinite(yb), yb, np.nan), "k--", lw=1.3,
                label=bound_label)
    if logy:
        log_ticks(ax, "y")
    if xl is not None:
        log_ticks(ax, "x")
    ax.set_xlabel(X_LABELS.get(x, x))
    ax.set_ylabel(Y_LABELS.get(y, y))
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        handles, labels = _legend_entries(ax, nonnegative=_nonnegative(y))
        legend_outside(ax, handles=handles, labels=labels, title=_filter_title(filters), title_fontsize=7)
    return fig


def results_figure(df, y=None, xs=("round", "comm_up", "grad_evals"), title=None, filters=None):
    """Plot a results table against each horizontal axis, one legend outside the panels.

    One panel per horizontal axis (rounds, communication, gradient evaluations); the curves are the
    same in every panel.

    ``xs`` entries may use the command line's names (``"rounds"``, ``"comm"``, ``"grad_evals"``);
    ``filters`` keeps the matching runs (:func:`filter_table`) and is named in the legend's
    header. Curves are labelled with the algorithms' display names and the parameters in words
    (:func:`curve_groups` with ``readable=True``).

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
        The figure, one panel per horizontal axis.

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
    y = y or default_metric(df)
    xs = [X_ALIASES.get(x, x) for x in ([xs] if isinstance(xs, str) else xs)]
    if not xs:
        raise ValueError("The 'xs' parameter of results_figure must name at least one horizontal axis "
                         f"({sorted(X_ALIASES)} or a column). Got an empty sequence instead.")
    n_curves = len(curve_groups(df))
    fig, axes = plt.subplots(1, len(xs), figsize=(4.2 * len(xs) + 2.6, 3.6 + 0.05 * max(0, n_curves - 20)),
                             squeeze=False, layout="constrained")
    for ax, x in zip(axes[0], xs):
        rate_plot(df, y=y, x=x, ax=ax, legend=False)
    handles, labels = _legend_entries(axes[0][0], nonnegative=_nonnegative(y))
    fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False,
               ncols=1 + len(labels) // 30, title=_filter_title(filters), title_fontsize=7)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def bound_vs_T(T, measured, stderr=None, bounds=None, predicted_slope=None, ax=None, title=None,
               ylabel=None):
    """Measured left-hand side against T with a theorem's right-hand side(s), log-log.

    Parameters
    ----------
    T : array_like
        The horizontal values (rounds T); each gets a labelled tick.
    measured : array_like
        The measured left-hand side at each T (black, filled circles).
    stderr : array_like, optional
        Its standard error: error bars of two standard errors.
    bounds : dict, optional
        ``{variant: values at each T}``, each drawn in its :func:`bound_style`.
    predicted_slope : float, optional
        The theorem's order: a dashed line of slope ``predicted_slope``, drawn above the measured
        curve and anchored at the last measured point (the legend says which T).
    ax : matplotlib.axes.Axes, optional
        Draw into these axes; default a new figure.
    title : str, optional
        Axes title.
    ylabel : str, optional
        The quantity on the vertical axis (e.g. the theorem's left-hand side written out);
        default "left-hand side of the theorem".

    Returns
    -------
    matplotlib.figure.Figure
        The legend sits to the right of the data. Values the log axis cannot show are marked at
        its edge (:func:`mark_off_axis`): 0 or below at the bottom, +inf at the top; NaN is left out.

    Examples
    --------
    >>> from fedtheory.plotting import bound_vs_T
    >>> fig = bound_vs_T([10, 20, 40], [1.0, 0.5, 0.25], bounds={"printed": [4, 2, 1]}, predicted_slope=-1)
    >>> [ln.get_label() for ln in fig.axes[0].lines][1:]
    ['bound: printed', 'predicted order $T^{-1}$ (anchored at T = 40)']
    """
    fig, ax = _figure(ax, figsize=(6.8, 3.8))
    T = np.asarray(T, dtype=float).ravel()
    m = np.asarray(measured, dtype=float).ravel()
    if not T.size or not np.all(np.isfinite(T) & (T > 0)):
        raise ValueError(f"The 'T' parameter of bound_vs_T must be one or more finite horizons T > 0 (a log axis). "
                         f"Got {T.tolist()} instead.")
    if m.shape != T.shape:
        raise ValueError(f"The 'measured' parameter of bound_vs_T must have one value per T ({T.size}). "
                         f"Got {m.size} instead.")
    bounds = {k: np.asarray(v, dtype=float).ravel() for k, v in (bounds or {}).items()}
    for k, v in bounds.items():
        if v.shape != T.shape:
            raise ValueError(f"The 'bounds' parameter of bound_vs_T must have one value per T ({T.size}) for "
                             f"each variant. Got {v.size} for {k!r} instead.")
    se = None if stderr is None else np.abs(np.nan_to_num(np.asarray(stderr, dtype=float).ravel(),
                                                           nan=0.0, posinf=0.0, neginf=0.0))
    if se is not None and se.shape != T.shape:
        raise ValueError(f"The 'stderr' parameter of bound_vs_T must have one value per T ({T.size}). "
                         f"Got {se.size} instead.")
    okT = _usable_mask(T)
    pred, anchor = None, None
    ok_m = np.flatnonzero(okT & _usable_mask(m))
    if predicted_slope is not None and np.isfinite(predicted_slope) and ok_m.size:
        anchor = ok_m[-1]
        with np.errstate(all="ignore"):
            pred = m[anchor] * np.exp(predicted_slope * (np.log(np.where(okT, T, np.nan)) - np.log(T[anchor])))
    with np.errstate(all="ignore"):
        ends = [m + 2 * se, m - 2 * se] if se is not None else []
    limits = log_limits(m, *bounds.values(), *ends) or (0.1, 10.0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(*limits)                            # before drawing: no autoscaling over the data
    ax.set_xlim(*(log_limits(T, margin=0.04) or (1.0, 10.0)))
    shown = np.where(okT & _usable_mask(m), m, np.nan)
    if se is not None:
        with np.errstate(all="ignore"):
            low = np.clip(np.where(m - 2 * se > 0, m - 2 * se, limits[0]), *limits)
            high = np.clip(m + 2 * se, *limits)
        yerr = np.where(np.isfinite(shown), [shown - low, high - shown], np.nan)
        yerr = np.maximum(np.nan_to_num(yerr, nan=0.0), 0.0)
        ax.errorbar(T, shown, yerr=yerr, marker="o", ms=4, label="measured (mean, 2 s.e.)", zorder=2,
                    **bound_style("measured"))
    else:
        ax.plot(T, shown, marker="o", ms=4, label="measured", zorder=2, **bound_style("measured"))
    mark_off_axis(ax, np.where(okT, T, np.nan), m, *limits, color="black")
    for lab, b in bounds.items():
        ax.plot(T, np.where(okT & _usable_mask(b), b, np.nan), lw=1.6, label=f"bound: {lab}", zorder=1.5,
                **bound_style(lab))
        mark_off_axis(ax, np.where(okT, T, np.nan), b, *limits, color=bound_style(lab)["color"])
    if pred is not None:
        ax.plot(T, np.where(_usable_mask(pred), pred, np.nan), color=PREDICTED_COLOR, ls=(0, (5, 3)), lw=1.5,
                zorder=3, label=f"predicted order $T^{{{predicted_slope:g}}}$ (anchored at T = {T[anchor]:g})")
    value_ticks(ax, T)                              # the measured T values, not crowded minor labels
    log_ticks(ax, "y")
    ax.set_xlabel("rounds T")
    ax.set_ylabel(ylabel or "left-hand side of the theorem")
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    handles, labels = _legend_entries(ax)
    legend_outside(ax, handles=handles, labels=labels)
    return fig
