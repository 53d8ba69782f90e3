"""FedSPS family (spec/fedsps.md): update rules, properties P1-P17, baselines."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, strategies as st

import fedtheory as ft
import problems
from fedtheory.algorithms.context import RoundContext
from fedtheory.registry import get_algorithm
from test_update_rules import CASES, _data, _grad_fn, _problem


def _value_fn(kind, A, b, l2):
    def F(i, x):
        a = A[i].toarray() if sp.issparse(A[i]) else A[i]
        z = a @ x
        if kind == "least_squares":
            return 0.5 * np.mean((z - b[i]) ** 2) + 0.5 * l2 * x @ x
        return np.mean(np.logaddexp(0, -b[i] * z)) + 0.5 * l2 * x @ x
    return F


def sps_ref(F, gg, ell, c, cap):
    if gg == 0:
        return cap
    return min(max(F - ell, 0.0) / (c * gg), cap)


# ------------------------------------------------------------------ rules (deterministic)
@pytest.mark.parametrize("kind,sparse", CASES)
def test_fedsps_rule(kind, sparse):
    A, b = _data(kind, sparse, seed=11)
    g, F = _grad_fn(kind, A, b, 0.01), _value_fn(kind, A, b, 0.01)
    n, R, tau, c, gb = len(A), 6, 4, 0.5, 2.0
    x = np.zeros(4)
    for _ in range(R):
        ys = []
        for i in range(n):
            y = x.copy()
            for _ in range(tau):
                gi = g(i, y)
                y = y - sps_ref(F(i, y), gi @ gi, 0.0, c, gb) * gi
            ys.append(y)
        x = np.mean(ys, axis=0)
    res = ft.run(_problem(kind, A, b, 0.01), "fedsps", rounds=R, local_steps=tau, c=c, gamma_b=gb)
    assert np.abs(res.x - x).max() <= 1e-12


@pytest.mark.parametrize("c_index", ["iteration", "round"])
@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
def test_fedsps_dec_rule(kind, c_index):
    A, b = _data(kind, False, seed=12)
    g, F = _grad_fn(kind, A, b, 0.01), _value_fn(kind, A, b, 0.01)
    n, R, tau, c0, gb = len(A), 5, 3, 0.5, 1.0
    x = np.zeros(4)
    P = np.full(n, c0 * gb)
    t = 0
    for r in range(R):
        ys = []
        for i in range(n):
            y = x.copy()
            for k in range(tau):
                tt = r * tau + k
                ct = c0 * math.sqrt((tt // tau if c_index == "round" else tt) + 1)
                gi = g(i, y)
                ratio = F(i, y) / (gi @ gi)
                gam = min(ratio, P[i]) / ct
                P[i] = ct * gam
                y = y - gam * gi
            ys.append(y)
        x = np.mean(ys, axis=0)
    res = ft.run(_problem(kind, A, b, 0.01), "fedsps_dec", rounds=R, local_steps=tau, c0=c0, gamma_b=gb,
                 c_index=c_index)
    assert np.abs(res.x - x).max() <= 1e-12


@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
def test_fedsps_normalized_rule(kind):
    A, b = _data(kind, False, seed=13)
    g, F = _grad_fn(kind, A, b, 0.0), _value_fn(kind, A, b, 0.0)
    n, R, tau, c, gb = len(A), 5, 3, 0.5, 5.0
    x = np.zeros(4)
    for _ in range(R):
        ys, nus = [], []
        for i in range(n):
            y, nu = x.copy(), 0.0
            for _ in range(tau):
                gi = g(i, y)
                gam = sps_ref(F(i, y), gi @ gi, 0.0, c, gb)
                nu += gam                                       # all tau step sizes (spec §2.5)
                y = y - gam * gi
            ys.append(y)
            nus.append(nu)
        nus = np.array(nus)
        x = (np.array(ys) / nus[:, None]).mean(0) / (1 / nus).mean()
    res = ft.run(_problem(kind, A, b, 0.0), "fedsps_normalized", rounds=R, local_steps=tau, c=c, gamma_b=gb)
    assert np.abs(res.x - x).max() <= 1e-12


@pytest.mark.parametrize("agg", ["a", "b", "c"])
def test_fedsps_global_rule(agg):
    A, b = _data("logistic", False, seed=14)
    g, F = _grad_fn("logistic", A, b, 0.01), _value_fn("logistic", A, b, 0.01)
    n, R, tau, c, gb = len(A), 5, 3, 0.5, 4.0
    x = np.zeros(4)
    g0 = g(0, x)
    gam = sps_ref(F(0, x), g0 @ g0, 0.0, c, gb)                 # probe: client 0 at x^0
    for _ in range(R):
        ys, Fs, Gs = [], [], []
        for i in range(n):
            y = x.copy()
            for k in range(tau):
                gi = g(i, y)
                if k == tau - 1:
                    Fs.append(F(i, y))
                    Gs.append(gi)
                y = y - gam * gi
            ys.append(y)
        x = np.mean(ys, axis=0)
        Fs, Gs = np.array(Fs), np.array(Gs)
        if agg == "a":
            gam = np.mean([sps_ref(f, q @ q, 0.0, c, gb) for f, q in zip(Fs, Gs)])
        elif agg == "b":
            gam = min(Fs.mean() / (c * np.mean(np.sum(Gs ** 2, 1))), gb)
        else:
            gbar = Gs.mean(0)
            gam = min(Fs.mean() / (c * gbar @ gbar), gb)
    res = ft.run(_problem("logistic", A, b, 0.01), "fedsps_global", rounds=R, local_steps=tau, c=c, gamma_b=gb,
                 aggregation=agg)
    assert np.abs(res.x - x).max() <= 1e-12
    assert res.state["gamma"] == pytest.approx(gam, rel=1e-12)


def test_fedams_and_mime_rules():
    A, b = _data("logistic", False, seed=15)
    g = _grad_fn("logistic", A, b, 0.01)
    n, R, K, lr = len(A), 5, 3, 0.1
    # FedAMS
    eta, b1, b2, ea, eps = 0.05, 0.9, 0.99, 1e-3, 1e-8
    x, m, v, vh = np.zeros(4), np.zeros(4), np.zeros(4), np.full(4, 1e-3)
    for r in range(1, R + 1):
        ys = []
        for i in range(n):
            y = x.copy()
            for _ in range(K):
                y = y - lr * g(i, y)
            ys.append(y)
        D = np.mean(ys, 0) - x
        m = b1 * m + (1 - b1) * D
        v = b2 * v + (1 - b2) * D * D
        vh = np.maximum(vh, v)
        x = x + eta / (1 - b1 ** r) * m / (np.sqrt(vh / (1 - b2 ** r)) + eps)
    res = ft.run(_problem("logistic", A, b, 0.01), "fedams", rounds=R, local_steps=K, lr=lr, server_lr=eta,
                 eps_ams=ea)
    assert np.abs(res.x - x).max() <= 1e-12
    # Mime and MimeLite (exact gradients)
    for variant in ("mime", "mimelite"):
        beta = 0.9
        x, s = np.zeros(4), np.zeros(4)
        for _ in range(R):
            gx = np.array([g(i, x) for i in range(n)])
            cbar = gx.mean(0)
            ys = []
            for i in range(n):
                y = x.copy()
                for _ in range(K):
                    d = g(i, y) - g(i, x) + cbar if variant == "mime" else g(i, y)
                    y = y - lr * ((1 - beta) * d + beta * s)
                ys.append(y)
            s = (1 - beta) * cbar + beta * s
            x = np.mean(ys, 0)
        res = ft.run(_problem("logistic", A, b, 0.01), "mime", rounds=R, local_steps=K, lr=lr, variant=variant)
        assert np.abs(res.x - x).max() <= 1e-12, variant


# ------------------------------------------------------------------ properties
def _one_step(name, p, x, rows, **kw):
    """Run one local step of the library's kernel for every client from x (minibatch ``rows``)."""
    alg = get_algorithm(name).create(**kw)
    state = alg.init(p, x)
    n = p.n_clients
    idx = np.asarray(rows, dtype=np.int64).reshape(n, 1, -1)
    ctx = RoundContext(p, 0, np.arange(n, dtype=np.int64), np.full(n, 1 / n), idx, np.zeros((0, 0, 0)), np.ones(1))
    return alg.local_round(state, ctx)


