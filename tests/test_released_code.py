"""The run options that reproduce the authors' released code (``weight_decay``, ``clip_norm``,
``client_schedule``, FedSpeed's ``sam_eps``) against an independent reference.

The reference re-derives, in torch float64, the client and server rules of FL-Simulator
(github.com/woodenchild95/FL-Simulator, the FedSpeed authors' simulator) for a model whose parameter
vector is x: each client builds ``torch.optim.SGD(weight_decay=wd (+ lamb))``, backpropagates its
loss (data loss plus the algorithm's linear correction term), calls
``torch.nn.utils.clip_grad_norm_`` and steps; the server decays the learning rate every round and
draws Bernoulli participants from ``np.random.seed(t + seed + retry)``. fedtheory runs the same
problem through ``ft.run`` with the mapping of docs/conventions.md on its three backends.
"""
import numpy as np
import pytest

import fedtheory as ft
import problems
from fedtheory.exceptions import InvalidParameterError
from fedtheory.runs.schedules import epochs_to_local_steps, round_decay

torch = pytest.importorskip("torch")

N, M, D = 6, 10, 4
K, ROUNDS, LR0, DECAY = 4, 6, 0.4, 0.9
WD, LAMB, RHO, SAM_EPS, CM_ALPHA, ETA_G = 1e-2, 0.1, 0.05, 1e-7, 0.3, 0.8
CLIP = {"fedcm": 0.1, "scaffold": 0.1}      # about the median norm of u (others: 0.2), so that some
#                                             steps are clipped and others not
ADAM = dict(beta1=0.9, beta2=0.99, eps=1e-3, server_lr=0.1)
BACKENDS = ("numba", "python", "torch")
TOL = 1e-10


def _label_skewed(seed=3):
    """Logistic data whose clients' labels are skewed to one class (and their features shifted)."""
    rng = np.random.default_rng(seed)
    A, y = [], []
    for i in range(N):
        a = rng.standard_normal((M, D)) + 0.5 * (i % 3)
        p_pos = 0.85 if i % 2 == 0 else 0.15
        A.append(a)
        y.append(np.where(rng.random(M) < p_pos, 1.0, -1.0))
    return problems.logistic(A, y)


def fl_simulator_participants(t, seed, n, ratio):
    """FL-Simulator's Bernoulli participation of round t (``Server._activate_clients_``): uniforms
    from ``np.random.seed(t + seed + retry)``, clients with u <= ratio, sorted; redrawn if empty."""
    retry = 0
    while True:
        np.random.seed(t + seed + retry)
        sel = np.sort(np.flatnonzero(np.random.uniform(size=n) <= ratio))
        retry += 1
        if sel.size:
            return sel


def _loss(A, y, w):
    return torch.nn.functional.softplus(-y * (A @ w)).mean()


def released_client(alg, data, x, corr, lr, wd, clip, stats, sam_eps=SAM_EPS):
    """One client's K full-batch local steps as FL-Simulator's client classes take them.

    ``corr`` is the vector the server sends for the linear loss term (SCAFFOLD: c - c_i; FedDyn
    and FedSpeed: h_i - x; FedCM: the momentum). Returns the final local model.
    """
    A, y = data
    w = torch.nn.Parameter(x.clone())
    extra = LAMB if alg in ("fedprox", "feddyn", "fedspeed") else 0.0          # prox pull as decay
    opt = torch.optim.SGD([w], lr=lr, weight_decay=wd + extra)
    for _ in range(K):
        opt.zero_grad()
        if alg == "fedspeed":                        # ESAM step: ascend, gradient there, come back
            _loss(A, y, w).backward()
            with torch.no_grad():
                e = RHO * w.grad / (w.grad.norm() + sam_eps)
                w.add_(e)
            opt.zero_grad()
            _loss(A, y, w).backward()
            with torch.no_grad():
                w.sub_(e)
            (LAMB * torch.sum(w * corr)).backward()   # accumulates into the perturbed gradient
        else:
            loss = _loss(A, y, w)
            if alg == "fedprox":
                loss = loss + LAMB * (-torch.sum(w * x))
            elif alg == "scaffold":
                loss = loss + torch.sum(w * corr)
            elif alg == "feddyn":
                loss = loss + LAMB * torch.sum(w * corr)
            elif alg == "fedcm":
                loss = CM_ALPHA * loss + (1 - CM_ALPHA) * torch.sum(w * corr)
            loss.backward()
        if clip is not None:
            norm = float(torch.nn.utils.clip_grad_norm_([w], max_norm=clip))
            stats["steps"] += 1
            stats["clipped"] += int(clip / (norm + 1e-6) < 1.0)
        opt.step()
    return w.detach().clone()


