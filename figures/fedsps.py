"""Figures of the FedSPS reproduction (docs/papers/fedsps.md) from ``validation/results/fedsps``.

``python figures/fedsps.py [--results DIR] [--out figures]`` writes ``fedsps_libsvm_loss.png``,
``fedsps_libsvm_accuracy.png``, ``fedsps_stepsizes.png``, ``fedsps_digits_noniid.png`` and
``fedsps_sensitivity.png``. The loss figures plot the suboptimality F - F* against the certified
optimum of each problem (``optima.csv``; a linearly separable problem has F* = inf F = 0, a
quasi-separable one the infimum over the rows no direction of recession separates).
"""
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _render import ROOT, log_ticks, save, style  # noqa: E402


def _short(m):
    return m.split(" {")[0].replace(" tuned", " (tuned)")


def panels(df, col, ylabel, datasets, logy=True, title="", optima=None, zoom=False):
    """One panel per data set, one curve per method (mean over seeds, min-max band). With ``optima``
    (dataset -> (F*, attained)), ``col`` minus F* is drawn: the suboptimality."""
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.3 * len(datasets) + 2.4, 3.8), squeeze=False,
                             layout="constrained")
    for ax, ds in zip(axes[0], datasets):
        d = df[df.dataset == ds]
        f_star, attained = optima[ds] if optima is not None else (0.0, True)
        means = {_short(m): g.groupby("round")[col].mean() for m, g in d.groupby("method", sort=False)}
        same = []                                   # methods whose curves coincide (FedSPS at its cap = FedAvg)
        for a in means:
            grp = [b for b in means if len(means[b]) == len(means[a])
                   and np.allclose(means[a].values, means[b].values, rtol=1e-3, atol=0)]
            if len(grp) > 1 and grp not in same:
                same.append(grp)
        note = "".join("\nwithin 0.1%: " + " = ".join(g.split(" (")[0] for g in grp) for grp in same)
        for j, (m, g) in enumerate(d.groupby("method", sort=False)):
            s = g.groupby("round")[col]
            mean, lo, hi = s.mean() - f_star, s.min() - f_star, s.max() - f_star
            kw = style(j)
            ax.plot(mean.index, mean.values, label=_short(m), lw=1.4, markevery=(j % 5, max(1, len(mean) // 8)), **kw)
            ax.fill_between(mean.index, lo.values, hi.values, color=kw["color"], alpha=0.12, lw=0)
        if logy:
            ax.set_yscale("log")
            log_ticks(ax, "y")
        if zoom:                                   # the differences after round 0 (the start is far below)
            later = d[d["round"] > 0].groupby(["method", "round"])[col].mean()
            span = later.max() - later.min()
            ax.set_ylim(later.min() - 0.1 * span, later.max() + 0.1 * span)
        sub = "" if optima is None else (f"\nF* = {f_star:.6g} (certified)" if attained else
                                         "\nseparable: F* = inf F = 0, not attained" if f_star == 0 else
                                         f"\nno minimiser: inf F = {f_star:.6g}")
        ax.set_title((f"{title}\n" if len(datasets) == 1 and title else "") + ds + sub + note, fontsize=8)
        ax.set_xlabel("communication rounds")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False)
    if title and len(datasets) > 1:
        fig.suptitle(title, fontsize=11)
    return fig


def stepsizes(df):
    d = df[df.method.str.startswith("FedSPS (") | df.method.str.startswith("FedDecSPS")]
    datasets = list(dict.fromkeys(d.dataset))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
    cols = ("step_mean", "step_capped_frac", "step_inter_cv")
    for (ds, m), g in d.groupby(["dataset", "method"], sort=False):
        s = g.groupby("round")
        k = datasets.index(ds)
        lab = f"{ds}: {_short(m).split(' (')[0]}"
        kw = dict(color=f"C{k}", ls="-" if m.startswith("FedSPS") else ":", marker="osD^"[k % 4], ms=[8, 6, 4, 4][k % 4],
                  mfc="none" if k < 2 else None, lw=1.3)
        for ax, col in zip(axes, cols):
            v = s[col].mean()
            ax.plot(v.index, v.values, label=lab, markevery=(k * 2, 10), **kw)
    same = [ds for ds in datasets if ds != "a9a" and all(
        np.allclose(d[(d.dataset == ds) & d.method.str.startswith(p)].groupby("round").step_mean.mean().values,
                    d[(d.dataset == "a9a") & d.method.str.startswith(p)].groupby("round").step_mean.mean().values,
                    rtol=1e-2, equal_nan=True) for p in ("FedSPS (", "FedDecSPS"))]
    axes[0].set_ylabel("mean local step size")
    axes[0].set_yscale("log")
    axes[1].set_ylabel("fraction of steps at the cap gamma_b")
    axes[2].set_ylabel("inter-client std/mean of the step size")
    for ax in axes:
        ax.set_xlabel("communication rounds")
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False)
    fig.suptitle("FedSPS (c = 0.5, gamma_b = 1) and FedDecSPS step sizes: the cap binds on (almost) every step"
                 + (f"\n(step sizes of {', '.join(same)} coincide with a9a's to 1%: open markers)" if same else ""),
                 fontsize=10)
    return fig


def sensitivity(df, f_star=None):
    """Final loss against c and gamma_b on a9a; with ``f_star`` (a9a's certified optimum) the
    suboptimality F - F* on a log axis."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    shift = f_star or 0.0
    ylab = "final F - F* (a9a, F* certified)" if f_star is not None else "final training loss"
    a = df[(df.gamma_b == 1.0) & df.c.notna()]
    axes[0].plot(a.c, a.final_loss - shift, "o-", color="C0", label=ylab)
    ax2 = axes[0].twinx()
    ax2.plot(a.c, a.capped_frac, "s--", color="C3", label="fraction of capped steps")
    ax2.set_ylabel("fraction of capped steps (dashed)", color="C3")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("c (gamma_b = 1)")
    axes[0].set_ylabel(ylab + " (solid)", color="C0")
    b = df[(df.c == 0.5)].sort_values("gamma_b")
    axes[1].plot(b.gamma_b, b.final_loss - shift, "o-", label="FedSPS c = 0.5")
    fa = df[df.status.astype(str).str.startswith("FedAvg")]
    for _, r in fa.iterrows():
        axes[1].axhline(r.final_loss - shift, color="0.5", ls=":", lw=1)
        axes[1].text(b.gamma_b.max(), r.final_loss - shift, f"{r.status} ", fontsize=7, va="bottom", ha="right")
    axes[1].set_xscale("log")
    axes[1].set_xlabel("gamma_b (c = 0.5)")
    axes[1].set_ylabel(ylab)
    for ax in axes:
        if f_star is not None:
            ax.set_yscale("log")
            log_ticks(ax, "y")
        ax.grid(True, which="major", alpha=0.3)
    fig.suptitle("FedSPS sensitivity on a9a (10 of 100 clients, tau = 5, B = 20; mean over the last 20% of rounds)",
                 fontsize=10)
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "validation" / "results" / "fedsps"))
    ap.add_argument("--out", default=str(ROOT / "figures"))
    args = ap.parse_args(argv)
    res, out = Path(args.results), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df = pd.read_csv(res / "curves.csv")
    opt = pd.read_csv(res / "optima.csv")
    optima = {r.dataset: (float(r.f_star), bool(r.attained)) for r in opt.itertuples()}
    libsvm = [d for d in dict.fromkeys(df.dataset) if d != "digits non-iid"]
    sub = r"$F(x^t) - F^*$ (training)"
    figs = {"fedsps_libsvm_loss.png": panels(df, "loss", sub, libsvm, optima=optima,
                                             title="Logistic regression on LIBSVM, i.i.d., 10 of 100 clients, tau = 5, B = 20"),
            "fedsps_libsvm_accuracy.png": panels(df, "test_acc", "test accuracy", libsvm, logy=False, zoom=True,
                                                 title="Test accuracy, same runs (axes from the first "
                                                       "evaluated round on; round 0 lies below)"),
            "fedsps_digits_noniid.png": panels(df, "loss", sub, ["digits non-iid"], optima=optima,
                                               title="digits (<5 vs >=5), 2-class shards, 10 of 50 clients"),
            "fedsps_stepsizes.png": stepsizes(df),
            "fedsps_sensitivity.png": sensitivity(pd.read_csv(res / "sensitivity.csv"), optima["a9a"][0])}
    for name, fig in figs.items():
        save(fig, out / name)
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
