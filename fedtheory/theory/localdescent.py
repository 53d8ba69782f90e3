r"""Haddadpour & Mahdavi (2019), "On the convergence of local descent methods in federated
learning": Theorems 4.1, 4.2, 4.4 and 4.7 as code, with spec/localdescent.md §3-§4.

Constants (spec §3): L = max_j L_j (local smoothness), mu the PL constant of f (for a quadratic
lambda_min of the average Hessian), kappa = L/mu, and the gradient diversity

.. math:: \Lambda(x, q) = \frac{\sum_j q_j\|\nabla f_j(x)\|^2}{\|\sum_j q_j\nabla f_j(x)\|^2} \le \lambda,

whose supremum is finite only when every client is stationary at the minimiser (a shared
minimiser); for shared-minimiser quadratics it is :math:`\lambda_{\max}(\bar A^{-1} M \bar A^{-1})`,
:math:`M = \sum_j q_j A_j^2`. The proofs use a multi-point version (gradients at the clients' own
local iterates, spec §3.2), logged along trajectories as ``lambda_traj``.

Bound variants: ``"printed"`` (the paper's conditions as stated) and ``"corrected"`` (the
conditions the proofs need: (43) for Theorem 4.1, the direct Lemma B.6 check for Theorem 4.2,
the E-factor of (165) for Theorem 4.4, the factor n in the T-condition of Theorem 4.7).
"""
from __future__ import annotations

import math

import numpy as np

from ..constants import diversity, quadratic_diversity_sup  # noqa: F401  (defined once, re-exported)
from . import Case, Condition, RateStudy, Verification, mean_stderr, register_cases, register_theorem

VARIANTS = ("printed", "corrected")


# --------------------------------------------------------------------------- diversity --
def _quadratic_parts(problem):
    from .._kernels.oracles import KIND_QUADRATIC
    if problem.kind != KIND_QUADRATIC:
        return None
    n, d = problem.n_clients, problem.dim
    As = np.array([problem.client_hessian(i, np.zeros(d)) for i in range(n)])
    cs = np.array([problem.client_data(i)[1] for i in range(n)])
    return As, cs


def shared_minimizer(problem, x_star=None, tol=1e-10):
    """True when every client is stationary at the minimiser (required for a finite sup Lambda)."""
    if x_star is None:
        x_star = problem.info.get("x_star") if problem.info else None
    if x_star is None:
        from ..truth import ground_truth
        x_star = ground_truth(problem).x
    scale = max(1.0, max(float(np.linalg.norm(problem.client_grad(i, np.zeros(problem.dim))))
                         for i in range(problem.n_clients)))
    return all(np.linalg.norm(problem.client_grad(i, x_star)) <= tol * scale for i in range(problem.n_clients))


def diversity_sup(problem):
    r"""sup_x Lambda(x, q): :math:`\lambda_{\max}(\bar A^{-1}M\bar A^{-1})` for a shared-minimiser
    quadratic, +inf when the clients' minimisers differ (spec §3.1). Other problem kinds raise
    ValueError (estimate along trajectories with :func:`trajectory_diversity`)."""
    parts = _quadratic_parts(problem)
    if parts is None:
        raise ValueError("diversity_sup has a closed form for quadratics only; use trajectory_diversity.")
    if not shared_minimizer(problem):
        return math.inf
    return quadratic_diversity_sup(parts[0], problem.weights)


def pl_constants(problem):
    """(L, mu): L = max_j L_j, mu = PL constant of f (lambda_min of the average Hessian for a
    quadratic, l2 for logistic regression)."""
    from ..constants import client_smoothness, strong_convexity
    return float(np.max(client_smoothness(problem))), float(strong_convexity(problem))


def trajectory_diversity(problem, rounds, local_steps, lr, clients_per_round=None, seed=0, x0=None,
                         lr_schedule=None):
    r"""Multi-point diversity :math:`\Lambda_{multi}` at every local step of an LFD trajectory.

    Diagnostic simulation of spec §3.2 (``simulate_all``): all n clients run the local steps
    from each broadcast (the analysis's "agnostic" clients), the server averages the sampled
    multiset (with replacement by q, weight 1/S per draw; all clients with weights q when
    ``clients_per_round`` is None). Exact gradients plus the problem's additive noise.
    Returns the array of Lambda_multi(x_1^(t), ..., x_n^(t)) for t = 0..T-1.
    """
    rng = np.random.default_rng(seed)
    n, d = problem.n_clients, problem.dim
    q = problem.weights
    x = np.zeros(d) if x0 is None else np.asarray(x0, dtype=float).copy()
    out, t = [], 0
    for _ in range(rounds):
        if clients_per_round is None:
            idx, w = np.arange(n), q
        else:
            P = rng.choice(n, size=clients_per_round, replace=True, p=q)
            idx, cnt = np.unique(P, return_counts=True)
            w = cnt / clients_per_round
        X = np.repeat(x[None], n, axis=0)
        for _ in range(local_steps):
            G = np.array([problem.client_grad(j, X[j]) for j in range(n)])
            out.append(diversity(G, q))
            if problem.noise > 0:
                G = G + problem.noise * rng.standard_normal(G.shape)
            eta = lr if lr_schedule is None else lr_schedule(t)
            X = X - eta * G
            t += 1
        x = w @ X[idx]
    return np.array(out)


