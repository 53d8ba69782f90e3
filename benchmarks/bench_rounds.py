"""Cost of the round loop of ``ft.run``, against a baseline checkout, a compiled floor and the NumPy peer.

Written for the change that runs the rounds between two evaluations of ``ft.run`` in one compiled
call ("compiled rounds"); it measures today's loop as well, so it can be run before and after. All
ratios are taken in one invocation, and every timing runs in fresh worker processes that alternate
between the two checkouts (``new``: the checkout of this file; ``base``: ``--baseline``), with the
fedtheory of that checkout first on ``PYTHONPATH``, so that both sides see the same machine load.
A worker first warms up (compiles or loads every kernel it will time), then keeps the best of
``--inner`` timings of each workload. Times are CPU time of the worker (``time.process_time``;
everything runs on one thread: ``NUMBA_NUM_THREADS=1``, BLAS limited to one thread), which a busy
shared machine disturbs less than wall time (``--clock wall`` for wall time). Reported: the min
and the median over the ``--repeat`` workers of each side; ratios between the sides as min / min and
as the median (and range) of the ratios of the r-th worker pair; ratios within a side from the same
worker (median and range).

1. **Tiny problem** (``problems.quadratic(10, 10, seed=0)``: 10 clients, d = 10), K = 5, full
   participation, exact gradients, each algorithm's ``test_params``; microseconds per round of a
   training-only run (``eval_every=rounds``: evaluations at round 0 and the last round only) for
   FedAvg, SCAFFOLD, FedProx, FedDyn, LFD and FedSPS, base against new (target: new at least 5x
   faster). Also the default evaluation schedule (``eval_every=None``) against training only, on
   this problem and on a9a (target <= 1.25x).
2. **a9a** (``problems.libsvm("a9a", n_clients=100, partition="iid", l2=1e-3, seed=0)``), 10
   clients per round, K = 5, B = 20, lr = 0.5, FedAvg and SCAFFOLD: microseconds per round of
   ``ft.run`` (training only) against

   * the *compiled floor*: one ``numba.njit`` loop (:func:`floor_rounds`, peer code of this
     benchmark, not library code) doing only the same local steps, the same aggregation and for
     SCAFFOLD the same control-variate update, with the library's own gradient kernel
     (``client_grad``) and client and minibatch indices drawn before the timing; no sampling, no
     finiteness checks, no counters, no evaluation. It is compiled with NumPy's error model, as the
     library's local-step loops are: Numba's default model made each of its local steps pay a
     reference count per array argument of the inlined gradient (about 2 us of an a9a round). A worker checks once that the floor follows
     ``ft.run``: fed the clients, weights and rows that a traced ``ft.run`` used, it must end at
     the same model (to rounding);
   * the floor *drawing in the loop* (:func:`floor_rounds_drawing`): the same, with each round's
     clients and minibatch rows drawn inside the compiled loop by the library's sampling kernels
     (Floyd's algorithm, as ``ft.run`` draws them), reported beside the target's floor: ft.run /
     this floor is the cost of the runner itself (counters, checks, records, evaluations);
   * the vectorised dense NumPy peer of ``bench_a9a.py`` (``numpy_vectorised``, imported; the
     faster of its matmul and einsum forms), which draws rows with replacement, so it is compared
     with ``ft.run(..., batch_replacement=True)`` as in ``bench_a9a.py``. The peer densifies the
     data set at every call; that setup (a zero-round call, timed too) is subtracted, as the
     construction of the problem is not part of ``ft.run``'s time either.

   Targets: ft.run / floor <= 1.25 (FedAvg) and <= 1.35 (SCAFFOLD); peer / ft.run >= 5. ft.run's time
   includes its fixed cost (setup and the evaluations at round 0 and at the last round, about 7 ms
   each on a9a); the *marginal* time per round, (T(2R) - T(R)) / R, leaves it out and is reported
   beside it.
3. **Cold compile**: for each of the six algorithms, the first ``ft.run`` (tiny problem, 10
   rounds, default schedule) in a fresh process with an empty ``NUMBA_CACHE_DIR`` (a new temporary
   directory), then in a second fresh process with the cache the first one wrote; both checkouts,
   alternately; wall and CPU seconds of that call (the CPU time is the robust one on a loaded
   machine: compilation is single-threaded). With ``--verify`` (long: about a minute per call on
   an idle machine), ``fedtheory verify --out TMP`` with an empty cache and then with the warm one,
   for each checkout (one run each): wall seconds and the CPU seconds of the process and its children.

Each worker also returns the final model of every timed workload; the report says whether the two
checkouts' models are identical (or by how much they differ), so that a change of the trajectory
is seen next to its speed.

Usage (the baseline is any checkout, e.g. a worktree of the commit before the change)::

    git worktree add /tmp/fedtheory-base <commit>
    FEDTHEORY_DATA=... python benchmarks/bench_rounds.py --baseline /tmp/fedtheory-base \\
        [--repeat 5] [--inner 3] [--rounds 2000] [--a9a-rounds 1000] [--verify] [--out FILE]

Without ``--baseline`` only this checkout is measured (no base-vs-new ratios). The markdown tables
are printed; ``--out`` writes every number (each worker's too) as JSON.
"""
import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

