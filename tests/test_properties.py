"""Hypothesis property tests: oracles, prox, reductions, fixed points, sampling, determinism."""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings, strategies as st

import fedtheory as ft
import problems
from fedtheory._kernels.oracles import client_grad
from fedtheory._kernels import sampling
from fedtheory._kernels.sampling import minibatch_rows, sample_clients
from fedtheory.algorithms.context import RoundContext
from fedtheory.registry import get_algorithm

seeds = st.integers(0, 2**31 - 1)


def _ls(seed, n=4, d=3, sparse=False, labels=False):
    rng = np.random.default_rng(seed)
    A = [rng.normal(size=(int(rng.integers(3, 12)), d)) * rng.uniform(0.2, 2) for _ in range(n)]
    if sparse:
        A = [sp.csr_matrix(a * (rng.random(a.shape) < 0.6)) for a in A]
    b = [rng.normal(size=a.shape[0]) for a in A]
    if labels:
        b = [np.where(t > 0, 1.0, -1.0) for t in b]
        return problems.logistic(A, b, l2=float(rng.uniform(0, 0.5)))
    return problems.least_squares(A, b, l2=float(rng.uniform(0, 0.5)))


@given(seeds, st.sampled_from(["ls", "logistic", "logistic_csr", "quadratic"]))
def test_gradient_matches_finite_differences(seed, kind):
    if kind == "quadratic":
        p = problems.quadratic(3, 4, L=2.0, mu=0.3, heterogeneity=0.5, seed=seed % 1000, hessian="distinct")
    else:
        p = _ls(seed, labels=kind != "ls", sparse=kind.endswith("csr"))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=p.dim)
    i = int(rng.integers(p.n_clients))
    g = p.client_grad(i, x)
    h = 1e-6
    fd = np.array([(p.client_value(i, x + h * e) - p.client_value(i, x - h * e)) / (2 * h)
                   for e in np.eye(p.dim)])
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-7)
    # the Numba oracle computes the same client gradient
    out = np.empty(p.dim)
    s, e = p.client_rows(i)
    sparse, A, data, ind, ptr, b, k, _ = p.kernel_pack()
    client_grad(sparse, A, data, ind, ptr, b, k, s, e, np.zeros(0, np.int64), x, p.l2, out)
    assert np.allclose(out, g, rtol=1e-12, atol=1e-13)
    # global gradient is the weighted sum of client gradients
    G = sum(p.weights[j] * p.client_grad(j, x) for j in range(p.n_clients))
    assert np.allclose(p.grad(x), G, rtol=1e-12, atol=1e-13)


@given(seeds, st.floats(1e-3, 10), st.floats(1e-3, 5))
def test_soft_threshold_prox_optimality(seed, l1, step):
    """p = prox_{step h}(v) iff (v - p)/step is in the subdifferential of l1 ||.||_1 at p."""
    rng = np.random.default_rng(seed)
    p = problems.lasso([rng.normal(size=(5, 6))], [rng.normal(size=5)], l1=l1)
    v = rng.normal(size=6) * 3
    z = p.prox(v, step)
    u = (v - z) / step
    nz = z != 0
    assert np.allclose(u[nz], l1 * np.sign(z[nz]), atol=1e-12)
    assert np.all(np.abs(u[~nz]) <= l1 * (1 + 1e-12))
    # Moreau: prox of h plus step * prox of h*/step recovers v (h* = indicator of the l1-ball box)
    assert np.allclose(z + step * np.clip(v / step, -l1, l1), v, atol=1e-12)


@given(seeds, st.floats(0.01, 0.3), st.integers(1, 6))
def test_fedavg_k1_full_participation_is_gd(seed, lr, rounds):
    p = _ls(seed, labels=seed % 2 == 0)
    x = np.zeros(p.dim)
    for _ in range(rounds):
        x = x - lr * p.grad(x)
    res = ft.run(p, "fedavg", rounds=rounds, local_steps=1, lr=lr)
    assert np.allclose(res.x, x, rtol=1e-12, atol=1e-13)


@given(seeds, st.floats(0.01, 0.3), st.integers(1, 5), st.sampled_from([None, 2]),
       st.sampled_from([None, 2]))
