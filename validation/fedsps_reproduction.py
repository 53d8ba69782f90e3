"""Reproduction of the FedSPS paper's convex experiments (docs/papers/fedsps.md, §6) on real LIBSVM data.

``python -m validation.fedsps_reproduction [--quick] [--out DIR] [--data-dir DIR]`` writes the
tables to ``DIR`` (default ``validation/results/fedsps``); ``python figures/fedsps.py`` draws the
figures. Settings of the paper (§6.1): logistic regression (no ridge, ell_i* = 0), i.i.d. split
over 100 clients, 10 sampled per round, tau = 5 local steps, minibatch 20, 500 rounds;
FedSPS (c = 0.5, gamma_b = 1), FedSPS-Global, FedDecSPS (c0 = 0.5, gamma_b = 1) against FedAvg
and FedAMS tuned on the paper's grid (App. F.4) by final training loss. Test accuracy uses the
official a9a.t test file, and a fixed 80/20 split for w8a and mushrooms (no official test file
here). The non-i.i.d. MNIST-style setting uses scikit-learn's digits (binary: digit < 5), split
into 2-class shards over 50 clients, 10 per round, minibatch 10 (digits is 1797 samples: the
paper's MNIST sizes do not fit).
"""
from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
import pandas as pd

import fedtheory as ft
import problems
from validation.experiments import markdown