THREAD_VARS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _v in THREAD_VARS:
    os.environ.setdefault(_v, "1")

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
NEW_TREE = os.path.dirname(BENCH_DIR)
SIX = ("fedavg", "scaffold", "fedprox", "feddyn", "lfd", "fedsps")
A9A_ALGS = ("fedavg", "scaffold")
TINY_K = 5
FLOOR_TOL = 1e-9      # relative difference of the final models of the floor and ft.run (30 a9a rounds)
TARGETS = {"speedup": 5.0, "default_over_training": 1.25, "run_over_floor": {"fedavg": 1.25, "scaffold": 1.35},
           "peer_over_run": 5.0}


# ---------------------------------------------------------------------------------------------- floor
def _make_floor(error_model="numpy"):
    """Compile-on-first-call :func:`floor_rounds` (built in the worker: it calls the ``client_grad`` of
    the checkout being measured; ``cache=False`` so that a cached floor never keeps another
    checkout's gradient kernel). Compiled with NumPy's error model, as the library's local-step
    loops are (``oracles.loop_kernel``): with Numba's default ("python") model the raise paths of
    its divisions kept a reference-count increment and decrement of each array argument of the
    inlined gradient in every local step, about 3 us of an a9a round (``error_model="python"``
    gives that weaker floor)."""
    import numpy as np
    from numba import njit

    from fedtheory._kernels.oracles import client_grad

    @njit(cache=False, error_model=error_model)
    def floor_rounds(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, agg_w, obj_w, idx, lr, l2,
                     scaffold, x, c, ci):
        """R rounds of FedAvg (``scaffold`` False) or SCAFFOLD option II, in place on x, c, ci.

        ``clients`` (R, S), aggregation weights ``agg_w`` (R, S), objective weights ``obj_w`` (n,),
        absolute minibatch rows ``idx`` (R, S, K, B). Per client: K steps y <- y - lr (g(y) [+ c -
        c_i]); the server: x <- x + sum_s agg_w (y_s - x) and, for SCAFFOLD, c_i += dc_i with
        dc_i = (x - y_K) / (K lr) - c, c <- c + sum_s obj_w[i] dc_i."""
        R, S = clients.shape
        K = idx.shape[2]
        d = x.shape[0]
        g, y, acc, cacc = np.empty(d), np.empty(d), np.empty(d), np.empty(d)
        inv = 1.0 / (K * lr)
        for r in range(R):
            acc[:] = 0.0
            cacc[:] = 0.0
            for s in range(S):
                i = clients[r, s]
                start, end = client_ptr[i], client_ptr[i + 1]
                y[:] = x
                for k in range(K):
                    client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[r, s, k], y, l2, g)
                    if scaffold:
                        for j in range(d):
                            y[j] -= lr * (g[j] + c[j] - ci[i, j])
                    else:
                        for j in range(d):
                            y[j] -= lr * g[j]
                w = agg_w[r, s]
                for j in range(d):
                    acc[j] += w * (y[j] - x[j])
                if scaffold:
                    wi = obj_w[i]
                    for j in range(d):
                        dc = (x[j] - y[j]) * inv - c[j]
                        ci[i, j] += dc
                        cacc[j] += wi * dc
            for j in range(d):
                x[j] += acc[j]
            if scaffold:
                for j in range(d):
                    c[j] += cacc[j]
        return x

    from fedtheory._kernels.sampling import minibatch_rows, sample_clients

    @njit(cache=False, error_model=error_model)
    def floor_rounds_drawing(sparse, A, data, indices, indptr, b, kind, client_ptr, sizes, obj_w, rng, R, S, K, B,
                             lr, l2, scaffold, x, c, ci):
        """:func:`floor_rounds`, drawing each round's clients (Floyd's S-subset of S uniforms) and
        minibatch rows (Floyd's algorithm per step, S K B uniforms) with the library's sampling
        kernels from one Generator, inside the compiled loop: the floor plus the draws."""
        n = obj_w.shape[0]
        clients = np.empty((1, S), dtype=np.int64)
        agg_w = np.empty((1, S))
        for r in range(R):
            sample_clients(rng.random(S), n, clients[0])
            for s in range(S):
                agg_w[0, s] = obj_w[clients[0, s]] * (n / S)
            idx = minibatch_rows(rng.random((S, K, B)), client_ptr[:-1][clients[0]], sizes[clients[0]], False,
                                 np.empty((S, K, B), dtype=np.int64))
            floor_rounds(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, agg_w, obj_w,
                         idx.reshape(1, S, K, B), lr, l2, scaffold, x, c, ci)
        return x

    return floor_rounds, floor_rounds_drawing


