"""Deep-network reproductions with the torch backend (GPU work; not run in CI).

Three of the reference papers' deep experiments, at the papers' settings:

``fedspeed_cifar10``
    FedSpeed (Sun et al. 2023, docs/papers/fedspeed.md, §6.1) on CIFAR-10: 100 clients, 10% per round,
    Dirichlet-0.6 split (``dirichlet_per_client``, equal client sizes as the authors' code),
    ResNet-18 with GroupNorm, 5 local epochs of batch 50 (K = 50), eta_l = 0.1 decayed by 0.9995
    (FedSpeed/FedDyn) or 0.998 (others) per round, lambda = 10, alpha = 1, rho0 = 0.1 with the
    normalised (SAM) perturbation, weight decay 1e-3 as l2, T = 1500; baselines FedAvg, SCAFFOLD,
    FedDyn (alpha = 1/lambda).
``fedsps_lenet_mnist``
    FedSPS (Mukherjee et al. 2023, docs/papers/fedsps.md, §6) on MNIST with LeNet-5: 100 clients, 10 per
    round, tau = 5, B = 20, i.i.d. and two-class shards, the smoothed cap (gamma_b0 = 1, c = 0.5),
    FedDecSPS (c0 = 0.5), FedAvg (eta_l = 0.1: the LeNet row of Table 1 is missing) and FedAMS
    (eta = 1, eps = 1e-3 from the MNIST row), 500 rounds.
``feddeper_cnn_mnist``
    FedDeper (docs/papers/feddeper.md, §6.1) on MNIST with its CNN: n = 100, S = 10, two-shard split, K = 10
    (FedDeper*: 5), eta_l = 0.01, lambda = 0.5, rho = 0.005, T = 500; FedAvg, FedProx (mu = 1),
    SCAFFOLD. The batch size is unspecified: 50.

Augmentation (FedSpeed's random crop and flip) is not applied: the runner's minibatches are index
arrays shared by every backend, and a random transform would be a second, backend-specific
stream. Each experiment writes ``OUT/<experiment>/results.parquet`` (the results store of
``fedtheory sweep``), which ``fedtheory plot OUT/<experiment> --y test_acc`` draws.

Usage::

    python -m validation.deep_reproduction fedspeed_cifar10 --device cuda
    python -m validation.deep_reproduction all --quick          # about 20 min on a CPU: small subsets
    python -m validation.deep_reproduction all --quick --dataset digits --out /tmp/deep   # offline
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "deep"


def _experiments(quick):
    """name -> (problem args, [run args]) at the papers' settings; ``quick`` shrinks data and rounds."""
    T = lambda full, q: q if quick else full          # noqa: E731
    sub = 2000 if quick else None
    n = 20 if quick else 100
    fs = dict(dataset="cifar10", model="resnet18_gn" if not quick else "feddeper_cnn_cifar", n_clients=n,
              partition="dirichlet_per_client", alpha=0.6, l2=1e-3, max_samples=sub)
    fs_common = dict(clients_per_round=10, batch_size=50 if not quick else 10, local_steps=50 if not quick else 2,
                     rounds=T(1500, 3), lr=0.1)
    fedspeed = [dict(algorithm="fedspeed", lam=10.0, alpha=1.0, rho=0.1, perturbation="sam", lr_decay=0.9995),
                dict(algorithm="feddyn", alpha=0.1, lr_decay=0.9995),
                dict(algorithm="fedavg", lr_decay=0.998), dict(algorithm="scaffold", lr_decay=0.998)]
    sps_common = dict(clients_per_round=10, batch_size=20, local_steps=5, rounds=T(500, 3), lr=0.1)
    sps_runs = []
    for part in ("iid", "shards"):
        sps_runs += [dict(algorithm="fedsps", c=0.5, gamma_b=1.0, smoothing="sps_code", _partition=part),
                     dict(algorithm="fedsps_dec", c0=0.5, gamma_b=1.0, _partition=part),
                     dict(algorithm="fedavg", _partition=part),
                     dict(algorithm="fedams", server_lr=1.0, eps=1e-3, bias_correction=True, _partition=part)]
    dep_common = dict(clients_per_round=10, batch_size=50, local_steps=10, rounds=T(500, 3), lr=0.01)
    feddeper = [dict(algorithm="feddeper", mix=0.5, rho=0.005), dict(algorithm="feddeper", mix=0.5, rho=0.005, star=True),
                dict(algorithm="fedavg"), dict(algorithm="fedprox", mu=1.0), dict(algorithm="scaffold")]
    return {
        "fedspeed_cifar10": (fs, [dict(fs_common, **r) for r in fedspeed]),
        "fedsps_lenet_mnist": (dict(dataset="mnist", model="lenet5", n_clients=n, partition="iid", max_samples=sub),
                               [dict(sps_common, **r) for r in sps_runs]),
        "feddeper_cnn_mnist": (dict(dataset="mnist", model="feddeper_cnn_mnist", n_clients=n, partition="shards",
                                    shards_per_client=2, max_samples=sub),
                               [dict(dep_common, **r) for r in feddeper]),
    }


