"""Styles shared by every figure: axis labels, markers, the colour and line style of each curve
and of each bound variant, which metrics are drawn on a logarithmic axis.

Part of :mod:`fedtheory.plotting`, which re-exports its public names."""
from __future__ import annotations

import numpy as np


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


def _nonnegative(y):
    """Whether metric ``y`` is non-negative by definition (a value below 0 is rounding)."""
    return y in LOG_METRICS or str(y).endswith("_sq")
