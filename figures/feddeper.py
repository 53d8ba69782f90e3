"""Figures of the FedDeper validation runs (spec/feddeper.md §7) from ``validation/results/feddeper``.

``python figures/feddeper.py [--results DIR] [--out figures]``.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _render import finish, render  # noqa: E402
import numpy as np  # noqa: E402



def bias(df):
    d = df[(df.hessian == "distinct")]
    fig, ax = plt.subplots(figsize=(5.8, 4))
    for j, (lam, g) in enumerate(d[d.method == "feddeper"].groupby("lam")):
        g = g[np.isfinite(g.grad_norm) & (g.grad_norm < 1e3)]
        ax.plot(g.rhoK, g.grad_norm, "o-", color=f"C{j}", label=f"FedDeper, lambda = {lam}")
    for name, style in (("fedavg", "k--"), ("fedprox", "k:"), ("scaffold", "k-.")):
        v = d[d.method == name].grad_norm.iloc[0]
        ax.axhline(max(v, 1e-16), ls=style[1:], color="k", lw=1, label=f"{name} ({v:.1e})")
    ax.set_yscale("log")
    ax.set_xlabel(r"$\rho K$ (K = 10, $\eta_l\beta K$ = 0.05)")
    ax.set_ylabel(r"$\|\nabla f(x_\infty)\|$ (deterministic, full participation)")
    ax.set_title("FedDeper rescales client drift: bias vs rho K\n(heterogeneous Hessians; diverges beyond the h0 pole)",
                 fontsize=10)
    return finish(fig, ax)


def instability(df):
    fig, ax = plt.subplots(figsize=(5.8, 4))
    runs = df[df.multiple.notna()]
    for j, ((p, lam), g) in enumerate(runs.groupby(["p", "lam"])):
        ax.plot(g.multiple, np.minimum(g.final_dist, 1e100), "o-", color=f"C{j}",
                label=f"p = {p}, lambda = {lam} (rho_crit K = {g.rhoK_crit.iloc[0]:.3f})")
    avg = df[df.multiple.isna()]
    ax.axhline(avg.final_dist.max(), color="k", ls="--", lw=1, label="FedAvg (largest of the settings)")
    ax.set_yscale("log")
    ax.set_xscale("log")
    ax.set_xticks([0.5, 1, 3], ["0.5", "1", "3"])
    ax.set_xlabel(r"$\rho / \rho_{crit}$ (linearised stale-v threshold)")
    ax.set_ylabel(r"final $\|x - x^*\|$")
    ax.set_title("Partial participation: stale personalized models make FedDeper unstable", fontsize=10)
    return finish(fig, ax)


def comparison(df):
    Ss = sorted(df.S.unique())
    fig, axes = plt.subplots(1, len(Ss), figsize=(4.8 * len(Ss), 3.9), squeeze=False)
    for ax, S in zip(axes[0], Ss):
        d = df[df.S == S]
        for j, (m, g) in enumerate(d.groupby("method", sort=False)):
            s = g.groupby("round").subopt.mean()
            s = s[np.isfinite(s) & (s < 1e3)]
            ax.plot(s.index, s.values, color=f"C{j}", label=m, ls="--" if m.startswith("fed") and "deper" not in m else "-")
        ax.set_yscale("log")
        ax.set_title(f"S = {S} of 20 clients", fontsize=10)
        ax.set_xlabel("communication rounds")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(r"$F(x^t) - F^*$")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("Heterogeneous logistic regression, K = 10, B = 10 (curves above 1e3 = diverged, cut)", fontsize=11)
    fig.tight_layout()
    return fig


FIGURES = {"e3_fixed_point_bias": ("feddeper_bias_vs_rhoK.png", bias),
           "e5_instability": ("feddeper_instability.png", instability),
           "e7_comparison": ("feddeper_comparison.png", comparison)}


def main(argv=None):
    render(FIGURES, "feddeper", __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
