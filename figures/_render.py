"""Shared command line of the figure scripts: read the result tables, draw, save the PNGs."""
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def finish(fig, ax, **legend):
    """Last lines of a one-panel figure: legend (``fontsize=7`` unless given), log-scale grid, tight layout."""
    ax.legend(**{"fontsize": 7, **legend})
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def render(figures, results, description, argv=None):
    """``figures`` maps a table name (``results/<name>.csv``) to ``(png name, fn(DataFrame) -> Figure)``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--results", default=str(ROOT / "validation" / "results" / results))
    ap.add_argument("--out", default=str(ROOT / "figures"))
    args = ap.parse_args(argv)
    res, out = Path(args.results), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for table, (fname, fn) in figures.items():
        path = res / f"{table}.csv"
        if not path.exists():
            print(f"skip {fname}: {path} missing")
            continue
        fig = fn(pd.read_csv(path))
        fig.savefig(out / fname, dpi=150)
        plt.close(fig)
        print(f"wrote {out / fname}")
