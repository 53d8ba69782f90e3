"""Figures of the FedSPS reproduction (spec/fedsps.md §6) from ``validation/results/fedsps``.

``python figures/fedsps.py [--results DIR] [--out figures]`` writes ``fedsps_libsvm_loss.png``,
``fedsps_libsvm_accuracy.png``, ``fedsps_stepsizes.png``, ``fedsps_digits_noniid.png`` and
``fedsps_sensitivity.png``.
"""
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _short(m):
    return m.split(" {")[0].replace(" tuned", " (tuned)")


def panels(df, col, ylabel, datasets, logy=True, title=""):
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.6 * len(datasets), 3.8), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        d = df[df.dataset == ds]
        for j, (m, g) in enumerate(d.groupby("method", sort=False)):
            s = g.groupby("round")[col]
            mean, lo, hi = s.mean(), s.min(), s.max()
            ax.plot(mean.index, mean.values, color=f"C{j}", label=_short(m), lw=1.5,
                    ls="--" if "FedAvg" in m else "-")
            ax.fill_between(mean.index, lo.values, hi.values, color=f"C{j}", alpha=0.15, lw=0)
        if logy:
            ax.set_yscale("log")
        ax.set_title(ds, fontsize=10)
        ax.set_xlabel("communication rounds")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def stepsizes(df):
    d = df[df.method.str.startswith("FedSPS (") | df.method.str.startswith("FedDecSPS")]
    datasets = list(dict.fromkeys(d.dataset))
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for j, ((ds, m), g) in enumerate(d.groupby(["dataset", "method"], sort=False)):
        s = g.groupby("round")
        style = "-" if m.startswith("FedSPS") else ":"
        lab = f"{ds}: {_short(m).split(' (')[0]}"
        axes[0].plot(s.step_mean.mean().index, s.step_mean.mean().values, style, color=f"C{datasets.index(ds)}", label=lab)
        axes[1].plot(s.step_capped_frac.mean().index, s.step_capped_frac.mean().values, style,
                     color=f"C{datasets.index(ds)}", label=lab)
        axes[2].plot(s.step_inter_cv.mean().index, s.step_inter_cv.mean().values, style,
                     color=f"C{datasets.index(ds)}", label=lab)
    axes[0].set_ylabel("mean local step size")
    axes[0].set_yscale("log")
    axes[1].set_ylabel("fraction of steps at the cap gamma_b")
    axes[2].set_ylabel("inter-client std/mean of the step size")
    for ax in axes:
        ax.set_xlabel("communication rounds")
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.suptitle("FedSPS (c = 0.5, gamma_b = 1) and FedDecSPS step sizes: the cap binds on (almost) every step",
                 fontsize=11)
    fig.tight_layout()
    return fig


def sensitivity(df):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    a = df[(df.gamma_b == 1.0) & df.c.notna()]
    axes[0].plot(a.c, a.final_loss, "o-", label="final training loss")
    ax2 = axes[0].twinx()
    ax2.plot(a.c, a.capped_frac, "s--", color="C3", label="fraction of capped steps")
    ax2.set_ylabel("fraction of capped steps", color="C3")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("c (gamma_b = 1)")
    axes[0].set_ylabel("final training loss")
    b = df[(df.c == 0.5)].sort_values("gamma_b")
    axes[1].plot(b.gamma_b, b.final_loss, "o-", label="FedSPS c = 0.5")
    fa = df[df.status.astype(str).str.startswith("FedAvg")]
    for _, r in fa.iterrows():
        axes[1].axhline(r.final_loss, color="0.5", ls=":", lw=1)
        axes[1].text(b.gamma_b.min(), r.final_loss, f" {r.status}", fontsize=7, va="bottom")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("gamma_b (c = 0.5)")
    axes[1].set_ylabel("final training loss")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.suptitle("FedSPS sensitivity on a9a (10 of 100 clients, tau = 5, B = 20)", fontsize=11)
    fig.tight_layout()
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "validation" / "results" / "fedsps"))
    ap.add_argument("--out", default=str(ROOT / "figures"))
    args = ap.parse_args(argv)
    res, out = Path(args.results), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df = pd.read_csv(res / "curves.csv")
    libsvm = [d for d in dict.fromkeys(df.dataset) if d != "digits non-iid"]
    figs = {"fedsps_libsvm_loss.png": panels(df, "loss", "training loss", libsvm,
                                             title="Logistic regression on LIBSVM, i.i.d., 10 of 100 clients, tau = 5, B = 20"),
            "fedsps_libsvm_accuracy.png": panels(df, "test_acc", "test accuracy", libsvm, logy=False),
            "fedsps_digits_noniid.png": panels(df, "loss", "training loss", ["digits non-iid"],
                                               title="digits (<5 vs >=5), 2-class shards, 10 of 50 clients"),
            "fedsps_stepsizes.png": stepsizes(df),
            "fedsps_sensitivity.png": sensitivity(pd.read_csv(res / "sensitivity.csv"))}
    for name, fig in figs.items():
        fig.savefig(out / name, dpi=150)
        plt.close(fig)
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