def _draws(p, rounds, S, K, B, seed):
    """Clients (uniform without replacement, sorted) and minibatch rows (without replacement, the
    library's Floyd kernel) of ``rounds`` rounds, and the aggregation weights uniform sampling gives."""
    import numpy as np

    from fedtheory._kernels.sampling import minibatch_rows
    rng = np.random.default_rng(seed)
    n = p.n_clients
    clients = np.sort(np.argsort(rng.random((rounds, n)), axis=1)[:, :S], axis=1).astype(np.int64)
    flat = clients.reshape(-1)
    idx = minibatch_rows(rng.random((rounds * S, K, B)), p.client_ptr[:-1][flat], p.client_sizes[flat], False,
                         np.empty((rounds * S, K, B), dtype=np.int64)).reshape(rounds, S, K, B)
    agg_w = p.weights[clients] * (n / S)
    return clients, np.ascontiguousarray(agg_w), idx


def _run_floor(floor, p, algo, clients, agg_w, idx, lr, l2):
    import numpy as np
    d, n = p.dim, p.n_clients
    x, c, ci = np.zeros(d), np.zeros(d), np.zeros((n, d))
    return floor[0](*p.kernel_pack(), clients, agg_w, p.weights, idx, lr, l2, algo == "scaffold", x, c, ci)


def _run_floor_drawing(floor, p, algo, R, S, K, B, lr, l2, seed=1):
    import numpy as np
    d, n = p.dim, p.n_clients
    x, c, ci = np.zeros(d), np.zeros(d), np.zeros((n, d))
    sparse, A, data, indices, indptr, b, kind = p.kernel_pack()[:7]
    return floor[1](sparse, A, data, indices, indptr, b, kind, p.client_ptr, p.client_sizes, p.weights,
                    np.random.default_rng(seed), R, S, K, B, lr, l2, algo == "scaffold", x, c, ci)


