"""Speed of local SGD on a9a logistic regression: fedtheory vs peers, measured in one run.

Setting: 100 i.i.d. clients, 10 sampled per round, K = 5 local steps, minibatch 20,
l2 = 1e-3, lr = 0.5. For FedAvg and SCAFFOLD we time R rounds of

* fedtheory (``ft.run``, Numba CSR kernels, evaluation only at the end),
* a plain NumPy/SciPy per-client loop (scipy.sparse minibatch gradients per step),
* the strongest fair NumPy peer: a vectorised dense loop that takes the local step of all S
  sampled clients at once (batched products per step over an (S, B, d) minibatch tensor, written
  with stacked matmul and with einsum: the faster of the two is the peer),
* a PyTorch per-client loop in the style of popular FL simulators (a model and an optimizer
  per client per round, sparse minibatches densified per step, as those simulators do),
* the raw limit: only the same 10 x 5 minibatch gradients per round in one compiled loop.

All on one core (NUMBA_NUM_THREADS=1, BLAS and torch limited to one thread). Reports local
steps per second, ratios, first-call compile time and cached-call time. Usage::

    python benchmarks/bench_a9a.py [--rounds 2000] [--out benchmarks/results.json]
"""
import argparse
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import fedtheory as ft  # noqa: E402
from _report import report, timed  # noqa: E402
import problems  # noqa: E402
from fedtheory._kernels import numba_cache_dir  # noqa: E402
from fedtheory._kernels.raw import minibatch_gradients_only  # noqa: E402

N_CLIENTS, S, K, B, LR, L2 = 100, 10, 5, 20, 0.5, 1e-3


def numpy_loop(p, rounds, algo, seed=0):
    """Plain NumPy/SciPy: per client, per step, a scipy.sparse minibatch gradient."""
    rng = np.random.default_rng(seed)
    d = p.dim
    x = np.zeros(d)
    c, ci = np.zeros(d), np.zeros((N_CLIENTS, d))
    mats = [p.client_data(i) for i in range(N_CLIENTS)]
    for _ in range(rounds):
        sel = rng.choice(N_CLIENTS, S, replace=False)
        deltas, dcs = [], []
        for i in sel:
            A, y = mats[i]
            w = x.copy()
            for _ in range(K):
                rows = rng.choice(A.shape[0], B, replace=False)
                Ab, yb = A[rows], y[rows]
                g = -(Ab.T @ (yb / (1 + np.exp(yb * (Ab @ w))))) / B + L2 * w
                if algo == "scaffold":
                    g = g - ci[i] + c
                w -= LR * g
            if algo == "scaffold":
                new = ci[i] - c + (x - w) / (K * LR)
                dcs.append(new - ci[i])
                ci[i] = new
            deltas.append(w - x)
        x = x + np.mean(deltas, axis=0)
        if algo == "scaffold":
            c = c + np.sum(dcs, axis=0) / N_CLIENTS
    return x


def numpy_vectorised(p, rounds, algo, seed=0, product="matmul"):
    """Vectorised dense NumPy: the data densified once; per round the S clients step together, each
    local step one batched gradient over the (S, B, d) minibatch tensor.

    ``product`` picks how the two batched products are written: ``"matmul"`` (stacked BLAS
    matrix-vector products, ``(S, B, d) @ (S, d, 1)``) or ``"einsum"``; the benchmark times both and
    compares fedtheory with the faster one (the strongest NumPy peer on the machine at hand)."""
    rng = np.random.default_rng(seed)
    d = p.dim
    X = np.vstack([np.asarray(p.client_data(i)[0].todense()) for i in range(N_CLIENTS)])
    Y = np.concatenate([p.client_data(i)[1] for i in range(N_CLIENTS)])
    starts, sizes = p.client_ptr[:-1], p.client_sizes
    x = np.zeros(d)
    c, ci = np.zeros(d), np.zeros((N_CLIENTS, d))
    for _ in range(rounds):
        sel = rng.choice(N_CLIENTS, S, replace=False)
        W = np.repeat(x[None], S, axis=0)
        corr = (c - ci[sel]) if algo == "scaffold" else 0.0
        for _ in range(K):
            rows = starts[sel][:, None] + (rng.random((S, B)) * sizes[sel][:, None]).astype(np.int64)
            Xb, yb = X[rows], Y[rows]                                   # (S, B, d), (S, B)
            if product == "matmul":
                z = (Xb @ W[:, :, None])[:, :, 0]
                coef = yb / (1 + np.exp(yb * z))
                G = -(coef[:, None, :] @ Xb)[:, 0, :] / B + L2 * W
            else:
                z = np.einsum("sbd,sd->sb", Xb, W)
                G = -np.einsum("sbd,sb->sd", Xb, yb / (1 + np.exp(yb * z))) / B + L2 * W
            W -= LR * (G + corr)
        if algo == "scaffold":
            new = ci[sel] - c + (x - W) / (K * LR)
            c = c + (new - ci[sel]).sum(0) / N_CLIENTS
            ci[sel] = new
        x = W.mean(0)
    return x