def released_run(alg, problem, ratio, seed, wd, clip, stats, sam_eps=SAM_EPS):
    """FL-Simulator's server loop (FedAvg, FedAdam, FedProx, SCAFFOLD, FedDyn, FedCM, FedSpeed)."""
    data = [(torch.tensor(problem.client_data(i)[0], dtype=torch.float64),
             torch.tensor(problem.client_data(i)[1], dtype=torch.float64)) for i in range(N)]
    x = torch.zeros(D, dtype=torch.float64)
    h = torch.zeros((N, D), dtype=torch.float64)            # FedDyn/FedSpeed duals, SCAFFOLD c_i
    c = torch.zeros(D, dtype=torch.float64)
    m, v = torch.zeros(D, dtype=torch.float64), torch.zeros(D, dtype=torch.float64)
    avg_update = torch.zeros(D, dtype=torch.float64)
    lr, xs, sched = LR0, [x.clone()], []
    for t in range(ROUNDS):
        sel = fl_simulator_participants(t, seed, N, ratio)
        sched.append(sel)
        updates, models, delta_c = [], [], torch.zeros(D, dtype=torch.float64)
        for i in sel:
            corr = {"scaffold": c - h[i], "feddyn": h[i] - x, "fedspeed": h[i] - x,
                    "fedcm": avg_update / K / lr * DECAY * -1.0}.get(alg)
            wi = released_client(alg, data[i], x, corr, lr, wd, clip, stats, sam_eps)
            updates.append(wi - x)
            models.append(wi)
            if alg in ("feddyn", "fedspeed"):
                h[i] += wi - x
            elif alg == "scaffold":
                ci = h[i] - c - (wi - x) / K / lr
                delta_c += ci - h[i]
                h[i] = ci
        avg_update = torch.stack(updates).mean(0)
        if alg in ("feddyn", "fedspeed"):
            x = torch.stack(models).mean(0) + h.mean(0)
        elif alg == "fedadam":
            m = ADAM["beta1"] * m + (1 - ADAM["beta1"]) * avg_update
            v = ADAM["beta2"] * v + (1 - ADAM["beta2"]) * avg_update ** 2
            x = x + ADAM["server_lr"] * m / (v.sqrt() + ADAM["eps"])
        else:
            if alg == "scaffold":
                c = c + delta_c / N
            x = x + (ETA_G if "server_lr" in FEDTHEORY[alg] else 1.0) * avg_update   # fedprox: eta_g = 1
        xs.append(x.clone())
        lr *= DECAY
    return np.array([a.numpy() for a in xs]), sched


FEDTHEORY = {"fedavg": {"server_lr": ETA_G},
             "fedadam": {"server_lr": ADAM["server_lr"], "beta1": ADAM["beta1"], "beta2": ADAM["beta2"],
                         "tau": ADAM["eps"]},
             "fedprox": {"mu": LAMB},
             "scaffold": {"server_lr": ETA_G},
             "feddyn": {"alpha": LAMB},
             "fedcm": {"alpha": CM_ALPHA, "server_lr": ETA_G},
             "fedspeed": {"lam": 1.0 / LAMB, "alpha": 1.0, "rho": RHO, "perturbation": "sam", "server": "dyn",
                          "sam_eps": SAM_EPS}}


