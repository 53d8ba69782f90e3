"""FedSPS (Mukherjee et al.): what its theorems and lemmas measure and assume, shared by
:mod:`fedtheory.theory.fedsps` (Theorem 3, the conforming spaces, the performance-estimation forms),
:mod:`fedtheory.theory.fedsps_theorem6` (Theorems 6 and 18) and :mod:`fedtheory.theory.fedsps_lemmas`.

The problem's constants (per-sample smoothness, client minima), the theorems' conditions on the
problem, the quantities read from the traced runs (virtual averages, objective and gradient along
them, the step-size statistics) and the common set-up of a check.
"""
from __future__ import annotations

import math

import numpy as np

from . import Condition
from .floors import distance_floor, EPS, FLOOR_ULPS, gap_floor, setup_scale, worst_instance
from .engine import NotApplicable
from .._argcheck import check_param, Interval
from ..constants import client_smoothness, per_problem
from ..truth import ground_truth

_REL = 1e-12          # relative slack of the step-size comparisons (the cap, alpha)


# ------------------------------------------------------------------------- constants --
@per_problem
def sample_constants(problem):
    """(L, mu): per-sample smoothness and strong convexity (A1, A2; docs/papers/fedsps.md, §4.6), from
    the datafit's capabilities: L = curvature_bound max ||a||^2 + l2 for samples (a client is one sample
    without them); mu = l2 for samples (a rank-one sample Hessian), else the smallest client mu_i.

    Raises DataError (a ValueError) naming the missing capability when the datafit declares neither a
    constant Hessian nor a curvature bound.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    tuple of float
        ``(L, mu)``.
    """
    fit, data = problem.datafit, problem.data
    L = fit.sample_smoothness(data)
    if fit.has_samples:
        return float(L), float(problem.l2)
    return float(L), float(min(fit.client_strong_convexity(data, i) for i in range(problem.n_clients)))


def _full_batch_L(problem):
    """Deterministic clients: the full-batch constant max_i lambda_max(Hessian of f_i) (docs/papers/fedsps.md, §4.6)."""
    return float(np.max(client_smoothness(problem)))


def _full_batch_mu(problem):
    """Deterministic clients: min_i inf_x lambda_min(Hessian of f_i) (the datafit's
    :meth:`~fedtheory.components.Datafit.client_strong_convexity`: constant Hessians exactly, else l2)."""
    fit = problem.datafit
    return float(min(fit.client_strong_convexity(problem.data, i) for i in range(problem.n_clients)))


def _gt(problem):
    info = problem.info or {}
    if "x_star" in info and "f_star" in info:
        return np.asarray(info["x_star"]), float(info["f_star"])
    gt = ground_truth(problem)
    return gt.x, gt.f


@per_problem
def client_minima(problem):
    """f_i* = min f_i of every client (explicit quadratic clients, a constant Hessian without samples,
    in closed form; else the ground truth).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    ndarray of shape (n,)
        The clients' minimal values f_i*.
    """
    if _explicit_quadratic(problem):
        out = []
        for i in range(problem.n_clients):
            Q, c, _ = problem.datafit.client_quadratic(problem.data, i)
            Q = Q + problem.l2 * np.eye(problem.dim)
            if np.linalg.eigvalsh(Q)[0] <= 0:
                out.append(-math.inf)
            else:
                out.append(float(-0.5 * c @ np.linalg.solve(Q, c)))
        return np.array(out)
    return np.asarray(ground_truth(problem).client_f)


# ------------------------------------------------------------------------ conditions --
def uniform_weights_condition(problem):
    """Stated: every FedSPS theorem has n clients of weight 1/n (docs/papers/fedsps.md, §1.1).

    ``value`` is max_i |n w_i - 1| (0 for uniform weights).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    Condition
        The stated condition, with its value and limit.

    Examples
    --------
    >>> import problems
    >>> uniform_weights_condition(problems.quadratic(2, 2, seed=0)).ok
    True
    >>> c = uniform_weights_condition(problems.quadratic(2, 2, seed=0, weights=[1.0, 3.0]))
    >>> c.ok, c.value, c.role
    (False, 0.5, 'stated')
    """
    dev = float(np.max(np.abs(problem.n_clients * np.asarray(problem.weights) - 1.0)))
    return Condition("uniform client weights w_i = 1/n", dev, 0.0, dev <= 1e-12)