# --------------------------------------------------------------------------- Theorem 4.1 --
def cond43(eta, L, lam, mu, E):
    """Left-hand side of (43), the exact requirement of the recursion (Lemma A.4): must be <= 1."""
    if E == 1:
        return eta * L * lam
    return eta * L * lam * (1 + 4 * (L / mu) * E * ((1 - mu * eta) ** (1 - E) - 1))


def cond46(eta, L, lam, mu, E):
    """Left-hand side of (9) = (46) (Lemma A.5, what the paper proves sufficient): <= 1."""
    return eta * L * lam * (1 + 4 * (L / mu) * E * (1 - mu * eta) ** (1 - E))


def cond19_printed(eta, L, lam, mu, E):
    """Left-hand side of (19) exactly as printed (an extra 1/mu: not scale invariant): <= 1."""
    return eta * lam * (L + 4 * (L / mu) * L * E / (mu * (1 - mu * eta) ** (E - 1)))


LFGD_CONDITIONS = {"19": cond19_printed, "46": cond46, "43": cond43}


def lfgd_eta_max(L, mu, lam, E, variant="43"):
    """Largest eta with the condition's left-hand side <= 1 (bisection; spec §4.1)."""
    lhs = LFGD_CONDITIONS[variant]
    lo, hi = 0.0, min(1 / (L * lam), 1 / mu) * (1 - 1e-12)
    for _ in range(200):
        m = 0.5 * (lo + hi)
        lo, hi = (m, hi) if lhs(m, L, lam, mu, E) <= 1 else (lo, m)
    return lo


def lfgd_E_max(eta, L, mu, lam, variant="43", E_cap=100000):
    """Largest E with the condition's left-hand side <= 1 at step eta (0 if even E = 1 fails)."""
    lhs = LFGD_CONDITIONS[variant]
    E = 0
    while E < E_cap and lhs(eta, L, lam, mu, E + 1) <= 1:
        E += 1
    return E


def lfgd_bound(T, eta, mu, f0):
    """(1 - mu eta)^T f0, Theorem 4.1."""
    return (1 - mu * eta) ** np.asarray(T) * f0


def _lfgd_conditions(eta, L, mu, lam, E, lam_traj=None):
    conds = [Condition(f"({v}){' as printed' if v == '19' else ''}: eta L lambda [...] <= 1 (lambda = sup)",
                       LFGD_CONDITIONS[v](eta, L, lam, mu, E), 1.0, LFGD_CONDITIONS[v](eta, L, lam, mu, E) <= 1)
             for v in ("19", "46", "43")]
    conds.append(Condition("mu eta < 1", mu * eta, 1.0, mu * eta < 1))
    if lam_traj is not None:
        v = cond43(eta, L, lam_traj, mu, E)
        conds.append(Condition("(43) with lambda_traj (info)", v, 1.0, v <= 1))
    return conds


def _f_star(problem):
    fs = problem.info.get("f_star") if problem.info else None
    if fs is None:
        from ..truth import ground_truth
        fs = ground_truth(problem).f
    return fs


def _not_applicable(name, variant, reason):
    return Verification(name, variant, False, reason, [], float("nan"), float("nan"))


def _assumption_constants(problem, batch_size=None, noise_model=True):
    """(lambda_sup, sigma^2, B, C1) of Assumptions 1-3, or a string saying why they do not exist
    (no closed form, or clients without a shared minimiser: sup Lambda = inf, spec §3.1)."""
    try:
        lam = diversity_sup(problem)
        sigma2, B, C1 = _sigma2_B(problem, batch_size) if noise_model else (0.0, 1, 0.0)
    except ValueError as e:
        return str(e)
    if not math.isfinite(lam):
        return ("the clients do not share a minimiser, so sup Lambda = inf "
                "(Assumption: bounded gradient diversity fails; spec §3.1)")
    return lam, sigma2, B, C1


