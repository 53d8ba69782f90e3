"""Local descent (Haddadpour & Mahdavi 2019): what its theorems and lemmas measure, shared by
:mod:`fedtheory.theory.localdescent` (Theorems 4.1 and 4.2), :mod:`fedtheory.theory.localdescent_nonconvex`
(Theorems 4.4 and 4.7) and :mod:`fedtheory.theory.localdescent_lemmas`.

The gradient diversity of a problem (its supremum for quadratics, the PL constants), the gradients
at traced points, the diversity along a run, the virtual averages of a trace, and the common set-up
of a check (assumption constants, the runs a theorem takes, floors).
"""
from __future__ import annotations

import math

import numpy as np

from .floors import gap_floor, grad_sq_floor, setup_scale
from .engine import NotApplicable
from ..runs.trace import virtual_average
from .._argcheck import Bool, check_param, Interval
from ..constants import client_smoothness, per_problem, quadratic_diversity_sup, strong_convexity
from ..truth import ground_truth


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
    """True when every client is stationary at the minimiser (required for a finite sup Lambda).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    x_star : ndarray, optional
        The minimiser (the ground truth's otherwise).
    tol : float, default 1e-10
        Relative tolerance of stationarity.

    Returns
    -------
    bool
        Whether every client's gradient vanishes at x*.
    """
    if x_star is None:
        x_star = problem.info.get("x_star") if problem.info else None
    if x_star is None:
        x_star = ground_truth(problem).x
    scale = max(1.0, max(float(np.linalg.norm(problem.client_grad(i, np.zeros(problem.dim))))
                         for i in range(problem.n_clients)))
    return all(np.linalg.norm(problem.client_grad(i, x_star)) <= tol * scale for i in range(problem.n_clients))


@per_problem
def diversity_sup(problem):
    r"""sup_x Lambda(x, q): :math:`\lambda_{\max}(\bar A^{-1}M\bar A^{-1})` for a shared-minimiser
    quadratic, +inf when the clients' minimisers differ (docs/papers/localdescent.md, §3.1). Other problem kinds raise
    ValueError (estimate the diversity along a traced run with :func:`traced_diversity`).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    float
        sup_x Lambda(x, q), +inf when the clients' minimisers differ.
    """
    parts = _quadratic_parts(problem)
    if parts is None:
        raise ValueError("diversity_sup has a closed form for quadratics only; estimate the diversity along "
                         "a traced run with traced_diversity.")
    if not shared_minimizer(problem):
        return math.inf
    return quadratic_diversity_sup(parts[0], problem.weights)


def pl_constants(problem):
    """(L, mu): L = max_j L_j, mu = PL constant of f (lambda_min of the average Hessian for a
    quadratic, l2 for logistic regression).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    tuple of float
        ``(L, mu)``.
    """
    return float(np.max(client_smoothness(problem))), float(strong_convexity(problem))


# ------------------------------------------------------------- gradients at traced points --
def client_gradients(problem, clients, Y):
    r"""Exact gradients :math:`\nabla f_{j_s}(y)` of client ``clients[s]`` at the points ``Y[s, ...]``.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    clients : array of int, shape (S,)
        The clients, one per row of ``Y``.
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
                g = _quadratic_client_grads(problem, int(j), X)
            else:                                        # the problem's own client oracle, point by point
                g = np.array([problem.client_grad(int(j), x) if np.all(np.isfinite(x)) else np.full(d, np.nan)
                              for x in X]).reshape(X.shape)
            G[sel] = g.reshape(Y[sel].shape)
    return G


def _quadratic_client_grads(problem, j, X):
    """Client j's gradients Q_j x - c_j + l2 x at the rows of ``X`` (P, d), a quadratic datafit."""
    Q, c, _ = problem.datafit.client_quadratic(problem.data, j)
    return X @ np.asarray(Q).T - c + problem.l2 * X


def objective_gradients(problem, X):
    r""":math:`\nabla f(x) = \sum_j q_j\nabla f_j(x)` (the smooth part) at every row of ``X`` (P, d).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    X : ndarray of shape (P, d)
        The points, one per row.

    Returns
    -------
    ndarray of shape (P, d)
        The gradient of the smooth part at each row.

    Examples
    --------
    >>> import numpy as np, problems
    >>> p = problems.quadratic(4, 3, heterogeneity=1.0, seed=1)
    >>> X = np.ones((2, 3))
    >>> bool(np.allclose(objective_gradients(p, X)[1], p.grad(X[1])))
    True
    """
    X = np.asarray(X, dtype=np.float64)
    n, fit = problem.n_clients, problem.datafit
    if fit.constant_hessian and not fit.has_samples:     # client_gradients' products, client by client
        X = np.ascontiguousarray(X)
        G = np.empty_like(np.broadcast_to(X, (n,) + X.shape))    # (client_gradients' layout: the same sums below)
        with np.errstate(all="ignore"):
            for j in range(n):
                G[j] = _quadratic_client_grads(problem, j, X)
    else:
        G = client_gradients(problem, np.arange(n), np.broadcast_to(X, (n,) + X.shape))
    return np.einsum("j,jpd->pd", problem.weights, G)