def noise_free_condition(problem):
    r"""Stated: the sampled loss is the function the step size evaluates, bounded below.

    With additive gradient noise of std s the sample function whose gradient the clients use is
    :math:`F_i(x,\xi) = f_i(x) + \xi^\top x`, unbounded below over Gaussian :math:`\xi`, so
    :math:`F_i^* = -\infty`: no lower bound :math:`\ell_i^* \le F_i^*` exists, interpolation fails
    and the noise-free :math:`f_i^*` (or :math:`\sigma_f^2` built from it) does not bound it.
    ``value`` is the noise std.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    Condition
        The stated condition, with its value and limit.

    Examples
    --------
    >>> import problems
    >>> c = noise_free_condition(problems.quadratic(2, 2, noise=0.1, seed=0))
    >>> c.ok, c.value
    (False, 0.1)
    """
    s = float(problem.noise)
    return Condition("no additive gradient noise (with noise F_i* = -inf: no ell_i* <= F_i*, no interpolation)",
                     s, 0.0, s == 0.0)


def _lower_bound_condition(problem, ell, batch_size=None):
    """Stated: ell_i* <= F_i*, the infimum of the sampled loss the step size evaluates.

    With deterministic clients (``batch_size=None``), or a datafit without samples (a minibatch
    is the whole client), the sampled loss is f_i, so F_i* = f_i* (``value`` is
    max_i ell_i* - f_i*). With minibatches F_i* is the minimum over minibatch losses, bounded
    below by the datafit's declared ``sample_loss_floor`` (0 for least squares and logistic
    losses); a datafit that declares none cannot be checked, and the condition fails.

    Examples
    --------
    >>> import problems
    >>> p = problems.quadratic(2, 2, seed=0)
    >>> fi = client_minima(p)
    >>> _lower_bound_condition(p, fi).ok, _lower_bound_condition(p, fi + 1.0).ok
    (True, False)
    """
    fit = problem.datafit
    if batch_size is None or not fit.has_samples:
        fi = client_minima(problem)
        gap = float(np.max(ell - fi))
        return Condition("ell_i* <= f_i* (= F_i*: the sampled loss is the client's loss)", gap, 0.0,
                         gap <= 1e-10 * max(1.0, np.abs(fi).max()))
    floor = getattr(fit, "sample_loss_floor", None)
    v = float(np.max(ell))
    if floor is None:
        return Condition("ell_i* <= F_i* = min over minibatch losses (the datafit declares no lower bound on its "
                         "sample losses: cannot be checked)", v, float("nan"), False)
    return Condition(f"ell_i* <= F_i* = min over minibatch losses (>= {floor:g}, the datafit's sample_loss_floor)",
                     v, float(floor), v <= floor)


def _stop_if_inapplicable(problem_conds, conds):
    """When a condition on the problem itself fails (``problem_conds``: uniform weights, no noise),
    the runs would not measure the theorem's quantities: raise NotApplicable (no run is made),
    naming every failing stated condition of ``conds``."""
    if all(c.ok for c in problem_conds):
        return
    failed = [c for c in conds if c.role == "stated" and not c.ok]
    raise NotApplicable("; ".join(f"fails {c.name}" for c in failed), conds)


def _problem_conditions(problem, noise=True):
    return [uniform_weights_condition(problem)] + ([noise_free_condition(problem)] if noise else [])


def _lemma14_condition(st, m):
    """Informational: Lemma 14, alpha <= gamma_t^i <= gamma_b on every traced step."""
    lo, hi = m["gamma_min"], m["gamma_max"]
    ok = lo >= st["alpha"] * (1 - _REL) and hi <= st["gamma_b"] * (1 + _REL)
    return Condition("Lemma 14 on the run: alpha <= gamma_t^i <= gamma_b (value: min gamma_t^i)", lo,
                     st["alpha"], ok, role="informational")


def _pinned_condition(m, gamma_b):
    """Stated: every step at gamma_b, the regime of Theorems 6 and 18 (FedSPS = FedAvg(gamma_b)).

    The theorems analyse FedAvg(gamma_b): their step-size cap makes gamma_t^i = gamma_b follow
    from A1 and ell_i* <= F_i* (Lemma 14). A run in which a step is below the cap is not the
    algorithm the theorem is about (e.g. additive gradient noise in the Polyak ratio), so it gets
    no verdict. ``value`` is the fraction of steps at the cap (relative 1e-12), or below it by a step
    whose Polyak numerator is a rounding residue (a converged run, :func:`_gamma_stats`)."""
    f = m["pinned_frac"]
    return Condition("every step at gamma_b, FedSPS = FedAvg(gamma_b) (value: fraction of steps)", f, 1.0,
                     f == 1.0)