@register_theorem("localdescent.theorem_4_1")
def theorem_4_1(problem, rounds=50, local_steps=5, lr=None, clients_per_round=None, variant="corrected",
                seeds=10, x0=None, trajectory=True, measurement=None):
    r"""Theorem 4.1 (LFGD under PL): :math:`\mathbb E[f(\bar x^T) - f^*] \le (1-\mu\eta)^T (f(x^0) - f^*)`.

    Runs LFGD (``lfd``, exact gradients) for ``seeds`` sampling seeds and compares the mean gap
    with the bound at every round end t = rE (where the bound is above 1e-13 f0). ``measured``
    and ``bound`` are taken at the round with the largest measured/bound ratio.

    Conditions: (19) as printed, (46) and (43) with lambda = sup Lambda; ``variant="printed"``
    requires (19), ``"corrected"`` requires (43) (the proof's sharp condition). Not applicable
    when the clients do not share a minimiser (sup Lambda = inf, spec §3.1).

    Parameters
    ----------
    lr : float, optional
        Default: the largest step allowed by the variant's condition.
    trajectory : bool
        Also log lambda_traj (multi-point diversity along a simulated trajectory) and report
        (43) evaluated with it as an informational condition.

    Examples
    --------
    >>> import problems, validation
    >>> p = problems.quadratic(6, 4, L=1.0, mu=0.3, shared_minimizer=True, hessian="distinct", seed=0)
    >>> v = validation.verify("localdescent.theorem_4_1", p, rounds=20, local_steps=5, seeds=3,
    ...                       clients_per_round=3, x0=[1.0, 1.0, 1.0, 1.0])
    >>> v.applicable, v.holds
    (True, True)
    """
    from .._validation import Interval, Options, check_param
    from ..runner import run
    name = "localdescent.theorem_4_1"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    check_param("rounds", rounds, [Interval(int, 1, None)], name)
    check_param("seeds", seeds, [Interval(int, 1, None)], name)
    consts = _assumption_constants(problem, noise_model=False)
    if isinstance(consts, str):
        return _not_applicable(name, variant, consts)
    lam = consts[0]
    L, mu = pl_constants(problem)
    E = local_steps
    if lr is None:
        lr = lfgd_eta_max(L, mu, lam, E, "19" if variant == "printed" else "43")
    x0 = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    fs = _f_star(problem)
    f0 = problem.value(x0) - fs
    if measurement is None:
        gaps = []
        for s in range(seeds):
            res = run(problem, "lfd", rounds=rounds, local_steps=E, lr=lr, clients_per_round=clients_per_round,
                      seed=s, x0=x0, record_iterates=True)
            gaps.append([problem.value(x) - fs for x in res.iterates])
        gaps = np.array(gaps)
        lam_traj = None
        if trajectory:
            lam_traj = float(np.max(trajectory_diversity(problem, min(rounds, 30), E, lr, clients_per_round,
                                                         seed=0, x0=x0)))
        measurement = dict(mean_gap=gaps.mean(0), stderr=gaps.std(0, ddof=1) / np.sqrt(seeds) if seeds > 1
                           else np.full(gaps.shape[1], np.nan), lam_traj=lam_traj, lr=lr)
    m = measurement
    lr = m["lr"]
    T = np.arange(rounds + 1) * E
    bound = lfgd_bound(T, lr, mu, f0)
    mask = bound > 1e-13 * f0
    mask[0] = False                               # t = 0: gap = f0 = bound by definition
    ratio = np.where(mask, m["mean_gap"] / np.where(mask, bound, 1.0), -np.inf)
    r = int(np.argmax(ratio))
    conds = _lfgd_conditions(lr, L, mu, lam, E, m["lam_traj"])
    emax = lfgd_E_max(lr, L, mu, lam, "43", E_cap=10 * E + 100)
    conds.append(Condition("E <= E_max(eta) under (43) (info)", E, emax, E <= emax))
    need = conds[0] if variant == "printed" else conds[2]
    ok = need.ok and conds[3].ok
    return Verification(name, variant, ok, "" if ok else f"fails {need.name}", conds,
                        float(m["mean_gap"][r]), float(bound[r]), float(m["stderr"][r]),
                        dict(L=L, mu=mu, kappa=L / mu, lam_sup=lam, lr=lr, E=E, f0=f0, worst_round=r,
                             mean_gap=m["mean_gap"], bound_curve=bound, measurement=m,
                             all_rounds_hold=bool(np.all(m["mean_gap"][mask] <= bound[mask] * (1 + 1e-9)))))