ETA_L = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
ETA = (1e-3, 1e-2, 1e-1, 1.0)
EPS_AMS = (1e-8, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def load(name, data_dir=None, seed=0):
    """(train problem over 100 i.i.d. clients, X_test, y_test).

    Parameters
    ----------
    name : str
        A LIBSVM data set.
    data_dir : str, optional
        Where the data are.
    seed : int, default 0
        Seed of the partition.

    Returns
    -------
    tuple
        ``(problem, X_test, y_test)``.
    """
    X, y = problems.load_libsvm(name, data_dir=data_dir)
    if name == "a9a":
        Xt, yt = problems.load_libsvm("a9a.t", data_dir=data_dir)
    else:
        perm = np.random.default_rng(seed).permutation(X.shape[0])
        cut = int(0.8 * X.shape[0])
        Xt, yt = X[perm[cut:]], y[perm[cut:]]
        X, y = X[perm[:cut]], y[perm[:cut]]
    parts = problems.partition_indices(y, 100, "iid", seed=seed)
    p = problems.logistic([X[q] for q in parts], [y[q] for q in parts], l2=0.0, name=name)
    return p, Xt, yt


def digits_noniid(seed=0):
    """Non-i.i.d. logistic regression on scikit-learn's digits: 50 clients of 2-class shards, labels digit < 5.

    Parameters
    ----------
    seed : int
        Seed of the split and the partition.

    Returns
    -------
    tuple
        ``(problem, X_test, y_test)``.
    """
    from sklearn.datasets import load_digits
    X, c = load_digits(return_X_y=True)
    X = np.hstack([X / 16.0, np.ones((X.shape[0], 1))])          # pixels in [0, 1] and a bias feature
    y = np.where(c < 5, 1.0, -1.0)
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    cut = int(0.8 * X.shape[0])
    tr, te = perm[:cut], perm[cut:]
    parts = problems.partition_indices(c[tr], 50, "shards", seed=seed, shards_per_client=2)
    p = problems.logistic([X[tr][q] for q in parts], [y[tr][q] for q in parts], l2=0.0, name="digits<5 shards")
    return p, X[te], y[te]


def accuracy(X, y, x):
    """Test accuracy of a linear classifier.

    Parameters
    ----------
    X : ndarray of shape (m, d)
        Test rows.
    y : ndarray of shape (m,)
        Labels in {-1, +1}.
    x : ndarray of shape (d,)
        The model.

    Returns
    -------
    float
        The fraction of rows whose sign of X x is their label.
    """
    z = X @ x
    return float(np.mean(np.where(z >= 0, 1.0, -1.0) == y))


def _run(p, name, rounds, seed, eval_every, B, S, K=5, **kw):
    return ft.run(p, name, rounds=rounds, local_steps=K, clients_per_round=S, batch_size=B, seed=seed,
                  eval_every=eval_every, record_iterates=True, **kw)


def tune(p, name, grid, rounds, B, S, K=5, seed=0):
    """Best grid point by the mean training loss over the last 10% of rounds (diverged runs lose).

    Parameters
    ----------
    p : FederatedProblem
        The problem.
    name : str
        The algorithm.
    grid : list of dict
        The hyperparameters tried.
    rounds : int
        Rounds of each run.
    B : int
        Minibatch size.
    S : int
        Clients per round.
    K : int, default 5
        Local steps.
    seed : int, default 0
        The run's seed.

    Returns
    -------
    tuple
        ``(best grid point, its loss)``.
    """
    best, best_loss = None, np.inf
    for kw in grid:
        res = _run(p, name, rounds, seed, max(1, rounds // 20), B, S, K, **kw)
        if res.status != "max_rounds":
            continue
        h = res.history
        loss = h.value[h["round"] >= 0.9 * rounds].mean()
        if loss < best_loss:
            best, best_loss = kw, loss
    return best, best_loss


def curves(p, Xt, yt, label, name, kw, rounds, seeds, B, S, K=5, every=10):
    """Training loss, test accuracy and the step-size statistics at every evaluated round, per seed.

    Parameters
    ----------
    p : FederatedProblem
        The training problem.
    Xt, yt : ndarray
        The test rows and labels.
    label : str
        The method's label in the table.
    name : str
        The algorithm.
    kw : dict
        Its hyperparameters.
    rounds, seeds : int
        Rounds of a run, and seeds.
    B, S : int
        Minibatch size and clients per round.
    K : int
        Local steps.
    every : int
        Evaluate every this many rounds.

    Returns
    -------
    list of dict
        One row per seed and evaluated round.
    """
    rows = []
    for s in range(seeds):
        res = _run(p, name, rounds, s, every, B, S, K, **kw)
        h = res.history
        for _, r in h.iterrows():
            rnd = int(r["round"])
            rows.append(dict(method=label, seed=s, round=rnd, loss=r.value,
                             test_acc=accuracy(Xt, yt, res.iterates[rnd]) if rnd < len(res.iterates) else np.nan,
                             **{k: r.get(k, np.nan) for k in ("step_mean", "step_min", "step_max", "step_capped_frac",
                                                              "step_intra_cv", "step_inter_cv",
                                                              "step_capped_frac_total")},
                             status=res.status, params=str(kw)))
    return rows


def libsvm_experiment(name, quick, data_dir=None):
    """FedSPS, FedSPS-Global, FedDecSPS vs tuned FedAvg and FedAMS (docs/papers/fedsps.md, §6, Fig. 3(b), Fig. 9).

    Parameters
    ----------
    name : str
        A LIBSVM data set.
    quick : bool
        The quick settings (fewer rounds, seeds and points).
    data_dir : str, optional
        Where the data are.

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    p, Xt, yt = load(name, data_dir)
    rounds = 150 if quick else 500
    seeds = 1 if quick else 3
    B, S = 20, 10
    t_rounds = 60 if quick else 200
    avg_grid = [dict(lr=a, server_lr=b) for a, b in itertools.product(ETA_L, ETA)]
    ams_grid = [dict(lr=a, server_lr=b, eps_ams=e) for a, b, e in itertools.product(ETA_L, ETA, EPS_AMS)]
    if quick:
        ams_grid = [g for g in ams_grid if g["eps_ams"] in (1e-3, 1e-2) and g["server_lr"] >= 1e-2]
    best_avg, _ = tune(p, "fedavg", avg_grid, t_rounds, B, S)
    best_ams, _ = tune(p, "fedams", ams_grid, t_rounds, B, S)
    rows = []
    for label, alg, kw in (("FedSPS (c=0.5, gb=1)", "fedsps", dict(c=0.5, gamma_b=1.0)),
                           ("FedSPS-Global (a)", "fedsps_global", dict(c=0.5, gamma_b=1.0)),
                           ("FedDecSPS (c0=0.5, gb=1)", "fedsps_dec", dict(c0=0.5, gamma_b=1.0)),
                           (f"FedAvg tuned {best_avg}", "fedavg", best_avg),
                           (f"FedAMS tuned {best_ams}", "fedams", best_ams)):
        rows += curves(p, Xt, yt, label, alg, kw, rounds, seeds, B, S)
    return pd.DataFrame(rows).assign(dataset=name)


def sensitivity(quick, data_dir=None):
    """FedSPS on a9a: c in {0.01 ... 40} at gamma_b = 1 and gamma_b in {0.1 ... 10} at c = 0.5
    (docs/papers/fedsps.md, run E4, run E5): final loss and the fraction of steps at the cap.

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).
    data_dir : str, optional
        Where the data are.

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    p, Xt, yt = load("a9a", data_dir)
    rounds = 100 if quick else 300
    rows = []
    for c, gb in [(c, 1.0) for c in (0.01, 0.1, 0.5, 1.0, 5.0, 40.0)] + [(0.5, g) for g in (0.1, 5.0, 10.0)]:
        res = _run(p, "fedsps", rounds, 0, 10, 20, 10, c=c, gamma_b=gb)
        h = res.history
        tail = h[h["round"] >= 0.8 * rounds]
        rows.append(dict(c=c, gamma_b=gb, final_loss=tail.value.mean(), capped_frac=h.step_capped_frac_total.iloc[-1],
                         step_mean=tail.step_mean.mean(), test_acc=accuracy(Xt, yt, res.x), status=res.status))
    for lr in (0.1, 1.0):
        res = _run(p, "fedavg", rounds, 0, 10, 20, 10, lr=lr)
        h = res.history
        tail = h[h["round"] >= 0.8 * rounds]
        rows.append(dict(c=np.nan, gamma_b=np.nan, final_loss=tail.value.mean(), capped_frac=np.nan,
                         step_mean=lr, test_acc=accuracy(Xt, yt, res.x), status=f"FedAvg lr={lr}"))
    return pd.DataFrame(rows)


def digits_experiment(quick):
    """Non-i.i.d. (2-class shards) MNIST-style setting on digits: FedSPS, FedDecSPS vs tuned FedAvg,
    FedAdam and MIME (docs/papers/fedsps.md, run E8, Fig. 3(c)).

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).

    Returns
    -------
    pandas.DataFrame
        One row per setting measured.
    """
    p, Xt, yt = digits_noniid()
    rounds = 150 if quick else 500
    seeds = 1 if quick else 3
    B, S = 10, 10
    t_rounds = 60 if quick else 200
    best_avg, _ = tune(p, "fedavg", [dict(lr=a, server_lr=b) for a, b in itertools.product(ETA_L, ETA)], t_rounds, B, S)
    adam_grid = [dict(lr=a, server_lr=b, tau=e, bias_correction=True) for a, b, e in
                 itertools.product(ETA_L, ETA, (1e-8, 1e-3, 1e-1) if quick else EPS_AMS)]
    best_adam, _ = tune(p, "fedadam", adam_grid, t_rounds, B, S)
    best_mime, _ = tune(p, "mime", [dict(lr=a) for a in ETA_L], t_rounds, B, S)
    rows = []
    for label, alg, kw in (("FedSPS (c=0.5, gb=1)", "fedsps", dict(c=0.5, gamma_b=1.0)),
                           ("FedDecSPS (c0=0.5, gb=1)", "fedsps_dec", dict(c0=0.5, gamma_b=1.0)),
                           (f"FedAvg tuned {best_avg}", "fedavg", best_avg),
                           (f"FedAdam tuned {best_adam}", "fedadam", best_adam),
                           (f"MIME-Lite tuned {best_mime}", "mime", best_mime)):
        rows += curves(p, Xt, yt, label, alg, kw, rounds, seeds, B, S)
    return pd.DataFrame(rows).assign(dataset="digits non-iid")


def optima(datasets, data_dir=None):
    """The optimum F* of every problem of the reproduction (``optima.csv``), so that the figures
    plot the suboptimality F - F*. Without ridge, logistic data may have no minimiser
    (``attained`` False): then F* is the certified infimum (``validation.infimum``; linearly
    separable, inf F = 0; quasi-separable, the minimum over the rows that no direction of recession
    separates, ``rows_removed`` the others).

    Parameters
    ----------
    datasets : list of str
        The data sets.
    data_dir : str, optional
        Where the data are.

    Returns
    -------
    pandas.DataFrame
        One row per problem.
    """
    from fedtheory.truth import infimum
    rows = []
    built = [(n, load(n, data_dir)[0]) for n in datasets] + [("digits non-iid", digits_noniid()[0])]
    for name, p in built:
        inf = infimum(p)
        residual = np.nan if inf.reduced is None else inf.reduced.residual
        rows.append(dict(dataset=name, f_star=inf.f, attained=inf.attained, residual=residual,
                         rows_removed=inf.rows_removed))
    return pd.DataFrame(rows)


def long_horizon(quick, seed=0):
    """Run E7 (docs/papers/fedsps.md, §7): FedDecSPS against FedSPS over a long horizon on synthetic
    logistic regression (10 clients of 200 noisy-label rows, d = 10, no ridge, ell_i* = 0, full
    participation, tau = 5, minibatch 5; c = c0 = 0.5, gamma_b = 1), suboptimality F(x) - F* against
    the certified F*. FedSPS stalls at its neighbourhood; FedDecSPS's steps decay like 1/sqrt(t)
    and pass it later. Returns (curves, crossover): ``crossover`` the first evaluated round from
    which FedDecSPS's seed-mean suboptimality stays below FedSPS's (NaN: not within the horizon).

    Parameters
    ----------
    quick : bool
        The quick settings (fewer rounds, seeds and points).
    seed : int, default 0
        Seed of the data.

    Returns
    -------
    tuple
        ``(table, crossover round)``.
    """
    import validation
    rng = np.random.default_rng(seed)
    n, m, d = 10, 200, 10
    A = [rng.normal(size=(m, d)) + rng.normal(size=d) for _ in range(n)]       # a shift per client: non-i.i.d.
    w = rng.normal(size=d)
    y = [np.where(a @ w + rng.normal(scale=3.0, size=m) >= 0, 1.0, -1.0) for a in A]   # noisy labels: not separable
    p = problems.logistic(A, y)
    fstar = validation.ground_truth(p).f
    rounds, seeds, every = (1000, 1, 50) if quick else (5000, 3, 50)
    rows = []
    for label, alg, kw in (("FedSPS (c=0.5, gb=1)", "fedsps", dict(c=0.5, gamma_b=1.0)),
                           ("FedDecSPS (c0=0.5, gb=1)", "fedsps_dec", dict(c0=0.5, gamma_b=1.0))):
        for s in range(seeds):
            h = ft.run(p, alg, rounds=rounds, local_steps=5, batch_size=5, seed=s, eval_every=every, **kw).history
            rows += [dict(method=label, seed=s, round=int(r), suboptimality=float(v) - fstar)
                     for r, v in zip(h["round"], h["value"])]
    df = pd.DataFrame(rows)
    mean = df.groupby(["method", "round"]).suboptimality.mean().unstack(0)
    below = mean["FedDecSPS (c0=0.5, gb=1)"] < mean["FedSPS (c=0.5, gb=1)"]
    after = below[::-1].cummin()[::-1]                     # True from the round on which it stays below
    crossover = float(after.index[after.values.argmax()]) if after.any() else float("nan")
    return df, crossover


def _write_long_horizon(out, quick):
    """Run E7 (:func:`long_horizon`) and write ``long_horizon.csv`` (every evaluated round) and
    ``long_horizon.md`` (the seed-mean suboptimality at a few rounds, and the crossover)."""
    long, crossover = long_horizon(quick)
    long.to_csv(out / "long_horizon.csv", index=False)
    mean = long.groupby(["round", "method"], sort=False).suboptimality.mean().unstack(1)
    last = int(mean.index.max())
    show = mean.loc[[r for r in mean.index if r in (0, 50, 100, 500, 1000, 2000, last)]]
    seeds = long.seed.nunique()
    (out / "long_horizon.md").write_text(
        f"### long horizon (run E7, synthetic logistic regression; {'quick' if quick else 'full'}, {seeds} "
        f"seed(s)): mean F(x) - F*\n\n{markdown(show.reset_index())}\n\nFedDecSPS below FedSPS from round "
        f"{crossover:g} on.\n")
    print(f"long horizon: FedDecSPS below FedSPS from round {crossover:g} on")
    return long, crossover


def summary(df):
    """The last 10% of rounds of every method, averaged.

    Parameters
    ----------
    df : pandas.DataFrame
        The curves (:func:`curves` rows) of every data set.

    Returns
    -------
    pandas.DataFrame
        One row per data set and method: final loss, test accuracy and step-size statistics.
    """
    last = df[df["round"] >= 0.9 * df["round"].max()]
    g = last.groupby(["dataset", "method"], sort=False)
    fin = df[df["round"] == df["round"].max()].groupby(["dataset", "method"], sort=False)
    out = g.agg(final_loss=("loss", "mean"), test_acc=("test_acc", "mean"), capped_frac=("step_capped_frac", "mean"),
                 step_mean=("step_mean", "mean"), intra_cv=("step_intra_cv", "mean"),
                 inter_cv=("step_inter_cv", "mean"))
    out["capped_frac_all_steps"] = fin.step_capped_frac_total.mean()
    return out.reset_index()


def main(argv=None):
    """The command line of this module: run its experiments and write their tables.

    Parameters
    ----------
    argv : list of str, optional
        The command line (``--quick``, ``--out DIR``, ...; default ``sys.argv``).

    Returns
    -------
    dict
        The tables written, by name.
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "fedsps"))
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--datasets", nargs="*", default=["w8a", "mushrooms", "a9a"])
    ap.add_argument("--optima-only", action="store_true", help="only the certified optima (optima.csv)")
    ap.add_argument("--long-horizon-only", action="store_true",
                    help="only run E7, FedDecSPS against FedSPS over 5000 rounds (long_horizon.csv, long_horizon.md)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.long_horizon_only:                   # synthetic: needs none of the LIBSVM optima
        long, crossover = _write_long_horizon(out, args.quick)
        return dict(long_horizon=long, crossover=crossover)
    opt = optima(args.datasets, args.data_dir)
    opt.to_csv(out / "optima.csv", index=False)
    print(opt.to_string(index=False))
    if args.optima_only:
        return dict(optima=opt)
    t0 = time.perf_counter()
    parts = [libsvm_experiment(n, args.quick, args.data_dir) for n in args.datasets]
    parts.append(digits_experiment(args.quick))
    curves_df = pd.concat(parts, ignore_index=True)
    curves_df.to_csv(out / "curves.csv", index=False)
    summ = summary(curves_df)
    summ.to_csv(out / "summary.csv", index=False)
    sens = sensitivity(args.quick, args.data_dir)
    sens.to_csv(out / "sensitivity.csv", index=False)
    long, crossover = _write_long_horizon(out, args.quick)
    (out / "tables.md").write_text(f"### summary ({'quick' if args.quick else 'full'})\n\n{markdown(summ)}\n\n"
                                   f"### sensitivity (a9a)\n\n{markdown(sens)}\n")
    print(summ.to_string(index=False))
    print(sens.to_string(index=False))
    print(f"{time.perf_counter() - t0:.0f} s")
    return dict(curves=curves_df, summary=summ, sensitivity=sens, optima=opt, long_horizon=long,
                crossover=crossover)


if __name__ == "__main__":
    main()