def test_fedprox_mu0_is_fedavg(seed, lr, K, S, B):
    p = _ls(seed, labels=True)
    kw = dict(rounds=4, local_steps=K, lr=lr, clients_per_round=S, batch_size=B, seed=seed % 100)
    a = ft.run(p, "fedprox", mu=0.0, **kw)
    b = ft.run(p, "fedavg", **kw)
    assert np.array_equal(a.x, b.x)


@given(seeds, st.integers(1, 4), st.floats(0.01, 0.2))
def test_lfd_e1_is_client_sampled_sgd(seed, S, lr):
    """E = 1: LFD is x - (eta/S) sum over the drawn multiset of grad f_j(x) (spec identity #8)."""
    p = _ls(seed)
    res = ft.run(p, "lfd", rounds=3, local_steps=1, lr=lr, clients_per_round=S, seed=seed % 1000,
                 record_iterates=True, replicate_duplicates=True)
    for r in range(3):
        x = res.iterates[r]
        draws = res.sampled[r]
        assert draws.size == S
        expect = x - lr / S * sum(p.client_grad(int(j), x) for j in draws)
        assert np.allclose(res.iterates[r + 1], expect, rtol=1e-12, atol=1e-13)


@given(seeds)
def test_scaffold_fixed_point_is_x_star(seed):
    """With c_i = grad f_i(x*) and c = grad F(x*) = 0, one SCAFFOLD round leaves x* unchanged."""
    p = problems.quadratic(5, 4, L=1.0, mu=0.1, heterogeneity=2.0, seed=seed % 10000, hessian="distinct")
    xs = p.info["x_star"]
    alg = get_algorithm("scaffold").create()
    state = {"x": xs.copy(), "c": np.zeros(4), "c_i": np.array([p.client_grad(i, xs) for i in range(5)])}
    n = p.n_clients
    ctx = RoundContext(p, 0, np.arange(n), p.weights, np.zeros((n, 5, 0), np.int64), np.zeros((0, 0, 0)),
                       np.full(5, 0.3))
    new = alg.server_update(state, ctx, alg.local_round(state, ctx))
    assert np.abs(new["x"] - xs).max() <= 1e-12
    assert np.abs(new["c_i"] - state["c_i"]).max() <= 1e-12
    # FedAvg from x* drifts on the same problem (the client-drift SCAFFOLD removes)
    fa = ft.run(p, "fedavg", rounds=1, local_steps=5, lr=0.3, x0=xs)
    assert np.linalg.norm(fa.x - xs) > 1e-6


@given(seeds, st.sampled_from(["fedavg", "fedprox", "scaffold", "lfd"]))
def test_same_seed_bit_identical(seed, name):
    p = _ls(seed % 50, labels=True, sparse=True)
    kw = dict(rounds=3, local_steps=2, lr=0.1, clients_per_round=2, batch_size=2, seed=seed)
    a, b = ft.run(p, name, **kw), ft.run(p, name, **kw)
    assert np.array_equal(a.x, b.x)
    assert a.history.drop(columns="time").equals(b.history.drop(columns="time"))


@given(seeds, st.integers(1, 6), st.integers(6, 40), st.booleans())
def test_minibatch_rows_valid(seed, B, m, replace):
    rng = np.random.default_rng(seed)
    B = min(B, m)
    u = rng.random((3, 4, B))
    out = minibatch_rows(u, np.array([0, 100, 1000]), np.array([m, m, m]), replace,
                         np.empty((3, 4, B), np.int64))
    for s, st_ in enumerate((0, 100, 1000)):
        assert np.all((out[s] >= st_) & (out[s] < st_ + m))
        if not replace:
            for k in range(4):
                assert len(set(out[s, k].tolist())) == B


def _floyd(u, m):
    """Floyd's algorithm as its docstring states it, in plain Python: for t = m - B .. m - 1 pick
    floor(u (t + 1)), or t itself if that row is already taken."""
    out = []
    for t, v in zip(range(m - len(u), m), u):
        c = min(int(v * (t + 1)), t)
        out.append(t if c in out else c)
    return out