def torch_loop(p, rounds, algo, seed=0):
    """FL-simulator style: a torch model and optimizer per client per round."""
    import warnings

    import torch
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    rng = np.random.default_rng(seed)
    d = p.dim
    glob = torch.nn.Linear(d, 1, bias=False).double()
    torch.nn.init.zeros_(glob.weight)
    c = torch.zeros(d, dtype=torch.float64)
    ci = torch.zeros(N_CLIENTS, d, dtype=torch.float64)
    data = []
    for i in range(N_CLIENTS):
        A, y = p.client_data(i)
        A = A.tocoo()
        idx = torch.tensor(np.vstack([A.row, A.col]), dtype=torch.long)
        data.append((torch.sparse_coo_tensor(idx, torch.tensor(A.data), A.shape).coalesce(),
                     torch.tensor(y)))
    for _ in range(rounds):
        sel = rng.choice(N_CLIENTS, S, replace=False)
        states, dcs = [], []
        for i in sel:
            model = torch.nn.Linear(d, 1, bias=False).double()
            model.load_state_dict(glob.state_dict())
            opt = torch.optim.SGD(model.parameters(), lr=LR, weight_decay=L2)
            A, y = data[i]
            for _ in range(K):
                rows = torch.tensor(rng.choice(A.shape[0], B, replace=False))
                Ab = A.index_select(0, rows).to_dense()
                yb = y[rows]
                opt.zero_grad()
                loss = torch.nn.functional.softplus(-yb * model(Ab).squeeze(1)).mean()
                loss.backward()
                if algo == "scaffold":
                    model.weight.grad += (c - ci[i]).unsqueeze(0)
                opt.step()
            if algo == "scaffold":
                with torch.no_grad():
                    new = ci[i] - c + (glob.weight[0] - model.weight[0]) / (K * LR)
                    dcs.append(new - ci[i])
                    ci[i] = new
            states.append(model.weight.detach().clone())
        with torch.no_grad():
            glob.weight.copy_(torch.stack(states).mean(0))
            if algo == "scaffold":
                c += torch.stack(dcs).sum(0) / N_CLIENTS
    return glob.weight.detach().numpy()[0]


def raw_limit(p, rounds, seed=0):
    """Only the S*K minibatch gradients per round, rows pre-drawn, one compiled call."""
    rng = np.random.default_rng(seed)
    idx = np.empty((rounds * S * K, B), dtype=np.int64)
    for t in range(rounds * S):
        i = rng.integers(N_CLIENTS)
        s0, m = p.client_ptr[i], p.client_sizes[i]
        for k in range(K):
            idx[t * K + k] = s0 + rng.choice(m, B, replace=False)
    pack = p.kernel_pack()
    x = np.full(p.dim, 0.01)
    minibatch_gradients_only(*pack, idx[:S * K], x, L2)  # compile / load
    t0 = time.perf_counter()
    minibatch_gradients_only(*pack, idx, x, L2)
    return time.perf_counter() - t0


SIX = ("fedavg", "scaffold", "fedspeed", "fedsps", "pfedfbe", "feddeper")