# --------------------------------------------------------------- traced quantities --
def _completed(res, seed):
    if not res.finished:
        raise RuntimeError(f"FedSPS did not complete the run for seed {seed}: {res.message}")
    return res


def virtual_averages(res):
    r"""The virtual averages :math:`\bar x_t = \frac1n\sum_i x_t^i`, t = 0..T-1 (T = R tau), of a
    full-participation run traced with ``trace="local"``: array (T, d).

    Computed with the aggregation weights (:meth:`fedtheory.runs.trace.RoundTrace.virtual_average`):
    the paper's unweighted average is that average under its uniform weights w_i = 1/n, a condition
    every FedSPS theorem check states (:func:`uniform_weights_condition`).

    Parameters
    ----------
    res : RunResult
        A full-participation run traced with ``trace="local"``.

    Returns
    -------
    ndarray of shape (T, d)
        The virtual averages.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(3, 2, seed=0)
    >>> res = ft.run(p, "fedsps", rounds=4, local_steps=3, trace="local")
    >>> xb = virtual_averages(res)
    >>> xb.shape, bool((xb[3] == res.trace[1].x).all())     # t = 3 is the start of round 1
    ((12, 2), True)
    """
    return np.concatenate([rt.virtual_average("local")[:-1] for rt in res.trace])


def _explicit_quadratic(problem):
    """The clients are explicit quadratics (capabilities: a constant Hessian and no samples), whose
    (Q_i, c_i) are their data (:meth:`~fedtheory.components.Datafit.client_quadratic`)."""
    fit = problem.datafit
    return bool(fit.constant_hessian and not fit.has_samples)


def _quadratic_blocks(problem):
    """(w, Q (n, d, d), c (n, d)) of a quadratic problem, f = sum_i w_i (x^T Q_i x/2 - c_i^T x) + l2 ||x||^2/2
    (the constants k_i of the explicit quadratics are 0)."""
    parts = [problem.datafit.client_quadratic(problem.data, i) for i in range(problem.n_clients)]
    Q = np.array([q for q, _, _ in parts])
    c = np.array([c for _, c, _ in parts])
    return np.asarray(problem.weights), Q, c


def objective_at(problem, X):
    """f(x) at every row of X (m, d): the problem's objective, vectorised for quadratics.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    X : ndarray of shape (m, d)
        The points, one per row.

    Returns
    -------
    ndarray of shape (m,)
        f at each row.

    Examples
    --------
    >>> import numpy as np, problems
    >>> p = problems.quadratic(3, 2, seed=0)
    >>> X = np.array([[0.0, 1.0], [2.0, -1.0]])
    >>> bool(np.allclose(objective_at(p, X), [p.value(x) for x in X], rtol=1e-14))
    True
    """
    X = np.asarray(X, dtype=float)
    if not _explicit_quadratic(problem) or problem.reg_weight != 0:
        return np.array([problem.value(x) for x in X])
    w, Q, c = _quadratic_blocks(problem)
    per = 0.5 * np.einsum("tj,ijk,tk->ti", X, Q, X) - X @ c.T
    return per @ w + 0.5 * problem.l2 * np.einsum("tj,tj->t", X, X)


def gradient_at(problem, X):
    """grad f(x) at every row of X (m, d): the problem's gradient, vectorised for quadratics.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    X : ndarray of shape (m, d)
        The points, one per row.

    Returns
    -------
    ndarray of shape (m, d)
        grad f at each row.

    Examples
    --------
    >>> import numpy as np, problems
    >>> p = problems.quadratic(3, 2, seed=0)
    >>> X = np.array([[0.0, 1.0], [2.0, -1.0]])
    >>> bool(np.allclose(gradient_at(p, X), [p.grad(x) for x in X], rtol=1e-14))
    True
    """
    X = np.asarray(X, dtype=float)
    if not _explicit_quadratic(problem):
        return np.array([problem.grad(x) for x in X])
    w, Q, c = _quadratic_blocks(problem)
    return np.einsum("i,ijk,tk->tj", w, Q, X) - w @ c + problem.l2 * X