@given(seeds, st.integers(1, 12), st.integers(1, 40), st.integers(1, 6))
def test_floyd_draws_are_the_stated_algorithm(seed, B, m, K):
    """The compiled draws (minibatch rows and the client subset) give exactly the indices of Floyd's
    algorithm as written: one seed, one trajectory, whatever the kernel's loop looks like. Small m
    against B makes collisions (the branch that picks t itself) frequent."""
    B = min(B, m)
    rng = np.random.default_rng(seed)
    u = rng.random((2, K, B))
    starts = np.array([0, 1000])
    out = minibatch_rows(u, starts, np.array([m, m]), False, np.empty((2, K, B), np.int64))
    for s in range(2):
        for k in range(K):
            assert out[s, k].tolist() == [starts[s] + c for c in _floyd(u[s, k].tolist(), m)]
    c = sample_clients(u[0, 0], m, np.empty(B, np.int64))
    assert c.tolist() == sorted(_floyd(u[0, 0].tolist(), m))


@given(st.lists(st.integers(0, 6), min_size=1, max_size=12), st.integers(1, 40))
@example([0, 1, 1, 3], 2)           # t = 1, 2, 3 hit rows already taken (m-4, m-3, m-4): three collisions
def test_floyd_draws_of_a_large_client_are_the_stated_algorithm(picks, m_small):
    """A client of more than ``MARK_LIMIT`` rows takes the draw's other membership test (comparison
    with the rows drawn so far, for every client of that call): the same indices. The uniforms are
    chosen to pick rows near the top, so that rows already taken are hit often."""
    B = len(picks)
    m = sampling.MARK_LIMIT + 5
    u = np.empty((2, 1, B))
    for t, pick in enumerate(picks):
        j = m - B + t
        u[0, 0, t] = (j - pick + 0.5) / (j + 1)      # picks row j - pick
    u[1, 0] = np.random.default_rng(len(picks)).random(B)
    m2 = max(m_small, B)
    out = minibatch_rows(u, np.array([0, 10 ** 6]), np.array([m, m2]), False, np.empty((2, 1, B), np.int64))
    assert out[0, 0].tolist() == _floyd(u[0, 0].tolist(), m)
    assert out[1, 0].tolist() == [10 ** 6 + c for c in _floyd(u[1, 0].tolist(), m2)]


def test_minibatch_without_replacement_is_uniform():
    """Floyd's sampler: every row of a client is picked with probability B/m (chi-square, fixed seed)."""
    m, B, N = 7, 3, 20000
    u = np.random.default_rng(0).random((1, N, B))
    out = minibatch_rows(u, np.array([0]), np.array([m]), False, np.empty((1, N, B), np.int64))
    counts = np.bincount(out.ravel(), minlength=m)
    expected = N * B / m
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert chi2 < 22.5  # 99.9% quantile of chi-square with 6 degrees of freedom
    pairs = np.bincount((out[0, :, 0] * m + out[0, :, 1]), minlength=m * m).reshape(m, m)
    assert np.all(np.diag(pairs) == 0)


@pytest.mark.parametrize("kind", ["shared", "distinct"])
def test_quadratic_declared_constants_hold(kind):
    p = problems.quadratic(5, 6, L=3.0, mu=0.25, heterogeneity=0.7, seed=4, hessian=kind)
    H = p.hessian(np.zeros(6))
    ev = np.linalg.eigvalsh(H)
    assert abs(ev[0] - 0.25) < 1e-13 and abs(ev[-1] - 3.0) < 1e-13
    xs = p.info["x_star"]
    assert np.linalg.norm(p.grad(xs)) < 1e-13
    zeta = sum(p.weights[i] * np.sum(p.client_grad(i, xs) ** 2) for i in range(5))
    assert abs(zeta - 0.7) < 1e-12
    if kind == "shared":
        x = np.random.default_rng(0).normal(size=6) * 10
        sg = sum(p.weights[i] * np.sum((p.client_grad(i, x) - p.grad(x)) ** 2) for i in range(5))
        assert abs(sg - 0.7) < 1e-10


@given(seeds, st.integers(1, 30), st.integers(0, 29))
def test_sample_clients_sorted_distinct(seed, n, s):
    S = min(s + 1, n)
    c = sample_clients(np.random.default_rng(seed).random(S), n, np.empty(S, np.int64))
    assert np.all(np.diff(c) > 0) and c.min() >= 0 and c.max() < n


def test_sample_clients_uniform_over_subsets():
    """All C(5, 2) = 10 subsets appear with probability 1/10 (chi-square, fixed seed)."""
    rng = np.random.default_rng(1)
    N = 20000
    codes = [tuple(sample_clients(rng.random(2), 5, np.empty(2, np.int64))) for _ in range(N)]
    _, counts = np.unique(np.array(codes), axis=0, return_counts=True)
    assert len(counts) == 10
    chi2 = np.sum((counts - N / 10) ** 2 / (N / 10))
    assert chi2 < 27.9  # 99.9% quantile of chi-square with 9 degrees of freedom