# --------------------------------------------------------------------------------------------- worker
def worker(tree, data_dir, args):
    """Time every workload with the fedtheory of ``tree``; print one JSON line of results."""
    import numpy as np

    import fedtheory as ft
    import problems
    here = os.path.realpath(tree)
    for mod in (ft, problems):
        if not os.path.realpath(mod.__file__).startswith(here + os.sep):
            raise RuntimeError(f"worker for {tree} imported {mod.__name__} from {mod.__file__}")
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    def best(fn, repeat):
        t, out = np.inf, None
        for _ in range(repeat):
            t0 = clock()
            out = fn()
            t = min(t, clock() - t0)
        return t, out

    def full(res, rounds, what):
        if res.status != "max_rounds" or res.rounds != rounds:
            raise RuntimeError(f"{what}: status {res.status!r} after {res.rounds} of {rounds} rounds "
                               f"({res.message}); the timing would not be of {rounds} rounds")
        return [float(v) for v in res.x]

    out = {"tree": tree, "tiny": {}, "a9a": {}}
    R = args.rounds
    tiny = problems.quadratic(10, 10, seed=0)
    jobs, out["final_x"] = {}, {}
    for name in SIX:
        kw = dict(ft.get_algorithm(name).test_params, local_steps=TINY_K)
        # warm-up, a check that the run completes, and its final model (compared between the checkouts)
        out["final_x"][f"tiny {name}"] = full(ft.run(tiny, name, rounds=R, eval_every=R, **kw), R, f"tiny {name}")
        ft.run(tiny, name, rounds=20, **kw)
        jobs[name] = kw
    for _ in range(args.inner):                          # interleaved: each workload sees the same load
        for name, kw in jobs.items():
            row = out["tiny"].setdefault(name, {"train_s": np.inf, "default_s": np.inf})
            row["train_s"] = min(row["train_s"], best(lambda: ft.run(tiny, name, rounds=R, eval_every=R, **kw), 1)[0])
            t, res = best(lambda: ft.run(tiny, name, rounds=R, **kw), 1)
            row["default_s"], row["default_rows"] = min(row["default_s"], t), len(res.history)
    for row in out["tiny"].values():
        row["us_per_round"] = 1e6 * row["train_s"] / R
        row["default_over_training"] = row["default_s"] / row["train_s"]

    if args.skip_a9a:
        return _emit(out)
    from bench_a9a import B, K, L2, LR, N_CLIENTS, S, numpy_vectorised
    p = problems.libsvm("a9a", n_clients=N_CLIENTS, partition="iid", l2=L2, seed=0, data_dir=data_dir)
    Ra, Rp = args.a9a_rounds, args.peer_rounds
    floor = _make_floor()
    draws = _draws(p, Ra, S, K, B, seed=1)
    t0 = time.perf_counter()
    common = dict(local_steps=K, lr=LR, clients_per_round=S, batch_size=B)
    for algo in A9A_ALGS:
        _run_floor(floor, p, algo, *[a[:2] for a in draws], LR, L2)               # compile (first algo)
        _run_floor_drawing(floor, p, algo, 2, S, K, B, LR, L2)
        if algo == A9A_ALGS[0]:
            out["floor_compile_s"] = time.perf_counter() - t0
        # the floor follows ft.run: the clients, weights and rows of a traced run give the same model
        Rc = 30
        ref = ft.run(p, algo, rounds=Rc, eval_every=Rc, trace=True, **common)
        full(ref, Rc, f"a9a {algo} (floor check)")
        xf = _run_floor(floor, p, algo, np.stack([rt.clients for rt in ref.trace]),
                        np.stack([rt.weights for rt in ref.trace]), np.stack([rt.idx for rt in ref.trace]), LR, L2)
        scale = max(1.0, float(np.abs(ref.x).max()))
        out["a9a"][algo] = {"floor_max_abs_diff_vs_run": float(np.abs(xf - ref.x).max() / scale)}
        out["final_x"][f"a9a {algo}"] = full(ft.run(p, algo, rounds=Ra, eval_every=Ra, **common), Ra, f"a9a {algo}")
        ft.run(p, algo, rounds=Ra, eval_every=Ra, batch_replacement=True, **common)
        ft.run(p, algo, rounds=20, **common)
        for product in ("matmul", "einsum"):
            numpy_vectorised(p, 2, algo, product=product)
    for _ in range(args.inner):
        for algo in A9A_ALGS:
            row = out["a9a"][algo]
            cand = {"train_s": lambda: ft.run(p, algo, rounds=Ra, eval_every=Ra, **common),
                    "train2_s": lambda: ft.run(p, algo, rounds=2 * Ra, eval_every=2 * Ra, **common),
                    "default_s": lambda: ft.run(p, algo, rounds=Ra, **common),
                    "train_replacement_s": lambda: ft.run(p, algo, rounds=Ra, eval_every=Ra, batch_replacement=True,
                                                          **common),
                    "floor_s": lambda: _run_floor(floor, p, algo, *draws, LR, L2),
                    "floor_draws_s": lambda: _run_floor_drawing(floor, p, algo, Ra, S, K, B, LR, L2),
                    "peer_matmul_s": lambda: numpy_vectorised(p, Rp, algo, 0, "matmul"),
                    "peer_einsum_s": lambda: numpy_vectorised(p, Rp, algo, 0, "einsum"),
                    # the peer densifies the data set on every call: that setup (a zero-round call) is
                    # subtracted, as ft.run's problem construction is not timed either
                    "peer_setup_s": lambda: numpy_vectorised(p, 0, algo, 0, "matmul")}
            for key, fn in cand.items():
                t, res = best(fn, 1)
                row[key] = min(row.get(key, np.inf), t)
                if key == "default_s":
                    row["default_rows"] = len(res.history)
    for algo, row in out["a9a"].items():
        row["run_us_per_round"] = 1e6 * row["train_s"] / Ra
        row["run_replacement_us_per_round"] = 1e6 * row["train_replacement_s"] / Ra
        row["floor_us_per_round"] = 1e6 * row["floor_s"] / Ra
        row["peer_us_per_round"] = 1e6 * (min(row["peer_matmul_s"], row["peer_einsum_s"]) - row["peer_setup_s"]) / Rp
        row["peer_form"] = "matmul" if row["peer_matmul_s"] <= row["peer_einsum_s"] else "einsum"
        row["run_over_floor"] = row["run_us_per_round"] / row["floor_us_per_round"]
        row["floor_draws_us_per_round"] = 1e6 * row["floor_draws_s"] / Ra
        row["run_over_floor_draws"] = row["run_us_per_round"] / row["floor_draws_us_per_round"]
        # the run's fixed cost (setup, its two evaluations: about 7 ms each on a9a) left out
        row["run_marginal_us_per_round"] = 1e6 * (row["train2_s"] - row["train_s"]) / Ra
        row["marginal_over_floor"] = row["run_marginal_us_per_round"] / row["floor_us_per_round"]
        row["peer_over_run"] = row["peer_us_per_round"] / row["run_replacement_us_per_round"]
        row["default_over_training"] = row["default_s"] / row["train_s"]
    return _emit(out)