def _gamma_stats(runs, gamma_b, st=None):
    """The traced step sizes' range and ``pinned_frac``, the fraction of steps at the cap (relative
    1e-12) or, with ``st``, below it only by rounding: the Polyak numerator F_i(x, B) - ell_i* of the
    step is a rounding residue, |F_i - ell_i*| <= FLOOR_ULPS eps max(|F_i|, |ell_i*|). In exact
    arithmetic every step of the theorems' regime is at the cap; in double precision the numerator
    loses its digits once f_i - f_i* ~ eps |f_i| (||x - x*|| ~ sqrt(eps)), the ratio becomes noise
    and the run leaves FedAvg(gamma_b) by steps of that size only, where the measured gaps are at
    their resolution floor anyway (a converged run was NOT APPLICABLE, "fails every step at
    gamma_b")."""
    G_all, pinned = [], []
    for res in runs:
        for rt in res.trace:
            G = np.asarray(rt["gammas"], dtype=float)
            at_cap = G >= gamma_b * (1 - _REL)
            if st is not None and not at_cap.all():
                X = rt["local"]
                for s_, k in zip(*np.nonzero(~at_cap)):
                    i = int(rt.clients[s_])
                    rows = rt.idx[s_, k] if rt.idx.shape[2] else None
                    f = float(st["problem"].client_value(i, X[s_, k], rows))
                    ell = float(st["ell"][i])
                    at_cap[s_, k] = abs(f - ell) <= FLOOR_ULPS * EPS * max(abs(f), abs(ell))
            G_all.append(G.ravel())
            pinned.append(at_cap.ravel())
    G, P = np.concatenate(G_all), np.concatenate(pinned)
    return dict(gamma_min=float(G.min()), gamma_max=float(G.max()), pinned_frac=float(np.mean(P)))


# ------------------------------------------------------------------ common setup --
def _params(name, rounds, local_steps, seeds):
    check_param("rounds", rounds, [Interval(int, 1, None)], name)
    check_param("local_steps", local_steps, [Interval(int, 1, None)], name)
    check_param("seeds", seeds, [Interval(int, 1, None)], name)


def _constants(problem, c, gamma_b, lower_bound, x0):
    L, mu = sample_constants(problem)
    xs, fs = _gt(problem)
    n = problem.n_clients
    ell = np.broadcast_to(np.asarray(lower_bound, dtype=float), (n,)).copy()
    x0 = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    alpha = min(1 / (2 * c * L), gamma_b)
    return dict(L=L, mu=mu, x_star=xs, f_star=fs, ell=ell, x0=x0, alpha=alpha,
                D0=float(np.sum((x0 - xs) ** 2)), sigma_f_sq=float(fs - ell.mean()))


def _scale_x(st):
    """The size of the points of a run: max(||x*||, ||x^0||, max_i ||grad f_i(0)||/L) (:func:`setup_scale`)."""
    return setup_scale(st, st["L"], st["x_star"])


def _gap_floor(st, m):
    """Resolution floor of f - f* (or f_i - ell_i*) averages: eps times |f(x^0)|, |f*|, |ell_i*|."""
    p = st["problem"]
    return gap_floor(p.value(st["x0"]), st["f_star"], *np.abs(st["ell"]))


def _rounding_sigma(st, m):
    """sigma_f^2 = f* - mean(ell_i*) of bounds (6), (7) and (10) is a difference of values: it is
    resolved to eps max(|f*|, |ell_i*|) only (under interpolation it is 0 to that rounding)."""
    return {("setup", "sigma_f_sq"): gap_floor(st["f_star"], *np.abs(st["ell"]))}


def _distance_floor(st, m):
    """Resolution floor of ||x - x*||^2: rounding of a step amplified by L/mu at the fixed point."""
    mu = st.get("mu", 0.0)
    return distance_floor(_scale_x(st), st["L"] / mu if mu > 0 else 1.0)


def _grad_floor(st, m):
    """Resolution floor of ||grad f||^2: (eps L max(||x||))^2, times the FLOOR_ULPS allowance."""
    return distance_floor(_scale_x(st) * st["L"])


_A1 = (("smooth", "A1 (L-smoothness of every sample function)"),)


def _run_kwargs(st):
    """FedSPS (Alg. 1) with full participation, as the theorems state it. The measurement reads the
    trace, so the history is evaluated at the first and last rounds only."""
    return dict(rounds=st["R_run"], local_steps=st["tau"], c=st["c"], gamma_b=st["gamma_b"],
                lower_bound=st["ell"], batch_size=st["batch_size"], x0=st["x0"], trace=("local", "gammas"),
                eval_every=st["R_run"])


