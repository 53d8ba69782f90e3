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
#: ``figures/`` scripts). The colours are neutral: none is red or green, so a colour never says
#: "violated" or "holds" (figures mark a violation with a hatch, a marker or a word instead).
#: Variants not listed get :data:`OTHER_BOUND_STYLES` in order of appearance.
BOUND_STYLES = {
    "measured": dict(color="black", linestyle="-"),
    "printed": dict(color="tab:purple", linestyle="--"),
    "corrected": dict(color="tab:blue", linestyle="-"),
    "derived": dict(color="tab:cyan", linestyle="-."),
    "proof": dict(color="tab:brown", linestyle=":"),
    "lemma2_corrected": dict(color="tab:olive", linestyle="-."),
    "lemma3_proof": dict(color="tab:pink", linestyle=":"),
    "theorem_L_F2": dict(color="tab:gray", linestyle="-."),
    "lemmas_corrected": dict(color="darkgoldenrod", linestyle="--"),
}
OTHER_BOUND_STYLES = (dict(color="teal", linestyle="--"), dict(color="slateblue", linestyle="-."),
                      dict(color="sienna", linestyle=":"))
#: Colour of a theorem's predicted order (a dashed line drawn above the measured curve).
PREDICTED_COLOR = "tab:orange"
#: Largest number of decades a logarithmic value axis shows (:func:`log_limits`): values further
#: below the largest one leave the axis at its bottom, so that one value at rounding level never
#: squeezes the rest of the figure into a few pixels.
MAX_DECADES = 40
#: Positive values outside this range are not used to place a logarithmic axis (10**±300: beyond
#: them matplotlib's log transform loses the ticks; they still leave the axis at its edge).
LOG_RANGE = (1e-300, 1e300)


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
    {'color': 'tab:purple', 'linestyle': '--'}
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
    return bool(v.size and (v > 0).all() and v.max() / 100 > v.min())      # (100 v.min() could overflow)


def _usable_mask(values):
    """Where ``values`` are finite, positive and inside :data:`LOG_RANGE` (the values that may
    place a logarithmic axis)."""
    v = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.isfinite(v) & (v >= LOG_RANGE[0]) & (v <= LOG_RANGE[1])


def _usable(values):
    """The values of :func:`_usable_mask`, flattened."""
    v = np.asarray(values, dtype=float).ravel()
    return v[_usable_mask(v)]


def log_limits(*arrays, max_decades=MAX_DECADES, margin=0.05):
    """Limits ``(lo, hi)`` of a logarithmic axis showing the positive values of ``arrays``.

    Zeros, negative values, NaN and infinities are left out (figures mark them at the axis'
    edge, see :func:`rate_plot`); the axis spans at most ``max_decades`` below the largest value,
    with a margin of ``margin`` times the span (at least 0.15 decade) on each side.

    Parameters
    ----------
    *arrays : array_like
        Values drawn on the axis.
    max_decades : float
        Largest number of decades between the largest value and the axis' bottom.
    margin : float
        Margin on each side, as a fraction of the span in decades.

    Returns
    -------
    tuple of float or None
        ``(lo, hi)`` with ``0 < lo < hi`` finite, or None when no value is positive and finite.

    Examples
    --------
    >>> from fedtheory.plotting import log_limits
    >>> lo, hi = log_limits([1.0, 1e-3, 0.0, -1e-17, float("nan")])
    >>> round(float(np.log10(lo)), 2), round(float(np.log10(hi)), 2)
    (-3.15, 0.15)
    >>> lo, hi = log_limits([1.0, 1e-200]); round(float(np.log10(hi / lo)))
    44
    >>> log_limits([0.0, -1.0]) is None
    True
    """
    parts = [_usable(a) for a in arrays]
    v = np.concatenate(parts) if parts else np.array([])
    if not v.size:
        return None
    top, bot = float(np.log10(v.max())), float(np.log10(v.min()))
    bot = max(bot, top - max_decades)
    pad = max(margin * (top - bot), 0.15)
    lo_exp, hi_exp = bot - pad, top + pad
    return float(10.0 ** lo_exp), float(10.0 ** hi_exp)