def compile_times(data_dir=None):
    """First call in a fresh process with an empty cache, then with the on-disk cache: FedAvg on a
    small quadratic, and one round of each of six algorithms (kernels: corrected local SGD, SAM
    steps, Polyak steps, FBE steps, FedDeper steps) on a9a."""
    code = ("import time,os; t=time.perf_counter(); import fedtheory as ft, problems; "
            "p=problems.quadratic(4,3,seed=0); t1=time.perf_counter(); "
            "ft.run(p,'fedavg',rounds=1,local_steps=1,lr=0.1); t2=time.perf_counter(); "
            f"q=problems.libsvm('a9a',n_clients=10,data_dir={data_dir!r}); t3=time.perf_counter(); "
            f"[ft.run(q,a,rounds=1,local_steps=1,lr=0.1,batch_size=5) for a in {SIX!r}]; "
            "print(t2-t1, time.perf_counter()-t3)")
    kdir = numba_cache_dir(os.path.join(os.path.dirname(ft.__file__), "_kernels"))   # where Numba keeps it
    for f in list(kdir.glob("*.nbi")) + list(kdir.glob("*.nbc")):
        f.unlink()
    first = [float(v) for v in subprocess.check_output([sys.executable, "-c", code]).decode().split()]
    cached = [float(v) for v in subprocess.check_output([sys.executable, "-c", code]).decode().split()]
    return first, cached


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--peer-rounds", type=int, default=200)
    ap.add_argument("--data-dir", default=os.environ.get("FEDTHEORY_DATA"))
    ap.add_argument("--local-steps", type=int, default=K,
                    help="local steps per round (default 5, the benchmark's setting; more local steps "
                         "spread the per-round cost of the round loop over more steps)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    globals()["K"] = args.local_steps
    p = problems.libsvm("a9a", n_clients=N_CLIENTS, l2=L2, data_dir=args.data_dir)
    R, Rp = args.rounds, args.peer_rounds
    steps, steps_p = R * S * K, Rp * S * K
    out = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                      f"Python {platform.python_version()}, numpy {np.__version__}",
           "setting": dict(n_clients=N_CLIENTS, S=S, K=args.local_steps, B=B, rounds=R, peer_rounds=Rp)}
    first, cached = compile_times(args.data_dir)
    out["first_call_s"], out["cached_first_call_s"] = first[0], cached[0]
    out["first_round_six_algorithms_a9a_s"], out["cached_first_round_six_algorithms_a9a_s"] = first[1], cached[1]
    raw = raw_limit(p, R)
    out["raw_steps_per_s"] = steps / raw
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    for algo in ("fedavg", "scaffold"):
        ft.run(p, algo, rounds=2, local_steps=K, lr=LR, clients_per_round=S, batch_size=B)
        t_ft = timed(lambda: ft.run(p, algo, rounds=R, local_steps=K, lr=LR, clients_per_round=S,
                                    batch_size=B, eval_every=R))
        numpy_loop(p, 2, algo)
        t_np = timed(numpy_loop, p, Rp, algo, repeat=1)
        t_vec_by = {}
        for product in ("matmul", "einsum"):
            numpy_vectorised(p, 2, algo, product=product)
            t_vec_by[product] = timed(numpy_vectorised, p, R // 4, algo, 0, product)
        t_vec = min(t_vec_by.values())
        # the vectorised peer draws minibatch rows with replacement (a fair comparison does too)
        t_ft_rep = timed(lambda: ft.run(p, algo, rounds=R, local_steps=K, lr=LR, clients_per_round=S,
                                        batch_size=B, eval_every=R, batch_replacement=True))
        row = {"fedtheory_steps_per_s": steps / t_ft, "numpy_steps_per_s": steps_p / t_np,
               "numpy_vectorised_steps_per_s": (steps // 4) / t_vec,
               "numpy_vectorised_matmul_steps_per_s": (steps // 4) / t_vec_by["matmul"],
               "numpy_vectorised_einsum_steps_per_s": (steps // 4) / t_vec_by["einsum"]}
        row["fedtheory_replacement_steps_per_s"] = steps / t_ft_rep
        row["x_vs_numpy_vectorised"] = row["fedtheory_replacement_steps_per_s"] / row["numpy_vectorised_steps_per_s"]
        # the floor: minibatch gradients alone (no update, sampling or bookkeeping) over the same peer
        row["raw_limit_vs_numpy_vectorised"] = out["raw_steps_per_s"] / row["numpy_vectorised_steps_per_s"]
        if have_torch:
            torch_loop(p, 2, algo)  # warm-up: torch initialises lazily on its first calls
            t_torch = timed(torch_loop, p, Rp // 4, algo, repeat=1)
            row["torch_steps_per_s"] = (steps_p // 4) / t_torch
            row["x_vs_torch"] = row["fedtheory_steps_per_s"] / row["torch_steps_per_s"]
        row["x_vs_numpy"] = row["fedtheory_steps_per_s"] / row["numpy_steps_per_s"]
        row["raw_limit_over_fedtheory"] = out["raw_steps_per_s"] / row["fedtheory_steps_per_s"]
        out[algo] = row
    report(out, args.out)


if __name__ == "__main__":
    main()
