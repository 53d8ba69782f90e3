"""Figure of the pFedFBE federated-lasso re-run (spec/pfedfbe.md §8) from ``validation/results/pfedfbe``.

``python figures/pfedfbe.py [--results DIR] [--out figures]`` writes ``pfedfbe_lasso.png`` and
``pfedfbe_matrix_completion.png``.
"""
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def figure(df):
    d = df[(df.setting == "II") & (df.normalization == "half_mse")]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for j, (m, g) in enumerate(d.groupby("method", sort=False)):
        s = g.groupby("round")
        axes[0].plot(s.objective.mean().index, s.objective.mean().values, color=f"C{j}", label=m)
        axes[1].plot(s.gm_f1.mean().index, s.gm_f1.mean().values, color=f"C{j}", ls="--", label=f"{m}: global")
        if g.pm_f1.notna().any():
            axes[1].plot(s.pm_f1.mean().index, s.pm_f1.mean().values, color=f"C{j}", label=f"{m}: personalized")
            axes[2].plot(s.pm_shift_inf.mean().index, s.pm_shift_inf.mean().values, color=f"C{j}", label=m)
    axes[2].axhline(0.01, color="k", ls=":", lw=1, label="support threshold 0.01")
    axes[0].set_yscale("log")
    axes[2].set_yscale("log")
    axes[0].set_ylabel("training objective (1/2-MSE + tau ||w||_1)")
    axes[1].set_ylabel("support F1 (threshold 0.01)")
    axes[2].set_ylabel(r"max $|\theta_i(x) - x|$")
    for ax in axes:
        ax.set_xlabel("communication rounds")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle("pFedFBE setting (II), paper hyper-parameters: personalization moves < 0.01, so personalized "
                 "supports equal the global one", fontsize=10)
    fig.tight_layout()
    return fig


def mc_figure(df):
    d = df[(df.setting == "MC") & (df.normalization == "half_mse")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for j, (m, g) in enumerate(d.groupby("method", sort=False)):
        s = g.groupby("round")
        if g.pm_rank.notna().any():
            axes[0].plot(s.pm_rank.mean().index, s.pm_rank.mean().values, color=f"C{j}", label=f"{m}: personalized")
            axes[1].plot(s.pm_recovery.mean().index, s.pm_recovery.mean().values, color=f"C{j}", label=f"{m}: personalized")
        if g.gm_rank.notna().any():
            axes[0].plot(s.gm_rank.mean().index, s.gm_rank.mean().values, color=f"C{j}", ls="--", label=f"{m}: global")
    axes[0].axhline(5, color="k", ls=":", lw=1, label="true rank 5")
    axes[0].set_ylabel("rank (singular values > 0.01)")
    axes[1].set_ylabel(r"recovery error $\|W_j - \hat W_j\|_F$")
    for ax in axes:
        ax.set_xlabel("communication rounds")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle("pFedFBE matrix completion (32x32, 30 clients), paper hyper-parameters, 1/2-MSE", fontsize=10)
    fig.tight_layout()
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "validation" / "results" / "pfedfbe"))
    ap.add_argument("--out", default=str(ROOT / "figures"))
    args = ap.parse_args(argv)
    df = pd.read_csv(Path(args.results) / "curves.csv")
    for fname, fn in (("pfedfbe_lasso.png", figure), ("pfedfbe_matrix_completion.png", mc_figure)):
        fig = fn(df)
        out = Path(args.out) / fname
        fig.savefig(out, dpi=150)
        plt.close(fig)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