# --------------------------------------------------------------------------- Theorem 4.2 --
def lfsgd_pl_stated_conditions(alpha, E, S, L, mu, lam, C1=0.0):
    """The paper's conditions (i)-(iv) of Theorem 4.2 (spec §4.2), as Conditions."""
    kap = L / mu
    a = alpha * E + 4
    Chat = 192 * lam * (S + 1) / S * kap ** 2 * math.exp(4 / alpha)
    c1_l, c1_r = alpha * math.exp(-2 / alpha), kap * math.sqrt(192 * lam * (S + 1) / S)
    # (ii) compared in logarithms (both sides overflow for large E): ratio LHS/RHS <= 1
    log_l = math.log(4 * L * (C1 + S)) + (E - 1) * math.log(a - 3)
    log_r = (math.log(64 * L ** 2 * (S + 1) / (mu * S) * (E - 1) * E) + (E - 2) * math.log(a + 1)) if E > 1 \
        else -math.inf
    c2_ratio = math.exp(min(log_l - log_r, 700.0))
    e21 = 1 + (alpha ** 2 + 6 * alpha) / (Chat - alpha ** 2) + math.sqrt(5) / math.sqrt(Chat - alpha ** 2) \
        if Chat > alpha ** 2 else math.inf
    return [Condition("(i) alpha e^{-2/alpha} < kappa sqrt(192 lambda (S+1)/S)", c1_l, c1_r, c1_l < c1_r),
            Condition("(ii) 4 (a-3)^{E-1} L (C1+S) <= 64 L^2 (S+1)/(mu S) (E-1) E (a+1)^{E-2} [LHS/RHS]",
                      c2_ratio, 1.0, c2_ratio <= 1),
            Condition("(iii) C1 <= 2E", C1, 2 * E, C1 <= 2 * E),
            Condition("(iv) E >= eq. (21)", E, e21, E >= e21)]


def lemma_b6_worst(etas, E, mu, D, c):
    """max_k eta_k (D + 2 sum_{m=k+1}^{e} c eta_m / prod_{i=k+1}^{m}(1 - mu eta_i)) over periods [s, s+E-1]."""
    T, worst = len(etas), 0.0
    for s in range(0, T, E):
        e = min(s + E - 1, T - 1)
        for k in range(s, e + 1):
            acc, prod = 0.0, 1.0
            for m in range(k + 1, e + 1):
                prod *= 1 - mu * etas[m]
                acc += c * etas[m] / prod
            worst = max(worst, etas[k] * (D + 2 * acc))
    return worst


def lfsgd_pl_corrected_conditions(alpha, E, S, L, mu, lam, C1=0.0, horizon=None):
    """The direct check of Lemma B.6 plus a >= E - 1 and a >= 4 lambda kappa (C1+S)/S (spec §4.2)."""
    a = alpha * E + 4
    D = lam * L * (C1 + S) / S
    c = lam * L ** 2 * (S + 1) * (C1 + E) / S
    T = horizon or 6 * E
    etas = 4 / (mu * (np.arange(T) + a))
    w = lemma_b6_worst(etas, E, mu, D, c)
    nec = 4 * lam * (L / mu) * (C1 + S) / S
    return [Condition("Lemma B.6 direct check: max_k eta_k (D + 2 sum ...) <= 1", w, 1.0, w <= 1),
            Condition("(151): a >= E - 1", a, E - 1, a >= E - 1),
            Condition("necessary: a >= 4 lambda kappa (C1+S)/S (eta_t <= 1/D)", a, nec, a >= nec)]


def lfsgd_pl_alpha_min(E, S, L, mu, lam, C1=0.0, grid=None):
    """Smallest alpha on a grid passing the corrected conditions (spec §4.2 item 2)."""
    for al in (grid if grid is not None else np.linspace(0.5, 400, 1600)):
        if all(c.ok for c in lfsgd_pl_corrected_conditions(al, E, S, L, mu, lam, C1)):
            return float(al)
    return math.inf


def bound22(T, a, E, S, B, sigma2, L, mu, f0):
    """Eq. (22): a^3/(T+a)^3 f0 + 4 kappa s^2 T(T+2a)/(mu S B (T+a)^3) + 256 kappa^2 s^2 T (E-1)/(mu S B (T+a)^3)."""
    kap = L / mu
    return (a ** 3 / (T + a) ** 3 * f0 + 4 * kap * sigma2 * T * (T + 2 * a) / (mu * S * B * (T + a) ** 3)
            + 256 * kap ** 2 * sigma2 * T * (E - 1) / (mu * S * B * (T + a) ** 3))


def _sigma2_B(problem, batch_size):
    """(sigma^2, B, C1) of Assumption 3: additive noise on quadratics (B = 1), logistic minibatches."""
    from .._kernels.oracles import KIND_LOGISTIC, KIND_QUADRATIC
    d = problem.dim
    if problem.kind == KIND_QUADRATIC:
        if batch_size is not None:
            raise ValueError("quadratic problems have no samples; use their noise (batch_size=None).")
        return d * problem.noise ** 2, 1, 0.0
    if problem.kind == KIND_LOGISTIC:
        if batch_size is None:
            return d * problem.noise ** 2, 1, 0.0
        s2 = max(float(np.mean(np.asarray(problem.client_data(i)[0].power(2).sum(axis=1)).ravel()
                               if problem.sparse else np.sum(problem.client_data(i)[0] ** 2, axis=1)))
                 for i in range(problem.n_clients))
        return s2, batch_size, 0.0
    raise ValueError("Assumption 3 needs C1 > 0 for least squares; use a quadratic with noise or logistic.")