@given(seed=st.integers(0, 10 ** 6), c=st.floats(0.01, 100), gb=st.floats(1e-3, 1e3), B=st.integers(1, 8),
       scale=st.floats(0.1, 10))
def test_P1_P2_stepsize_bounds_and_lemma15(seed, c, gb, B, scale):
    """alpha_B <= gamma <= gamma_b with alpha_B = min(1/(2 c L_B), gamma_b), and
    ||gamma g||^2 <= (gamma/c)(F - ell*) (Lemmas 14, 15) for the library's kernel."""
    rng = np.random.default_rng(seed)
    A = [rng.normal(size=(10, 3)) for _ in range(3)]
    y = [np.where(rng.random(10) < 0.5, 1.0, -1.0) for _ in range(3)]
    p = problems.logistic(A, y, l2=0.0)
    x = rng.normal(size=3) * scale
    rows = np.array([i * 10 + rng.choice(10, B, replace=False) for i in range(3)])
    m = _one_step("fedsps", p, x, rows, c=c, gamma_b=gb)
    for i in range(3):
        gam = m["gammas"][i, 0]
        Ab = p.M[rows[i]]
        LB = np.linalg.eigvalsh(Ab.T @ Ab / B / 4)[-1]                   # smoothness of this batch loss
        alpha = min(1 / (2 * c * LB), gb)
        assert alpha * (1 - 1e-12) <= gam <= gb * (1 + 1e-12)
        gvec = p.client_grad(i, x, rows[i])
        F = p.client_value(i, x, rows[i])
        assert gam ** 2 * (gvec @ gvec) <= gam / c * F * (1 + 1e-12) + 1e-300


