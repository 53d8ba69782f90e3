r"""Haddadpour & Mahdavi (2019), "On the convergence of local descent methods in federated
learning": Theorems 4.1, 4.2, 4.4 and 4.7 as theorem specs, with docs/papers/localdescent.md, §3-§4.

Constants (docs/papers/localdescent.md, §3): L = max_j L_j (local smoothness), mu the PL constant of f (for a quadratic
lambda_min of the average Hessian), kappa = L/mu, and the gradient diversity

.. math:: \Lambda(x, q) = \frac{\sum_j q_j\|\nabla f_j(x)\|^2}{\|\sum_j q_j\nabla f_j(x)\|^2} \le \lambda,

whose supremum is finite only when every client is stationary at the minimiser (a shared
minimiser); for shared-minimiser quadratics it is :math:`\lambda_{\max}(\bar A^{-1} M \bar A^{-1})`,
:math:`M = \sum_j q_j A_j^2` (:func:`diversity_sup`). Every condition is evaluated with
:math:`\lambda = \sup_x\Lambda`; a problem without a finite sup is not applicable.

Measurement
-----------
Every verdict is measured on the registered algorithm through ``fedtheory.run``: ``lfd``
(LFGD / LFSGD, Algorithm 1) for Theorems 4.1, 4.2 and 4.4, ``nfsgd`` (Algorithm 2) for
Theorem 4.7. Theorems 4.1 and 4.2 bound f at round ends (the run's iterates x^r and final
model); Theorems 4.4 and 4.7 bound gradients at every local step, read from the runs' traces
(``trace="local"``):

* the **virtual average** at every local step, :math:`\bar x^{(rE+k)} = \sum_s w_s y_{s,k}`
  (``rt.virtual_average("local")``, k = 0..E-1 of round r): for LFD the participants with
  their aggregation weights (multiplicity / S of a draw with replacement, q under full
  participation), for NFSGD the q-average over all clients' paths (:func:`virtual_averages`);
* gradients at the traced points only (:func:`client_gradients`, :func:`objective_gradients`):
  the module never re-runs an algorithm;
* ``lambda_traj``, the **multi-point diversity** the proofs actually use (docs/papers/localdescent.md, §3.2),
  :math:`\Lambda_{multi} = \sum_s w_s\|\nabla f_{j_s}(y_{s,k})\|^2/\|\sum_s w_s\nabla f_{j_s}(y_{s,k})\|^2`
  with each client's exact gradient at its own traced local iterate (:func:`traced_diversity`),
  over the **participants** of a traced run. The proofs sum over all n clients (the devices
  are "agnostic to sampling"), so a run that samples clients gets an extra full-participation
  traced run of the same algorithm (``extra_runs`` label ``"agnostic"``: all n clients, weights
  q, its own trajectory); a full-participation run (and NFSGD) is its own. It feeds only
  informational conditions.

Variants (``default_variant="corrected"``): ``"printed"`` is the theorem as printed; each other
variant says in one sentence (``Variant.description``) what it changes: Theorem 4.1 ``"proof"``
(the proof's (45) form of the bound) and ``"corrected"`` ((43) instead of (19)); Theorem 4.2
``"corrected"`` (the direct Lemma B.6 check instead of (i)-(iv)); Theorem 4.4 ``"corrected"``
(the factor E of step (165)); Theorem 4.7 ``"corrected"`` (identical to printed: the
correction of docs/papers/localdescent.md, §4.4 concerns the informal Theorem 3.4's condition on T, reported as an
informational condition).

Examples
--------
>>> import numpy as np, fedtheory as ft, problems, validation
>>> p = problems.quadratic(6, 4, L=1.0, mu=0.3, shared_minimizer=True, hessian="distinct", seed=0)
>>> v = validation.verify("localdescent.theorem_4_1", p, rounds=20, local_steps=5, seeds=3,
...                       clients_per_round=3, x0=[1.0, 1.0, 1.0, 1.0])
>>> v.applicable, v.holds, v.algorithm
(True, True, 'lfd')
>>> bool(np.array_equal(ft.run(p, v.algorithm, **v.run_kwargs).x, v.runs[0].x))
True
>>> [c.role for c in v.conditions if c.name.startswith(("(19)", "(43):"))]
['stated', 'hidden']

The counterexample of docs/papers/localdescent.md, §4.2: every stated condition of Theorem 4.2 holds, the bound fails.

>>> A = [np.diag([1.0, 0.3, 0.05]) * s for s in (0.95, 1.0, 1.05, 1.1)]
>>> c = problems.explicit_quadratic(A, [a @ np.ones(3) for a in A])
>>> v = validation.verify("localdescent.theorem_4_2", c, rounds=5, local_steps=10, alpha=0.1,
...                       variant="printed", seeds=1, x0=2 * np.ones(3))
>>> v.applicable, v.holds
(True, False)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..constants import diversity, quadratic_diversity_sup  # noqa: F401  (defined once, re-exported)
from . import Case, Condition, RateStudy, register_cases
from .engine import (Erratum, NotApplicable, TheoremSpec, Variant, gap_floor, grad_sq_floor, register_spec,
                     setup_scale)
from ..runs.trace import virtual_average
from .tightness.pepit_adapter import tightness_case


# --------------------------------------------------------------------------- diversity --
def _quadratic_parts(problem):
    fit = problem.datafit
    if not (fit.constant_hessian and not fit.has_samples):     # explicit quadratics: (Q_i, c_i) are the data
        return None
    n, d = problem.n_clients, problem.dim
    As = np.array([problem.client_hessian(i, np.zeros(d)) for i in range(n)])
    cs = np.array([fit.client_quadratic(problem.data, i)[1] for i in range(n)])
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
    quadratic, +inf when the clients' minimisers differ (docs/papers/localdescent.md, §3.1). Other problem kinds raise
    ValueError (estimate the diversity along a traced run with :func:`traced_diversity`)."""
    parts = _quadratic_parts(problem)
    if parts is None:
        raise ValueError("diversity_sup has a closed form for quadratics only; estimate the diversity along "
                         "a traced run with traced_diversity.")
    if not shared_minimizer(problem):
        return math.inf
    return quadratic_diversity_sup(parts[0], problem.weights)


def pl_constants(problem):
    """(L, mu): L = max_j L_j, mu = PL constant of f (lambda_min of the average Hessian for a
    quadratic, l2 for logistic regression)."""
    from ..constants import client_smoothness, strong_convexity
    return float(np.max(client_smoothness(problem))), float(strong_convexity(problem))


# ------------------------------------------------------------- gradients at traced points --
def client_gradients(problem, clients, Y):
    r"""Exact gradients :math:`\nabla f_{j_s}(y)` of client ``clients[s]`` at the points ``Y[s, ...]``.

    Parameters
    ----------
    problem : FederatedProblem
    clients : array of int, shape (S,)
    Y : array, shape (S, ..., d)
        Points, e.g. the traced local path ``rt["local"]`` (S, K + 1, d).

    Returns
    -------
    ndarray, shape of ``Y``
        Quadratic clients in one vectorised pass per distinct client, other datafits with the
        problem's ``client_grad`` point by point; non-finite points give non-finite gradients.

    Examples
    --------
    >>> import numpy as np, problems
    >>> p = problems.quadratic(3, 2, heterogeneity=1.0, seed=0)
    >>> Y = np.random.default_rng(0).normal(size=(2, 4, 2))
    >>> G = client_gradients(p, np.array([2, 0]), Y)
    >>> bool(np.allclose(G[0, 3], p.client_grad(2, Y[0, 3])))
    True
    """
    fit = problem.datafit
    explicit = fit.constant_hessian and not fit.has_samples
    Y = np.asarray(Y, dtype=np.float64)
    clients = np.asarray(clients)
    d = Y.shape[-1]
    G = np.empty_like(Y)
    with np.errstate(all="ignore"):
        for j in np.unique(clients):
            sel = clients == j
            X = Y[sel].reshape(-1, d)
            if explicit:                                 # f_j = x'Q_j x/2 - c_j'x + l2 ||x||^2/2
                Q, c, _ = fit.client_quadratic(problem.data, int(j))
                g = X @ np.asarray(Q).T - c + problem.l2 * X
            else:                                        # the problem's own client oracle, point by point
                g = np.array([problem.client_grad(int(j), x) if np.all(np.isfinite(x)) else np.full(d, np.nan)
                              for x in X]).reshape(X.shape)
            G[sel] = g.reshape(Y[sel].shape)
    return G