def multi_point_diversity(G, w):
    r"""Multi-point diversity :math:`\sum_s w_s\|g_s\|^2/\|\sum_s w_s g_s\|^2` over axis 0 of ``G``.

    ``G`` has shape (S, ..., d) (row s: client s's gradient at its own point), ``w`` (S,) are
    weights (normalised here). 1 where the numerator is 0, +inf where only the denominator is
    (docs/papers/localdescent.md, §3.1-§3.2); the same as :func:`diversity` for one set of points.

    Parameters
    ----------
    G : ndarray of shape (S, ..., d)
        Row s: client s's gradient at its own point.
    w : ndarray of shape (S,)
        The clients' weights.

    Returns
    -------
    ndarray
        The diversity over axis 0 (shape ``G.shape[1:-1]``).

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


def _stacked_steps(trace, name):
    """``(Y, clients, weights)`` of every round at once (:meth:`Trace.stacked`): the path at the
    starts of the K local steps, (R, S, K, d) in the layout of the rounds' paths stacked (the same
    sums, bit for bit), and (R, S) each; None when S or K differ between rounds."""
    every = trace.stacked(name)
    if every is None:
        return None
    K = every.values.shape[2] - 1
    return np.ascontiguousarray(every.values[:, :, :K]), every.clients, every.weights


def virtual_averages(trace, name="local"):
    r"""Virtual averages :math:`\bar x^{(t)}` at the start of every traced local step, shape (T, d).

    Row t = (sum of K over earlier rounds) + k is ``rt.virtual_average(name)[k]`` for k < K of
    round r: the participants' iterates averaged with the round's aggregation weights (for
    NFSGD the q-average over all clients); k = 0 is the broadcast model (LFD) or the clients'
    q-average (NFSGD).

    Parameters
    ----------
    trace : Trace
        A run's trace.
    name : str, default "local"
        The traced sequence averaged.

    Returns
    -------
    ndarray of shape (T, d)
        One row per traced local step.

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> res = ft.run(p, "lfd", rounds=3, local_steps=2, lr=0.1, clients_per_round=2, trace="local")
    >>> X = virtual_averages(res.trace)
    >>> X.shape, bool(np.allclose(X[2], res.trace[1].x))
    ((6, 3), True)
    """
    every = _stacked_steps(trace, name)
    if every is not None:                                     # one pass over the rounds as recorded
        Y, _, w = every
        return virtual_average(w, Y).reshape(-1, Y.shape[3])

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

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    trace : Trace
        A run's trace.
    name : str, default "local"
        The traced sequence whose points are used.

    Returns
    -------
    ndarray of shape (T,)
        The diversity at every traced local step.

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, shared_minimizer=True, hessian="distinct", seed=0)
    >>> res = ft.run(p, "lfd", rounds=5, local_steps=1, lr=0.1, x0=np.ones(3), trace="local")
    >>> lam = traced_diversity(p, res.trace)              # E = 1, all clients: Lambda(x^t, q)
    >>> bool(lam.max() <= diversity_sup(p))
    True
    """
    def stacked(Y, c, w):                 # (R, S, K, d), (R, S), (R, S): one vectorised pass over the rounds
        G = client_gradients(problem, c.ravel(), Y.reshape((-1,) + Y.shape[2:])).reshape(Y.shape)
        W = w / w.sum(axis=1, keepdims=True)
        with np.errstate(all="ignore"):
            gbar = np.einsum("rs,rskd->rkd", W, G)
            return _ratio(np.einsum("rs,rsk->rk", W, np.sum(G * G, axis=-1)), np.sum(gbar * gbar, axis=-1))

    every = _stacked_steps(trace, name)
    if every is not None:
        return stacked(*every).reshape(-1)

    def div(rounds, K):
        if len({rt.S for rt in rounds}) == 1:
            return stacked(np.stack([rt[name][:, :K] for rt in rounds]), np.stack([rt.clients for rt in rounds]),
                           np.stack([rt.weights for rt in rounds]))
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
        fs = ground_truth(problem).f
    return fs


def _x_star(problem):
    """x* for the rounding scale (the problem's own, else its ground truth; None when there is none)."""
    xs = problem.info.get("x_star") if problem.info else None
    if xs is None:
        try:
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


@per_problem
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
    check_param("rounds", rounds, [Interval(int, 1, None)], name)
    check_param("local_steps", local_steps, [Interval(int, 1, None)], name)
    check_param("seeds", seeds, [Interval(int, 1, None)], name)
    check_param("trajectory", trajectory, [Bool()], name)