def linear_limits(*arrays, margin=0.05):
    """Limits ``(lo, hi)`` of a linear axis showing the finite values of ``arrays``.

    Parameters
    ----------
    *arrays : array_like
        Values drawn on the axis (NaN and infinities are left out).
    margin : float
        Margin on each side, as a fraction of the range (a single value: 10 % of it, at least 0.25).

    Returns
    -------
    tuple of float
        ``(lo, hi)``, finite and ``lo < hi``, within +-1/16 of the largest float (values beyond
        leave the axis); ``(0, 1)`` when no value is finite.

    Examples
    --------
    >>> from fedtheory.plotting import linear_limits
    >>> linear_limits([0.0, 1.0, float("inf")])
    (-0.05, 1.05)
    >>> linear_limits([float("nan")])
    (0.0, 1.0)
    """
    parts = [np.asarray(a, dtype=float).ravel() for a in arrays]
    v = np.concatenate(parts) if parts else np.array([])
    v = v[np.isfinite(v)] / 4                        # quarter values: no overflow below
    if not v.size:
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    span = hi - lo
    pad = margin * span if span > 0 else max(0.1 * abs(hi), 0.25)
    big = np.finfo(float).max / 64                 # (x4: +-max/16, so that hi - lo and matplotlib's tick
    a, b = max(lo - pad, -big), min(hi + pad, big)   # arithmetic stay finite)
    if not a < b:                                  # every value beyond the clip on one side: a window at its edge
        a, b = (b - 0.1 * abs(b), b) if b == big else (a, a + 0.1 * abs(a))
    return 4 * a, 4 * b


def _tick_values(lo, hi):
    """Readable tick positions of a logarithmic axis from ``lo`` to ``hi`` (at least three when
    the range allows): whole decades (a regular step of them, at most about eight labels, when it
    spans many), else 1-2-5 or 1-9 times the powers of ten, else evenly spaced values."""
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= 0:
        return []
    lo, hi = (lo, hi) if lo <= hi else (hi, lo)
    if lo <= 0 or hi <= lo:
        return []
    a, b = float(np.log10(lo)), float(np.log10(hi))
    eps = 1e-9 * max(1.0, abs(a), abs(b))
    d = b - a
    k0, k1 = max(int(np.floor(a)), -323), min(int(np.ceil(b)), 308)
    if d > 8:
        step = int(np.ceil(d / 8))
        first = int(np.ceil(a / step - eps)) * step
        return [10.0 ** k for k in range(max(first, -322), min(int(np.floor(b + eps)), 308) + 1, step)]
    ticks = []
    for subs in ((1.0,), (1.0, 2.0, 5.0), tuple(range(1, 10))):
        ticks = [m * 10.0 ** k for k in range(k0, k1 + 1) for m in subs
                 if a - eps <= k + np.log10(m) <= b + eps]
        if len(ticks) >= 3:
            return ticks
    from matplotlib.ticker import MaxNLocator
    lin = MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
    lin = [float(t) for t in lin if lo * (1 - 1e-12) <= t <= hi * (1 + 1e-12) and t > 0]
    return lin if len(lin) >= 2 else sorted(set(ticks + lin))


def _format_ticks(values):
    """Labels of tick values, with just enough significant digits to tell them apart and to be
    within 0.05 % of the value: plain
    numbers when every value lies in [1e-4, 1e5), else powers of ten (:math:`2\\times10^{-5}`)."""
    v = [float(x) for x in values]
    if not v:
        return []
    plain = all(1e-4 <= abs(x) < 1e5 or x == 0 for x in v)
    labels = []
    for p in range(1, 18):
        if plain:
            labels = [np.format_float_positional(x, precision=p, unique=False, fractional=False, trim="-")
                      for x in v]
        else:
            labels = []
            for x in v:
                mant, exp = f"{x:.{p - 1}e}".split("e")
                mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
                exp = int(exp)
                labels.append(f"$10^{{{exp}}}$" if mant == "1" else
                              f"$-10^{{{exp}}}$" if mant == "-1" else f"${mant}\\times10^{{{exp}}}$")
        close = all(abs(float(f"{x:.{p - 1}e}") - x) <= 5e-4 * abs(x) for x in v)
        if close and len(set(labels)) == len(set(v)):
            break
    return labels


def _readable_log_locator():
    from matplotlib.ticker import Locator

    class ReadableLogLocator(Locator):
        """Ticks of :func:`_tick_values` at the axis' current limits."""

        def __call__(self):
            vmin, vmax = self.axis.get_view_interval()
            return self.tick_values(vmin, vmax)

        def tick_values(self, vmin, vmax):
            return np.asarray(_tick_values(vmin, vmax), dtype=float)

    return ReadableLogLocator()


def _readable_formatter():
    from matplotlib.ticker import Formatter

    class ReadableFormatter(Formatter):
        """Labels of :func:`_format_ticks` (digits chosen over all ticks at once)."""

        def __call__(self, x, pos=None):
            return _format_ticks([x])[0]

        def format_ticks(self, values):
            return _format_ticks(values)

    return ReadableFormatter()