@given(seed=st.integers(0, 10 ** 6), tau=st.integers(1, 5), S=st.integers(1, 4))
def test_P4_small_cap_is_fedavg_bitwise(seed, tau, S):
    """gamma_b <= 1/(2 c L_max) (per-sample L_max): FedSPS == FedAvg(gamma_b), bitwise, with
    minibatches and client sampling on the shared random stream."""
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    Lmax = max(np.sum(p.M ** 2, axis=1)) / 4 + p.l2
    c = 0.5
    gb = 1 / (2 * c * Lmax)
    kw = dict(rounds=4, local_steps=tau, batch_size=3, clients_per_round=S, seed=seed, record_iterates=True)
    a = ft.run(p, "fedsps", c=c, gamma_b=gb, **kw)
    b = ft.run(p, "fedavg", lr=gb, **kw)
    assert np.array_equal(a.iterates, b.iterates)
    assert (a.history.step_capped_frac.iloc[1:] == 1.0).all()


def test_P5_fedsps_dec_monotone_and_bounded():
    """FedDecSPS: gamma_t non-increasing per client, min{1/(2 c_t L), c0 gb/c_t} <= gamma_t <= c0 gb/c_t,
    and gamma_0 equals FedSPS's step with c = c0 (P5a-c)."""
    p = problems.quadratic(3, 2, L=2.0, mu=0.5, heterogeneity=1.0, seed=1, hessian="distinct")
    fstar_i = [p.client_value(i, np.linalg.solve(p.client_data(i)[0], p.client_data(i)[1])) for i in range(3)]
    L = float(np.max([np.linalg.eigvalsh(p.client_data(i)[0])[-1] for i in range(3)]))
    alg = get_algorithm("fedsps_dec").create(c0=0.5, gamma_b=3.0, lower_bound=fstar_i)
    state = alg.init(p, np.array([3.0, -2.0]))
    K = 40
    ctx = RoundContext(p, 0, np.arange(3, dtype=np.int64), np.full(3, 1 / 3), np.zeros((3, K, 0), dtype=np.int64),
                       np.zeros((0, 0, 0)), np.ones(K))
    G = alg.local_round(state, ctx)["gammas"]
    ct = 0.5 * np.sqrt(np.arange(K) + 1.0)
    assert np.all(np.diff(G, axis=1) <= 1e-15)
    assert np.all(G <= 0.5 * 3.0 / ct * (1 + 1e-12))
    assert np.all(G >= np.minimum(1 / (2 * ct * L), 0.5 * 3.0 / ct) * (1 - 1e-12))
    sps1 = get_algorithm("fedsps").create(c=0.5, gamma_b=3.0, lower_bound=fstar_i)
    G1 = sps1.local_round(sps1.init(p, np.array([3.0, -2.0])), ctx)["gammas"]
    assert np.allclose(G[:, 0], G1[:, 0], rtol=1e-15)