def _emit(out):
    print(json.dumps(out))


# ------------------------------------------------------------------------------------- cold compile
COMPILE_CODE = """
import time
t0 = time.perf_counter()
import fedtheory as ft, problems
t1 = time.perf_counter()
p = problems.quadratic(10, 10, seed=0)
kw = dict(ft.get_algorithm({algo!r}).test_params, local_steps={K})
t2, c2 = time.perf_counter(), time.process_time()
res = ft.run(p, {algo!r}, rounds=10, **kw)
t3, c3 = time.perf_counter(), time.process_time()
assert res.status == "max_rounds", res.message
print(t1 - t0, t3 - t2, c3 - c2)
"""


def _env(tree, cache=None):
    env = dict(os.environ, PYTHONPATH=tree)
    for v in THREAD_VARS:
        env[v] = "1"
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = cache
    return env


def compile_times(trees, algos, repeat=1):
    """{side: {algo: {cold/warm import, first run and process seconds}}}: an empty NUMBA_CACHE_DIR,
    then the cache that run wrote, each in a fresh process; the sides alternate per algorithm. With
    ``repeat`` > 1 each measurement is repeated (a new empty cache each time) and the minimum kept,
    every value in ``all``."""
    res = {side: {} for side in trees}
    for a, algo in enumerate(algos * repeat):
        for side in (list(trees) if a % 2 == 0 else list(trees)[::-1]):
            cache = tempfile.mkdtemp(prefix="bench-rounds-cache-")
            try:
                row = {}
                for phase in ("cold", "warm"):
                    t0 = time.perf_counter()
                    txt = subprocess.run([sys.executable, "-c", COMPILE_CODE.format(algo=algo, K=TINY_K)],
                                         env=_env(trees[side], cache), cwd="/", capture_output=True, text=True)
                    wall = time.perf_counter() - t0
                    if txt.returncode:
                        raise RuntimeError(f"cold-compile run of {algo} ({side}) failed:\n{txt.stderr[-2000:]}")
                    imp, first, first_cpu = map(float, txt.stdout.split()[-3:])
                    row.update({f"{phase}_import_s": imp, f"{phase}_first_run_s": first,
                                f"{phase}_first_run_cpu_s": first_cpu, f"{phase}_process_s": wall})
                prev = res[side].get(algo)
                if prev is not None:
                    row["all"] = prev["all"] + [dict(row)]
                    row.update({k: min(v, prev[k]) for k, v in row.items() if k != "all"})
                else:
                    row["all"] = [dict(row)]
                res[side][algo] = row
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            last = row["all"][-1]
            print(f"  compile {side:4s} {algo:8s} cold {last['cold_first_run_s']:6.2f} s, warm "
                  f"{last['warm_first_run_s']:5.2f} s", file=sys.stderr, flush=True)
    return res


