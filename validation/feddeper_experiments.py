"""Validation runs of docs/papers/feddeper.md, §7 (E2-E9; E1 is the unit tests) as result tables.

``python -m validation.feddeper_experiments [--quick] [--out DIR]`` writes CSV and Markdown tables
to ``DIR`` (default ``validation/results/feddeper``); ``python figures/feddeper.py`` draws the
figures. The slow test ``tests/test_validation_slow.py::test_feddeper_experiments_quick`` checks
the predictions.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

import fedtheory as ft
import problems
import validation
from validation.experiments import run_experiments
from validation.fedspeed_experiments import hetero_logistic


def hetero_quadratic(n=10, d=5, seed=3, het=1.0):
    """Heterogeneous quadratic with distinct Hessians (L = 1, mu = 0.3), the experiments' default problem.

    Parameters
    ----------
    n, d : int
        Clients and dimension.
    seed : int
        Seed of the construction.
    het : float
        The heterogeneity at the optimum.

    Returns
    -------
    FederatedProblem
        ``problems.quadratic(n, d, L=1.0, mu=0.3, heterogeneity=het, seed=seed, hessian="distinct")``.
    """
    return problems.quadratic(n, d, L=1.0, mu=0.3, heterogeneity=het, seed=seed, hessian="distinct")


def _grad_norm_at_limit(p, name, K, lr, rounds, **kw):
    res = ft.run(p, name, rounds=rounds, local_steps=K, lr=lr, **kw)
    g = p.grad(res.x)
    return float(np.sqrt(g @ g)), res.status


# ------------------------------------------------------------------------- E3 --
def e3_fixed_point_bias(quick):
    """Deterministic, full participation, heterogeneous Hessians: ||grad f(x_inf)|| of FedDeper vs rho K
    (lambda in {0.5, 1}) against FedAvg, FedProx(mu=1) and SCAFFOLD; equal Hessians as control.

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    K, lr = 10, 0.005            # a = eta K beta = 0.05 (docs/papers/feddeper.md, C15)
    rounds = 3000 if quick else 8000
    rows = []
    for hess in ("distinct", "shared"):
        p = problems.quadratic(10, 5, L=1.0, mu=0.3, heterogeneity=1.0, seed=3, hessian=hess)
        base = {}
        for name, kw in (("fedavg", {}), ("fedprox", {"mu": 1.0}), ("scaffold", {})):
            base[name] = _grad_norm_at_limit(p, name, K, lr, rounds, **kw)[0]
            rows.append(dict(hessian=hess, method=name, lam=np.nan, rhoK=np.nan, grad_norm=base[name],
                             ratio_to_fedavg=base[name] / base["fedavg"] if base["fedavg"] > 0 else np.nan))
        for lam in (0.5, 1.0):
            for rhoK in (0.02, 0.05, 0.1, 0.112, 0.2, 0.3, 0.5, 0.788):
                gn, st = _grad_norm_at_limit(p, "feddeper", K, lr, rounds, rho=rhoK / K, mix=lam)
                rows.append(dict(hessian=hess, method="feddeper", lam=lam, rhoK=rhoK, grad_norm=gn if st == "max_rounds" else np.inf,
                                 ratio_to_fedavg=gn / base["fedavg"] if base["fedavg"] > 1e-13 else np.nan))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- E4 --
def h0(rho, lam, K, eta=1.0):
    """Effective step at zero curvature: h0 = eta [(S0 - rho S1) - c (1-lam) K / lam] / (1 + c) (docs/papers/feddeper.md, run E4).

    Parameters
    ----------
    rho : float
        The FedDeper coupling.
    lam : float
        lambda.
    K : int
        Local steps.
    eta : float, default 1
        The local step size.

    Returns
    -------
    float
        h0.
    """
    k = np.arange(K)
    w = (1 - rho) ** (K - 1 - k)
    S0, S1 = w.sum(), (k * w).sum()
    c = 1 - (1 - rho) ** K
    return eta * ((S0 - rho * S1) - c * (1 - lam) * K / lam) / (1 + c)