def value_ticks(ax, values, axis="x", max_ticks=10):
    """Ticks of an axis at the measured values, written as plain numbers (no minor labels).

    Values that the axis cannot show (NaN, infinities; zero and negative values on a logarithmic
    axis) are skipped; more than ``max_ticks`` values are thinned to about ``max_ticks``
    (evenly spread, the first and the last kept). With no value left, a logarithmic axis gets the
    ticks of :func:`log_ticks`.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes, changed in place.
    values : array_like
        The values to mark (e.g. the measured T or E; duplicates are dropped).
    axis : {"x", "y"}, default "x"
        Which axis.
    max_ticks : int, default 10
        Largest number of labelled ticks.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from fedtheory.plotting import value_ticks
    >>> fig, ax = plt.subplots()
    >>> _ = ax.loglog([10, 40, 160], [1.0, 0.5, 0.25]); value_ticks(ax, [10, 40, 160, 0, float("nan")])
    >>> [t.get_text() for t in ax.get_xticklabels()]
    ['10', '40', '160']
    """
    from matplotlib.ticker import NullFormatter
    log = getattr(ax, f"get_{axis}scale")() == "log"
    v = np.asarray(values, dtype=float).ravel()
    v = _usable(v) if log else v[np.isfinite(v) & (np.abs(v) < np.finfo(float).max / 4)]
    v = np.unique(v)
    if not v.size:
        if log:
            log_ticks(ax, axis)
        return
    if v.size > max_ticks:
        v = v[np.unique(np.round(np.linspace(0, v.size - 1, max_ticks)).astype(int))]
    getattr(ax, f"set_{axis}ticks")(v, _format_ticks(v))
    getattr(ax, f"{axis}axis").set_minor_formatter(NullFormatter())


def log_ticks(ax, axis="y"):
    """Readable labels on a logarithmic axis, whatever its limits.

    At least three labelled ticks when the range allows: whole decades (a regular step of whole
    decades, at most about eight labels, when it spans more than eight), 1, 2 and 5 times the
    powers of ten, or 1 to 9 times them when it spans less; evenly spaced values on a range
    narrower than that. Labels are plain numbers between 1e-4 and 1e5, powers of ten elsewhere, with
    just enough digits to tell the ticks apart; minor ticks are unlabelled. The ticks follow the
    limits when they change later. An axis that is not logarithmic is left as it is.

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
    >>> _ = ax.semilogy([1, 2], [0.12, 0.5]); _ = ax.set_ylim(0.1, 0.6); log_ticks(ax)
    >>> fig.canvas.draw(); [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    ['0.1', '0.2', '0.5']
    """
    from matplotlib.ticker import NullFormatter
    if getattr(ax, f"get_{axis}scale")() != "log":
        return
    a = getattr(ax, f"{axis}axis")
    a.set_major_locator(_readable_log_locator())
    a.set_major_formatter(_readable_formatter())
    a.set_minor_formatter(NullFormatter())


