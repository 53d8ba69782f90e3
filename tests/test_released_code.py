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

torch = pytest.importorskip("torch")

N, M, D = 6, 10, 4
K, ROUNDS, LR0, DECAY = 4, 6, 0.4, 0.9
WD, LAMB, RHO, SAM_EPS, CM_ALPHA, ETA_G = 1e-2, 0.1, 0.05, 1e-7, 0.3, 1.0
CLIP = {"fedcm": 0.1, "scaffold": 0.1}      # about the median norm of u (others: 0.2), so that some
#                                             steps are clipped and others not
ADAM = dict(beta1=0.9, beta2=0.99, eps=1e-3, server_lr=0.1)
BACKENDS = ("numba", "python", "torch")
TOL = 1e-10


def _label_skewed(seed=3):
    """8-feature logistic data, each client's labels skewed to one class (as the outside check)."""
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


def released_client(alg, data, x, corr, lr, wd, clip, stats):
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
                e = RHO * w.grad / (w.grad.norm() + SAM_EPS)
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


def released_run(alg, problem, ratio, seed, wd, clip, stats):
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
            wi = released_client(alg, data[i], x, corr, lr, wd, clip, stats)
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
            x = x + ETA_G * avg_update
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
    return ft.run(problem, alg, rounds=ROUNDS, local_steps=K, lr=lambda s: LR0 * DECAY ** (s // K),
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
    global SAM_EPS
    p = _label_skewed()
    old = SAM_EPS
    try:
        SAM_EPS = 0.5
        ref, sched = released_run("fedspeed", p, 1.0, 0, 0.0, None, {"steps": 0, "clipped": 0})
    finally:
        SAM_EPS = old
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