def test_P6_example1_polyak_step_exact_for_a_quadratic():
    """SPS with c = 1/2, ell* = 0 on (a/2)x^2 gives gamma = 1/a; with c = 1, 1/(2a) (P6b)."""
    for a in (0.5, 3.0, 1000.0):
        p = problems.explicit_quadratic(np.array([[a]]), np.zeros((1, 1)))
        for c, expect in ((0.5, 1 / a), (1.0, 1 / (2 * a))):
            G = _one_step_quad(p, c, 1e9)
            assert G == pytest.approx(expect, rel=1e-14)


def _one_step_quad(p, c, gb):
    alg = get_algorithm("fedsps").create(c=c, gamma_b=gb)
    ctx = RoundContext(p, 0, np.arange(1, dtype=np.int64), np.ones(1), np.zeros((1, 1, 0), dtype=np.int64),
                       np.zeros((0, 0, 0)), np.ones(1))
    return alg.local_round(alg.init(p, np.array([1.7])), ctx)["gammas"][0, 0]


def test_example1_locally_adaptive_vs_common_stepsize():
    """spec E2 (2-D separable Example 1): rounds to eps stay flat in a for FedSPS, grow ~ a for FedAvg(1/L_max)."""
    rounds_sps, rounds_avg = [], []
    for a in (10.0, 100.0, 1000.0):
        Q = [np.diag([a, 0.0]), np.diag([0.0, 1.0])]
        p = problems.explicit_quadratic(Q, np.zeros((2, 2)))
        x0 = np.array([1.0, 1.0])
        f0 = p.value(x0)
        def rounds_to(name, **kw):
            res = ft.run(p, name, rounds=20000, local_steps=1, x0=x0, tol=1e-20, **kw)
            h = res.history
            hit = h["round"][h.value <= 1e-8 * f0]
            return int(hit.iloc[0])
        rounds_sps.append(rounds_to("fedsps", c=0.5, gamma_b=1e6))
        rounds_avg.append(rounds_to("fedavg", lr=1.0 / a))
    # each client solves its own coordinate in one Polyak step, averaging halves the rest: the
    # rate is 1/2 per round for every a; FedAvg's common step 1/a leaves (1 - 1/(2a)) per round
    assert max(rounds_sps) == min(rounds_sps) <= 20
    assert rounds_avg[1] > 5 * rounds_avg[0] and rounds_avg[2] > 5 * rounds_avg[1]


def test_vanishing_gradient_stays_finite():
    """A client at its own minimiser (g = 0, F = 0): the step is the cap, nothing becomes NaN."""
    A = [np.eye(2), np.eye(2) * 2.0]
    p = problems.least_squares(A, [np.zeros(2), np.ones(2)])
    for name, kw in (("fedsps", {}), ("fedsps_dec", {}), ("fedsps_normalized", {}), ("fedsps_global", {})):
        res = ft.run(p, name, rounds=20, local_steps=3, **kw)
        assert res.status == "max_rounds" and np.all(np.isfinite(res.x)), name


@given(k=st.floats(0.1, 10), seed=st.integers(0, 1000))
def test_P17_metamorphic_scaling(k, seed):
    """F -> k F (A, b scaled by sqrt k), ell* -> k ell*, gamma_b -> gamma_b / k: the same iterates."""
    A, b = _data("least_squares", False, seed=seed % 50)
    base = ft.run(problems.least_squares(A, b), "fedsps", rounds=4, local_steps=3, c=0.5, gamma_b=0.7,
                  record_iterates=True)
    sk = math.sqrt(k)
    scaled = ft.run(problems.least_squares([a * sk for a in A], [t * sk for t in b]), "fedsps", rounds=4,
                    local_steps=3, c=0.5, gamma_b=0.7 / k, record_iterates=True)
    assert np.allclose(base.iterates, scaled.iterates, rtol=1e-9, atol=1e-10)


