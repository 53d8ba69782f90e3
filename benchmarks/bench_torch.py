"""Rounds per second of the torch backend, on CPU and (when one is present) on a CUDA GPU.

Two settings, each measured in one run against a peer in the same process:

* convex: FedAvg on LIBSVM a9a logistic regression (100 i.i.d. clients, 10 per round, K = 5,
  B = 20, float64) with ``backend="numba"`` and ``backend="torch"``: the price of the torch
  backend's per-step Python loop on a tiny model;
* deep: LeNet-5 and FedDeper's MNIST CNN on MNIST-shaped data (100 clients of 60 synthetic
  28x28 images, 10 per round, K = 5, B = 20) with FedAvg, SCAFFOLD, FedSpeed and FedSPS through
  ``ft.run(backend="torch")``, against a conventional PyTorch FedAvg loop (a model copy and an SGD
  optimizer per client per round, as FL simulators do) on the same data.

Usage::

    FEDTHEORY_DATA=../shared/data/libsvm python benchmarks/bench_torch.py [--rounds 20] [--device cuda]
"""
import argparse
import copy
import json
import platform
import sys
import time

import numpy as np
import torch

import fedtheory as ft
import problems
from fedtheory.backends.torch import DeepProblem, models

S, K, B = 10, 5, 20


def rate(fn, rounds):
    """Rounds per second of training: ``RunResult.time`` counts the rounds' local and server work
    only (not the evaluations at round 0 and R); a peer loop is timed whole."""
    fn(1)                                        # warm-up (compilation, data transfer)
    t = time.perf_counter()
    res = fn(rounds)
    return rounds / (res.time if isinstance(res, ft.RunResult) else time.perf_counter() - t)


def peer_fedavg(p, dev, rounds, lr=0.05, seed=0):
    """A conventional PyTorch FedAvg loop: per sampled client a model copy and an SGD optimizer."""
    g = torch.Generator().manual_seed(seed)
    glob = copy.deepcopy(p.model).to(dev)
    X, y = p.X.to(dev), p.y.to(dev)
    for _ in range(rounds):
        clients = torch.randperm(p.n_clients, generator=g)[:S]
        states = []
        for i in clients.tolist():
            m = copy.deepcopy(glob)
            opt = torch.optim.SGD(m.parameters(), lr=lr)
            a, n = int(p.client_ptr[i]), int(p.client_sizes[i])
            for _ in range(K):
                rows = a + torch.randperm(n, generator=g)[:B].to(dev)
                opt.zero_grad()
                torch.nn.functional.cross_entropy(m(X[rows]), y[rows]).backward()
                opt.step()
            states.append(m.state_dict())
        glob.load_state_dict({k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]})
    return glob


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    ap.add_argument("--out", default=None, help="write the numbers as JSON")
    args = ap.parse_args(argv)
    dev = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    out = {"device": dev, "torch": torch.__version__, "threads": torch.get_num_threads(),
           "machine": platform.processor() or platform.machine(),
           "gpu": torch.cuda.get_device_name(0) if dev.startswith("cuda") else None}

    a9a = problems.libsvm("a9a", n_clients=100, partition="iid", l2=1e-3, seed=0)
    kw = dict(local_steps=K, lr=0.5, clients_per_round=S, batch_size=B, eval_every=10 ** 9)
    conv = {b: rate(lambda r, b=b: ft.run(a9a, "fedavg", rounds=r, backend=b,
                                          **({"device": dev} if b == "torch" else {}), **kw), 10 * args.rounds)
            for b in ("numba", "torch")}
    out["convex_a9a_fedavg_rounds_per_s"] = conv
    print(f"a9a FedAvg rounds/s: numba {conv['numba']:.0f}, torch[{dev}] {conv['torch']:.1f} "
          f"(numba/torch {conv['numba'] / conv['torch']:.0f}x)")

    rng = np.random.default_rng(0)
    X = rng.random((6000, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 6000)
    parts = problems.partition_indices(y, 100, "iid", seed=0)
    hp = {"fedspeed": dict(lam=10.0, alpha=1.0, rho=0.1, perturbation="sam"), "fedsps": dict(c=0.5, gamma_b=1.0)}
    deep = {}
    for mname, model in (("lenet5", models.lenet5()), ("feddeper_cnn_mnist", models.feddeper_cnn_mnist())):
        p = DeepProblem(model, X, y, parts, eval_grad=False)
        res = {}
        for alg in ("fedavg", "scaffold", "fedspeed", "fedsps"):
            res[alg] = rate(lambda r, alg=alg: ft.run(p, alg, rounds=r, backend="torch", device=dev,
                                                      **{**kw, "lr": 0.05}, **hp.get(alg, {})),
                            args.rounds)
        res["peer_pytorch_fedavg"] = rate(lambda r: peer_fedavg(p, dev, r), args.rounds)
        deep[mname] = {"dim": p.dim, **res}
        print(f"{mname} (d={p.dim}) rounds/s on {dev}: " + ", ".join(f"{k} {v:.2f}" for k, v in res.items())
              + f"; fedavg / peer {res['fedavg'] / res['peer_pytorch_fedavg']:.2f}x")
    out["deep_rounds_per_s"] = deep
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