def _fedtheory(alg, problem, sched, backend, wd, clip):
    # the released code's E local epochs of one full batch each, its per-round decay lr *= DECAY
    K_steps = epochs_to_local_steps(problem, epochs=K, batch_size=M)
    return ft.run(problem, alg, rounds=ROUNDS, local_steps=K_steps, lr=round_decay(LR0, DECAY, K_steps),
                  client_schedule=sched, weight_decay=wd, clip_norm=clip, backend=backend,
                  record_iterates=True, eval_every=ROUNDS, **FEDTHEORY[alg])


@pytest.mark.parametrize("ratio", [1.0, 0.5])
@pytest.mark.parametrize("alg", sorted(FEDTHEORY))
def test_released_code_reference_with_weight_decay_and_clipping(alg, ratio):
    """Every covered algorithm with weight decay and (partly active) clipping, full and Bernoulli
    participation and per-round decay: the three backends follow the reference to 1e-10."""
    p = _label_skewed()
    stats = {"steps": 0, "clipped": 0}
    clip = CLIP.get(alg, 0.2)
    ref, sched = released_run(alg, p, ratio, 7, WD, clip, stats)
    assert 0 < stats["clipped"] < stats["steps"]            # both branches of the clipping rule ran
    if ratio < 1:
        assert any(len(s) < N for s in sched) and len({len(s) for s in sched}) > 1
    for backend in BACKENDS:
        res = _fedtheory(alg, p, sched, backend, WD, clip)
        err = np.abs(res.iterates - ref).max()
        assert err <= TOL, (backend, err)
        assert [s.tolist() for s in res.sampled] == [s.tolist() for s in sched]


@pytest.mark.parametrize("alg", ["fedavg", "fedprox", "fedspeed"])
def test_released_code_reference_without_clipping(alg):
    """weight decay alone (clip_norm None: the released code with a threshold never reached)."""
    p = _label_skewed()
    stats = {"steps": 0, "clipped": 0}
    ref, sched = released_run(alg, p, 0.5, 11, WD, 1e6, stats)
    assert stats["clipped"] == 0
    for backend in BACKENDS:
        res = _fedtheory(alg, p, sched, backend, WD, None)
        assert np.abs(res.iterates - ref).max() <= TOL