def build(problem_args, data_dir=None, dataset=None):
    """The DeepProblem of an experiment's problem arguments (``dataset`` overrides the data set, e.g.
    "digits" for an offline smoke run; the model is sized from the data).

    Parameters
    ----------
    problem_args : dict
        The image problem's arguments.
    data_dir : str, optional
        Where the data are.
    dataset : str, optional
        Another data set than the configuration's.

    Returns
    -------
    DeepProblem
        The problem.
    """
    import numpy as np
    import problems
    from fedtheory.backends.torch import models
    a = dict(problem_args)
    name = dataset or a["dataset"]
    a.pop("dataset")
    if name == "digits":              # 8x8 digits zero-padded to MNIST's 28x28 frame
        arrays = list(problems.vision.load_digits_images(test_fraction=0.2, seed=0))
        for j in (0, 2):
            arrays[j] = np.pad(arrays[j], ((0, 0), (0, 0), (10, 10), (10, 10)))
        arrays = tuple(arrays)
    else:
        arrays = problems.vision.LOADERS[name](data_dir=data_dir)
    X = arrays[0]
    n_classes = int(np.max(arrays[1])) + 1
    kind = a.pop("model")
    if kind == "mlp":
        model = models.mlp(int(np.prod(X.shape[1:])), n_classes, seed=0)
    elif kind == "resnet18_gn":
        model = models.resnet18_gn(n_classes, in_channels=X.shape[1], seed=0)
    else:
        model = models.MODELS[kind](n_classes=n_classes, in_channels=X.shape[1], side=X.shape[2], seed=0)
    return problems.vision.image_problem(arrays, model, **a)


def run_experiment(name, quick=False, device=None, seed=0, out=OUT, data_dir=None, dataset=None, log=print):
    """Run one experiment; return the results directory (resumable: finished runs are skipped).

    Parameters
    ----------
    name : str
        The experiment.
    quick : bool, default False
        The quick settings.
    device : str, optional
        The torch device.
    seed : int, default 0
        The runs' seed.
    out : Path
        The results directory.
    data_dir : str, optional
        Where the data are.
    dataset : str, optional
        Another data set.
    log : callable, default print
        Where progress goes.

    Returns
    -------
    pathlib.Path
        The results store's directory.
    """
    import fedtheory as ft
    from fedtheory.reporting.results import ResultsStore
    from fedtheory.runs.schedules import round_decay
    from fedtheory.reporting.points import history_frame
    from fedtheory.reporting.results import run_id
    problem_args, runs = _experiments(quick)[name]
    store = ResultsStore(Path(out) / name)
    done = store.finished()
    problems_built = {}
    for ra in runs:
        ra = dict(ra, seed=seed, backend="torch")
        part = ra.pop("_partition", problem_args.get("partition"))
        pa = dict(problem_args, partition=part, dataset=dataset or problem_args["dataset"])
        if run_id(pa, ra) in done:
            log(f"{name}: {ra['algorithm']} ({part}) already stored, skipped")
            continue
        if part not in problems_built:
            problems_built[part] = build(pa, data_dir=data_dir)
        p = problems_built[part]
        kw = {k: v for k, v in ra.items() if k not in ("algorithm", "lr_decay")}
        if ra.get("lr_decay"):
            kw["lr"] = round_decay(ra["lr"], ra["lr_decay"], ra["local_steps"])
        t = time.perf_counter()
        res = ft.run(p, ra["algorithm"], device=device, eval_every=max(1, ra["rounds"] // 50), **kw)
        rid, df = history_frame(pa, ra, res)
        store.add(rid, df)
        store.commit()
        h = res.history
        log(f"{name}: {ra['algorithm']:10s} ({part}) {res.status}: loss {h.value.iloc[-1]:.4f}, "
            f"test acc {h.test_acc.iloc[-1]:.4f}, {res.rounds / (time.perf_counter() - t):.2f} rounds/s")
    return store.dir


def main(argv=None):
    """Run the experiments named on the command line.

    Parameters
    ----------
    argv : list of str, optional
        The command line (an experiment or ``all``, ``--quick``, ``--device``, ...; default ``sys.argv``).

    Returns
    -------
    int
        The exit status (0).
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", choices=["all", "fedspeed_cifar10", "fedsps_lenet_mnist", "feddeper_cnn_mnist"])
    ap.add_argument("--quick", action="store_true", help="20 clients, 2000 samples, 3 rounds (a smoke run on CPU)")
    ap.add_argument("--device", default=None, help="torch device (default: cuda when available)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--data-dir", default=None, help="directory holding the MNIST/CIFAR files")
    ap.add_argument("--dataset", default=None, choices=["mnist", "cifar10", "cifar100", "digits"],
                    help="replace the experiment's data set (digits: an offline smoke run)")
    args = ap.parse_args(argv)
    names = list(_experiments(args.quick)) if args.experiment == "all" else [args.experiment]
    for n in names:
        run_experiment(n, args.quick, args.device, args.seed, args.out, args.data_dir, args.dataset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
