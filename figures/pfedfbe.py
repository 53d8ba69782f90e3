"""Figure of the pFedFBE federated-lasso re-run (docs/papers/pfedfbe.md) from ``validation/results/pfedfbe``.

``python figures/pfedfbe.py [--results DIR] [--out figures]`` writes ``pfedfbe_lasso.png`` and
``pfedfbe_matrix_completion.png``.
"""
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _render import ROOT, log_ticks, save, style  # noqa: E402


def _coincide(curves):
    """``{label: label of an earlier curve it coincides with (relative 1e-3)}``, so the legend says so."""
    out, seen = {}, []
    for lab, s in curves:
        for prev, t in seen:
            if len(s) == len(t) and np.allclose(s.values, t.values, rtol=1e-3, equal_nan=True):
                out[lab] = prev
                break
        seen.append((lab, s))
    return out


def _draw(ax, curves, dashed=False, offset=0):
    """Curves ``[(label, series)]`` with distinct styles; one that lies on an earlier one says so."""
    curves = [(lab, s) for lab, s in curves if np.isfinite(s.values).any()]     # a metric the method lacks
    same = _coincide(curves)
    for j, (lab, s) in enumerate(curves):
        kw = style(j + offset)
        if dashed:
            kw["linestyle"] = "--"
        step = max(1, len(s) // 7)
        ax.plot(s.index, s.values, lw=1.3, markevery=(j % step, step), mfc="none" if lab in same else None,
                label=lab + (f"  (on {same[lab]})" if lab in same else ""), **kw)


def figure(df):
    d = df[(df.setting == "II") & (df.normalization == "half_mse")]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), layout="constrained")
    groups = list(d.groupby("method", sort=False))
    _draw(axes[0], [(m, g.groupby("round").objective.mean()) for m, g in groups])
    _draw(axes[1], [(f"{m}: global", g.groupby("round").gm_f1.mean()) for m, g in groups], dashed=True)
    pers = [(m, g) for m, g in groups if g.pm_f1.notna().any()]
    _draw(axes[1], [(f"{m}: personalized", g.groupby("round").pm_f1.mean()) for m, g in pers], offset=len(groups))
    _draw(axes[2], [(m, g.groupby("round").pm_shift_inf.mean()) for m, g in pers])
    axes[2].axhline(0.01, color="k", ls=":", lw=1, label="support threshold 0.01")
    axes[0].set_yscale("log")
    axes[2].set_yscale("log")
    axes[0].set_ylabel("training objective (1/2-MSE + tau ||w||_1)")
    axes[1].set_ylabel("support F1 (threshold 0.01)")
    axes[2].set_ylabel(r"max $|\theta_i(x) - x|$")
    log_ticks(axes[0], "y")
    log_ticks(axes[2], "y")
    for ax in axes:
        ax.set_xlabel("communication rounds")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(0, -0.16), ncols=1 if ax is not axes[1] else 2,
                  frameon=False)
    fig.suptitle("pFedFBE setting (II), paper hyper-parameters: personalization moves < 0.01, so personalized "
                 "supports equal the global one", fontsize=10)
    return fig


def mc_figure(df):
    d = df[(df.setting == "MC") & (df.normalization == "half_mse")]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    groups = list(d.groupby("method", sort=False))
    pers = [(m, g) for m, g in groups if g.pm_rank.notna().any()]
    glob = [(m, g) for m, g in groups if g.gm_rank.notna().any()]
    _draw(axes[0], [(f"{m}: personalized", g.groupby("round").pm_rank.mean()) for m, g in pers])
    _draw(axes[0], [(f"{m}: global", g.groupby("round").gm_rank.mean()) for m, g in glob], dashed=True,
          offset=len(pers))
    _draw(axes[1], [(f"{m}: personalized", g.groupby("round").pm_recovery.mean()) for m, g in pers])
    axes[0].axhline(5, color="k", ls=":", lw=1, label="true rank 5")
    axes[0].set_ylabel("rank (singular values > 0.01)")
    axes[1].set_ylabel(r"recovery error $\|W_j - \hat W_j\|_F$")
    for ax in axes:
        ax.set_xlabel("communication rounds")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.suptitle("pFedFBE matrix completion (32x32, 30 clients), paper hyper-parameters, 1/2-MSE", fontsize=10)
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "validation" / "results" / "pfedfbe"))
    ap.add_argument("--out", default=str(ROOT / "figures"))
    args = ap.parse_args(argv)
    df = pd.read_csv(Path(args.results) / "curves.csv")
    for fname, fn in (("pfedfbe_lasso.png", figure), ("pfedfbe_matrix_completion.png", mc_figure)):
        out = Path(args.out) / fname
        save(fn(df), out)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
