"""What each CSR storage choice of the kernel data pack is worth, on a9a, in one run.

``ClientData.kernel_arrays`` passes CSR indices as uint32 and a binary matrix without its values
(``docs/how-a-problem-is-built.md``). This script times the same work with the four combinations
of {int64, uint32} indices and {float values, binary (no values)}, swapping the problem's pack in
one process and alternating between the four so that all see the same machine load:

* ``raw``: the minibatch gradients alone (``fedtheory._kernels.raw.minibatch_gradients_only``),
  B = 20 rows of one client, 20,000 minibatches;
* ``fedavg`` / ``scaffold``: ``ft.run`` in the setting of ``bench_a9a.py`` (100 clients, 10 per
  round, K = 5, B = 20 with replacement, evaluation at the first and last round only).

Every run's final model is compared bit for bit across the four storages. One core. Usage::

    python benchmarks/bench_storage.py [--rounds 1000] [--repeat 5] [--out results.json]
"""
import argparse
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import fedtheory as ft  # noqa: E402
import problems  # noqa: E402
from _report import report  # noqa: E402
from fedtheory._kernels.raw import minibatch_gradients_only  # noqa: E402

STORAGES = ("int64+values", "uint32+values", "int64+binary", "uint32+binary")


def pack_for(p, storage):
    """The problem's data pack with the indices and values of ``storage``."""
    sparse, A, _, _, _, b, kind, ptr = p.kernel_pack()
    it = np.uint32 if storage.startswith("uint32") else np.int64
    data = np.zeros(0) if storage.endswith("binary") else np.ascontiguousarray(p.M.data, dtype=np.float64)
    return (sparse, A, data, np.ascontiguousarray(p.M.indices, dtype=it),
            np.ascontiguousarray(p.M.indptr, dtype=it), b, kind, ptr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-dir", default=os.environ.get("FEDTHEORY_DATA"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    p = problems.libsvm("a9a", n_clients=100, l2=1e-3, data_dir=args.data_dir)
    assert np.all(p.M.data == 1.0), "a9a is binary"
    packs = {s: pack_for(p, s) for s in STORAGES}
    rng = np.random.default_rng(0)
    ptr = p.client_ptr
    clients = rng.integers(0, p.n_clients, 20_000)
    idx = (ptr[clients][:, None] + rng.random((20_000, 20)) * (ptr[clients + 1] - ptr[clients])[:, None]).astype(np.int64)
    x = np.full(p.dim, 0.01)
    kw = dict(rounds=args.rounds, local_steps=5, lr=0.5, clients_per_round=10, batch_size=20,
              eval_every=args.rounds, batch_replacement=True)
    work = {
        "raw": lambda: minibatch_gradients_only(*p._pack, idx, x, 1e-3),
        "fedavg": lambda: ft.run(p, "fedavg", **kw),
        "scaffold": lambda: ft.run(p, "scaffold", **kw),
    }
    best = {(w, s): np.inf for w in work for s in STORAGES}
    finals = {}
    for s in STORAGES:                       # compile every specialisation first
        p._pack = packs[s]
        for w, f in work.items():
            f()
    for _ in range(args.repeat):
        for s in STORAGES:
            p._pack = packs[s]
            for w, f in work.items():
                t0 = time.perf_counter()
                r = f()
                best[(w, s)] = min(best[(w, s)], time.perf_counter() - t0)
                if w != "raw":
                    finals.setdefault(w, []).append(r.x)
    out = {"setting": dict(rounds=args.rounds, repeat=args.repeat, minibatches=int(idx.shape[0]))}
    steps = {"raw": idx.shape[0], "fedavg": args.rounds * 50, "scaffold": args.rounds * 50}
    for w in work:
        base = best[(w, "int64+values")]
        out[w] = {s: {"steps_per_s": steps[w] / best[(w, s)], "speedup_vs_int64_values": base / best[(w, s)]}
                  for s in STORAGES}
    out["bitwise_identical_runs"] = all(all(np.array_equal(v[0], y) for y in v) for v in finals.values())
    report(out, args.out)


if __name__ == "__main__":
    main()