def h_moving(rho, lam, K, eta=1.0):
    """Steady-state round step when the model moves (identical clients, zero curvature): with
    e = v_0 - x stationary, Delta x = -eta g [(S0 - rho S1) - c (1-lam) K/lam] / (1 - c (1-lam)/lam).

    Parameters
    ----------
    rho : float
        The FedDeper coupling.
    lam : float
        lambda.
    K : int
        Local steps.
    eta : float, default 1
        The local step size.

    Returns
    -------
    float
        The steady-state round step.
    """
    k = np.arange(K)
    w = (1 - rho) ** (K - 1 - k)
    S0, S1 = w.sum(), (k * w).sum()
    c = 1 - (1 - rho) ** K
    return eta * ((S0 - rho * S1) - c * (1 - lam) * K / lam) / (1 - c * (1 - lam) / lam)


def e4_effective_step(quick):
    """Mean round displacement of FedDeper on a nearly flat problem (identical clients, curvature 1e-6)
    in steady state, against the h0 of docs/papers/feddeper.md, run E4 (derived at a fixed point with Delta x = 0) and against
    the moving steady state derived here (h_moving); FedAvg's is eta K.

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    d, n = 3, 4
    Q = np.eye(d) * 1e-6
    p = problems.explicit_quadratic(Q, np.tile([1.0, -2.0, 0.5], (n, 1)))
    K, lr = 10, 0.01
    rows = []
    for lam in (0.5, 0.75, 1.0):
        for rhoK in (0.0, 0.05, 0.1, 0.3, 0.5):
            res = ft.run(p, "feddeper", rounds=200, local_steps=K, lr=lr, rho=rhoK / K, mix=lam, record_iterates=True)
            step = res.iterates[-1] - res.iterates[-2]
            g = p.grad(res.iterates[-2])
            measured = float(-(step @ g) / (g @ g))
            rows.append(dict(lam=lam, rhoK=rhoK, step_over_etaK_measured=measured / (lr * K),
                             h_moving_over_etaK=h_moving(rhoK / K, lam, K) / K,
                             spec_h0_over_etaK=h0(rhoK / K, lam, K) / K))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- E5 --
def rho_crit(p_frac, lam, K):
    """Linearised instability threshold: c (1 - p lam) > p lam with c = 1 - (1-rho)^K (docs/papers/feddeper.md, run E5).

    Parameters
    ----------
    p_frac : float
        The participation fraction p.
    lam : float
        lambda.
    K : int
        Local steps.

    Returns
    -------
    float
        The threshold (inf when none).
    """
    r = p_frac * lam / (1 - p_frac * lam) if p_frac * lam < 1 else math.inf
    if not r < 1:
        return math.inf
    return 1 - (1 - r) ** (1 / K)


def e5_instability(quick):
    """Partial participation with stale v: runs at 0.5x, 1x and 3x the linearised threshold rho_crit
    (n = 20, K = 10, near-zero curvature) for p in {0.1, 0.5}, lambda in {0.5, 1}.

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    n, K = 20, 10
    p = problems.quadratic(n, 3, L=0.01, mu=0.005, heterogeneity=0.01, seed=4, hessian="distinct")
    rounds = 600 if quick else 2000
    rows = []
    for pf, lam in ((0.1, 0.5), (0.1, 1.0), (0.5, 0.5)):
        S = int(pf * n)
        rc = rho_crit(pf, lam, K)
        for mult in (0.5, 1.0, 3.0):
            res = ft.run(p, "feddeper", rounds=rounds, local_steps=K, lr=0.5, rho=mult * rc, mix=lam,
                         clients_per_round=S, seed=0)
            dist = float(np.linalg.norm(res.x - p.info["x_star"])) if res.status == "max_rounds" else np.inf
            rows.append(dict(p=pf, lam=lam, S=S, rho_crit=rc, rhoK_crit=rc * K, multiple=mult, status=res.status,
                             final_dist=dist, rounds=res.rounds))
        avg = ft.run(p, "fedavg", rounds=rounds, local_steps=K, lr=0.5, clients_per_round=S, seed=0)
        rows.append(dict(p=pf, lam=lam, S=S, rho_crit=rc, rhoK_crit=rc * K, multiple=np.nan, status="FedAvg " + avg.status,
                         final_dist=float(np.linalg.norm(avg.x - p.info["x_star"])), rounds=avg.rounds))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- E7 --