@register_theorem("localdescent.theorem_4_2")
def theorem_4_2(problem, rounds=100, local_steps=4, alpha=None, clients_per_round=2, batch_size=None,
                variant="corrected", seeds=10, x0=None, replicate_duplicates=True, measurement=None):
    r"""Theorem 4.2 (LFSGD under PL, eta_t = 4/(mu (t + a)), a = alpha E + 4): bound (22) at T = R E.

    ``variant="printed"`` requires the stated conditions (i)-(iv); ``"corrected"`` requires
    the direct Lemma B.6 check, a >= E - 1 and a >= 4 lambda kappa (C1+S)/S (spec §4.2). With
    ``alpha=None`` the smallest alpha passing the corrected check is used.

    Examples
    --------
    >>> import numpy as np, problems, validation
    >>> A = [np.diag([1.0, 0.3, 0.05]) * s for s in (0.95, 1.0, 1.05, 1.1)]
    >>> p = problems.explicit_quadratic(A, [a @ np.ones(3) for a in A])     # spec §4.2 counterexample
    >>> v = validation.verify("localdescent.theorem_4_2", p, rounds=5, local_steps=10, alpha=0.1,
    ...                       variant="printed", seeds=1, x0=2 * np.ones(3))
    >>> v.applicable, v.holds                  # every stated condition holds, the bound fails
    (True, False)
    """
    from .._validation import Options, check_param
    from ..runner import run
    name = "localdescent.theorem_4_2"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    consts = _assumption_constants(problem, batch_size)
    if isinstance(consts, str):
        return _not_applicable(name, variant, consts)
    lam, sigma2, B, C1 = consts
    L, mu = pl_constants(problem)
    E, S = local_steps, clients_per_round or problem.n_clients
    if alpha is None:
        alpha = lfsgd_pl_alpha_min(E, S, L, mu, lam, C1)
    a = alpha * E + 4
    T = rounds * E
    x0 = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    fs = _f_star(problem)
    f0 = problem.value(x0) - fs
    if measurement is None:
        vals = []
        for s in range(seeds):
            res = run(problem, "lfd", rounds=rounds, local_steps=E, lr=lambda t: 4.0 / (mu * (t + a)),
                      clients_per_round=clients_per_round, batch_size=batch_size, seed=s, x0=x0,
                      replicate_duplicates=replicate_duplicates and clients_per_round is not None)
            vals.append(problem.value(res.x) - fs if res.status != "diverged" else math.inf)
        with np.errstate(all="ignore"):
            traj = trajectory_diversity(problem, min(rounds, 30), E, None, clients_per_round, seed=0, x0=x0,
                                        lr_schedule=lambda t: 4.0 / (mu * (t + a)))
        traj = traj[np.isfinite(traj)]
        measurement = dict(values=vals, lam_traj=float(np.percentile(traj, 99)) if traj.size else math.inf)
    m, se = mean_stderr(measurement["values"])
    stated = lfsgd_pl_stated_conditions(alpha, E, S, L, mu, lam, C1)
    corrected = lfsgd_pl_corrected_conditions(alpha, E, S, L, mu, lam, C1)
    lt = measurement.get("lam_traj", math.inf)
    if math.isfinite(lt):
        b6t = lfsgd_pl_corrected_conditions(alpha, E, S, L, mu, lt, C1)[0]
        corrected = corrected + [Condition("Lemma B.6 check with lambda_traj (p99 multi-point diversity; info)",
                                           b6t.value, 1.0, b6t.ok)]
    need = stated if variant == "printed" else [c for c in corrected if "(info)" not in c.name and "; info)" not in c.name]
    failed = [c.name for c in need if not c.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed),
                        stated + corrected, m, float(bound22(T, a, E, S, B, sigma2, L, mu, f0)), se,
                        dict(L=L, mu=mu, lam_sup=lam, alpha=alpha, a=a, T=T, S=S, B=B, sigma2=sigma2,
                             eta0_L=4 / (mu * a) * L, f0=f0, measurement=measurement))