# ------------------------------------------------------------ rounds of a traced run --
def _stochastic(st):
    """Whether the runs are random (additive gradient noise, or minibatches of a datafit with samples)."""
    p = st["problem"]
    return bool(p.noise > 0 or (st.get("batch_size") is not None and p.datafit.has_samples))


def rounds_of(st, runs, grads=False, drawn_noise=True):
    r"""Every traced round of every run, as arrays over (seed, traced round, local step k):
    the virtual averages :math:`\bar x_k` (k = 0..tau: k = tau is the next server model), the drift
    :math:`V_k = \frac1n\sum_i\|x_k^i - \bar x_k\|^2` (k < tau), :math:`\frac1n\sum_i\|\nabla F_i(\bar x_k,
    \xi_k^i)\|^2` with the sample client i drew at step k (its minibatch rows and its additive noise,
    from the trace), :math:`f(\bar x_k) - f^*`, :math:`\|\nabla f(\bar x_k)\|^2`, and their rounding.

    Parameters
    ----------
    st : dict
        The check's setup.
    runs : dict
        The check's runs by label.
    grads : bool, default False
        Whether to compute ``GF2`` and ``dGF2`` (n gradients per step: a loop over them unless the
        clients are explicit quadratics without minibatches).
    drawn_noise : bool, default True
        Whether ``GF2`` includes the additive gradient noise each client drew (from the trace), or is
        :math:`\frac1n\sum_i\|\nabla F_i(\bar x_k, B_k^i)\|^2` without it (for the expectation over the
        noise, which is independent of :math:`\bar x_k`).

    Returns
    -------
    dict
        ``xbar`` (S, R, tau + 1, d), ``V``, ``GF2`` (S, R, tau), ``gap``, ``grad2`` (S, R, tau + 1),
        ``dV``, ``dGF2``, ``dgap``, ``dx`` (rounding levels), ``rounds`` (the traced round indices).
    """
    p, tau = st["problem"], st["tau"]
    n, d = p.n_clients, p.dim
    Ys, orders, rounds = [], [], None
    for s, res in enumerate(runs["main"]):
        _completed(res, s)
        orders.append([np.argsort(rt.clients) for rt in res.trace])                   # client i at row i
        Ys.append(np.array([rt["local"][o] for rt, o in zip(res.trace, orders[-1])]))  # (R, n, tau + 1, d)
        rounds = [int(rt.round) for rt in res.trace]
    Y = np.array(Ys)                                                 # (S, R, n, tau + 1, d)
    xbar = Y.mean(axis=2)                                            # the uniform weights are a stated condition
    V = np.mean(np.sum((Y[:, :, :, :tau] - xbar[:, :, None, :tau]) ** 2, axis=-1), axis=2)
    X = xbar[:, :, :tau]                                             # (S, R, tau, d)
    flat = xbar.reshape(-1, d)
    fx = objective_at(p, flat).reshape(xbar.shape[:3])
    gap = fx - st["f_star"]
    grad2 = np.sum(gradient_at(p, flat) ** 2, axis=1).reshape(xbar.shape[:3])
    scale = max(float(np.max(np.abs(Y))), float(np.max(np.abs(st["x_star"]))), float(np.finfo(float).tiny))
    dx = FLOOR_ULPS * EPS * scale * np.sqrt(d)                      # the rounding of a point's coordinates
    L = st["L"]
    dgap = FLOOR_ULPS * EPS * np.maximum(np.abs(fx), abs(st["f_star"])) + np.sqrt(grad2) * dx + L * dx ** 2
    out = dict(xbar=xbar, V=V, gap=gap, grad2=grad2, dV=dx ** 2 + 2 * dx * np.sqrt(V), dgap=dgap, dx=dx,
               rounds=rounds, d_grad2=2 * np.sqrt(grad2) * L * dx + (L * dx) ** 2)
    if not grads:
        return out
    traces = [list(zip(res.trace, o)) for res, o in zip(runs["main"], orders)]
    rows = [[rt.idx[o] if rt.idx.shape[2] else None for rt, o in tr] for tr in traces]
    if _explicit_quadratic(p) and all(r is None for rs in rows for r in rs):
        _, Q, cq = _quadratic_blocks(p)
        G = np.einsum("ijk,srtk->srtij", Q, X) - cq + p.l2 * X[:, :, :, None, :]        # (S, R, tau, n, d)
    else:
        G = np.empty(X.shape[:3] + (n, d))
        for s in range(X.shape[0]):
            for r in range(X.shape[1]):
                for k in range(tau):
                    for i in range(n):
                        G[s, r, k, i] = p.client_grad(i, X[s, r, k], None if rows[s][r] is None else rows[s][r][i, k])
    if p.noise > 0 and drawn_noise:                                   # the noise drawn at step k: grad F_i(x, xi)
        G = G + np.moveaxis(np.array([[rt.noise[o] for rt, o in tr] for tr in traces]), 2, 3)
    nG = np.sqrt(np.sum(G ** 2, axis=-1))
    dG = FLOOR_ULPS * EPS * (nG + L * scale * np.sqrt(d)) + L * dx
    return dict(out, GF2=np.mean(nG ** 2, axis=-1), dGF2=np.mean(2 * nG * dG + dG ** 2, axis=-1))


