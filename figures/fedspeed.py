"""Figures of the FedSpeed validation runs (spec/fedspeed.md §7) from their CSV tables.

``python figures/fedspeed.py [--results validation/results/fedspeed] [--out figures]`` reads the
tables written by ``python -m validation.fedspeed_experiments`` and writes PNGs.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _render import finish, render  # noqa: E402
import numpy as np  # noqa: E402



def theorem_vs_T(df):
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.errorbar(df["T"], df.lhs, yerr=2 * df.lhs_stderr, fmt="o-", color="k", label="measured LHS (mean, 2 s.e.)")
    ax.plot(df["T"], df.final_window, "s:", color="0.4", label=r"last quarter mean of $\|\nabla F(z^t)\|^2$")
    for col, style, lab in (("rhs_printed", "C3--", "RHS printed (6)-(7)"),
                            ("rhs_corrected", "C2-", "RHS corrected (+ dropped variance)"),
                            ("rhs_derived", "C0x:", "RHS derived (E1, E2 fixed)")):
        ax.plot(df["T"], df[col], style, label=lab, ms=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("communication rounds T  (K = 2T, $\\eta_l=\\lambda/K$, $\\rho=0.1/\\sqrt{T}$)")
    ax.set_ylabel(r"$\frac{1}{T}\sum_{t=1}^{T-1}\mathbb{E}\|\nabla F(z^t)\|^2$")
    ax.set_title("FedSpeed Theorem 4.4: bound vs measured\n(Corollary 4.5 schedule, noisy quadratic, n = 10)", fontsize=10)
    return finish(fig, ax)


def floor_vs_K(df):
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for j, (n, g) in enumerate(df.groupby("n")):
        ax.errorbar(g.K, g.floor, yerr=2 * g.floor_stderr, fmt="o", color=f"C{j}", label=f"measured, n={n}")
        ax.plot(g.K, g.heuristic, "-", color=f"C{j}", alpha=0.7,
                label=r"$\lambda S_2 s^2 \mathrm{tr}(A)/(2n)$" + f", n={n}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"local steps K  ($\eta_l = \lambda / K$, $\lambda=0.05$)")
    ax.set_ylabel(r"stationary $\mathbb{E}\|\nabla F(z^t)\|^2$")
    ax.set_title("FedSpeed noise floor scales as 1/K and 1/n\n(the variance the proof of Theorem 4.4 drops)", fontsize=10)
    ax.set_xticks(sorted(df.K.unique()), [str(k) for k in sorted(df.K.unique())])
    ax.minorticks_off()
    return finish(fig, ax)


def server_floor(df):
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for j, (lam, g) in enumerate(df.groupby("lam_L")):
        for server, style in (("alg1", "o-"), ("dyn", "x--")):
            h = g[g.server == server]
            ax.plot(h.S, np.maximum(h.mean_dist_last200, 1e-16), style, color=f"C{j}",
                    label=f"{server}, $\\lambda L$={lam}")
    ax.set_yscale("log")
    ax.set_xlabel("clients per round S (n = 20), exact gradients")
    ax.set_ylabel(r"mean $\|x^t - x^*\|$ over the last 200 rounds")
    ax.set_title("FedSpeed server under partial participation:\nAlg. 1 line 16 ('alg1') vs released code ('dyn')", fontsize=10)
    return finish(fig, ax, ncol=2)


def audit(df):
    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(df))
    for j, (col, lab) in enumerate((("rhs_printed", "printed"), ("rhs_derived", "derived"),
                                    ("rhs_corrected", "corrected"))):
        ax.bar(x + (j - 1) * 0.27, df.lhs / df[col], 0.27, label=lab, color=f"C{[3, 0, 2][j]}")
    ax.axhline(1.0, color="k", lw=1)
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{c}\n(hidden fail: {h})" for c, h in zip(df.case, df.hidden_failed)], fontsize=7)
    ax.set_ylabel("measured LHS / bound  (> 1: bound violated)")
    ax.set_title("FedSpeed Theorem 4.4 audit, spec §4.6 cases", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def fixed_budget(df):
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for j, (m, g) in enumerate(df.groupby("method", sort=False)):
        ax.plot(g.K, g.final_subopt, "o-", color=f"C{j}", label=m)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("local steps K at a fixed budget K T")
    ax.set_ylabel(r"final $F(x) - F^*$")
    ax.set_title("Robustness to K at a fixed local budget\n(heterogeneous logistic, S = 5 of 20, B = 10)", fontsize=10)
    ax.set_xticks(sorted(df.K.unique()), [str(k) for k in sorted(df.K.unique())])
    ax.minorticks_off()
    return finish(fig, ax)


FIGURES = {"e8_corollary": ("fedspeed_theorem_vs_T.png", theorem_vs_T),
           "e7_noise_floor": ("fedspeed_floor_vs_K.png", floor_vs_K),
           "e5_server_rule": ("fedspeed_server_floor.png", server_floor),
           "e6_theorem_audit": ("fedspeed_theorem_audit.png", audit),
           "e9_fixed_budget": ("fedspeed_fixed_budget.png", fixed_budget)}


def main(argv=None):
    render(FIGURES, "fedspeed", __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