# --------------------------------------------------------------- Theorems 4.4 and 4.7 --
def cond23(eta, S, E, L, lam, C1=0.0, corrected=True):
    """Left-hand side of (23) (must be <= 0); ``corrected`` restores the factor E on C1 (step 165)."""
    c1 = 2 * C1 * E if corrected else 2 * C1
    return -eta / (2 * lam) + (S + 1) * L ** 2 * eta ** 3 * (c1 + E * (E + 1)) / (2 * S) + L * eta ** 2 / 2 * (C1 / S + 1)


def lfsgd_nc_eta_max(S, E, L, lam, C1=0.0, corrected=True):
    """Corollary 4.5: the positive root of (23)."""
    c1 = 2 * C1 * E if corrected else 2 * C1
    c = (S + 1) / S * L ** 2 * (c1 + E * (E + 1))
    b = L * (C1 / S + 1)
    return (-b + math.sqrt(b * b + 4 * c / lam)) / (2 * c)


def bound24(T, eta, S, B, E, L, sigma2, f0):
    """Eq. (24): 2 f0/(eta T) + eta L s^2/(S B) + 2 eta^2 L^2 (E+1) s^2 (S+1)/(S B)."""
    return 2 * f0 / (eta * T) + eta * L * sigma2 / (S * B) + 2 * eta ** 2 * L ** 2 * (E + 1) * sigma2 * (S + 1) / (S * B)


def cond28(eta, n, E, L, lam, zeta, C1=0.0):
    """Left-hand side of (28) minus 1/lambda (must be <= 0)."""
    z = zeta
    lhs = (2 * L ** 2 * eta ** 2 * C1 * E / (1 - z ** 2)
           + L ** 2 * eta ** 2 * E ** 2 / (1 - z) * (2 * z ** 2 / (1 + z) + 2 * z / (1 - z) + (E - 1) / E)
           + eta * L * (C1 / n + 1))
    return lhs - 1 / lam


def bound29(T, eta, n, B, E, L, sigma2, zeta, f0):
    """Eq. (29): 2 f0/(eta T) + eta L s^2/(n B) + (L^2 eta^2 s^2/B)((1+z^2)/(1-z^2) E - 1)."""
    return (2 * f0 / (eta * T) + eta * L * sigma2 / (n * B)
            + L ** 2 * eta ** 2 * sigma2 / B * ((1 + zeta ** 2) / (1 - zeta ** 2) * E - 1))


def _virtual_average_grad_sq(problem, T, E, eta, S, seed, x0, W=None):
    """(1/T) sum_{t<T} ||grad f(xbar^(t))||^2 of LFSGD (S draws by q; None: all clients, weights q) or
    NFSGD (mixing matrix W), with xbar the virtual average at every local step (spec §4.3-4.4),
    and the 99th percentile of the multi-point diversity of the clients' iterates (lambda_traj)."""
    rng = np.random.default_rng(seed)
    n = problem.n_clients
    q = problem.weights
    X = np.repeat(np.asarray(x0, dtype=float)[None], n, axis=0)
    idx, w = np.arange(n), q
    acc = 0.0
    lams = []
    for t in range(T):
        if W is None and t % E == 0:
            x = w @ X[idx]
            X[:] = x
            if S is not None:
                P = rng.choice(n, size=S, replace=True, p=q)
                idx, cnt = np.unique(P, return_counts=True)
                w = cnt / S
        xbar = w @ X[idx] if W is None else q @ X
        g = problem.grad(xbar)
        acc += float(g @ g)
        G = np.array([problem.client_grad(j, X[j]) for j in range(n)])
        lams.append(diversity(G, q))
        if problem.noise > 0:
            G = G + problem.noise * rng.standard_normal(G.shape)
        X = X - eta * G
        if W is not None and (t + 1) % E == 0:
            X = W @ X
    lams = np.array(lams)
    return acc / T, float(np.percentile(lams[np.isfinite(lams)], 99))


def lfsgd_nc_E_max(T, S, lam, C1=0.0):
    """Remark 7: the largest E with 2 C1 + E(E+1) <= (T/S)[S/(lambda (S+1)) - sqrt(S/T)(S+C1)/(S+1)]
    (condition (23) at eta = sqrt(S/T)/L); 0 when none."""
    rhs = T / S * (S / (lam * (S + 1)) - math.sqrt(S / T) * (S + C1) / (S + 1))
    E = 0
    while 2 * C1 + (E + 1) * (E + 2) <= rhs:
        E += 1
    return E