def test_stepsize_statistics_recorded():
    from fedtheory.testing.checks import suite_problems
    p = suite_problems()["logistic"]
    h = ft.run(p, "fedsps", rounds=5, local_steps=4, batch_size=5, clients_per_round=3, c=0.5, gamma_b=1.0).history
    for col in ("step_mean", "step_min", "step_max", "step_capped_frac", "step_intra_cv", "step_inter_cv"):
        assert col in h and h[col].iloc[1:].notna().all(), col
    assert (h.step_min <= h.step_mean).iloc[1:].all() and (h.step_mean <= h.step_max).iloc[1:].all()
    assert ((h.step_capped_frac >= 0) & (h.step_capped_frac <= 1)).iloc[1:].all()


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_reset_each_round_resets_the_smoothing_state_on_every_backend(backend):
    """With the smoothed cap, reset_each_round restarts gamma_{-1} = 1 at every round on every
    backend (numba and torch once ran the kernel on a copy taken before the reset)."""
    if backend == "torch":
        pytest.importorskip("torch")
    A, b = _data("logistic", False)
    p = problems.logistic(A, b, l2=0.05)
    kw = dict(rounds=6, local_steps=4, c=0.5, gamma_b=0.5, batch_size=4, clients_per_round=3, seed=3,
              smoothing="sps_code", record_iterates=True)
    ref = ft.run(p, "fedsps", backend="python", reset_each_round=True, **kw)
    run = ft.run(p, "fedsps", backend=backend, reset_each_round=True, **kw)
    assert np.abs(run.iterates - ref.iterates).max() <= 1e-10 * max(1.0, np.abs(ref.iterates).max())
    no_reset = ft.run(p, "fedsps", backend="python", reset_each_round=False, **kw)
    assert np.abs(no_reset.iterates - ref.iterates).max() > 1e-6        # the option changes the run


def test_integer_hyperparameters_keep_the_state_float():
    """Integer c0 and gamma_b give FedDecSPS the run of their float values: the per-client memory
    P_i = c_t gamma_t^i is a float array (an int array truncated it to 0 and froze the steps)."""
    p = problems.quadratic(4, 3, seed=0, heterogeneity=1.0)
    lb = [p.client_value(i, np.linalg.solve(p.client_data(i)[0], p.client_data(i)[1])) for i in range(4)]
    kw = dict(rounds=10, local_steps=5, lower_bound=lb, record_iterates=True)
    for backend in ("numba", "python"):
        a = ft.run(p, "fedsps_dec", c0=1, gamma_b=1, backend=backend, **kw)
        b = ft.run(p, "fedsps_dec", c0=1.0, gamma_b=1.0, backend=backend, **kw)
        assert a.state["state"].dtype == np.float64
        assert np.any(b.state["state"] != np.round(b.state["state"]))     # a memory an int array would truncate
        assert np.array_equal(a.iterates, b.iterates) and np.array_equal(a.state["state"], b.state["state"])


def test_fedsps_global_integer_cap_runs_compiled():
    """An integer gamma_b that binds at the initial probe leaves the global step a float (one type in
    the compiled state): the fused and per-round runs agree."""
    p = problems.quadratic(4, 3, seed=0)
    kw = dict(rounds=3, local_steps=2, c=0.01, gamma_b=1, lower_bound=-10.0, record_iterates=True)
    a = ft.run(p, "fedsps_global", **kw)
    b = ft.run(p, "fedsps_global", callback=lambda r, x: False, **kw)
    assert a.status == b.status == "max_rounds"
    assert isinstance(a.state["gamma"], float) and a.state["gamma"] == 1.0      # the cap binds
    assert np.array_equal(a.iterates, b.iterates)


