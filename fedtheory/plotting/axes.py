"""Axes: limits of logarithmic and linear value axes, readable ticks and labels, marks of values an
axis cannot show, legends outside the data.

Part of :mod:`fedtheory.plotting`, which re-exports its public names."""
from __future__ import annotations

import numpy as np


#: Largest number of decades a logarithmic value axis shows (:func:`log_limits`): values further
#: below the largest one leave the axis at its bottom, so that one value at rounding level never
#: squeezes the rest of the figure into a few pixels.
MAX_DECADES = 40


#: Positive values outside this range are not used to place a logarithmic axis (10**±300: beyond
#: them matplotlib's log transform loses the ticks; they still leave the axis at its edge).
LOG_RANGE = (1e-300, 1e300)


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


# Hand-written log ticks (this function, _minor_tick_values, _format_ticks, the locator and the formatter below) where
# matplotlib's own fail, as tests/test_plotting_properties.py::test_matplotlib_log_ticks_fail_where_ours_are_used
# shows: LogLocator with LogFormatterSciNotation labels no tick, or one, on a range within a decade (0.12 to
# 0.5: none), raises OverflowError on limits near the largest float (1e-300 to 1e300), and its minor ticks
# overflow from 1e300 to 1e308. Linear ranges use MaxNLocator (on the mantissa's scale).
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
    # on the mantissa's scale: MaxNLocator's arithmetic on the values themselves overflows within a
    # decade of the largest float (1e308 to 1.01e308: "arange: cannot compute length")
    scale = 10.0 ** min(max(int(np.floor(a)), -307), 307)
    lin = MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]).tick_values(lo / scale, hi / scale) * scale
    lin = [float(t) for t in lin if lo * (1 - 1e-12) <= t <= hi * (1 + 1e-12) and t > 0]
    return lin if len(lin) >= 2 else sorted(set(ticks + lin))


def _minor_tick_values(lo, hi):
    """Unlabelled ticks of a logarithmic axis from ``lo`` to ``hi``: 2 to 9 times the powers of ten
    on a range of at most eight decades, none on a wider one (its major ticks are decades)."""
    if not (np.isfinite(lo) and np.isfinite(hi)) or min(lo, hi) <= 0:
        return []
    lo, hi = min(lo, hi), max(lo, hi)
    a, b = float(np.log10(lo)), float(np.log10(hi))
    if b - a > 8:
        return []
    return [m * 10.0 ** k for k in range(max(int(np.floor(a)), -323), min(int(np.ceil(b)), 308) + 1)
            for m in range(2, 10) if lo <= m * 10.0 ** k <= hi]


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


def _locator(ticks, name):
    """A matplotlib locator placing ``ticks(vmin, vmax)`` at the axis' current limits."""
    from matplotlib.ticker import Locator

    class _Ticks(Locator):
        def __call__(self):
            vmin, vmax = self.axis.get_view_interval()
            return self.tick_values(vmin, vmax)

        def tick_values(self, vmin, vmax):
            return np.asarray(ticks(vmin, vmax), dtype=float)

    _Ticks.__name__ = _Ticks.__qualname__ = name
    _Ticks.__doc__ = f"Ticks of :func:`{ticks.__name__}` at the axis' current limits."
    return _Ticks()


def _readable_log_locator():
    return _locator(_tick_values, "ReadableLogLocator")


def _minor_log_locator():
    return _locator(_minor_tick_values, "MinorLogLocator")


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
    a.set_minor_locator(_minor_log_locator())
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
        The axes marked.
    x, y : array_like
        The points of one curve.
    lo, hi : float
        The limits of the (logarithmic) value axis.
    color : color
        Edge colour of the marks (the curve's).
    zorder : float
        The marks' drawing order.
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
        The legend handles of the off-axis marks.

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
        The legend drawn.
    """
    return ax.legend(**{"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0,
                        "fontsize": 7, "frameon": False, **kw})