@register_theorem("localdescent.theorem_4_4")
def theorem_4_4(problem, rounds=256, local_steps=4, clients_per_round=2, variant="corrected", seeds=10,
                x0=None, lr=None, measurement=None):
    r"""Theorem 4.4 (LFSGD, nonconvex, eta = sqrt(S/T)/L): bound (24) on the average squared gradient
    at the per-step virtual average; conditions (23) as printed and corrected, with lambda_sup.

    The measurement is a diagnostic NumPy simulation of LFSGD (exact client gradients plus the
    problem's additive noise, S draws with replacement, independent noise per draw) that logs
    :math:`\|\nabla f(\bar x^{(t)})\|^2` at every step (the library runner evaluates at round ends).
    """
    from .._validation import Options, check_param
    name = "localdescent.theorem_4_4"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    consts = _assumption_constants(problem, None)
    if isinstance(consts, str):
        return _not_applicable(name, variant, consts)
    lam, sigma2, B, C1 = consts
    L, _ = pl_constants(problem)
    E, S = local_steps, clients_per_round or problem.n_clients
    T = rounds * E
    eta = lr if lr is not None else math.sqrt(S / T) / L
    x0 = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    f0 = problem.value(x0) - _f_star(problem)
    if measurement is None:
        runs = [_virtual_average_grad_sq(problem, T, E, eta, clients_per_round, s, x0) for s in range(seeds)]
        measurement = dict(values=[r[0] for r in runs], lam_traj=max(r[1] for r in runs))
    m, se = mean_stderr(measurement["values"])
    lt = measurement["lam_traj"]
    c_p, c_c = cond23(eta, S, E, L, lam, C1, False), cond23(eta, S, E, L, lam, C1, True)
    c_t = cond23(eta, S, E, L, lt, C1, True)
    emax = lfsgd_nc_E_max(T, S, lam, C1)
    conds = [Condition("(23) as printed: LHS <= 0", c_p, 0.0, c_p <= 0),
             Condition("(23) corrected (2 C1 E): LHS <= 0", c_c, 0.0, c_c <= 0),
             Condition("eta <= eta_max of Corollary 4.5", eta, lfsgd_nc_eta_max(S, E, L, lam, C1), eta <= lfsgd_nc_eta_max(S, E, L, lam, C1)),
             Condition("E <= E_max(T) of Remark 7 (eta = sqrt(S/T)/L)", E, emax, E <= emax),
             Condition("(23) with lambda_traj (p99 multi-point diversity; info)", c_t, 0.0, c_t <= 0)]
    need = conds[0] if variant == "printed" else conds[1]
    return Verification(name, variant, need.ok, "" if need.ok else f"fails {need.name}", conds, m,
                        float(bound24(T, eta, S, B, E, L, sigma2, f0)), se,
                        dict(L=L, lam_sup=lam, lam_traj=lt, eta=eta, T=T, S=S, sigma2=sigma2, f0=f0,
                             measurement=measurement))


@register_theorem("localdescent.theorem_4_7")
def theorem_4_7(problem, rounds=256, local_steps=4, topology="ring", W=None, variant="corrected", seeds=10,
                x0=None, lr=None, measurement=None):
    r"""Theorem 4.7 (NFSGD, eta = sqrt(n/T)/L): bound (29) on the average squared gradient at the
    q-average of the client models; conditions (28), the simplified (86) and the condition on T
    (printed: T >= 4 lambda^2 (C1/n + 2)^2; corrected: the missing factor n, spec §4.4).
    Uniform client weights (the setting the proof covers)."""
    from .._validation import Options, check_param
    from ..topology import check_mixing, mixing_matrix, zeta as zeta_of
    name = "localdescent.theorem_4_7"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    n = problem.n_clients
    if not np.allclose(problem.weights, 1.0 / n):
        return _not_applicable(name, variant, "Theorem 4.7 is proved for uniform client weights q = 1/n")
    consts = _assumption_constants(problem, None)
    if isinstance(consts, str):
        return _not_applicable(name, variant, consts)
    lam, sigma2, B, C1 = consts
    Wm = mixing_matrix(topology, n) if W is None else check_mixing(W)
    z = zeta_of(Wm)
    L, _ = pl_constants(problem)
    E = local_steps
    T = rounds * E
    eta = lr if lr is not None else math.sqrt(n / T) / L
    x0 = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    f0 = problem.value(x0) - _f_star(problem)
    if measurement is None:
        runs = [_virtual_average_grad_sq(problem, T, E, eta, None, s, x0, W=Wm) for s in range(seeds)]
        measurement = dict(values=[r[0] for r in runs], lam_traj=max(r[1] for r in runs))
    m, se = mean_stderr(measurement["values"])
    lt = measurement["lam_traj"]
    c28 = cond28(eta, n, E, L, lam, z, C1)
    c28t = cond28(eta, n, E, L, lt, z, C1)
    c86 = eta * L * (C1 / n + 2) + 5 * eta ** 2 * L ** 2 * E ** 2 / (1 - z) ** 2 - 1 / lam
    t_p, t_c = 4 * lam ** 2 * (C1 / n + 2) ** 2, 4 * lam ** 2 * n * (C1 / n + 2) ** 2
    e_max = (1 - z) * math.sqrt(T / (10 * lam * n))
    conds = [Condition("(28): LHS - 1/lambda <= 0", c28, 0.0, c28 <= 0),
             Condition("(86) simplified: LHS - 1/lambda <= 0", c86, 0.0, c86 <= 0),
             Condition("T >= 4 lambda^2 (C1/n + 2)^2 (as printed)", T, t_p, T >= t_p),
             Condition("T >= 4 lambda^2 n (C1/n + 2)^2 (corrected: factor n)", T, t_c, T >= t_c),
             Condition("E <= (1 - zeta) sqrt(T/(10 lambda n))", E, e_max, E <= e_max),
             Condition("(28) with lambda_traj (p99 multi-point diversity; info)", c28t, 0.0, c28t <= 0)]
    need = [conds[0]] if variant == "corrected" else [conds[0], conds[2]]
    failed = [c.name for c in need if not c.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed), conds, m,
                        float(bound29(T, eta, n, B, E, L, sigma2, z, f0)), se,
                        dict(L=L, lam_sup=lam, lam_traj=lt, zeta=z, eta=eta, T=T, sigma2=sigma2, f0=f0,
                             measurement=measurement))