@pytest.mark.parametrize("backend,callback", [("numba", None), ("numba", lambda r, x: False), ("python", None)])
def test_fedsps_normalized_nu_literal_needs_two_local_steps(backend, callback):
    """nu_literal sums tau - 1 step sizes: tau = 1 is an error naming the parameter, on the fused and
    per-round compiled paths and the NumPy twin alike."""
    p = problems.quadratic(4, 3, seed=0)
    with pytest.raises(ft.InvalidParameterError, match=r"'local_steps' parameter of run must be >= 2\. Got 1"):
        ft.run(p, "fedsps_normalized", rounds=2, local_steps=1, nu_literal=True, lower_bound=-10.0,
               backend=backend, callback=callback)


@pytest.mark.parametrize("backend", ["numba", "python"])
def test_literal_smoothing_starts_its_cap_at_one(backend):
    """FedSPS §6: gamma_{b,t} = 2^{|B|/m_i} gamma_{b,t-1} with gamma_{b,0} = 1, so the cap at a client's
    step t is 2^{t |B|/m_i}. The first cap was already 2^{|B|/m_i} (one doubling ahead: 0.23 apart
    in x after 3 rounds). With exact gradients (|B| = m_i: factor 2) and a Polyak ratio far above
    the cap, every step is the cap: 1, 2, 4, then 8, 16, 32 in the next round (the state is kept)."""
    p = problems.quadratic(3, 2, seed=0)
    res = ft.run(p, "fedsps", rounds=2, local_steps=3, lr=0.1, c=1.0, lower_bound=-1e6, smoothing="literal",
                 trace=True, backend=backend)
    np.testing.assert_array_equal(res.trace[0]["gammas"], np.tile([1.0, 2.0, 4.0], (3, 1)))
    np.testing.assert_array_equal(res.trace[1]["gammas"], np.tile([8.0, 16.0, 32.0], (3, 1)))
    assert (res.trace[0]["capped"] == 1).all()


@pytest.mark.parametrize("backend", ["numba", "python"])
def test_fedsps_global_aggregation_c_counts_the_gradient_it_uploads(backend):
    """Aggregation (c) uploads each participant's last gradient g_i besides its model: comm_up was
    counted as for (a) (12 for 3 clients x 4 rounds, where 24 vectors go up)."""
    p = problems.quadratic(3, 3, seed=0)
    kw = dict(rounds=4, lr=0.1, gamma_b=0.5, backend=backend)
    a, c = (ft.run(p, "fedsps_global", aggregation=agg, **kw) for agg in ("a", "c"))
    assert (a.comm_up, a.comm_down) == (12, 12) and (c.comm_up, c.comm_down) == (24, 12)


@given(S=st.integers(1, 6), K=st.integers(1, 6), data=st.data())
def test_stepsize_statistics_follow_their_definitions(S, K, data):
    """step_stats against the definitions, computed by Python's statistics module over lists: the
    mean, min, max, capped fraction, and the mean coefficient of variation (population std / mean)
    over each client's K steps (intra) and over the clients at each step (inter), rows or columns of
    mean 0 left out."""
    import statistics
    from fedtheory.algorithms.sps_common import step_stats
    vals = st.one_of(st.just(0.0), st.floats(1e-6, 1e3))
    G = np.array(data.draw(st.lists(st.lists(vals, min_size=K, max_size=K), min_size=S, max_size=S)))
    C = np.array(data.draw(st.lists(st.lists(st.integers(0, 1), min_size=K, max_size=K), min_size=S, max_size=S)))
    out = step_stats(G, C)

    def cv(groups):
        r = [statistics.pstdev(g) / statistics.fmean(g) for g in groups if statistics.fmean(g) > 0]
        return statistics.fmean(r) if r else math.nan
    want = {"step_mean": statistics.fmean(G.ravel()), "step_min": min(G.ravel()), "step_max": max(G.ravel()),
            "step_capped_frac": statistics.fmean(C.ravel()), "step_intra_cv": cv(G.tolist()),
            "step_inter_cv": cv(G.T.tolist()) if S > 1 else 0.0}
    for k, v in want.items():
        if math.isnan(v):
            assert math.isnan(out[k]), k
        else:
            assert out[k] == pytest.approx(v, rel=1e-12, abs=1e-12), k