def e7_comparison(quick):
    """Heterogeneous logistic regression (20 clients), K = 10, eta_l = 0.1/L, minibatch 10:
    FedAvg, FedProx (mu = 1), SCAFFOLD, FedDeper (lambda = 0.5, rho in {0.005, 0.03}) and FedDeper*,
    S in {2, 10, 20}; final F - F* and ||grad F||^2 (3 seeds).

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    p = hetero_logistic()
    gt = validation.ground_truth(p)
    L = validation.constants(p, gt).L_max
    rounds = 150 if quick else 500
    seeds = 1 if quick else 3
    methods = {"fedavg": ("fedavg", {}), "fedprox mu=1": ("fedprox", {"mu": 1.0}), "scaffold": ("scaffold", {}),
               "feddeper rho=0.005": ("feddeper", {"rho": 0.005, "mix": 0.5}),
               "feddeper rho=0.03": ("feddeper", {"rho": 0.03, "mix": 0.5}),
               "feddeper* rho=0.03": ("feddeper", {"rho": 0.03, "mix": 0.5, "star": True})}
    rows = []
    for S in (2, 10, 20):
        for label, (name, kw) in methods.items():
            for s in range(seeds):
                res = ft.run(p, name, rounds=rounds, local_steps=10, lr=0.1 / L, clients_per_round=S, batch_size=10,
                             seed=s, reference=gt, eval_every=max(1, rounds // 50), **kw)
                h = res.history
                for _, r in h.iterrows():
                    rows.append(dict(S=S, method=label, seed=s, round=int(r["round"]), subopt=r.suboptimality,
                                     grad_sq=r.grad_mapping_sq, grad_evals=r.grad_evals, comm_up=r.comm_up,
                                     status=res.status))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- E2 --
def e2_drift_vs_K(quick):
    """Remark 1(ii) / Fig. 1: final F - F* at a fixed budget K T = 2000 local steps, full participation,
    exact gradients, for K in {1, 2, 5, 10, 20, 50, 100}: i.i.d. vs label-skewed logistic regression.

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    rows = []
    budget = 1000 if quick else 2000
    for split in ("iid", "shards"):
        p = problems.breast_cancer(n_clients=10, partition=split, l2=1e-2, seed=0)
        gt = validation.ground_truth(p)
        L = validation.constants(p, gt).L_max
        for K in (1, 2, 5, 10, 20, 50, 100):
            for name, kw in (("fedavg", {}), ("scaffold", {}), ("feddeper", {"rho": 0.1 / K, "mix": 0.5})):
                res = ft.run(p, name, rounds=budget // K, local_steps=K, lr=0.5 / L, reference=gt,
                             eval_every=budget // K, **kw)
                rows.append(dict(split=split, K=K, method=name, final_subopt=res.history.suboptimality.iloc[-1],
                                 status=res.status))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- E6 --
def e6_theorem1_grid(quick):
    """Theorem 1 on a noisy equal-Hessian quadratic: (n, S) in {(10, 5), (10, 10), (100, 5), (100, 10)},
    K in {2, 5, 10}, a = a_cap and a_cap/4, rho in {0, eta beta}; LHS vs RHS printed and corrected.

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    rows = []
    T = 100 if quick else 400
    seeds = 2 if quick else 10
    for n, S in ((10, 5), (10, 10), (100, 5), (100, 10)):
        p = problems.quadratic(n, 3, L=1.0, mu=0.2, heterogeneity=1.0, noise=0.2, seed=0)
        from fedtheory.theory import feddeper as th
        for K in ((5,) if quick else (2, 5, 10)):
            cap = th.a_cap(1.0, n, S)
            for frac in (1.0, 0.25):
                lr = frac * cap / K
                for rho in (0.0, lr):
                    v = validation.verify("feddeper.theorem_1", p, rounds=T, local_steps=K, lr=lr, rho=rho,
                                          clients_per_round=S, seeds=seeds, variant="printed")
                    c = validation.verify("feddeper.theorem_1", p, rounds=T, local_steps=K, lr=lr, rho=rho,
                                          clients_per_round=S, seeds=seeds, variant="corrected",
                                          measurement=v.details["measurement"])
                    rows.append(dict(n=n, S=S, K=K, a_over_cap=frac, rho=rho, lhs=v.measured, stderr=v.stderr,
                                     rhs_printed=v.bound, rhs_corrected=c.bound, ratio=c.ratio,
                                     applicable=v.applicable, holds=v.holds and c.holds))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- E8 --
def e8_theorem2(quick):
    """Theorem 2, full participation, lambda in {0.5, 1}, strongly convex quadratics: the personalized
    LHS against the corrected bound (1/mu^2) and the paper's step (1/beta^2).

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    rows = []
    for mu in (0.5, 0.05):
        p = problems.quadratic(6, 3, L=1.0, mu=mu, heterogeneity=1.0, seed=1, hessian="distinct")
        for lam in (0.5, 1.0):
            for lr in (0.05, 0.01):
                kw = dict(rounds=100 if quick else 300, local_steps=5, lr=lr, rho=lr / 5, mix=lam, x0=np.full(3, 20.0))
                pr = validation.verify("feddeper.theorem_2", p, variant="printed", **kw)
                co = validation.verify("feddeper.theorem_2", p, variant="corrected", measurement=pr.details["measurement"],
                                       **kw)
                rows.append(dict(mu=mu, lam=lam, lr=lr, lhs=pr.measured, bound_printed=pr.bound,
                                 bound_corrected=co.bound, printed_holds=pr.holds, corrected_holds=co.holds))
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------- E9 --
def e9_sweeps(quick):
    """Fig. 3-style sweeps on heterogeneous logistic regression (20 clients, S = 10, K = 10, 300 rounds):
    final F - F* over rho (lambda = 0.5) and over lambda (rho = 0.003), and the best rho against
    c(lambda)/K (E3) and eta_l (the paper's heuristic).

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    p = hetero_logistic()
    gt = validation.ground_truth(p)
    L = validation.constants(p, gt).L_max
    lr = 0.1 / L
    rounds = 100 if quick else 300
    rows = []
    for rho in (0.0, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1):
        res = ft.run(p, "feddeper", rounds=rounds, local_steps=10, lr=lr, rho=rho, mix=0.5, clients_per_round=10,
                     batch_size=10, seed=0, reference=gt, eval_every=rounds)
        rows.append(dict(sweep="rho", rho=rho, lam=0.5, final_subopt=res.history.suboptimality.iloc[-1] if
                         res.status == "max_rounds" else np.inf, eta_l=lr))
    for lam in (0.5, 0.625, 0.75, 0.875, 1.0):
        res = ft.run(p, "feddeper", rounds=rounds, local_steps=10, lr=lr, rho=3e-3, mix=lam, clients_per_round=10,
                     batch_size=10, seed=0, reference=gt, eval_every=rounds)
        rows.append(dict(sweep="lambda", rho=3e-3, lam=lam, final_subopt=res.history.suboptimality.iloc[-1] if
                         res.status == "max_rounds" else np.inf, eta_l=lr))
    return pd.DataFrame(rows)


EXPERIMENTS = {"e2_drift_vs_K": e2_drift_vs_K, "e3_fixed_point_bias": e3_fixed_point_bias, "e4_effective_step": e4_effective_step,
               "e5_instability": e5_instability, "e6_theorem1_grid": e6_theorem1_grid,
               "e7_comparison": e7_comparison, "e8_theorem2": e8_theorem2, "e9_sweeps": e9_sweeps}


def _shown(name, df):
    if name != "e7_comparison":
        return df
    last = df[df["round"] == df["round"].max()]
    return last.groupby(["S", "method"], sort=False)[["subopt", "grad_sq"]].mean().reset_index()


def main(argv=None):
    """The command line of this module: run its experiments and write their tables.

    Parameters
    ----------
    argv : list of str, optional
        The command line (``--quick``, ``--out DIR``, ...; default ``sys.argv``).

    Returns
    -------
    dict
        The tables written, by experiment name.
    """
    return run_experiments(EXPERIMENTS, Path(__file__).parent / "results" / "feddeper",
                           __doc__.splitlines()[0], argv, shown=_shown)


if __name__ == "__main__":
    main()