# --------------------------------------------------------------- default cases (verify) --
def conforming_quadratic(n=8, d=6, seed=6, noise=0.0):
    """Shared-minimiser quadratic with distinct Hessians (bounded diversity; spec §7 item 1)."""
    import problems
    return problems.quadratic(n, d, L=1.0, mu=0.25, shared_minimizer=True, hessian="distinct", seed=seed,
                              noise=noise)


def counterexample_4_2():
    """spec §4.2: n = 4 diagonal quadratics with a shared minimiser, kappa ~ 21, lambda ~ 1."""
    import problems
    A = [np.diag([1.0, 0.3, 0.05]) * s for s in (0.95, 1.0, 1.05, 1.1)]
    return problems.explicit_quadratic(A, [a @ np.ones(3) for a in A], name="thm42_counterexample")


@register_cases("localdescent.theorem_4_1")
def _cases_4_1(quick=False):
    seeds = 5 if quick else 30
    x0 = np.full(6, 2.0)
    cases = [Case(f"shared-minimiser quadratic, E={E}, S=3, eta from (43)", "conforming", conforming_quadratic,
                  dict(rounds=max(4, 60 // E), local_steps=E, clients_per_round=3, seeds=seeds, x0=x0),
                  {"corrected": True}) for E in ((1, 5) if quick else (1, 5, 20))]
    return cases, []


@register_cases("localdescent.theorem_4_2")
def _cases_4_2(quick=False):
    x0c = 2 * np.ones(3)
    return [Case("spec §4.2 counterexample: kappa~21, alpha=0.1, E=10, S=2", "counterexample", counterexample_4_2,
                 dict(rounds=5, local_steps=10, alpha=0.1, clients_per_round=2, seeds=1, x0=x0c),
                 {"printed": False}),
            Case("noisy shared-minimiser quadratic, alpha from Lemma B.6", "conforming",
                 lambda: conforming_quadratic(noise=0.3),
                 dict(rounds=100 if quick else 300, local_steps=4, clients_per_round=2, seeds=5 if quick else 30,
                      x0=np.full(6, 2.0)), {"corrected": True})], []


@register_cases("localdescent.theorem_4_4")
def _cases_4_4(quick=False):
    cases = [Case("noisy shared-minimiser quadratic, eta = sqrt(S/T)/L", "conforming",
                  lambda: conforming_quadratic(noise=0.3),
                  dict(rounds=128 if quick else 512, local_steps=4, clients_per_round=2, seeds=3 if quick else 20,
                       x0=np.full(6, 2.0)), {"corrected": True})]
    rates = [RateStudy("O(1/sqrt(S T)) with eta = sqrt(S/T)/L, E = 4, S = 2", lambda: conforming_quadratic(noise=0.3),
                       [256, 512, 1024, 2048, 4096],
                       lambda T: dict(rounds=T // 4, local_steps=4, clients_per_round=2, seeds=3 if quick else 10,
                                      x0=np.full(6, 2.0)), -0.5, variants=("corrected",),
                       note="the average squared gradient at the per-step virtual average")]
    return cases, rates


@register_cases("localdescent.theorem_4_7")
def _cases_4_7(quick=False):
    return [Case(f"noisy shared-minimiser quadratic, {top} graph, n=8", "conforming",
                 lambda: conforming_quadratic(noise=0.3),
                 dict(rounds=1024, local_steps=1, topology=top, seeds=3 if quick else 20,
                      x0=np.full(6, 2.0)), {"corrected": True}) for top in ("complete", "ring")], []