def objective_gradients(problem, X):
    r""":math:`\nabla f(x) = \sum_j q_j\nabla f_j(x)` (the smooth part) at every row of ``X`` (P, d).

    Examples
    --------
    >>> import numpy as np, problems
    >>> p = problems.quadratic(4, 3, heterogeneity=1.0, seed=1)
    >>> X = np.ones((2, 3))
    >>> bool(np.allclose(objective_gradients(p, X)[1], p.grad(X[1])))
    True
    """
    X = np.asarray(X, dtype=np.float64)
    n = problem.n_clients
    G = client_gradients(problem, np.arange(n), np.broadcast_to(X, (n,) + X.shape))
    return np.einsum("j,jpd->pd", problem.weights, G)


def multi_point_diversity(G, w):
    r"""Multi-point diversity :math:`\sum_s w_s\|g_s\|^2/\|\sum_s w_s g_s\|^2` over axis 0 of ``G``.

    ``G`` has shape (S, ..., d) (row s: client s's gradient at its own point), ``w`` (S,) are
    weights (normalised here). 1 where the numerator is 0, +inf where only the denominator is
    (docs/papers/localdescent.md, §3.1-§3.2); the same as :func:`diversity` for one set of points.

    Examples
    --------
    >>> import numpy as np
    >>> G = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])          # orthogonal gradients: 1 / sum w^2
    >>> multi_point_diversity(G, np.array([0.5, 0.5]))
    array([2.])
    """
    G = np.asarray(G, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    w = w / w.sum()
    with np.errstate(all="ignore"):
        gbar = np.einsum("s,s...d->...d", w, G)
        return _ratio(np.einsum("s,s...->...", w, np.sum(G * G, axis=-1)), np.sum(gbar * gbar, axis=-1))


def _ratio(num, den):
    """num / den with the diversity conventions: 1 where num = 0, +inf where only den = 0."""
    with np.errstate(all="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)
    return np.where(num == 0, 1.0, out)


def _groups(trace):
    """The traced rounds grouped by their number of local steps K (all equal unless the literal
    loop is used): [(K, [round indices])]."""
    ks = {}
    for i, rt in enumerate(trace):
        ks.setdefault(rt.K, []).append(i)
    return sorted(ks.items())


def _per_step(trace, fn):
    """Concatenate ``fn(list of rounds with one K) -> (len, K, ...)`` in round order over k < K."""
    parts = {}
    for K, idx in _groups(trace):
        out = fn([trace[i] for i in idx], K)
        parts.update(zip(idx, out))
    if not parts:
        return np.zeros(0)
    return np.concatenate([parts[i] for i in range(len(trace))])


def virtual_averages(trace, name="local"):
    r"""Virtual averages :math:`\bar x^{(t)}` at the start of every traced local step, shape (T, d).

    Row t = (sum of K over earlier rounds) + k is ``rt.virtual_average(name)[k]`` for k < K of
    round r: the participants' iterates averaged with the round's aggregation weights (for
    NFSGD the q-average over all clients); k = 0 is the broadcast model (LFD) or the clients'
    q-average (NFSGD).

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> res = ft.run(p, "lfd", rounds=3, local_steps=2, lr=0.1, clients_per_round=2, trace="local")
    >>> X = virtual_averages(res.trace)
    >>> X.shape, bool(np.allclose(X[2], res.trace[1].x))
    ((6, 3), True)
    """
    def avg(rounds, K):
        if len({rt.S for rt in rounds}) == 1:                 # one vectorised pass over the rounds
            return virtual_average(np.stack([rt.weights for rt in rounds]),
                                   np.stack([rt[name][:, :K] for rt in rounds]))      # (R, K, d)
        return [rt.virtual_average(name)[:K] for rt in rounds]
    return _per_step(trace, avg)


def traced_diversity(problem, trace, name="local"):
    r"""Multi-point diversity at every traced local step: the participants' exact gradients at
    their own iterates :math:`y_{s,k}` (k < K), weighted by the round's aggregation weights,
    shape (T,) in the order of :func:`virtual_averages` (docs/papers/localdescent.md, §3.2; the proofs' version uses all
    n clients: trace a full-participation run for it).

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, shared_minimizer=True, hessian="distinct", seed=0)
    >>> res = ft.run(p, "lfd", rounds=5, local_steps=1, lr=0.1, x0=np.ones(3), trace="local")
    >>> lam = traced_diversity(p, res.trace)              # E = 1, all clients: Lambda(x^t, q)
    >>> bool(lam.max() <= diversity_sup(p))
    True
    """
    def div(rounds, K):
        if len({rt.S for rt in rounds}) == 1:                 # one vectorised pass over the rounds
            Y = np.stack([rt[name][:, :K] for rt in rounds])              # (R, S, K, d)
            c = np.stack([rt.clients for rt in rounds])
            G = client_gradients(problem, c.ravel(), Y.reshape((-1,) + Y.shape[2:])).reshape(Y.shape)
            W = np.stack([rt.weights / rt.weights.sum() for rt in rounds])
            with np.errstate(all="ignore"):
                gbar = np.einsum("rs,rskd->rkd", W, G)
                return _ratio(np.einsum("rs,rsk->rk", W, np.sum(G * G, axis=-1)), np.sum(gbar * gbar, axis=-1))
        return [multi_point_diversity(client_gradients(problem, rt.clients, rt[name][:, :K]), rt.weights)
                for rt in rounds]
    return _per_step(trace, div)


def _lambda_traj(problem, runs, stat):
    """lambda_traj: ``stat`` ("max" or "p99") of the finite multi-point diversities of each run's
    trace, maximised over the runs; inf when none is finite."""
    vals = []
    for res in runs:
        lam = traced_diversity(problem, res.trace)
        lam = lam[np.isfinite(lam)]
        if lam.size:
            vals.append(float(lam.max() if stat == "max" else np.percentile(lam, 99)))
    return max(vals) if vals else math.inf


def _grad_sq_average(problem, res, T):
    r""":math:`\frac1T\sum_{t<T}\|\nabla f(\bar x^{(t)})\|^2` from one traced run (inf when the run
    diverged or stopped before T steps)."""
    X = virtual_averages(res.trace)
    if not res.finished or X.shape[0] < T:
        return math.inf
    g = objective_gradients(problem, X[:T])
    with np.errstate(all="ignore"):
        v = float(np.sum(g * g) / T)
    return v if math.isfinite(v) else math.inf


def _agnostic_runs(st, algorithm, kwargs):
    """extra_runs: a full-participation traced run of the same algorithm when the main run samples
    clients and lambda_traj is wanted (all n clients, as in the proofs)."""
    if not st["trajectory"] or st["clients_per_round"] is None:
        return {}
    kw = dict(kwargs, clients_per_round=None, trace="local")
    for k in ("replicate_duplicates", "record_iterates"):
        kw.pop(k, None)
    return {"agnostic": (algorithm, kw)}


def _trace_main(st):
    """The main runs carry the trace lambda_traj is measured on when no agnostic run is added."""
    return {"trace": "local"} if st["trajectory"] and st["clients_per_round"] is None else {}


def _traj_runs(runs):
    return runs.get("agnostic") or runs["main"]


def _f_star(problem):
    fs = problem.info.get("f_star") if problem.info else None
    if fs is None:
        from ..truth import ground_truth
        fs = ground_truth(problem).f
    return fs


def _x_star(problem):
    """x* for the rounding scale (the problem's own, else its ground truth; None when there is none)."""
    xs = problem.info.get("x_star") if problem.info else None
    if xs is None:
        try:
            from ..truth import ground_truth
            xs = ground_truth(problem).x
        except (ValueError, ArithmeticError):
            return None
    return np.asarray(xs, dtype=float)


def _nonconvex_floor(st, m):
    """Resolution floor of (1/T) sum_t ||grad f(xbar^(t))||^2: (eps L max(||x*||, ||x^0||, ...))^2."""
    return grad_sq_floor(setup_scale(st, st["L"], lambda: _x_star(st["problem"])), st["L"])


def _nonconvex_rounding(st, m):
    """The f(x^0) - f* of bounds (24) and (29) is resolved to eps max(|f(x^0)|, |f*|) only: near x^0 = x*
    it rounds to 0 or below, which is not a bound of 0 (a run at x* measures rounding too)."""
    fs = _f_star(st["problem"])
    return {("setup", "f0"): gap_floor(fs, st["f0"] + fs)}


def _x0(problem, x0):
    return np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)


def _sigma2_B(problem, batch_size):
    """(sigma^2, B, C1) of Assumption 3: additive noise on quadratics (B = 1), logistic minibatches."""
    fit = problem.datafit
    d = problem.dim
    if fit.constant_hessian and not fit.has_samples:          # explicit quadratics
        if batch_size is not None:
            raise ValueError("quadratic problems have no samples; use their noise (batch_size=None).")
        return d * problem.noise ** 2, 1, 0.0
    if fit.slope_bound is not None:                            # bounded sample slopes (logistic)
        if batch_size is None:
            return d * problem.noise ** 2, 1, 0.0
        s2 = float(fit.slope_bound) ** 2 * max(
            float(np.mean(np.asarray(problem.client_data(i)[0].power(2).sum(axis=1)).ravel()
                          if problem.sparse else np.sum(problem.client_data(i)[0] ** 2, axis=1)))
            for i in range(problem.n_clients))
        return s2, batch_size, 0.0
    raise ValueError(f"Assumption 3 needs C1 > 0 for the datafit {fit.name!r}: it declares no 'slope_bound' "
                     "(least squares has none); use a quadratic with noise or a datafit with bounded slopes "
                     "(logistic).")


def _assumption_constants(problem, batch_size=None, noise_model=True):
    """(lambda_sup, sigma^2, B, C1) of Assumptions 1-3; raises NotApplicable saying why they do not
    exist (no closed form, or clients without a shared minimiser: sup Lambda = inf, docs/papers/localdescent.md, §3.1)."""
    try:
        lam = diversity_sup(problem)
        sigma2, B, C1 = _sigma2_B(problem, batch_size) if noise_model else (0.0, 1, 0.0)
    except ValueError as e:
        raise NotApplicable(str(e)) from None
    if not math.isfinite(lam):
        raise NotApplicable("the clients do not share a minimiser, so sup Lambda = inf "
                            "(Assumption: bounded gradient diversity fails; docs/papers/localdescent.md, §3.1)")
    return lam, sigma2, B, C1


def _check_common(name, rounds, local_steps, seeds, trajectory):
    from .._argcheck import Bool, Interval, check_param
    check_param("rounds", rounds, [Interval(int, 1, None)], name)
    check_param("local_steps", local_steps, [Interval(int, 1, None)], name)
    check_param("seeds", seeds, [Interval(int, 1, None)], name)
    check_param("trajectory", trajectory, [Bool()], name)


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
    """Largest eta with the condition's left-hand side <= 1 (bisection; docs/papers/localdescent.md, §4.1)."""
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
    """(1 - mu eta)^T f0: eq. (45), the bound the proof of Theorem 4.1 derives."""
    return (1 - mu * eta) ** np.asarray(T) * f0


def lfgd_bound_printed(T, eta, mu, f0):
    """exp(-mu eta T) f0: eq. (20), the bound Theorem 4.1 prints (>= :func:`lfgd_bound`)."""
    return np.exp(-mu * eta * np.asarray(T, dtype=float)) * f0


def _setup_4_1(problem, rounds=50, local_steps=5, lr=None, clients_per_round=None, seeds=10, x0=None,
               trajectory=True, eta_rule="43"):
    from .._argcheck import Interval, NoneOk, Options, check_param
    name = "localdescent.theorem_4_1"
    _check_common(name, rounds, local_steps, seeds, trajectory)
    check_param("eta_rule", eta_rule, [Options(*LFGD_CONDITIONS)], name)
    check_param("lr", lr, [NoneOk(), Interval(float, 0, None, "neither")], name)
    if problem.noise > 0:
        raise NotApplicable("Theorem 4.1 is about LFGD (exact local gradients) and the problem adds gradient "
                            "noise; Theorems 4.2 and 4.4 cover LFSGD")
    lam = _assumption_constants(problem, noise_model=False)[0]
    L, mu = pl_constants(problem)
    E = local_steps
    if lr is None:
        lr = lfgd_eta_max(L, mu, lam, E, eta_rule)
    x0 = _x0(problem, x0)
    fs = _f_star(problem)
    return dict(L=L, mu=mu, kappa=L / mu, lam_sup=lam, lr=lr, E=E, rounds=rounds,
                clients_per_round=clients_per_round, seeds=seeds, x0=x0, f_star=fs,
                f0=problem.value(x0) - fs, trajectory=trajectory, eta_rule=eta_rule)


def _run_kwargs_4_1(st):
    """LFGD: lfd with exact local gradients, sampling S clients by q with replacement (all clients
    with weights q when clients_per_round is None)."""
    return dict(rounds=st["rounds"], local_steps=st["E"], lr=st["lr"], clients_per_round=st["clients_per_round"],
                x0=st["x0"], record_iterates=True, eval_every=st["rounds"], trace="local")


def _measure_4_1(st, runs):
    r"""The gap f(x^r) - f* at every round end t = rE (the run's iterates x^r), per seed; the left-hand side is taken at the round end with the
    largest mean-gap / (45) ratio among those where (45) exceeds 1e-13 f0 (the floating-point
    floor; t = 0 excluded)."""
    problem, R, E = st["problem"], st["rounds"], st["E"]
    gaps = np.full((len(runs["main"]), R + 1), np.inf)
    for i, res in enumerate(runs["main"]):
        with np.errstate(all="ignore"):
            g = [problem.value(x) - st["f_star"] if np.all(np.isfinite(x)) else np.inf for x in res.iterates[:R + 1]]
        gaps[i, :len(g)] = g
    seeds = gaps.shape[0]
    mean_gap = gaps.mean(0)
    stderr = gaps.std(0, ddof=1) / np.sqrt(seeds) if seeds > 1 else np.full(R + 1, np.nan)
    T = np.arange(R + 1) * E
    bound = lfgd_bound(T, st["lr"], st["mu"], st["f0"])
    mask = bound > 1e-13 * st["f0"]
    mask[0] = False                               # t = 0: gap = f0 = bound by definition
    with np.errstate(all="ignore"):
        ratio = np.where(mask, mean_gap / np.where(mask, bound, 1.0), -np.inf)
    r = int(np.argmax(ratio))
    printed = lfgd_bound_printed(T, st["lr"], st["mu"], st["f0"])
    lam_traj = _lambda_traj(problem, _traj_runs(runs), "max") if st["trajectory"] else None
    return dict(values=list(gaps[:, r]), worst_round=r, t_worst=int(T[r]), mean_gap=mean_gap, stderr=stderr,
                bound_curve=bound, lam_traj=lam_traj, lr=st["lr"],
                all_rounds_hold=bool(np.all(mean_gap[mask] <= bound[mask] * (1 + 1e-9))),
                all_rounds_hold_printed=bool(np.all(mean_gap[mask] <= printed[mask] * (1 + 1e-9))))


def _conditions_4_1(st, m):
    eta, L, mu, lam, E = st["lr"], st["L"], st["mu"], st["lam_sup"], st["E"]
    c19 = cond19_printed(eta, L, lam, mu, E) if mu * eta < 1 else math.inf
    c46, c43 = cond46(eta, L, lam, mu, E), cond43(eta, L, lam, mu, E)
    conds = [Condition("(19) as printed: eta lambda [L + 4 kappa L E/(mu (1-mu eta)^{E-1})] <= 1 (lambda = sup)",
                       c19, 1.0, c19 <= 1, role="stated"),
             Condition("(9) = (46), Theorem 3.1 and Lemma A.5: eta L lambda [1 + 4 kappa E (1-mu eta)^{1-E}] <= 1",
                       c46, 1.0, c46 <= 1, role="informational"),
             Condition("(43): eta L lambda [1 + 4 kappa E ((1-mu eta)^{1-E} - 1)] <= 1 (Lemma A.4, lambda = sup)",
                       c43, 1.0, c43 <= 1, role="hidden"),
             Condition("mu eta < 1 (Delta = 1 - mu eta > 0 in (40)-(45))", mu * eta, 1.0, mu * eta < 1,
                       role="hidden")]
    if m.get("lam_traj") is not None:
        v = cond43(eta, L, m["lam_traj"], mu, E)
        conds.append(Condition("(43) with lambda_traj (max multi-point diversity along the traced run)", v, 1.0,
                               v <= 1, role="informational"))
    emax = lfgd_E_max(eta, L, mu, lam, "43", E_cap=10 * E + 100)
    conds.append(Condition("E <= E_max(eta) under (43)", E, emax, E <= emax, role="informational"))
    return conds


def _bound_4_1(kind):
    f = lfgd_bound_printed if kind == "printed" else lfgd_bound
    return lambda st, m: float(f(m["t_worst"], st["lr"], st["mu"], st["f0"]))


@tightness_case("localdescent.theorem_4_1")
def _tightness_case_4_1(quick, local_steps=2):
    """``fedtheory verify --tightness``: local GD at the step its proof's condition (43) allows for
    ``local_steps``."""
    return dict(L=1.0, mu=0.1, local_steps=local_steps, rounds=2 if quick else 4,
                lr=lfgd_eta_max(1.0, 0.1, 1.0, local_steps, "43"), n_clients=2)


def pep_4_1(L, mu, local_steps, rounds, lr, n_clients=2, lam=1.0, server_lr=1.0):
    r"""PEP of LFGD (``lfd`` with exact gradients and full participation, weights q = 1/n):
    n clients, each L-smooth and mu-strongly convex, sharing a minimiser x*; E local steps
    :math:`y \leftarrow y - \eta\nabla f_j(y)` from the broadcast model, then
    :math:`x^{r+1} = x^r + \eta_g(\frac1n\sum_j y_{j,E} - x^r)` (server_lr = 1 in the paper).
    Initial condition f(x^0) - f* <= 1; metric f(x^R) - f* (round ends, as measured).

    The theorem's class is larger (f mu-PL, not each client strongly convex; diversity bounded
    by lambda), so the PEP's worst case is exact for this subclass and a lower bound for the
    theorem's class; ``lam`` (the diversity bound, default 1: identical clients, the theorem's
    most favourable case) enters only the step conditions (19) and (43) reported beside the
    step threshold.
    """
    from .._argcheck import Interval, check_param
    from .tightness.instances import class_quadratics, normalised_x0
    from .tightness.pepit_adapter import PEPForm, average, shared_minimiser_clients
    check_param("mu", mu, [Interval(float, 0, None, "neither")], "localdescent.theorem_4_1 (PL constant)")
    check_param("lam", lam, [Interval(float, 1, None, "left")], "localdescent.theorem_4_1 (diversity bound)")
    check_param("server_lr", server_lr, [Interval(float, 0, None, "neither")], "localdescent.theorem_4_1")
    E, n = local_steps, n_clients

    def build(steps, metric):
        pep, fs, xs, fstar = shared_minimiser_clients(n, L, mu)
        x0 = pep.set_initial_point()
        fstar_avg = average(fstar)

        def F(x):
            return average([f.value(x) for f in fs])
        pep.set_initial_condition(F(x0) - fstar_avg <= 1)
        x = x0
        for _ in range(rounds):
            ys = []
            for f in fs:
                y = x
                for _k in range(E):
                    y = y - lr * f.gradient(y)
                ys.append(y)
            x = x + server_lr * (average(ys) - x)
        pep.set_performance_metric(F(x) - fstar_avg)
        return pep

    def instances(R, cases=None):
        from ..runs.runner import run
        out = []
        cases = [(p, normalised_x0(p, "gap")) for p in class_quadratics(n, L, mu)] if cases is None else cases
        for p, x0 in cases:
            res = run(p, "lfd", rounds=R, local_steps=E, lr=lr, server_lr=server_lr, x0=x0,
                         record_iterates=True, eval_every=R)
            out.append([p.value(x) for x in res.iterates[1:R + 1]])
        return np.array(out)

    conds = {f"(19) as printed, lambda = {lam:g}": lfgd_eta_max(L, mu, lam, E, "19"),
             f"(43) of the proof, lambda = {lam:g}": lfgd_eta_max(L, mu, lam, E, "43")}
    return PEPForm(build=build, function_class=f"L-smooth mu-strongly convex clients sharing a minimiser "
                                               f"(L={L:g}, mu={mu:g}, n={n})",
                   bound_args=lambda R: (dict(lr=lr, mu=mu, f0=1.0), dict(t_worst=R * E)),
                   exact=False, note="full participation with weights 1/n; each client strongly convex (a subclass "
                                     "of the theorem's mu-PL f with bounded diversity)",
                   lr_conditions=conds, strict=mu > 0, metric="f(x^R) - f*", initial="f(x^0) - f* <= 1",
                   other_conditions={f"server_lr = 1, the theorem's method (server_lr = {server_lr:g})": server_lr == 1},
                   instances=instances, metric_is_contraction=True)


def _gap_floor(st, m):
    """Resolution floor of f(x) - f*: machine epsilon times |f*| and |f(x^0)|."""
    return gap_floor(st["f_star"], st["f0"] + st["f_star"])


def _space(theorem, curvature_scales=False):
    r"""Conforming space of Theorem ``theorem`` ("4.1", "4.2", "4.4", "4.7") for
    :func:`fedtheory.testing.strategies.theorem_cases`: shared-minimiser quadratics with distinct
    Hessians (mu-PL with exact L, mu and bounded diversity lambda; n in 3..8, d in 2..4, mu in
    [0.1, 0.5]), x^0 at distance [0.1, 10] from x*, and the step sizes each theorem's
    setup derives from its condition (Theorem 4.1: eta at the bound of (43), or of the printed
    (19) for the printed and proof variants; 4.2: the smallest alpha passing Lemma B.6; 4.4 and
    4.7: eta = sqrt(S/T)/L). Theorem 4.1 has exact gradients; the others gradient noise in
    [0.05, 0.3] and three seeds. S in 1..n (4.1: also full participation); 4.7 draws a ring or
    complete graph and E in 1..8 (the theorem holds for every period E; the space fixed E = 1
    before). ``curvature_scales``: also mu in [1, 100] and L = mu times [1.05, 5] (log scale) beside
    L = 1, for a condition that is not scale invariant (Lemma A.5's premise (19))."""
    def cases(variant):
        from hypothesis import strategies as st
        from ..testing import draws as fts

        @st.composite
        def draw_case(draw):
            noise = 0.0 if theorem == "4.1" else draw(fts.uniform(0.05, 0.3))
            mu = fts.log_uniform(0.02, 0.5) if (theorem, variant) == ("4.2", "printed") else fts.uniform(0.1, 0.5)
            L = 1.0
            if curvature_scales and draw(fts.choice(False, True)):
                mu = draw(fts.log_uniform(1.0, 100.0))
                L = mu * draw(fts.log_uniform(1.05, 5.0))
            p = draw(fts.quadratics(n_clients=fts.integers(3, 8), dim=fts.integers(2, 4), L=L, mu=mu,
                                    noise=noise, hessian="distinct", shared_minimizer=True))
            n = p.n_clients
            x0 = draw(fts.around(p.info["x_star"], radius=fts.log_uniform(0.1, 10.0)))
            if theorem == "4.1":
                S = draw(fts.choice(None, fts.integers(1, n)))
                return p, dict(rounds=draw(fts.integers(2, 20)), local_steps=draw(fts.integers(1, 5)),
                               clients_per_round=S, seeds=3, x0=x0, trajectory=False,
                               eta_rule="43" if variant == "corrected" else "19")
            if theorem == "4.7":
                return p, dict(rounds=draw(fts.integers(32, 256)), local_steps=draw(fts.integers(1, 8)),
                               topology=draw(fts.choice("ring", "complete")), seeds=3, x0=x0,
                               trajectory=False)
            kw = dict(rounds=draw(fts.integers(16, 128)), local_steps=draw(fts.integers(1, 5)),
                      clients_per_round=draw(fts.integers(1, n)), seeds=3, x0=x0, trajectory=False)
            if theorem == "4.2" and variant == "printed":
                # the printed conditions (i)-(iv) constrain alpha and E themselves: draw them (the
                # default alpha is the corrected rule's)
                kw.update(alpha=draw(fts.log_uniform(0.05, 5.0)), local_steps=draw(fts.integers(2, 12)),
                          rounds=draw(fts.integers(2, 12)))
            return p, kw
        return draw_case()
    return cases


THEOREM_4_1 = register_spec(TheoremSpec(
    name="localdescent.theorem_4_1", algorithm="lfd", quantity="f(x^r) - f* at the round end with the largest gap/bound",
    statement=r"E[f(xbar^T) - f*] <= exp(-mu eta T) (f(x^0) - f*) (eq. 20) for LFGD under (19), at round ends T = rE",
    setup=_setup_4_1, run_kwargs=_run_kwargs_4_1, measure=_measure_4_1, conditions=_conditions_4_1,
    variants={
        "printed": Variant("Theorem 4.1 as printed: condition (19) implies the bound exp(-mu eta T) (f(x^0) - f*) "
                           "of eq. (20).", _bound_4_1("printed"), ("stated",)),
        "proof": Variant("The bound the proof derives, eq. (45), (1 - mu eta)^T (f(x^0) - f*) (never above the "
                         "printed exp(-mu eta T) form), under the printed condition (19).",
                         _bound_4_1("proof"), ("stated",)),
        "corrected": Variant("The proof's bound (45) under the condition the recursion needs, (43) of Lemma A.4 "
                             "with mu eta < 1, instead of the printed (19) with its extra 1/mu (docs/papers/localdescent.md, §4.1).",
                             _bound_4_1("corrected"), ("hidden",))},
    default_variant="corrected",
    extra_runs=lambda st: _agnostic_runs(st, "lfd", _run_kwargs_4_1(st)),
    details=lambda st, m: {k: m[k] for k in ("worst_round", "mean_gap", "bound_curve", "lam_traj",
                                             "all_rounds_hold", "all_rounds_hold_printed")},
    cases=_space("4.1"),
    floor=_gap_floor,
    reference="Haddadpour & Mahdavi 2019, Theorem 4.1, eqs. (19)-(20); proof: Lemma A.4 (43), (45), Lemma A.5 (46); "
              "docs/papers/localdescent.md, §4.1",
    pep=pep_4_1,
    errata=(Erratum("corrected", "§4.1", "Theorem 4.1, eqs. (19)-(20) (proof: Lemma A.4, (43), (45); Lemma A.5)",
                    r"\eta\lambda\Bigl[L + \frac{4\kappa L E}{\mu(1-\mu\eta)^{E-1}}\Bigr] \le 1 \;\Rightarrow\; "
                    r"f(\bar x^T) - f^* \le e^{-\mu\eta T}(f(x^0) - f^*)",
                    r"\eta L\lambda\bigl[1 + 4\kappa E((1-\mu\eta)^{1-E} - 1)\bigr] \le 1,\ \mu\eta < 1 \;\Rightarrow\; "
                    r"f(\bar x^T) - f^* \le (1-\mu\eta)^T(f(x^0) - f^*)",
                    "condition (19) carries an extra 1/mu (it is not scale invariant) and is not what the recursion "
                    "needs: the proof needs (43) with mu eta < 1, and derives the bound (45); for mu > 1, (19) no "
                    "longer implies (43) (Lemma A.5 holds for (46), not for (19))",
                    level="localdescent.lemma_a5",
                    why_not="the correction is a condition: Lemma A.5 checks the implication 'step condition => (43)' "
                            "at the run's step, and (46) bounds (43) from above, so on every case where (19) holds "
                            "and (43) fails (printed VIOLATED at the lemma, ratio 2.42 on the registered case) the "
                            "corrected premise (46) <= 1 fails too (NOT APPLICABLE)"),)))


# --------------------------------------------------------------------------- Theorem 4.2 --
def lfsgd_pl_stated_conditions(alpha, E, S, L, mu, lam, C1=0.0):
    """The paper's conditions (i)-(iv) of Theorem 4.2 (docs/papers/localdescent.md, §4.2), as stated Conditions."""
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
    """The direct check of Lemma B.6 plus a >= E - 1 and a >= 4 lambda kappa (C1+S)/S (docs/papers/localdescent.md, §4.2): the
    hidden conditions the proof needs, as Conditions with role "hidden"."""
    a = alpha * E + 4
    D = lam * L * (C1 + S) / S
    c = lam * L ** 2 * (S + 1) * (C1 + E) / S
    T = horizon or 6 * E
    etas = 4 / (mu * (np.arange(T) + a))
    w = lemma_b6_worst(etas, E, mu, D, c)
    nec = 4 * lam * (L / mu) * (C1 + S) / S
    return [Condition("Lemma B.6 direct check: max_k eta_k (D + 2 sum ...) <= 1", w, 1.0, w <= 1, role="hidden"),
            Condition("(151): a >= E - 1", a, E - 1, a >= E - 1, role="hidden"),
            Condition("necessary: a >= 4 lambda kappa (C1+S)/S (eta_t <= 1/D)", a, nec, a >= nec, role="hidden")]


def lfsgd_pl_alpha_min(E, S, L, mu, lam, C1=0.0, grid=None):
    """Smallest alpha of an increasing grid (default 1600 points from 0.5 to 400) passing the corrected
    conditions (docs/papers/localdescent.md, §4.2), or inf.

    Each condition holds for every alpha above a threshold: a = alpha E + 4 grows with alpha, and the
    step sizes 4/(mu (t + a)) shrink, and with them every term of Lemma B.6's maximum. So the first
    passing grid point is found by bisection, in about 11 checks of the conditions instead of up to
    1600 (the property test compares it with the scan)."""
    grid = np.linspace(0.5, 400, 1600) if grid is None else np.asarray(grid, dtype=float)
    lo, hi = 0, len(grid)                  # grid[:lo] fail, grid[hi:] pass
    while lo < hi:
        mid = (lo + hi) // 2
        if all(c.ok for c in lfsgd_pl_corrected_conditions(float(grid[mid]), E, S, L, mu, lam, C1)):
            hi = mid
        else:
            lo = mid + 1
    return float(grid[lo]) if lo < len(grid) else math.inf


def bound22(T, a, E, S, B, sigma2, L, mu, f0):
    """Eq. (22): a^3/(T+a)^3 f0 + 4 kappa s^2 T(T+2a)/(mu S B (T+a)^3) + 256 kappa^2 s^2 T (E-1)/(mu S B (T+a)^3)."""
    kap = L / mu
    return (a ** 3 / (T + a) ** 3 * f0 + 4 * kap * sigma2 * T * (T + 2 * a) / (mu * S * B * (T + a) ** 3)
            + 256 * kap ** 2 * sigma2 * T * (E - 1) / (mu * S * B * (T + a) ** 3))


@dataclass(frozen=True)
class PLStepSizes:
    r"""The step sizes of Theorem 4.2, :math:`\eta_t = 4/(\mu(t + a))` with t the global local-step
    counter (a callable ``lr`` for ``fedtheory.run``).

    Examples
    --------
    >>> s = PLStepSizes(mu=0.5, a=8.0)
    >>> s(0), s(8)
    (1.0, 0.5)
    """

    mu: float
    a: float

    def __call__(self, t):
        return 4.0 / (self.mu * (t + self.a))


def _setup_4_2(problem, rounds=100, local_steps=4, alpha=None, clients_per_round=2, batch_size=None, seeds=10,
               x0=None, replicate_duplicates=True, trajectory=True):
    from .._argcheck import Bool, Interval, NoneOk, check_param
    name = "localdescent.theorem_4_2"
    _check_common(name, rounds, local_steps, seeds, trajectory)
    check_param("alpha", alpha, [NoneOk(), Interval(float, 0, None, "neither")], name)
    check_param("replicate_duplicates", replicate_duplicates, [Bool()], name)
    lam, sigma2, B, C1 = _assumption_constants(problem, batch_size)
    L, mu = pl_constants(problem)
    E, S = local_steps, clients_per_round or problem.n_clients
    if alpha is None:
        alpha = lfsgd_pl_alpha_min(E, S, L, mu, lam, C1)
        if not math.isfinite(alpha):
            raise NotApplicable("no alpha in (0.5, 400] passes the direct Lemma B.6 check (docs/papers/localdescent.md, §4.2); pass alpha",
                                lfsgd_pl_corrected_conditions(400.0, E, S, L, mu, lam, C1))
    a = alpha * E + 4
    x0 = _x0(problem, x0)
    fs = _f_star(problem)
    return dict(L=L, mu=mu, lam_sup=lam, C1=C1, alpha=alpha, a=a, T=rounds * E, E=E, S=S, B=B, sigma2=sigma2,
                eta0_L=4 / (mu * a) * L, rounds=rounds, clients_per_round=clients_per_round, batch_size=batch_size,
                seeds=seeds, x0=x0, f_star=fs, f0=problem.value(x0) - fs,
                replicate_duplicates=replicate_duplicates, trajectory=trajectory)


def _run_kwargs_4_2(st):
    """LFSGD: lfd with eta_t = 4/(mu (t + a)), S draws by q with replacement, independent replicas
    for duplicate draws by default (the independence Lemma E.2 assumes); the local trace, which its
    proof steps (48) and Lemma B.6 read on the same runs."""
    cpr = st["clients_per_round"]
    return dict(rounds=st["rounds"], local_steps=st["E"], lr=PLStepSizes(st["mu"], st["a"]), clients_per_round=cpr,
                batch_size=st["batch_size"], x0=st["x0"],
                replicate_duplicates=st["replicate_duplicates"] and cpr is not None, eval_every=st["rounds"],
                trace="local")


def _measure_4_2(st, runs):
    """f(x^R) - f* of every run (inf when it diverged) and lambda_traj (99th percentile of the
    multi-point diversity per run, maximised over the runs)."""
    problem = st["problem"]
    with np.errstate(all="ignore"):
        vals = [problem.value(res.x) - st["f_star"] if res.finished else math.inf for res in runs["main"]]
    lam_traj = _lambda_traj(problem, _traj_runs(runs), "p99") if st["trajectory"] else None
    return dict(values=vals, lam_traj=lam_traj)


def _conditions_4_2(st, m):
    args = (st["alpha"], st["E"], st["S"], st["L"], st["mu"])
    conds = (lfsgd_pl_stated_conditions(*args, st["lam_sup"], st["C1"])
             + lfsgd_pl_corrected_conditions(*args, st["lam_sup"], st["C1"]))
    lt = m.get("lam_traj")
    if lt is not None and math.isfinite(lt):
        b6t = lfsgd_pl_corrected_conditions(*args, lt, st["C1"])[0]
        conds.append(Condition("Lemma B.6 check with lambda_traj (p99 multi-point diversity along the traced run)",
                               b6t.value, 1.0, b6t.ok, role="informational"))
    return conds


def _bound_4_2(st, m):
    return float(bound22(st["T"], st["a"], st["E"], st["S"], st["B"], st["sigma2"], st["L"], st["mu"], st["f0"]))


THEOREM_4_2 = register_spec(TheoremSpec(
    name="localdescent.theorem_4_2", algorithm="lfd", quantity="f(xbar^T) - f*",
    statement="E[f(xbar^T) - f*] <= eq. (22) for LFSGD with eta_t = 4/(mu (t + a)), a = alpha E + 4, T = RE",
    setup=_setup_4_2, run_kwargs=_run_kwargs_4_2, measure=_measure_4_2, conditions=_conditions_4_2,
    variants={
        "printed": Variant("Theorem 4.2 as printed: the stated conditions (i)-(iv) imply bound (22).", _bound_4_2,
                           ("stated",)),
        "corrected": Variant("Bound (22) under the conditions the proof needs instead of the insufficient (i)-(iv) "
                             "(docs/papers/localdescent.md, §4.2): the direct per-period check of Lemma B.6, a >= E - 1 (step 151) and "
                             "a >= 4 lambda kappa (C1+S)/S.", _bound_4_2, ("hidden",))},
    default_variant="corrected",
    extra_runs=lambda st: _agnostic_runs(st, "lfd", _run_kwargs_4_2(st)),
    details=lambda st, m: {"lam_traj": m["lam_traj"]},
    cases=_space("4.2"),
    floor=_gap_floor,
    reference="Haddadpour & Mahdavi 2019, Theorem 4.2, eqs. (21)-(22); Lemma B.6; docs/papers/localdescent.md, §4.2",
    errata=(Erratum("corrected", "§4.2", "Theorem 4.2, eqs. (21)-(22) (Lemma B.6)",
                    r"\text{(i)-(iv)} \;\Rightarrow\; \mathbb E[f(\bar x^T) - f^*] \le \text{(22)}",
                    r"\text{Lemma B.6 checked per period},\ a \ge E - 1,\ a \ge \frac{4\lambda\kappa(C_1+S)}{S}"
                    r" \;\Rightarrow\; \mathbb E[f(\bar x^T) - f^*] \le \text{(22)}",
                    "conditions (i)-(iv) do not imply the step-size bound the proof needs: the first steps may be "
                    "far above 1/L and the iterates diverge",
                    level="localdescent.lemma_b6",
                    why_not="the correction is a condition: on the registered counterexample Lemma B.6's requirement "
                            "(60) fails on the run's first period under (i)-(iv) (printed VIOLATED), and the corrected "
                            "conditions (Lemma B.6 checked per period) exclude the case (NOT APPLICABLE); where they "
                            "hold, (60) holds under both, so no case has printed failing and corrected holding"),),
    pep=("LFSGD's bound is an expectation over gradient noise (Assumption 3) and over client sampling with "
         "replacement, and its class is a mu-PL objective with bounded gradient diversity: a PEP of the "
         "expectation would need every sampling path and a noise model, PL functions have no exact "
         "interpolation conditions (PEPit's quadratic-Lojasiewicz classes are necessary conditions only, so "
         "the value would be an upper bound: a bracket, not exact) and the diversity bound holds for all x, "
         "which a PEP can impose only at the points it evaluates (a relaxation). Not registered.")))


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


def lfsgd_nc_E_max(T, S, lam, C1=0.0):
    """Remark 7: the largest E with 2 C1 + E(E+1) <= (T/S)[S/(lambda (S+1)) - sqrt(S/T)(S+C1)/(S+1)]
    (condition (23) at eta = sqrt(S/T)/L); 0 when none."""
    rhs = T / S * (S / (lam * (S + 1)) - math.sqrt(S / T) * (S + C1) / (S + 1))
    E = 0
    while 2 * C1 + (E + 1) * (E + 2) <= rhs:
        E += 1
    return E


def _setup_4_4(problem, rounds=256, local_steps=4, clients_per_round=2, seeds=10, x0=None, lr=None,
               replicate_duplicates=True, trajectory=True):
    from .._argcheck import Bool, Interval, NoneOk, check_param
    name = "localdescent.theorem_4_4"
    _check_common(name, rounds, local_steps, seeds, trajectory)
    check_param("lr", lr, [NoneOk(), Interval(float, 0, None, "neither")], name)
    check_param("replicate_duplicates", replicate_duplicates, [Bool()], name)
    lam, sigma2, B, C1 = _assumption_constants(problem, None)
    L, _ = pl_constants(problem)
    E, S = local_steps, clients_per_round or problem.n_clients
    T = rounds * E
    x0 = _x0(problem, x0)
    return dict(L=L, lam_sup=lam, C1=C1, eta=lr if lr is not None else math.sqrt(S / T) / L, T=T, E=E, S=S, B=B,
                sigma2=sigma2, rounds=rounds, clients_per_round=clients_per_round, seeds=seeds, x0=x0,
                f0=problem.value(x0) - _f_star(problem), replicate_duplicates=replicate_duplicates,
                trajectory=trajectory)


def _run_kwargs_4_4(st):
    """LFSGD: lfd with the constant eta = sqrt(S/T)/L, S draws by q with replacement, each draw with
    its own noise (independent replicas, as Lemma E.2 assumes) unless replicate_duplicates=False."""
    cpr = st["clients_per_round"]
    return dict(rounds=st["rounds"], local_steps=st["E"], lr=st["eta"], clients_per_round=cpr, x0=st["x0"],
                replicate_duplicates=st["replicate_duplicates"] and cpr is not None, trace="local",
                eval_every=st["rounds"])


def _measure_nonconvex(st, runs):
    r"""(1/T) sum_{t<T} ||grad f(xbar^(t))||^2 per run, xbar^(t) the traced virtual average at every
    local step, and lambda_traj (99th percentile of the multi-point diversity per run, maximised
    over the runs)."""
    problem = st["problem"]
    vals = [_grad_sq_average(problem, res, st["T"]) for res in runs["main"]]
    lam_traj = _lambda_traj(problem, _traj_runs(runs), "p99") if st["trajectory"] else None
    return dict(values=vals, lam_traj=lam_traj)


def _conditions_4_4(st, m):
    eta, S, E, L, lam, C1 = st["eta"], st["S"], st["E"], st["L"], st["lam_sup"], st["C1"]
    c_p, c_c = cond23(eta, S, E, L, lam, C1, False), cond23(eta, S, E, L, lam, C1, True)
    e_max = lfsgd_nc_eta_max(S, E, L, lam, C1)
    E_max = lfsgd_nc_E_max(st["T"], S, lam, C1)
    conds = [Condition("(23) as printed: LHS <= 0", c_p, 0.0, c_p <= 0, role="stated"),
             Condition("(23) corrected (2 C1 E, step 165): LHS <= 0", c_c, 0.0, c_c <= 0, role="hidden"),
             Condition("eta <= eta_max of Corollary 4.5", eta, e_max, eta <= e_max, role="informational"),
             Condition("E <= E_max(T) of Remark 7 (eta = sqrt(S/T)/L)", E, E_max, E <= E_max, role="informational")]
    if m.get("lam_traj") is not None:
        c_t = cond23(eta, S, E, L, m["lam_traj"], C1, True)
        conds.append(Condition("(23) with lambda_traj (p99 multi-point diversity along the traced run)", c_t, 0.0,
                               c_t <= 0, role="informational"))
    return conds


def _bound_4_4(st, m):
    return float(bound24(st["T"], st["eta"], st["S"], st["B"], st["E"], st["L"], st["sigma2"], st["f0"]))


THEOREM_4_4 = register_spec(TheoremSpec(
    name="localdescent.theorem_4_4", algorithm="lfd", quantity="(1/T) sum_{t<T} ||grad f(xbar^(t))||^2",
    statement=r"(1/T) sum_{t<T} E||grad f(xbar^(t))||^2 <= eq. (24) for LFSGD with constant eta (xbar^(t): the "
              r"virtual average at every local step)",
    setup=_setup_4_4, run_kwargs=_run_kwargs_4_4, measure=_measure_nonconvex, conditions=_conditions_4_4,
    variants={
        "printed": Variant("Theorem 4.4 as printed: condition (23) implies bound (24).", _bound_4_4, ("stated",)),
        "corrected": Variant("Bound (24) under (23) with the factor E that step (165) drops on the C1 term restored "
                             "(2 C1 E for 2 C1; the same when C1 = 0).", _bound_4_4, ("hidden",))},
    default_variant="corrected",
    extra_runs=lambda st: _agnostic_runs(st, "lfd", _run_kwargs_4_4(st)),
    details=lambda st, m: {"lam_traj": m["lam_traj"]},
    cases=_space("4.4"),
    floor=_nonconvex_floor, rounding=_nonconvex_rounding,
    reference="Haddadpour & Mahdavi 2019, Theorem 4.4, eqs. (23)-(24), Corollary 4.5, Remark 7; Lemma E.2; "
              "docs/papers/localdescent.md, §4.3",
    errata=(Erratum("corrected", "§4.3", "Theorem 4.4, eq. (23) (proof: step (165))",
                    r"-\frac{\eta}{2\lambda} + \frac{(S+1)L^2\eta^3(2C_1 + E(E+1))}{2S} + "
                    r"\frac{L\eta^2}{2}\Bigl(\frac{C_1}{S} + 1\Bigr) \le 0",
                    r"-\frac{\eta}{2\lambda} + \frac{(S+1)L^2\eta^3(2C_1E + E(E+1))}{2S} + "
                    r"\frac{L\eta^2}{2}\Bigl(\frac{C_1}{S} + 1\Bigr) \le 0",
                    "step (165) drops a factor E on the C1 term of condition (23); bound (24) is unchanged "
                    "(the two coincide when C1 = 0)", level="localdescent.step_165"),),
    pep=("Non-convex with stochastic gradients: the bound (24) is driven by the noise sigma^2/(S B) and the "
         "class includes bounded gradient diversity for all x; PEP has exact L-smooth non-convex "
         "interpolation, but the diversity assumption can be imposed only at the evaluated points (a "
         "relaxation: an upper bound, a bracket) and the expectation over sampling and noise is not an SDP of "
         "fixed size. Not registered.")))


def _setup_4_7(problem, rounds=256, local_steps=4, topology="ring", W=None, seeds=10, x0=None, lr=None,
               trajectory=True):
    from .._argcheck import Interval, NoneOk, Options, check_param
    from ..runs.topology import TOPOLOGIES, check_mixing, mixing_matrix, zeta as zeta_of
    name = "localdescent.theorem_4_7"
    _check_common(name, rounds, local_steps, seeds, trajectory)
    check_param("topology", topology, [Options(*TOPOLOGIES)], name)
    check_param("lr", lr, [NoneOk(), Interval(float, 0, None, "neither")], name)
    n = problem.n_clients
    if not np.allclose(problem.weights, 1.0 / n):
        raise NotApplicable("Theorem 4.7 is proved for uniform client weights q = 1/n")
    lam, sigma2, B, C1 = _assumption_constants(problem, None)
    Wm = mixing_matrix(topology, n, problem.weights) if W is None else check_mixing(W, problem.weights)
    L, _ = pl_constants(problem)
    E = local_steps
    T = rounds * E
    x0 = _x0(problem, x0)
    return dict(L=L, lam_sup=lam, C1=C1, zeta=zeta_of(Wm, problem.weights), W=W, topology=topology,
                eta=lr if lr is not None else math.sqrt(n / T) / L, T=T, E=E, n=n, B=B, sigma2=sigma2,
                rounds=rounds, clients_per_round=None, seeds=seeds, x0=x0, f0=problem.value(x0) - _f_star(problem),
                trajectory=trajectory)


def _run_kwargs_4_7(st):
    """NFSGD: nfsgd with the constant eta = sqrt(n/T)/L on the topology (or the given W)."""
    mix = dict(topology=st["topology"]) if st["W"] is None else dict(W=np.asarray(st["W"], dtype=float))
    return dict(rounds=st["rounds"], local_steps=st["E"], lr=st["eta"], x0=st["x0"], trace="local",
                eval_every=st["rounds"], **mix)


def _conditions_4_7(st, m):
    eta, n, E, L, lam, z, C1, T = st["eta"], st["n"], st["E"], st["L"], st["lam_sup"], st["zeta"], st["C1"], st["T"]
    c28 = cond28(eta, n, E, L, lam, z, C1)
    c86 = eta * L * (C1 / n + 2) + 5 * eta ** 2 * L ** 2 * E ** 2 / (1 - z) ** 2 - 1 / lam
    t_p, t_c = 4 * lam ** 2 * (C1 / n + 2) ** 2, 4 * lam ** 2 * n * (C1 / n + 2) ** 2
    e_max = (1 - z) * math.sqrt(T / (10 * lam * n))
    conds = [Condition("(28): LHS - 1/lambda <= 0", c28, 0.0, c28 <= 0, role="stated"),
             Condition("(86) simplified (Appendix D.1): LHS - 1/lambda <= 0", c86, 0.0, c86 <= 0,
                       role="informational"),
             Condition("T >= 4 lambda^2 (C1/n + 2)^2 (Theorem 3.4, informal, as printed)", T, t_p, T >= t_p,
                       role="informational"),
             Condition("T >= 4 lambda^2 n (C1/n + 2)^2 (Theorem 3.4 with the missing factor n, docs/papers/localdescent.md, §4.4)", T, t_c,
                       T >= t_c, role="informational"),
             Condition("E <= (1 - zeta) sqrt(T/(10 lambda n)) (Remark 10)", E, e_max, E <= e_max,
                       role="informational")]
    if m.get("lam_traj") is not None:
        c28t = cond28(eta, n, E, L, m["lam_traj"], z, C1)
        conds.append(Condition("(28) with lambda_traj (p99 multi-point diversity along the traced run)", c28t, 0.0,
                               c28t <= 0, role="informational"))
    return conds


def _bound_4_7(st, m):
    return float(bound29(st["T"], st["eta"], st["n"], st["B"], st["E"], st["L"], st["sigma2"], st["zeta"], st["f0"]))


THEOREM_4_7 = register_spec(TheoremSpec(
    name="localdescent.theorem_4_7", algorithm="nfsgd", quantity="(1/T) sum_{t<T} ||grad f(xbar^(t))||^2",
    statement=r"(1/T) sum_{t<T} E||grad f(xbar^(t))||^2 <= eq. (29) for NFSGD with constant eta (xbar^(t): the "
              r"q-average of the clients' local iterates at every local step)",
    setup=_setup_4_7, run_kwargs=_run_kwargs_4_7, measure=_measure_nonconvex, conditions=_conditions_4_7,
    variants={
        "printed": Variant("Theorem 4.7 as printed: condition (28) implies bound (29).", _bound_4_7, ("stated",)),
        "corrected": Variant("The same as printed, (28) implies (29): the correction of docs/papers/localdescent.md, §4.4 (the factor n "
                             "missing from the condition on T) concerns the informal Theorem 3.4 and is reported as "
                             "an informational condition.", _bound_4_7, ("stated",))},
    default_variant="corrected",
    details=lambda st, m: {"lam_traj": m["lam_traj"]},
    cases=_space("4.7"),
    floor=_nonconvex_floor, rounding=_nonconvex_rounding,
    reference="Haddadpour & Mahdavi 2019, Theorem 4.7, eqs. (28)-(29); Theorem 3.4 (informal), Remark 10, "
              "Appendix D.1 (86); docs/papers/localdescent.md, §4.4",
    errata=(Erratum("corrected", "§4.4", "Theorem 3.4 (informal form of Theorem 4.7), condition on T (Appendix D.1, "
                    "(87) -> (88))",
                    r"T \ge 4\lambda^2\Bigl(\frac{C_1}{n} + 2\Bigr)^2",
                    r"T \ge 4\lambda^2 n\Bigl(\frac{C_1}{n} + 2\Bigr)^2",
                    "the informal Theorem 3.4 misses a factor n in its condition on T (step (87) -> (88) of "
                    "Appendix D.1); Theorem 4.7 itself ((28) implies (29)) is correct, so its corrected variant is "
                    "the printed bound", level="localdescent.step_87"),),
    pep=("NFSGD (decentralized, mixing matrix W) with stochastic gradients and bounded diversity for all x: "
         "the same obstacles as Theorem 4.4 (noise expectation; diversity only at evaluated points, a "
         "relaxation giving a bracket). Not registered.")))


# --------------------------------------------------------------- default cases (verify) --
def conforming_quadratic(n=8, d=6, seed=6, noise=0.0):
    """Shared-minimiser quadratic with distinct Hessians (bounded diversity; docs/papers/localdescent.md, run 1)."""
    import problems
    return problems.quadratic(n, d, L=1.0, mu=0.25, shared_minimizer=True, hessian="distinct", seed=seed,
                              noise=noise)


def counterexample_4_2():
    """docs/papers/localdescent.md, §4.2: n = 4 diagonal quadratics with a shared minimiser, kappa ~ 21, lambda ~ 1."""
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
    return [Case("docs/papers/localdescent.md, §4.2 counterexample: kappa~21, alpha=0.1, E=10, S=2", "counterexample", counterexample_4_2,
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