def _window(a):
    r""":math:`\sum_{j=s(t)}^{t-1} a_j` at every local step t = s(t) + k of a round (k terms; 0 at k = 0):
    the window of Lemmas 16, 17 and (27), over the last axis of ``a`` (its first tau entries)."""
    tau = a.shape[-1]
    c = np.cumsum(a, axis=-1)
    return np.concatenate([np.zeros(a.shape[:-1] + (1,)), c[..., :tau - 1]], axis=-1)


def _where(q, seed=None, pathwise=True):
    """Where each instance (seed, traced round, step) of ``q`` is: ``seed`` only for a pathwise lemma of
    several runs (an expectation is the mean over the seeds at each step)."""
    S, R, tau = q["V"].shape
    if pathwise:
        return [dict(round=q["rounds"][r], step=k, **({"seed": s} if S > 1 else {}))
                for s in range(S) for r in range(R) for k in range(tau)]
    return [dict(round=q["rounds"][r], step=k) for r in range(R) for k in range(tau)]


def expectation(st, q, lhs, rhs, floor, label=""):
    r"""The worst instance of an inequality between expectations, :math:`\mathbb E\,a_t \le \mathbb E\,b_t`
    at every local step t: both sides are the means over the seeds (arrays (S, R, tau)) at each step,
    compared by :func:`~fedtheory.theory.floors.worst_instance` with the mean of the floors and, for
    random runs, the standard error of the mean of :math:`a_t - b_t` over the seeds at each step: an
    excess within :data:`~fedtheory.theory.NOISE_SE` standard errors is no violation of an
    expectation (UNRESOLVED), decided at every step. One run of a random algorithm above its bound
    is UNRESOLVED (an expectation needs several seeds). Deterministic runs (no noise, no minibatches)
    are their expectation: every seed is the same run, the comparison is exact.

    Parameters
    ----------
    st : dict
        The check's setup.
    q : dict
        The rounds of the runs (:func:`rounds_of`).
    lhs, rhs : ndarray of shape (S, R, tau)
        The two sides per seed, round and step.
    floor : ndarray
        Their floors.
    label : str, default ""
        What the comparison is (for the notes).

    Returns
    -------
    dict
        The worst instance (:func:`~fedtheory.theory.floors.worst_instance`) and what was checked.
    """
    S = lhs.shape[0]
    a, b, f = lhs.mean(axis=0).ravel(), rhs.mean(axis=0).ravel(), floor.mean(axis=0).ravel()
    where = _where(q, pathwise=False)
    se = None
    if _stochastic(st) and S > 1:
        se = np.std((lhs - rhs).reshape(S, -1), axis=0, ddof=1) / np.sqrt(S)
    out = worst_instance(a, b, where, f, se=se)
    if _stochastic(st) and S == 1 and out["where"] is not None:
        k = where.index(out["where"])
        if a[k] - b[k] > f[k]:
            out["unresolved"] = (f"{label}: one run of a random algorithm exceeds the bound at {out['where']}; an "
                                 "expectation needs several seeds")
    elif label and out.get("unresolved"):
        out["unresolved"] = f"{label}: {out['unresolved']}"
    out["seeds"] = S
    return out


def _traced_note(st, q):
    """Which rounds the lemma was checked on (every traced round of the run)."""
    if st.get("trace_rounds") is None:
        return "every round"
    return f"the {len(q['rounds'])} traced rounds of {st['R_run']} (trace_rounds), only"