def verify_times(trees, data_dir):
    """{side: {cold_s, warm_s, exit codes}}: ``fedtheory verify --out TMP`` wall time with an empty
    NUMBA_CACHE_DIR, then with the cache it wrote; cold runs first (sides alternating), then warm."""
    res, caches, tmp = {side: {} for side in trees}, {}, tempfile.mkdtemp(prefix="bench-rounds-verify-")
    try:
        for phase, order in (("cold", list(trees)), ("warm", list(trees)[::-1])):
            for side in order:
                cache = caches.setdefault(side, os.path.join(tmp, f"cache-{side}"))
                os.makedirs(cache, exist_ok=True)
                env = _env(trees[side], cache)
                if data_dir:
                    env["FEDTHEORY_DATA"] = data_dir
                t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
                proc = subprocess.run([sys.executable, "-m", "fedtheory", "verify", "--out",
                                       os.path.join(tmp, f"out-{side}-{phase}")], env=env, cwd=tmp,
                                      capture_output=True, text=True)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                res[side][f"{phase}_s"] = time.perf_counter() - t0
                res[side][f"{phase}_cpu_s"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
                res[side][f"{phase}_exit"] = proc.returncode
                if proc.returncode not in (0, 1):         # 1: an unexpected verdict, still a full run
                    raise RuntimeError(f"fedtheory verify ({side}, {phase}) failed:\n{proc.stderr[-2000:]}")
                print(f"  verify {side:4s} {phase}: {res[side][phase + '_s']:.1f} s wall, "
                      f"{res[side][phase + '_cpu_s']:.1f} s CPU (exit {proc.returncode})",
                      file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


# -------------------------------------------------------------------------------------------- report
def _stats(values):
    import numpy as np
    v = np.asarray(values, dtype=float)
    return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}


def _side_vs(workers, get):
    """min / median over workers and paired ratios base / new (r-th worker of each side)."""
    import numpy as np
    out = {side: _stats([get(w) for w in ws]) for side, ws in workers.items()}
    if "base" in workers:
        pairs = [get(b) / get(n) for b, n in zip(workers["base"], workers["new"])]
        out["speedup_min"] = out["base"]["min"] / out["new"]["min"]
        out["speedup_paired"] = _stats(pairs)
        out["speedup_paired"]["values"] = [float(x) for x in np.round(pairs, 4)]
    return out


def _fmt_range(s, f="{:.2f}"):
    return f"{f.format(s['median'])} ({f.format(s['min'])}-{f.format(s['max'])})"


def _compare_models(workers):
    """Per workload: whether every worker of a side ended at the same model, and the largest
    difference between the sides' models relative to their largest entry (the timed runs must be the
    same computation; a trajectory that changed shows here)."""
    import numpy as np
    res = {}
    for key in workers["new"][0]["final_x"]:
        xs = {side: [np.asarray(w["final_x"][key]) for w in ws] for side, ws in workers.items()}
        same = all(np.array_equal(x, v[0]) for v in xs.values() for x in v)
        txt = "" if same else "workers of one side differ, "
        if "base" in xs:
            a, b = xs["base"][0], xs["new"][0]
            diff = float(np.abs(a - b).max() / max(1e-300, float(np.abs(a).max())))
            txt += "identical" if np.array_equal(a, b) else f"base vs new differ by {diff:.1e} (relative)"
        else:
            txt += "deterministic" if same else ""
        res[key] = txt.strip(", ")
    return res


def summarise(workers, comp, ver, args):
    sides = list(workers)
    summary = {"tiny": {}, "a9a": {}}
    lines = []
    has_base = "base" in workers
    lines.append(f"### 1. Tiny problem (quadratic, 10 clients, d = 10, K = {TINY_K}, full participation, exact "
                 f"gradients, {args.rounds} rounds, training only): us per round")
    lines.append("")
    if has_base:
        lines += ["| algorithm | base min (median) | new min (median) | speedup min/min | speedup, paired median "
                  "(range) | target >= 5x |", "|---|---:|---:|---:|---:|---|"]
    else:
        lines += ["| algorithm | new min (median) |", "|---|---:|"]
    for name in SIX:
        s = _side_vs(workers, lambda w: w["tiny"][name]["us_per_round"])
        summary["tiny"][name] = {"us_per_round": s,
                                 "default_over_training": {side: _stats([w["tiny"][name]["default_over_training"]
                                                                         for w in workers[side]]) for side in sides}}
        new = f"{s['new']['min']:.1f} ({s['new']['median']:.1f})"
        if has_base:
            sp = s["speedup_min"]
            lines.append(f"| {name} | {s['base']['min']:.1f} ({s['base']['median']:.1f}) | {new} | {sp:.2f}x | "
                         f"{_fmt_range(s['speedup_paired'])}x | {'met' if sp >= TARGETS['speedup'] else 'not met'} |")
        else:
            lines.append(f"| {name} | {new} |")
    lines += ["", "### Default evaluation schedule / training only (median over workers, range; target <= 1.25x "
              "for new)", "", "| workload | " + " | ".join(sides) + " | evaluated rows (default) | target met (new) |",
              "|---|" + "---:|" * len(sides) + "---:|---|"]
    rows = [(f"tiny {n}", lambda w, n=n: w["tiny"][n], summary["tiny"][n]) for n in SIX]
    if not args.skip_a9a:
        for algo in A9A_ALGS:
            summary["a9a"][algo] = {"default_over_training": {side: _stats([w["a9a"][algo]["default_over_training"]
                                                                            for w in workers[side]]) for side in sides}}
        rows += [(f"a9a {a}", lambda w, a=a: w["a9a"][a], summary["a9a"][a]) for a in A9A_ALGS]
    for label, get, summ in rows:
        r = summ["default_over_training"]
        met = r["new"]["median"] <= TARGETS["default_over_training"]
        lines.append(f"| {label} | " + " | ".join(_fmt_range(r[side]) + "x" for side in sides)
                     + f" | {get(workers['new'][0])['default_rows']} | {'met' if met else 'not met'} |")
    if not args.skip_a9a:
        lines += ["", f"### 2. a9a (100 clients, S = 10, K = 5, B = 20, lr 0.5; ft.run and floor {args.a9a_rounds} "
                  f"rounds, peer {args.peer_rounds}): us per round, min over workers", "",
                  "| quantity | " + " | ".join(f"{a} {side}" for a in A9A_ALGS for side in sides) + " |",
                  "|---|" + "---:|" * (len(A9A_ALGS) * len(sides))]
        table = {}
        for key, label in (("run_us_per_round", "ft.run, training only (rows without replacement, the default)"),
                           ("run_marginal_us_per_round", "ft.run, marginal: (T(2R) - T(R)) / R (no fixed cost)"),
                           ("run_replacement_us_per_round", "ft.run, rows with replacement"),
                           ("floor_us_per_round", "compiled floor (same steps and aggregation, pre-drawn indices)"),
                           ("floor_draws_us_per_round", "compiled floor drawing its clients and rows in the loop"),
                           ("peer_us_per_round", "vectorised NumPy peer (bench_a9a.py, rows with replacement)")):
            vals = []
            for algo in A9A_ALGS:
                for side in sides:
                    st = _stats([w["a9a"][algo][key] for w in workers[side]])
                    table.setdefault(algo, {}).setdefault(side, {})[key] = st
                    vals.append(f"{st['min']:.1f}")
            lines.append(f"| {label} | " + " | ".join(vals) + " |")
        for key, label, tgt in (("run_over_floor", "ft.run / floor (paired median, range)", "run_over_floor"),
                                ("marginal_over_floor", "ft.run marginal / floor (paired median, range)",
                                 "run_over_floor"),
                                ("run_over_floor_draws", "ft.run / floor drawing in the loop (paired median, range)",
                                 None),
                                ("peer_over_run", "peer / ft.run with replacement (paired median, range)",
                                 "peer_over_run")):
            vals = []
            for algo in A9A_ALGS:
                for side in sides:
                    st = _stats([w["a9a"][algo][key] for w in workers[side]])
                    table[algo][side][key] = st
                    vals.append(_fmt_range(st) + "x")
            lines.append(f"| {label} | " + " | ".join(vals) + " |")
        for algo in A9A_ALGS:
            new = table[algo]["new"]
            t_floor = TARGETS["run_over_floor"][algo]
            table[algo]["targets"] = {
                "run_over_floor": f"<= {t_floor}: {'met' if new['run_over_floor']['median'] <= t_floor else 'not met'}",
                "peer_over_run": f">= {TARGETS['peer_over_run']}: "
                                 f"{'met' if new['peer_over_run']['median'] >= TARGETS['peer_over_run'] else 'not met'}"}
            diffs = [w["a9a"][algo]["floor_max_abs_diff_vs_run"] for ws in workers.values() for w in ws]
            table[algo]["floor_max_abs_diff_vs_run"] = max(diffs)
            summary["a9a"][algo].update(table[algo])
        lines += ["", "Targets for new (paired medians): " + "; ".join(
            f"{a}: ft.run / floor {table[a]['targets']['run_over_floor']}, peer / ft.run "
            f"{table[a]['targets']['peer_over_run']}" for a in A9A_ALGS) + ". The floor ends at ft.run's model "
            "on the same draws to " + ", ".join(f"{table[a]['floor_max_abs_diff_vs_run']:.1e} ({a})"
                                                for a in A9A_ALGS) + " (max abs difference, relative)."]
        off = [a for a in A9A_ALGS if not table[a]["floor_max_abs_diff_vs_run"] <= FLOOR_TOL]
        if off:
            lines.append(f"**WARNING: the floor does not follow ft.run for {', '.join(off)}** (difference above "
                         f"{FLOOR_TOL:g}): the two do not compute the same rounds, so ft.run / floor is not a "
                         "ratio of equal work.")
        if has_base:
            lines.append("ft.run a9a, base / new (paired median, range): " + "; ".join(
                f"{a} {_fmt_range(_side_vs(workers, lambda w, a=a: w['a9a'][a]['run_us_per_round'])['speedup_paired'])}x"
                for a in A9A_ALGS) + ".")
    summary["final_x"] = _compare_models(workers)
    lines += ["", "Final models of the runs timed (first worker of each side): " + "; ".join(
        f"{k}: {v}" for k, v in summary["final_x"].items()) + "."]
    if comp:
        lines += ["", "### 3. Cold compile: first ft.run (tiny problem, 10 rounds) in a fresh process, wall "
                  f"seconds (CPU seconds), min of {args.compile_repeat}", "",
                  "| algorithm | " + " | ".join(f"{side} empty cache | {side} warm cache" for side in sides) + " |",
                  "|---|" + "---:|---:|" * len(sides)]
        for algo in SIX:
            lines.append(f"| {algo} | " + " | ".join(
                f"{c['cold_first_run_s']:.2f} ({c['cold_first_run_cpu_s']:.2f}) | "
                f"{c['warm_first_run_s']:.2f} ({c['warm_first_run_cpu_s']:.2f})"
                for c in (comp[side][algo] for side in sides)) + " |")
        lines.append("| sum | " + " | ".join(
            " | ".join(f"{sum(comp[side][a][f'{ph}_first_run_s'] for a in SIX):.2f} "
                       f"({sum(comp[side][a][f'{ph}_first_run_cpu_s'] for a in SIX):.2f})" for ph in ("cold", "warm"))
            for side in sides) + " |")
    if ver:
        lines += ["", "### fedtheory verify --out TMP, wall seconds (CPU seconds of the process and its children), "
                  "one run each", "",
                  "| checkout | empty cache | warm cache | exit codes |", "|---|---:|---:|---|"]
        for side in sides:
            v = ver[side]
            lines.append(f"| {side} | {v['cold_s']:.1f} ({v['cold_cpu_s']:.1f}) | {v['warm_s']:.1f} "
                         f"({v['warm_cpu_s']:.1f}) | {v['cold_exit']}, {v['warm_exit']} |")
    return summary, "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", default=None, help="path of a second checkout to compare against")
    ap.add_argument("--repeat", type=int, default=5, help="worker processes per side (default 5)")
    ap.add_argument("--inner", type=int, default=3, help="timings per workload in a worker, best kept (default 3)")
    ap.add_argument("--rounds", type=int, default=2000, help="rounds of the tiny-problem runs (default 2000)")
    ap.add_argument("--a9a-rounds", type=int, default=1000, help="rounds of the a9a runs and floor (default 1000)")
    ap.add_argument("--peer-rounds", type=int, default=250, help="rounds of the NumPy peer (default 250)")
    ap.add_argument("--data-dir", default=os.environ.get("FEDTHEORY_DATA"))
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--skip-a9a", action="store_true", help="only the tiny problem (no data needed)")
    ap.add_argument("--no-compile", action="store_true", help="skip the cold-compile measurements")
    ap.add_argument("--compile-repeat", type=int, default=1,
                    help="cold/warm compile measurements per algorithm and side, min kept (default 1)")
    ap.add_argument("--verify", action="store_true", help="also time `fedtheory verify` cold and warm (long)")
    ap.add_argument("--out", default=None, help="write every number as JSON")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    for opt in ("repeat", "inner", "rounds", "a9a_rounds", "peer_rounds", "compile_repeat"):
        if getattr(args, opt) < 1:
            ap.error(f"the '--{opt.replace('_', '-')}' option must be an int in the range [1, inf). "
                     f"Got {getattr(args, opt)} instead.")
    if args.worker:
        return worker(args.worker, args.data_dir, args)
    trees = {"new": NEW_TREE}
    if args.baseline:
        base = os.path.abspath(args.baseline)
        if not os.path.isdir(os.path.join(base, "fedtheory")):
            ap.error(f"the --baseline directory must be a checkout of fedtheory (with a fedtheory/ package). "
                     f"Got {args.baseline!r} instead.")
        trees = {"base": base, "new": NEW_TREE}
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load0 = os.getloadavg()
    workers = {side: [] for side in trees}
    for r in range(args.repeat):
        for side in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", trees[side], "--inner", str(args.inner),
                   "--rounds", str(args.rounds), "--a9a-rounds", str(args.a9a_rounds), "--peer-rounds",
                   str(args.peer_rounds), "--clock", args.clock] + (["--skip-a9a"] if args.skip_a9a else [])
            if args.data_dir:
                cmd += ["--data-dir", args.data_dir]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=_env(trees[side]), cwd="/", capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"bench_rounds: the worker for {trees[side]} failed:\n{proc.stderr[-3000:]}")
            workers[side].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"  worker {r + 1}/{args.repeat} {side}: {time.perf_counter() - t0:.1f} s", file=sys.stderr,
                  flush=True)
    comp = None if args.no_compile else compile_times(trees, SIX, args.compile_repeat)
    ver = verify_times(trees, args.data_dir) if args.verify else None
    import numpy as np
    summary, text = summarise(workers, comp, ver, args)
    out = {"started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "load_average_start": load0, "load_average_end": os.getloadavg(),
           "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                      f"Python {platform.python_version()}, numpy {np.__version__}",
           "trees": trees, "settings": {k: v for k, v in vars(args).items() if k != "worker"},
           "summary": summary, "compile": comp, "verify": ver, "workers": workers}
    print(text)
    print(f"\nload average {load0[0]:.2f} at the start, {out['load_average_end'][0]:.2f} at the end; "
          f"clock: {args.clock}; {args.repeat} workers per side, best of {args.inner} each.")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=2, default=float)


if __name__ == "__main__":
    main()
