"""Shared command line and styling of the figure scripts: read the result tables, draw, save the PNGs.

Styling is the library's (:mod:`fedtheory.plotting`): curve ``j`` takes :func:`style` ``(j)`` (the
colour/line-style pair of :func:`fedtheory.plotting.curve_style` plus a marker, so curves that
coincide stay visible), a theorem's bound variant takes :func:`fedtheory.plotting.bound_style`
(the same colour in every figure and in the ``fedtheory verify`` report), and legends sit outside
the data.
"""
import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from fedtheory.plotting import (bound_style, curve_style, legend_outside, log_ticks, save_figure,  # noqa: E402,F401
                                value_ticks)

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def style(j, marker=True):
    """Keyword arguments of ``ax.plot`` for the ``j``-th curve: colour, line style, marker."""
    kw = curve_style(j)
    if marker:
        kw["marker"] = MARKERS[j % len(MARKERS)]
        kw["markersize"] = 5
    return kw


def finish(fig, ax, outside=True, **legend):
    """Last lines of a one-panel figure: legend (outside the data unless ``outside=False``; ``fontsize=7``
    unless given), major grid, constrained layout."""
    if outside:
        legend_outside(ax, **legend)
    else:
        ax.legend(**{"fontsize": 7, **legend})
    ax.grid(True, which="major", alpha=0.3)
    fig.set_layout_engine("constrained")
    return fig


def save(fig, path, pdf=False):
    """Save at 150 dpi with everything drawn (legends outside the axes included), and a PDF beside
    it with ``pdf`` (:func:`fedtheory.plotting.save_figure`, the library's one save helper)."""
    save_figure(fig, path, dpi=150, tight=True, pdf=pdf)


def render(figures, results, description, argv=None):
    """``figures`` maps a table name (``results/<name>.csv``) to ``(png name, fn(DataFrame) -> Figure)``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--results", default=str(ROOT / "validation" / "results" / results))
    ap.add_argument("--out", default=str(ROOT / "figures"))
    ap.add_argument("--pdf", action="store_true", help="also write each figure as PDF beside its PNG")
    args = ap.parse_args(argv)
    res, out = Path(args.results), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for table, (fname, fn) in figures.items():
        path = res / f"{table}.csv"
        if not path.exists():
            print(f"skip {fname}: {path} missing")
            continue
        save(fn(pd.read_csv(path)), out / fname, pdf=args.pdf)
        print(f"wrote {out / fname}")


__all__ = ["ROOT", "bound_style", "curve_style", "finish", "legend_outside", "log_ticks", "np", "render", "save",
           "style", "value_ticks"]
