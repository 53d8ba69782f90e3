"""Figures of the FedDeper validation runs (docs/papers/feddeper.md) from ``validation/results/feddeper``.

``python figures/feddeper.py [--results DIR] [--out figures]``.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _render import finish, render, style, value_ticks  # noqa: E402
import numpy as np  # noqa: E402



def bias(df):
    d = df[(df.hessian == "distinct")]
    fig, ax = plt.subplots(figsize=(7.4, 4))
    for j, (lam, g) in enumerate(d[d.method == "feddeper"].groupby("lam")):
        g = g[np.isfinite(g.grad_norm) & (g.grad_norm < 1e3)]
        ax.plot(g.rhoK, g.grad_norm, label=f"FedDeper, lambda = {lam}", **style(j))
    base = {name: d[d.method == name].grad_norm.iloc[0] for name in ("fedavg", "fedprox", "scaffold")}
    for (name, v), ls, c in zip(base.items(), ("--", ":", "-."), ("0.1", "C4", "0.45")):
        same = [o for o, w in base.items() if o != name and np.isclose(v, w, rtol=1e-2)]
        ax.axhline(max(v, 1e-16), ls=ls, color=c, lw=1.4 if ls == ":" else 1,
                   label=f"{name} ({v:.2e})" + (f", on {same[0]}'s line" if same else ""))
    ax.set_yscale("log")
    ax.set_xlabel(r"$\rho K$ (K = 10, $\eta_l\beta K$ = 0.05)")
    ax.set_ylabel(r"$\|\nabla f(x_\infty)\|$ (deterministic, full participation)")
    ax.set_title("FedDeper rescales client drift: bias vs rho K\n(heterogeneous Hessians; diverges beyond the h0 pole)",
                 fontsize=10)
    return finish(fig, ax)


def instability(df):
    fig, ax = plt.subplots(figsize=(7.6, 4))
    runs = df[df.multiple.notna()]
    for j, ((p, lam), g) in enumerate(runs.groupby(["p", "lam"])):
        ax.plot(g.multiple, np.minimum(g.final_dist, 1e100), label=f"p = {p}, lambda = {lam}\n"
                f"(rho_crit K = {g.rhoK_crit.iloc[0]:.3f})", mfc="none" if j == 1 else None,
                **{**style(j), "markersize": [9, 6, 4][j % 3]})
    avg = df[df.multiple.isna()]
    ax.axhline(avg.final_dist.max(), color="k", ls="--", lw=1, label="FedAvg (largest of the settings)")
    ax.set_yscale("log")
    ax.set_xscale("log")
    value_ticks(ax, runs.multiple)
    ax.set_yticks([10.0 ** k for k in range(0, 101, 20)])
    ax.set_xlabel(r"$\rho / \rho_{crit}$ (linearised stale-v threshold)")
    ax.set_ylabel(r"final $\|x - x^*\|$")
    ax.set_title("Partial participation: stale personalized models\nmake FedDeper unstable beyond $\\rho_{crit}$",
                 fontsize=10)
    return finish(fig, ax)


def comparison(df):
    Ss = sorted(df.S.unique())
    fig, axes = plt.subplots(1, len(Ss), figsize=(4.4 * len(Ss) + 2, 3.9), squeeze=False, layout="constrained")
    for ax, S in zip(axes[0], Ss):
        d = df[df.S == S]
        for j, (m, g) in enumerate(d.groupby("method", sort=False)):
            s = g.groupby("round").subopt.mean()
            s = s[np.isfinite(s) & (s < 1e3)]
            ax.plot(s.index, s.values, label=m, lw=1.3, markevery=max(1, len(s) // 8), **style(j))
        ax.set_yscale("log")
        ax.set_title(f"S = {S} of 20 clients", fontsize=10)
        ax.set_xlabel("communication rounds")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel(r"$F(x^t) - F^*$")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False)
    fig.suptitle("Heterogeneous logistic regression, K = 10, B = 10 (curves above 1e3 = diverged, cut)", fontsize=11)
    return fig


FIGURES = {"e3_fixed_point_bias": ("feddeper_bias_vs_rhoK.png", bias),
           "e5_instability": ("feddeper_instability.png", instability),
           "e7_comparison": ("feddeper_comparison.png", comparison)}


def main(argv=None):
    render(FIGURES, "feddeper", __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
