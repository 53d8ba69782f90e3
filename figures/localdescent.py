"""Figures of the local-descent validation runs (docs/papers/localdescent.md) from their CSV tables.

``python figures/localdescent.py [--results validation/results/localdescent] [--out figures]``.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _render import finish, log_ticks, render, value_ticks  # noqa: E402



def admissible_eta(df):
    fig, ax = plt.subplots(figsize=(7.4, 4.2))
    for j, (s, g) in enumerate(df.groupby("s")):
        lam = g.lam_sup.iloc[0]
        ax.plot(g.E, g.eta_empirical_L, "o-", color=f"C{j}", label=f"empirical, $\\lambda$={lam:.3f}")
        ax.plot(g.E, g.eta43_L, "--", marker=["s", "D", "P"][j % 3], mfc="none", ms=[9, 7, 5][j % 3], color=f"C{j}",
                alpha=0.9, label=f"(43), $\\lambda$={lam:.3f}")
        ax.plot(g.E, g.eta46_L, "^:", color=f"C{j}", alpha=0.8, label=f"(46), $\\lambda$={lam:.3f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    value_ticks(ax, df.E)
    ax.set_xlabel("local steps E")
    ax.set_ylabel(r"largest admissible $\eta L$")
    ax.set_title("Theorem 4.1: admissible step vs E\n(empirical rate bound holds vs the conditions;"
                 "\n(43) nearly equal for the three $\\lambda$: open markers of decreasing size)", fontsize=10)
    return finish(fig, ax)


def rounds_per_efold(df):
    fig, ax = plt.subplots(figsize=(7.2, 4))
    ax.plot(df.E, df.guaranteed_46, "^:", color="C3", label="guaranteed, (46)")
    ax.plot(df.E, df.guaranteed_43, "s--", color="C0", label="guaranteed, (43)")
    ax.plot(df.E, df.measured_at_eta43, "o-", color="k", label=r"measured at $\eta_{43}$")
    ax.axhline(df.asymptote_43.iloc[0], color="C0", lw=0.8, alpha=0.6, label=r"asymptote of (43): $2\kappa\sqrt{\lambda}$")
    ax.axhline(df.asymptote_46.iloc[0], color="C3", lw=0.8, alpha=0.6, label=r"asymptote of (46): $4\lambda\kappa^2$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    value_ticks(ax, df.E)
    log_ticks(ax, "y")
    ax.set_xlabel("local steps E")
    ax.set_ylabel("communication rounds per e-fold of f - f*")
    ax.set_title(f"LFGD: rounds per e-fold ($\\kappa$={df.kappa.iloc[0]:.2f}, $\\lambda$={df.lam_sup.iloc[0]:.3f})",
                 fontsize=10)
    return finish(fig, ax)


def plateau(df):
    fig, ax = plt.subplots(figsize=(7.2, 4))
    for j, (eta, g) in enumerate(df.groupby("eta")):
        g = g[g.E > 1]
        ax.plot(g.E, g.plateau_measured, "o", color=f"C{j}", ms=7, label=f"measured, $\\eta$={eta}")
        ax.plot(g.E, g.plateau_predicted, "-", color=f"C{j}", label=f"$f(x_E)-f^*$ (identity #11), $\\eta$={eta}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    value_ticks(ax, df[df.E > 1].E)
    ax.set_xlabel("local steps E")
    ax.set_ylabel(r"plateau of $f - f^*$")
    ax.set_title("Distinct minimisers: local GD plateau\n(Theorems 4.1-4.7 not applicable)", fontsize=10)
    return finish(fig, ax)


def topology(df):
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.2), layout="constrained")
    for j, ((n, top), g) in enumerate(df.groupby(["n", "topology"])):
        g = g[g.consensus > 1e-20]        # complete graph with E = 1: exact consensus (round-off only)
        kw = dict(ls="-" if top == "ring" else "--", marker=["o", "s", "^"][j // 2 % 3], color=f"C{j}")
        axes[0].plot(g.E, g.consensus, label=f"{top}, n={n} ($\\zeta$={g.zeta.iloc[0]:.2f})", **kw)
        axes[1].plot(g.E, g.ratio, **kw)
    axes[0].set_ylabel(r"consensus error $\frac{1}{T}\sum_t \frac{1}{n}\sum_j\|x_j-\bar x\|^2$")
    axes[1].set_ylabel("measured / Lemma D.2 bound")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        value_ticks(ax, df.E)
        ax.set_xlabel("local steps E between gossip steps")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_title("NFSGD consensus error\n(complete graph, E = 1: exactly 0, not shown)", fontsize=10)
    axes[1].set_title("Lemma D.2 is loose on rings\n(zeta-dependence)", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7, frameon=False)
    return fig


def nonconvex(df):
    fig, ax = plt.subplots(figsize=(7.2, 4))
    for j, (S, g) in enumerate(df.groupby("S")):
        ax.errorbar(g.E, g.measured, yerr=2 * g.stderr, fmt="o-", color=f"C{j}", label=f"measured, S={S}")
        ax.plot(g.E, g.bound, "--", marker="s", mfc="none", color=f"C{j}", label=f"bound (24), S={S}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    value_ticks(ax, df.E)
    log_ticks(ax, "y")
    ax.set_xlabel("local steps E")
    ax.set_ylabel(r"$\frac{1}{T}\sum_t\|\nabla f(\bar x^{(t)})\|^2$")
    ax.set_title(f"Theorem 4.4, $\\eta=\\sqrt{{S/T}}/L$, T={int(df['T'].iloc[0])}: linear speed-up in S", fontsize=10)
    return finish(fig, ax)


FIGURES = {"e3_admissible_eta": ("localdescent_admissible_eta.png", admissible_eta),
           "e4_rounds_per_efold": ("localdescent_rounds_per_efold.png", rounds_per_efold),
           "e2_distinct_minimizers": ("localdescent_plateau.png", plateau),
           "e7_topology": ("localdescent_topology.png", topology),
           "e6_lfsgd_nonconvex": ("localdescent_theorem_4_4.png", nonconvex)}


def main(argv=None):
    render(FIGURES, "localdescent", __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