def mark_off_axis(ax, x, y, lo, hi, color="black", zorder=3, level=0):
    """Mark the points that a logarithmic value axis from ``lo`` to ``hi`` cannot show.

    Values at or below 0 (or -inf), or below ``lo``, get open down-triangles just above the axis'
    bottom, +inf and values above ``hi`` open up-triangles just below its top (in the margin that :func:`log_limits` leaves, below or above
    every value drawn to scale). Points whose ``x`` the horizontal axis cannot show (NaN; 0 or
    below on a logarithmic axis) are skipped.

    Parameters
    ----------
    ax : matplotlib Axes
    x, y : array_like
        The points of one curve.
    lo, hi : float
        The limits of the (logarithmic) value axis.
    color : color
        Edge colour of the marks (the curve's).
    zorder : float
    level : int
        0 to 3: shifts the marks a few points sideways, so that curves marked at the same x stay
        apart.

    Returns
    -------
    tuple of int
        The numbers of points marked ``(at_bottom, at_top)``; their legend entries are
        :func:`off_axis_handles`'.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from fedtheory.plotting import mark_off_axis
    >>> fig, ax = plt.subplots(); ax.set_yscale("log"); _ = ax.set_ylim(1e-3, 10)
    >>> mark_off_axis(ax, [0, 1, 2, 3], [1.0, 0.0, -1e-17, float("inf")], 1e-3, 10)
    (2, 1)
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    with np.errstate(invalid="ignore"):
        ok_x = np.isfinite(x) & ((x > 0) if ax.get_xscale() == "log" else True)
        # below the axis' bottom or above its top as well: values beyond LOG_RANGE (1e-279 from a run
        # that converged to underflow, 1e305 from a blow-up) are left out of the line
        low = ok_x & ((y <= 0) | (y < lo))
        top = ok_x & (y > hi)
    from matplotlib.transforms import offset_copy
    step = 10.0 ** (0.025 * (np.log10(hi) - np.log10(lo)))
    shift = offset_copy(ax.transData, fig=ax.figure, x=4.0 * ((int(level) % 4) - 1.5), units="points")
    for sel, where, marker in ((low, lo * step, "v"), (top, hi / step, "^")):
        if sel.any():
            ax.plot(x[sel], np.full(sel.sum(), where), linestyle="none", marker=marker, ms=6, mfc="white",
                    mec=color, mew=1.3, zorder=zorder, label="_off_axis", transform=shift)
    return int(low.sum()), int(top.sum())


def _nonnegative(y):
    """Whether metric ``y`` is non-negative by definition (a value below 0 is rounding)."""
    return y in LOG_METRICS or str(y).endswith("_sq")


def _filter_title(filters):
    """A legend header naming the filters applied (None without filters)."""
    return f"runs with {describe_filters(filters)}" if filters else None


def _legend_entries(ax, nonnegative=True):
    """``(handles, labels)`` of ``ax``'s legend, with the entries explaining the markers of
    :func:`mark_off_axis` drawn on it."""
    handles, labels = ax.get_legend_handles_labels()
    marks = [ln.get_marker() for ln in ax.lines if ln.get_label() == "_off_axis"]
    extra = off_axis_handles("v" in marks, "^" in marks, nonnegative)
    return handles + extra, labels + [h.get_label() for h in extra]


def off_axis_handles(at_floor, at_top, nonnegative=True):
    """Legend entries explaining the marks of :func:`mark_off_axis`.

    Parameters
    ----------
    at_floor, at_top : int or bool
        Whether marks at the bottom and at the top were drawn (only those get an entry).
    nonnegative : bool
        The metric is non-negative by definition: a value at or below 0 is rounding, and the entry
        says so.

    Returns
    -------
    list of matplotlib.lines.Line2D

    Examples
    --------
    >>> from fedtheory.plotting import off_axis_handles
    >>> [h.get_label() for h in off_axis_handles(1, 0)]
    ['0 or below (rounding level), at the bottom']
    """
    from matplotlib.lines import Line2D
    out = []
    if at_floor:
        out.append(Line2D([], [], linestyle="none", marker="v", ms=6, mfc="white", mec="black",
                          label="0 or below (rounding level), at the bottom" if nonnegative
                          else "0 or below, at the bottom"))
    if at_top:
        out.append(Line2D([], [], linestyle="none", marker="^", ms=6, mfc="white", mec="black",
                          label="+inf or above the axis (diverging), at the top"))
    return out


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
    from ._argcheck import did_you_mean
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
    from .registry import ALGORITHMS, algorithms
    algorithms()                                  # imports (registers) every algorithm
    cls = ALGORITHMS.get(str(name))
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
        from ._argcheck import did_you_mean
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
    """One panel per horizontal axis (rounds, communication, gradient evaluations), one legend
    outside the panels (the curves are the same in every panel).

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


#: The largest side, in pixels, of a saved figure (:func:`save_figure`).
MAX_PIXELS = 2400


def save_figure(fig, path, dpi=150, pdf=False, tight=False, max_pixels=MAX_PIXELS):
    """Save ``fig`` to ``path`` and close it: the one save helper of the project's figures.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or pathlib.Path
        Output file; its suffix picks the format (``.png``, ``.pdf``, ``.svg``, ...).
    dpi : float
        Resolution of raster formats, lowered where needed so that no side exceeds ``max_pixels``.
    pdf : bool
        Also write a PDF beside it (same name, ``.pdf``), for papers.
    tight : bool
        Crop to the drawn content (``bbox_inches="tight"``: legends outside the axes included);
        figures with a constrained layout need not.
    max_pixels : int
        The largest side in pixels of a raster file.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Examples
    --------
    >>> import tempfile, pathlib, matplotlib.pyplot as plt
    >>> from fedtheory.plotting import save_figure
    >>> fig, ax = plt.subplots(); _ = ax.plot([1, 2])
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> [p.name for p in save_figure(fig, d / "a.png", pdf=True)]
    ['a.png', 'a.pdf']
    """
    import matplotlib.pyplot as plt
    from pathlib import Path
    path = Path(path)
    w, h = fig.get_size_inches()
    kw = {"bbox_inches": "tight"} if tight else {}
    fig.savefig(path, dpi=min(dpi, max_pixels / max(w, h)), **kw)
    out = [path]
    if pdf and path.suffix.lower() != ".pdf":
        fig.savefig(path.with_suffix(".pdf"), **kw)
        out.append(path.with_suffix(".pdf"))
    plt.close(fig)
    return out