def test_non_contiguous_x0_compiles_nothing_new():
    from fedtheory._kernels.local_steps import corrected_local_sgd
    p = _ls(0)
    ft.run(p, "fedavg", rounds=1)
    n_sig = len(corrected_local_sgd.signatures)
    res = ft.run(p, "fedavg", rounds=2, x0=np.arange(2.0 * p.dim)[::2])
    assert len(corrected_local_sgd.signatures) == n_sig and res.status == "max_rounds"


def test_kernel_cache_is_cleared_when_any_kernel_source_changes(tmp_path):
    from fedtheory._kernels import numba_cache_dir, sync_cache
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 2\n")
    assert sync_cache(tmp_path)                       # first time: stamp written
    cache = numba_cache_dir(tmp_path)                 # __pycache__, or below NUMBA_CACHE_DIR when set
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "b.f-1.py311.nbi").write_text("index")
    (cache / "b.f-1.py311.1.nbc").write_text("code")
    assert not sync_cache(tmp_path)                   # unchanged sources: cache kept
    assert len(list(cache.glob("*.nb*"))) == 2
    (tmp_path / "a.py").write_text("x = 3\n")         # a helper in another file changed
    assert sync_cache(tmp_path)
    assert not list(cache.glob("*.nb*"))


@pytest.mark.parametrize("env_dir", [False, True], ids=["beside the sources", "NUMBA_CACHE_DIR"])
def test_kernel_cache_is_found_and_cleared_where_numba_keeps_it(tmp_path, env_dir):
    """With NUMBA_CACHE_DIR set, Numba writes its cache below it and not beside the sources: the
    staleness check must clear that directory (it used to look only in ``__pycache__``, so a
    kernel could keep an old helper inlined after an edit). Checked in a fresh process: a cached
    function is compiled, and the directory it was written to is the one ``sync_cache`` clears."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    src = tmp_path / "kern"
    src.mkdir()
    (src / "helper.py").write_text("from numba import njit\n\n@njit(cache=True)\ndef h(x):\n    return x + 1.0\n")
    (src / "kmod.py").write_text("from numba import njit\nfrom helper import h\n\n"
                                 "@njit(cache=True)\ndef f(x):\n    return h(x) * 2.0\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from fedtheory._kernels import numba_cache_dir, sync_cache\n"
            "first = sync_cache(sys.argv[1])\n"                           # the stamp is written
            "import kmod; kmod.f(1.0)\n"                                  # compiled and cached
            "d = numba_cache_dir(sys.argv[1])\n"
            "print(d); print(len(list(d.glob('kmod.f-*.nbi'))), first)\n"
            "open(sys.argv[1] + '/helper.py', 'a').write('# edited\\n')\n"
            "print(sync_cache(sys.argv[1]), len(list(d.glob('*.nb*'))))\n")
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    if env_dir:
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")
    out = subprocess.run([sys.executable, "-c", code, str(src)], env=env, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    where = Path(out[0])
    if env_dir:
        assert where.is_relative_to(tmp_path / "numba-cache")
        assert not list((src / "__pycache__").glob("*.nb*"))       # nothing of Numba's beside the sources
    else:
        assert where == src / "__pycache__"
    assert out[1] == "1 True"                  # the compiled function's index is there; stamp written
    assert out[2] == "True 0"                  # a changed source clears every cached function there


def test_strategy_ranges_reach_their_ends_and_refuse_what_they_cannot_draw():
    """log_uniform draws lo and hi themselves (exp(log(lo)) rounds above lo: a boundary such as
    lr = 1/L was never tried); quadratics' default mu is relative to L (with L < 0.5 it failed on a
    mu the user never passed); a range a strategy cannot draw from is an error naming it (integers
    (1.5, 3) drew 1, log_uniform(0, 1) was a math domain error)."""
    from hypothesis import find

    from fedtheory.testing import strategies as fts
    for lo, hi in ((0.1, 10.0), (1e-3, 10.0), (0.1, 30.0)):
        assert find(fts.log_uniform(lo, hi), lambda v: v <= lo) == lo
        assert find(fts.log_uniform(lo, hi), lambda v: v >= hi) == hi
    for L in (1e-3, 0.2, 1e3):
        p = find(fts.quadratics(L=L, dim=3), lambda p: p.info["mu"] < 0.03 * p.info["L"])
        assert p.info["L"] == pytest.approx(L, rel=1e-12) and 0.02 * L <= p.info["mu"] < 0.03 * L
    for bad, msg in ((lambda: fts.integers(1.5, 3), "'lo' parameter .* must be an integer"),
                     (lambda: fts.log_uniform(0, 1), "'lo' parameter .*log_uniform"),
                     (lambda: fts.uniform(2.0, 1.0), "the range is empty"),
                     (lambda: find(fts.around(np.zeros((2, 2)), radius=1.0), lambda x: True),
                      "'center' parameter .* must be a non-empty vector"),
                     (lambda: find(fts.unit_vectors(0), lambda u: True), "'dim' parameter .* int >= 1")):
        with pytest.raises(ValueError, match=msg):
            bad()


@settings(max_examples=40, deadline=None)
@given(seeds, st.sampled_from([sampling.FULL, sampling.UNIFORM, sampling.WITH_REPLACEMENT, sampling.BERNOULLI]),
       st.lists(st.integers(1, 4), min_size=1, max_size=7), st.integers(0, 3), st.booleans(), st.booleans(),
       st.booleans(), st.booleans())
def test_the_draws_of_many_rounds_are_those_of_each_round(seed, mode, Ks, B, replace, noise, replicate, schedule):
    """The compiled rounds take their draws for many rounds at once (``draw_rounds``); the per-round
    path draws each round (``draw_round_arrays``, then its coin from the third stream). From the same
    streams both give every round's participants, weights, rows and noise bit for bit, whatever the
    sampling mode, the local steps of each round, minibatches, noise and a replayed schedule (Bernoulli
    participation and a schedule can hold more participants than S: the buffers grow)."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 7)), 3
    sizes = rng.integers(max(B, 1), 9, size=n).astype(np.int64)
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    w = rng.dirichlet(np.ones(n))
    S = n if mode == sampling.FULL else int(rng.integers(1, n + 1))
    cdf, part = np.cumsum(w), 0.5
    Ks = np.array(Ks, dtype=np.int64)
    r0 = int(rng.integers(1, 4))
    rounds = r0 + len(Ks) - 1
    if mode == sampling.UNIFORM:                       # a schedule as the run accepts it (participants.py)
        entries = [rng.choice(n, S, replace=False) for _ in range(rounds)]
    elif mode == sampling.WITH_REPLACEMENT:
        entries = [rng.integers(0, n, size=S) for _ in range(rounds)]
    else:
        entries = [rng.choice(n, int(rng.integers(0, n + 1)), replace=False) for _ in range(rounds)]
    sched = np.concatenate([np.zeros(0, dtype=np.int64), *entries]).astype(np.int64)
    sched_ptr = np.concatenate([[0], np.cumsum([len(e) for e in entries])]).astype(np.int64)
    level = 0.3 if noise else 0.0
    args = (w, ptr, sizes, level, d, mode)
    streams = [np.random.default_rng(seed + k) for k in range(3)]
    many = sampling.draw_rounds(*args, streams[0], streams[1], S, cdf, part, replicate, schedule, sched, sched_ptr,
                                r0, Ks, B, replace)
    drawn, drawn_ptr, clients, weights, client_ptr, idx, idx_ptr, noise_all, noise_ptr = many
    one = [np.random.default_rng(seed + k) for k in range(3)]
    for j, K in enumerate(Ks):
        r = r0 + j
        dj, cj, wj, ij, nj, _ = sampling.draw_round_arrays(
            *args, one[0], one[1], one[2], S, cdf, part, replicate, schedule, sched[sched_ptr[r - 1]:sched_ptr[r]],
            int(K), B, replace)
        assert np.array_equal(drawn[drawn_ptr[j]:drawn_ptr[j + 1]], dj)
        assert np.array_equal(clients[client_ptr[j]:client_ptr[j + 1]], cj)
        assert np.array_equal(weights[client_ptr[j]:client_ptr[j + 1]], wj)
        assert np.array_equal(idx[idx_ptr[j]:idx_ptr[j + 1]].reshape(ij.shape), ij)
        assert np.array_equal(noise_all[noise_ptr[j]:noise_ptr[j + 1]], nj.ravel())