def test_fedspeed_sam_eps_is_the_constant_of_the_ascent_norm():
    """A large sam_eps changes the run, and the reference with the same constant follows it."""
    p = _label_skewed()
    ref, sched = released_run("fedspeed", p, 1.0, 0, 0.0, None, {"steps": 0, "clipped": 0}, sam_eps=0.5)
    kw = {**FEDTHEORY["fedspeed"], "sam_eps": 0.5}
    for backend in BACKENDS:
        res = ft.run(p, "fedspeed", rounds=ROUNDS, local_steps=K, lr=lambda s: LR0 * DECAY ** (s // K),
                     backend=backend, record_iterates=True, eval_every=ROUNDS, **kw)
        assert np.abs(res.iterates - ref).max() <= TOL
    default = _fedtheory("fedspeed", p, sched, "numba", 0.0, None)
    assert np.abs(default.iterates - ref).max() > 1e-6


def test_schedule_validation_errors():
    p = _label_skewed()
    with pytest.raises(InvalidParameterError, match="exactly one entry per round.*rounds=3.*Got 2"):
        ft.run(p, "fedavg", rounds=3, client_schedule=[[0], [1]])
    with pytest.raises(InvalidParameterError, match=r"range \[0, 5\].*entry 1"):
        ft.run(p, "fedavg", rounds=2, client_schedule=[[0], [6]])
    with pytest.raises(InvalidParameterError, match="distinct clients"):
        ft.run(p, "fedavg", rounds=1, client_schedule=[[1, 1]])
    with pytest.raises(InvalidParameterError, match="clients_per_round=2 clients.*with 3"):
        ft.run(p, "fedavg", rounds=1, clients_per_round=2, client_schedule=[[0, 1, 2]])
    with pytest.raises(InvalidParameterError, match="integer"):
        ft.run(p, "fedavg", rounds=1, client_schedule=[[0.5]])
    with pytest.raises(InvalidParameterError, match="sequence of client-index arrays"):
        ft.run(p, "fedavg", rounds=1, client_schedule=3)
    # a mapping's keys (here the round numbers) would be read as the entries
    with pytest.raises(InvalidParameterError, match=r"not a dict.*\[d\[t\] for t in range\(rounds\)\]"):
        ft.run(p, "fedavg", rounds=2, client_schedule={0: [1], 1: [2]})
    with pytest.raises(InvalidParameterError, match="not a frozenset"):
        ft.run(p, "fedavg", rounds=1, client_schedule=frozenset([(0, 1)]))
    # with replacement an entry lists the draws with their duplicates: the distinct clients are too few
    with pytest.raises(InvalidParameterError, match=r"clients_per_round=3 clients.*'with_replacement'.*"
                                                    r"draws with their duplicates.*distinct participants.*"
                                                    r"entry 0 with 2 clients \(\[1, 4\]\)"):
        ft.run(p, "lfd", rounds=1, clients_per_round=3, client_schedule=[[1, 4]])
    with pytest.raises(InvalidParameterError, match=r"'uniform'.*another clients_per_round or with Bernoulli"):
        ft.run(p, "fedavg", rounds=1, clients_per_round=2, client_schedule=[[1]])


# ------------------------------------------------------------------ done-when: the three claims, three backends
def _supported():
    return sorted(n for n in ft.algorithms() if "clip_norm" in ft.get_algorithm(n).released_options)


def _noisy_logistic():
    rng = np.random.default_rng(5)
    A = [rng.standard_normal((12, D)) for _ in range(N)]
    y = [np.where(rng.random(12) < 0.5, -1.0, 1.0) for _ in range(N)]
    return problems.logistic(A, y, noise=0.05)


@pytest.mark.parametrize("backend", BACKENDS)
def test_weight_decay_enters_neither_the_sam_ascent_nor_the_function_values(backend):
    """FedSpeed's local path with weight decay is the recursion whose SAM ascent uses grad f_i
    alone and whose step adds wd y; and F in the history is the problem's F, without wd."""
    p, wd, lam, a, rho = _label_skewed(), 0.05, 4.0, 0.5, 0.2
    res = ft.run(p, "fedspeed", rounds=1, local_steps=3, lr=0.3, lam=lam, alpha=a, rho=rho, perturbation="sam",
                 weight_decay=wd, trace="local", backend=backend, eval_every=1)
    path = res.trace[0]["local"]                                   # (S, K + 1, d), round 0: ghat = 0, x = 0
    for s, i in enumerate(res.sampled[0]):
        y = np.zeros(D)
        for k in range(3):
            g1 = p.client_grad(int(i), y)
            g2 = p.client_grad(int(i), y + rho / (np.linalg.norm(g1) + 1e-7) * g1)
            y = y - 0.3 * ((1 - a) * g1 + a * g2 + y / lam + wd * y)
            assert np.allclose(path[s, k + 1], y, rtol=0, atol=1e-13)
            # decay inside the ascent (grad of f_i + wd/2 ||y||^2) would give another path
        assert not np.allclose(path[s, 1:], _path_with_decay_in_f(p, int(i), wd, lam, a, rho), rtol=0, atol=1e-8)
    assert res.history["value"].iloc[-1] == pytest.approx(p.value(res.x), rel=1e-14, abs=0)


def _path_with_decay_in_f(p, i, wd, lam, a, rho):
    """The same client's path when the decay were part of f_i (``l2 = wd``): it enters the ascent."""
    y, out = np.zeros(D), []
    for _ in range(3):
        g1 = p.client_grad(i, y) + wd * y
        g2 = p.client_grad(i, y + rho / (np.linalg.norm(g1) + 1e-7) * g1)
        g2 = g2 + wd * (y + rho / (np.linalg.norm(g1) + 1e-7) * g1)
        y = y - 0.3 * ((1 - a) * g1 + a * g2 + y / lam)
        out.append(y)
    return np.array(out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_weight_decay_is_l2_in_the_iterates_of_fedavg_but_not_in_f(backend):
    """For FedAvg the decay is the gradient of (wd/2)||x||^2, so the iterates equal those of the
    problem with l2 = wd (to rounding); the values differ by exactly that term (not part of f_i)."""
    p, wd = _label_skewed(), 0.03
    pl2 = problems.logistic([p.client_data(i)[0] for i in range(N)], [p.client_data(i)[1] for i in range(N)], l2=wd)
    a = ft.run(p, "fedavg", rounds=5, local_steps=3, lr=0.3, weight_decay=wd, backend=backend, eval_every=1,
               record_iterates=True)
    b = ft.run(pl2, "fedavg", rounds=5, local_steps=3, lr=0.3, backend=backend, eval_every=1, record_iterates=True)
    assert np.abs(a.iterates - b.iterates).max() <= 1e-14
    xs = a.iterates[a.history["round"].to_numpy()]
    assert np.allclose(a.history["value"], [p.value(x) for x in xs], rtol=1e-14, atol=0)
    assert np.allclose(b.history["value"] - a.history["value"], [wd / 2 * x @ x for x in xs], rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("alg", _supported())
def test_clip_norm_never_changes_a_shorter_step(alg, backend):
    """A threshold above every local direction leaves the run bit for bit unchanged (with weight
    decay, sampling and minibatches), on every algorithm that accepts clipping."""
    p = _noisy_logistic()
    kw = dict(rounds=3, local_steps=3, lr=0.1, clients_per_round=3, batch_size=4, seed=2, record_iterates=True,
              backend=backend, eval_every=1, weight_decay=1e-3)
    if ft.get_algorithm(alg).full_participation_only:
        kw.pop("clients_per_round")
    a = ft.run(p, alg, **kw)
    b = ft.run(p, alg, clip_norm=1e8, **kw)
    assert a.status == b.status == "max_rounds"
    assert np.array_equal(a.iterates, b.iterates)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clipped_directions_have_norm_at_most_clip_norm(backend):
    """With clipping active, every FedAvg local direction (y_k - y_{k+1}) / eta - wd y_k has norm
    <= clip_norm (and the threshold is reached: some steps are clipped)."""
    p, clip, wd, lr = _label_skewed(), 0.2, 0.01, 0.3
    res = ft.run(p, "fedavg", rounds=3, local_steps=4, lr=lr, clip_norm=clip, weight_decay=wd, trace="local",
                 backend=backend)
    norms = []
    for t in range(3):
        Y = res.trace[t]["local"]
        dirs = (Y[:, :-1] - Y[:, 1:]) / lr - wd * Y[:, :-1]
        norms.extend(np.linalg.norm(dirs, axis=2).ravel())
    norms = np.array(norms)
    assert norms.max() <= clip * (1 + 1e-12)
    # a clipped direction has norm clip ||u|| / (||u|| + 1e-6), within 1e-5 of clip here
    assert np.sum(norms > clip * (1 - 1e-4)) > 0 and np.sum(norms < clip * (1 - 1e-2)) > 0


WR = dict(clients_per_round=4, sampling="with_replacement")      # 4 draws of 6 clients: duplicates
REPLAY = [("fedavg", dict(clients_per_round=3)), ("scaffold", dict(clients_per_round=2, sampling="uniform")),
          ("fedspeed", dict(sampling="bernoulli", participation=0.5, perturbation="sam", server="dyn")),
          ("feddyn", dict(clients_per_round=4, weight_decay=1e-2, clip_norm=0.3)),
          ("lfd", dict(clients_per_round=3, replicate_duplicates=True)),
          ("lfd", dict(clients_per_round=4)),                   # LFD's default: with replacement, merged
          ("lfd", dict(WR, replicate_duplicates=True)),
          ("fedavg", WR), ("scaffold", WR), ("fedprox", dict(WR, mu=0.1)),
          ("feddyn", dict(WR, weight_decay=1e-2)),
          ("fedsps", dict(clients_per_round=3))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("alg,kw", REPLAY)
def test_client_schedule_replays_a_sampled_run_bit_for_bit(alg, kw, backend):
    """Feeding a sampled run's own participants back as client_schedule (with minibatches, noise
    and the same seed) reproduces its iterates, history, counters and participants exactly, in
    every sampling mode: with replacement ``res.sampled`` keeps the duplicate draws, and the
    schedule merges them (weight m/S) exactly as the sampler does unless they are replicated."""
    p = _noisy_logistic()
    base = dict(rounds=6, local_steps=3, lr=0.1, batch_size=3, seed=9, record_iterates=True, eval_every=2,
                backend=backend, trace=True, **kw)
    a = ft.run(p, alg, **base)
    b = ft.run(p, alg, client_schedule=list(a.sampled), **base)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.iterates, b.iterates)
    assert [c.tolist() for c in a.sampled] == [c.tolist() for c in b.sampled]
    cols = [c for c in a.history.columns if c != "time"]
    assert a.history[cols].equals(b.history[cols])
    assert (a.grad_evals, a.sample_grads, a.comm_up, a.comm_down) == (b.grad_evals, b.sample_grads, b.comm_up,
                                                                      b.comm_down)
    for ra, rb in zip(a.trace, b.trace):                    # the same local runs, weights and minibatches
        assert np.array_equal(ra.clients, rb.clients) and np.array_equal(ra.weights, rb.weights)
        assert np.array_equal(ra.idx, rb.idx)
    assert len({len(c) for c in a.sampled}) > 1 or kw.get("clients_per_round")   # bernoulli: sizes vary
    if a.sampled.merge_duplicates or kw.get("sampling") == "with_replacement":
        S = kw["clients_per_round"]
        assert all(len(c) == S for c in a.sampled)          # the draws, duplicates kept
        assert any(np.unique(c).size < S for c in a.sampled)     # some round drew a client twice
        merged = kw.get("replicate_duplicates") is not True
        assert a.sampled.merge_duplicates == merged
        for t, rt in enumerate(a.trace):                    # the clients that ran: merged unless replicated
            u, m = np.unique(a.sampled[t], return_counts=True)
            assert np.array_equal(rt.clients, u if merged else a.sampled[t])
            assert np.array_equal(rt.clients, a.sampled.slots(t))
            if merged:                                      # multiplicity m of a draw: weight m / S
                np.testing.assert_array_equal(rt.weights, m / S)


def test_client_schedule_weights_follow_the_sampling_mode():
    """An explicit schedule is weighted as its sampling mode weighs a draw: uniform w_i n / S,
    self-normalised w_i / sum_S w without a mode, and w itself for an entry of every client."""
    rng = np.random.default_rng(0)
    A = [rng.standard_normal((8, 3)) for _ in range(4)]
    y = [np.where(rng.random(8) < 0.5, -1.0, 1.0) for _ in range(4)]
    w = np.array([0.1, 0.2, 0.3, 0.4])
    p = problems.logistic(A, y, weights=w)
    sched = [[2, 0], [0, 1, 2, 3], [3]]
    res = ft.run(p, "fedavg", rounds=3, client_schedule=sched, trace=True)
    seen = [rt.weights for rt in res.trace]
    np.testing.assert_array_equal(seen[0], w[[2, 0]] / w[[2, 0]].sum())
    np.testing.assert_array_equal(seen[1], w)
    np.testing.assert_array_equal(seen[2], [1.0])
    res = ft.run(p, "fedavg", rounds=1, clients_per_round=2, client_schedule=[[3, 1]], trace=True)
    np.testing.assert_array_equal(res.trace[0].weights, w[[3, 1]] * (4 / 2))


def test_options_rejected_where_the_local_step_is_not_a_gradient_step():
    p = _label_skewed()
    with pytest.raises(InvalidParameterError, match=r"'weight_decay'.*not supported by 'fedsps'.*Polyak.*Got weight_decay=0.01"):
        ft.run(p, "fedsps", rounds=1, weight_decay=0.01)
    with pytest.raises(InvalidParameterError, match=r"'clip_norm'.*not supported by 'pfedme'.*Got clip_norm=1.0"):
        ft.run(p, "pfedme", rounds=1, clip_norm=1.0)
    with pytest.raises(InvalidParameterError, match=r"'clip_norm'.*not supported by 'feddeper'"):
        ft.run(p, "feddeper", rounds=1, clip_norm=1.0)
    with pytest.raises(InvalidParameterError, match=r"'weight_decay' parameter of run"):
        ft.run(p, "fedavg", rounds=1, weight_decay=-1.0)
    with pytest.raises(InvalidParameterError, match=r"'clip_norm' parameter of run"):
        ft.run(p, "fedavg", rounds=1, clip_norm=0.0)
    with pytest.raises(InvalidParameterError, match=r"'sam_eps'"):
        ft.run(p, "fedspeed", rounds=1, sam_eps=0.0)
    ft.run(p, "fedsps", rounds=1, weight_decay=0.0)            # 0 is "off": accepted everywhere


def test_pfedme_receives_weight_decay_as_its_own_hyperparameter():
    """pfedme's reference-code decay is its own weight_decay: the run option sets it (default 0.001)."""
    rng = np.random.default_rng(0)
    p = problems.lasso([rng.normal(size=(10, 3)) for _ in range(3)], [rng.normal(size=10) for _ in range(3)], l1=0.1)
    kw = dict(rounds=2, local_steps=2, lr=0.005, eta_p=0.05)
    assert ft.run(p, "pfedme", **kw).algorithm.weight_decay == 0.001
    r = ft.run(p, "pfedme", weight_decay=0.02, **kw)
    assert r.algorithm.weight_decay == 0.02
    assert not np.array_equal(r.x, ft.run(p, "pfedme", **kw).x)


def test_fedcm_weight_decay_is_l2_over_alpha():
    """FedCM scales the fresh gradient by alpha but not the decay: weight_decay=wd follows the
    problem with l2 = wd / alpha (the decay an outside check needed before this option)."""
    p, wd, a = _label_skewed(), 0.02, 0.25
    pl2 = problems.logistic([p.client_data(i)[0] for i in range(N)], [p.client_data(i)[1] for i in range(N)],
                            l2=wd / a)
    for backend in BACKENDS:
        r1 = ft.run(p, "fedcm", rounds=5, local_steps=3, lr=0.3, alpha=a, weight_decay=wd, backend=backend,
                    record_iterates=True)
        r2 = ft.run(pl2, "fedcm", rounds=5, local_steps=3, lr=0.3, alpha=a, backend=backend, record_iterates=True)
        assert np.abs(r1.iterates - r2.iterates).max() <= 1e-13


def pfllib_fedjax_run(alg, problem, schedule, lr, E, mu, server_lr):
    """PFLlib's and FedJAX's rules for FedAvg and FedProx with full-batch epochs (independent
    reference): SGD without decay; FedProx's gradient is that of mean loss + mu/2 ||w - x||^2
    (PFLlib's PerturbedGradientDescent, FedJAX's ``proximal_weight``); the server averages the
    updates weighted by the participants' sample counts, m_i / sum_S m_j, and takes the step
    x - server_lr * mean(x - w_i) (FedJAX's server SGD on delta = x - w; PFLlib: server_lr = 1)."""
    data = [(torch.tensor(problem.client_data(i)[0]), torch.tensor(problem.client_data(i)[1]))
            for i in range(problem.n_clients)]
    sizes = problem.client_sizes
    x = torch.zeros(problem.dim, dtype=torch.float64)
    xs = [x.clone()]
    for sel in schedule:
        delta_sum, m_sum = torch.zeros_like(x), 0.0
        for i in sel:
            w = torch.nn.Parameter(x.clone())
            opt = torch.optim.SGD([w], lr=lr)
            for _ in range(E):                                    # one full batch per epoch
                opt.zero_grad()
                loss = _loss(*data[i], w)
                if alg == "fedprox":
                    loss = loss + 0.5 * mu * torch.sum((w - x) ** 2)
                loss.backward()
                opt.step()
            delta_sum += float(sizes[i]) * (x - w.detach())
            m_sum += float(sizes[i])
        x = x - server_lr * delta_sum / m_sum
        xs.append(x.clone())
    return np.array([a.numpy() for a in xs])


@pytest.mark.parametrize("alg", ["fedavg", "fedprox"])
def test_pfllib_and_fedjax_conventions(alg):
    """Unequal client sizes, uniform sampling without replacement (PFLlib's join_ratio, FedJAX's
    UniformGetClientSampler), sample-count weights: fedtheory with weights = m_i / sum m and the
    participants as client_schedule (self-normalised weights) follows the reference to 1e-10."""
    rng = np.random.default_rng(2)
    sizes = [6, 9, 12, 15, 8, 10]
    A = [rng.standard_normal((m, D)) for m in sizes]
    y = [np.where(rng.random(m) < 0.5, -1.0, 1.0) for m in sizes]
    p = problems.logistic(A, y, weights=np.array(sizes) / sum(sizes))
    sched = [np.random.default_rng(t).choice(N, 3, replace=False) for t in range(ROUNDS)]
    kw = {"mu": 0.3} if alg == "fedprox" else {"server_lr": 0.7}
    ref = pfllib_fedjax_run(alg, p, sched, 0.3, K, kw.get("mu"), kw.get("server_lr", 1.0))
    for backend in BACKENDS:
        res = ft.run(p, alg, rounds=ROUNDS, local_steps=K, lr=0.3, client_schedule=sched, backend=backend,
                     record_iterates=True, **kw)
        assert np.abs(res.iterates - ref).max() <= TOL


@pytest.mark.parametrize("alg", _supported())
def test_options_agree_on_the_three_backends(alg):
    """Weight decay and active clipping follow one rule in the kernel, the NumPy twin and the
    torch context of every algorithm that accepts them (with sampling and minibatches)."""
    p = _noisy_logistic()
    kw = dict(rounds=4, local_steps=3, lr=0.2, batch_size=4, seed=3, record_iterates=True, eval_every=4,
              weight_decay=0.02, clip_norm=0.3)
    if not ft.get_algorithm(alg).full_participation_only:
        kw["clients_per_round"] = 4
    runs = [ft.run(p, alg, backend=b, **kw) for b in BACKENDS]
    plain = ft.run(p, alg, **{**kw, "weight_decay": None, "clip_norm": None})
    for r in runs[1:]:
        assert np.abs(r.iterates - runs[0].iterates).max() <= 1e-12
    assert np.abs(plain.iterates - runs[0].iterates).max() > 1e-6        # the options act


def test_weight_decay_on_a_deep_problem_is_l2_for_fedavg():
    """The torch context applies the options to a network too: FedAvg with weight_decay=wd follows
    the DeepProblem with l2 = wd (float64), while clipping changes the run."""
    from fedtheory.backends.torch import DeepProblem, models
    X, y = problems.vision.load_digits_images(flatten=True)
    X, y = X[:240], y[:240]
    parts = problems.partition_indices(y, 4, "iid", seed=0)

    def deep(l2):
        return DeepProblem(models.mlp(64, 10, hidden=(8,), seed=0), X, y, parts, l2=l2, dtype=torch.float64)
    kw = dict(rounds=3, local_steps=3, lr=0.1, clients_per_round=2, batch_size=8, backend="torch", device="cpu",
              record_iterates=True)
    a = ft.run(deep(0.0), "fedavg", weight_decay=0.01, **kw)
    b = ft.run(deep(0.01), "fedavg", **kw)
    c = ft.run(deep(0.0), "fedavg", weight_decay=0.01, clip_norm=0.05, **kw)
    assert np.abs(a.iterates - b.iterates).max() <= 1e-12
    assert np.abs(a.iterates - c.iterates).max() > 1e-4
