r"""FedSPS (Mukherjee, Loizou, Stich 2023): Theorems 3(a), 3(b), 6(a), 6(b) and 18 as code,
with the errata of docs/papers/fedsps.md, §4 and §8.

Constants (docs/papers/fedsps.md, §4.6): L is the per-sample smoothness (A1; the maximum over all sample
functions), mu the per-sample strong convexity (A2; the ridge weight for least squares and
logistic regression, lambda_min(Q_i) for quadratic clients), :math:`\alpha = \min\{1/(2cL),\gamma_b\}`,
:math:`D_0 = \|x_0 - x^*\|^2`, :math:`\sigma_f^2 = f^* - \frac1n\sum_i\ell_i^*` and T = R tau.

Every check is a :class:`~fedtheory.theory.engine.TheoremSpec` measured on the registered
``fedsps`` through ``fedtheory.run`` with full participation and the trace of the local
iterates (``trace=("local", "gammas")``; Theorem 6(b) itself only needs the final models, the lemmas of
its proof read the trace, of some rounds only when it would be large: :func:`traced_rounds_6b`). At the global
step t = r tau + k (k < tau) of round r:

* the local iterates :math:`x_t^i` are ``res.trace[r]["local"][i, k]``;
* the virtual average is :math:`\bar x_t = \frac1n\sum_i x_t^i` (:func:`virtual_averages`);
* the minibatch of :math:`F_i(x_t^i, B_t^i)` is ``res.trace[r].idx[i, k]`` (exact client
  values when the run has no minibatches), the same rows the step size used;
* the step sizes :math:`\gamma_t^i` are ``res.trace[r]["gammas"][i, k]``.

The theorems are stated for n clients of weight 1/n and for sample functions the algorithm
evaluates: a problem with non-uniform client weights, or with additive gradient noise (the
sampled loss :math:`F_i(x,\xi) = f_i(x) + \xi^\top x` is unbounded below, so no
:math:`\ell_i^* \le F_i^*` exists and interpolation fails; the algorithm's Polyak ratio uses the
noise-free value with the noisy gradient), is not applicable, with the failing condition named.
So is a problem whose components do not declare A1 (every sample function L-smooth; a lasso
problem's l1 penalty is not smooth), asked of the components through
:func:`fedtheory.components.capabilities`.

Examples
--------
>>> import numpy as np, fedtheory as ft, problems, validation
>>> p = problems.quadratic(4, 3, L=1.0, mu=0.2, shared_minimizer=True, hessian="distinct", seed=0)
>>> lb = [p.client_value(i, p.info["x_star"]) for i in range(4)]
>>> v = validation.verify("fedsps.theorem_3a", p, rounds=20, local_steps=2, lower_bound=lb, seeds=1,
...                       x0=[1.0, 1.0, 1.0])
>>> v.applicable, v.holds, v.algorithm
(True, True, 'fedsps')
>>> bool(np.array_equal(ft.run(p, v.algorithm, **v.run_kwargs).x, v.runs[0].x))
True
>>> noisy = problems.quadratic(4, 3, L=1.0, mu=0.2, shared_minimizer=True, noise=0.1, seed=0)
>>> validation.verify("fedsps.theorem_3a", noisy, rounds=5, lower_bound=lb).applicable
False
"""
from __future__ import annotations

import math

import numpy as np

from . import THEOREMS, Case, Condition, register_cases
from .engine import (EPS, FLOOR_ULPS, Erratum, NotApplicable, TheoremSpec, Variant, distance_floor, gap_floor,
                     register_spec, setup_scale)
from .tightness.pepit_adapter import tightness_case

_REL = 1e-12


# ------------------------------------------------------------------------- constants --
def sample_constants(problem):
    """(L, mu): per-sample smoothness and strong convexity (A1, A2; docs/papers/fedsps.md, §4.6), from
    the datafit's capabilities: L = curvature_bound max ||a||^2 + l2 for samples (a client is one sample
    without them); mu = l2 for samples (a rank-one sample Hessian), else the smallest client mu_i.

    Raises DataError (a ValueError) naming the missing capability when the datafit declares neither a
    constant Hessian nor a curvature bound."""
    fit, data = problem.datafit, problem.data
    L = fit.sample_smoothness(data)
    if fit.has_samples:
        return float(L), float(problem.l2)
    return float(L), float(min(fit.client_strong_convexity(data, i) for i in range(problem.n_clients)))


def _full_batch_L(problem):
    """Deterministic clients: the full-batch constant max_i lambda_max(Hessian of f_i) (docs/papers/fedsps.md, §4.6)."""
    from ..constants import client_smoothness
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
    from ..truth import ground_truth
    gt = ground_truth(problem)
    return gt.x, gt.f


def client_minima(problem):
    """f_i* = min f_i of every client (explicit quadratic clients, a constant Hessian without samples,
    in closed form; else the ground truth)."""
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
    from ..truth import ground_truth
    return np.asarray(ground_truth(problem).client_f)


# ------------------------------------------------------------------------ conditions --
def uniform_weights_condition(problem):
    """Stated: every FedSPS theorem has n clients of weight 1/n (docs/papers/fedsps.md, §1.1).

    ``value`` is max_i |n w_i - 1| (0 for uniform weights).

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
    from .._argcheck import Interval, check_param
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


def _run_kwargs(st, trace=("local", "gammas")):
    """FedSPS (Alg. 1) with full participation, as the theorems state it. The measurement reads the
    trace, so the history is evaluated at the first and last rounds only."""
    return dict(rounds=st["R_run"], local_steps=st["tau"], c=st["c"], gamma_b=st["gamma_b"],
                lower_bound=st["ell"], batch_size=st["batch_size"], x0=st["x0"], trace=trace,
                eval_every=st["R_run"])


# ------------------------------------------------------------- performance estimation --
#: The theorems' default c (Theorem 3(a): c = 2 tau^2, 3(b): 4 tau^2, 6(a): 1/2), as a function of tau.
DEFAULT_C = {"3a": lambda tau: 2 * tau ** 2, "3b": lambda tau: 4 * tau ** 2, "6a": lambda tau: 0.5}
#: Theorems 3(a) and 3(b)'s condition on c: its text, and the least c it allows (their default c).
C_CONDITION = {"3a": "c >= 2 tau^2", "3b": "c >= 4 tau^2"}


def step_cap(c, L, tau, div=20):
    """The small-step theorems' cap on gamma_b: min{1/(2cL), 1/(div L tau)} (Theorem 6: div = 20)."""
    return min(1 / (2 * c * L), 1 / (div * L * tau))


@tightness_case("fedsps.theorem_3a")
def _tightness_case_3a(quick, local_steps=2):
    """``fedtheory verify --tightness``: FedSPS at the default cap gamma_b = 1."""
    return dict(L=1.0, mu=0.0, local_steps=local_steps, rounds=1 if quick else 2, lr=1.0, n_clients=2)


@tightness_case("fedsps.theorem_3b")
def _tightness_case_3b(quick, local_steps=2):
    """``fedtheory verify --tightness``: FedSPS at the default cap gamma_b = 1."""
    return dict(L=1.0, mu=0.1, local_steps=local_steps, rounds=1 if quick else 2, lr=1.0, n_clients=2)


@tightness_case("fedsps.theorem_6a")
def _tightness_case_6a(quick, local_steps=2):
    """``fedtheory verify --tightness``: FedSPS at Theorem 6(a)'s own cap (:func:`step_cap`)."""
    return dict(L=1.0, mu=0.0, local_steps=local_steps, rounds=2 if quick else 4,
                lr=step_cap(DEFAULT_C["6a"](local_steps), 1.0, local_steps), n_clients=2)


def _pep(kind):
    r"""``spec.pep`` of Theorem 3(a), 3(b) or 6(a): the PEP of ``fedsps`` (Alg. 1, exact gradients,
    full participation, plain mean at the server) over n clients, each L-smooth and mu-strongly
    convex (convex when mu = 0) with a shared minimiser x* and :math:`\ell_i^* = f_i(x^*)`
    (interpolation: :math:`\sigma_f^2 = 0`). Every local step is
    :math:`\gamma = \min\{(f_i(x) - \ell_i^*)/(c\|\nabla f_i(x)\|^2), \gamma_b\}` with
    :math:`\gamma_b` = ``lr``, modelled by :class:`~fedtheory.theory.tightness.PolyakSteps` (one step
    variable per client and local step, solved by branch and bound). Every step lies in
    [min(1/(2cL), gamma_b), min(1/(2c mu), gamma_b)] (smoothness and strong convexity bound the
    Polyak ratio). Initial condition :math:`\|x_0 - x^*\|^2 \le 1`; metric: 3(a) the average of
    :math:`f_i(x_t^i) - \ell_i^*` over clients and local steps t < T, 3(b)
    :math:`\|\bar x_T - x^*\|^2`, 6(a) the average of :math:`f(\bar x_t) - f^*` over t < T, as
    measured by the theorem checks.
    """
    def pep(L, mu, local_steps, rounds, lr, n_clients=2, c=None):
        from .._argcheck import Interval, NoneOk, check_param
        from .tightness.instances import class_quadratics, normalised_x0
        from .tightness.pepit_adapter import PEPForm, average, shared_minimiser_clients
        name = f"fedsps.theorem_{kind}"
        if kind == "3b":
            check_param("mu", mu, [Interval(float, 0, None, "neither")], f"{name} (strong convexity)")
        check_param("c", c, [NoneOk(), Interval(float, 0, None, "neither")], name)
        tau, n, gamma_b = local_steps, n_clients, lr
        c = DEFAULT_C[kind](tau) if c is None else c
        lo = min(1 / (2 * c * L), gamma_b)
        hi = min(1 / (2 * c * mu), gamma_b) if mu > 0 else gamma_b
        T = rounds * tau

        def build(steps, metric):
            pep, fs, xs, fstar = shared_minimiser_clients(n, L, mu)
            x0 = pep.set_initial_point()
            pep.set_initial_condition((x0 - xs) ** 2 <= 1)
            fstar_avg = average(fstar)
            x, acc = x0, []
            for _ in range(rounds):
                ys = [x] * n
                for _k in range(tau):
                    if kind == "6a":
                        xb = average(ys)
                        acc.append(average([f.value(xb) for f in fs]) - fstar_avg)
                    new = []
                    for i, f in enumerate(fs):
                        g, fx = f.oracle(ys[i])
                        if kind == "3a":
                            acc.append((1.0 / n) * (fx - fstar[i]))
                        if steps is None:                      # every step capped (lo = hi = gamma_b)
                            new.append(ys[i] - gamma_b * g)
                        else:
                            new.append(steps.step(pep, ys[i], g, fx, fstar[i], c))
                    ys = new
                x = average(ys)
            if metric == "contraction" or kind == "3b":
                pep.set_performance_metric((x - xs) ** 2)
            else:
                pep.set_performance_metric((1.0 / T) * sum(acc[1:], acc[0]))
            return pep

        def instances(R, cases=None):
            from ..runs.runner import run
            out = []
            cases = [(p, normalised_x0(p, "distance")) for p in class_quadratics(n, L, mu)] if cases is None else cases
            for p, x0 in cases:
                res = run(p, "fedsps", rounds=R, local_steps=tau, c=c, gamma_b=gamma_b, lower_bound=0.0,
                             x0=x0, trace="local", record_iterates=True, eval_every=R)
                if kind == "3b":
                    out.append([float(np.sum(x ** 2)) for x in res.iterates[1:R + 1]])
                elif kind == "6a":
                    v = objective_at(p, virtual_averages(res))
                    out.append([float(np.mean(v[:r * tau])) for r in range(1, R + 1)])
                else:
                    v = [np.mean([p.client_value(i, rt["local"][j, k]) for j, i in enumerate(rt.clients)])
                         for rt in res.trace for k in range(tau)]
                    out.append([float(np.mean(v[:r * tau])) for r in range(1, R + 1)])
            return np.array(out)

        def bound_args(R):
            alpha = min(1 / (2 * c * L), gamma_b)
            st = dict(alpha=alpha, mu=mu, L=L, tau=tau, T=R * tau, D0=1.0, gamma_b=gamma_b, sigma_f_sq=0.0)
            return st, dict(path_bounds=[_bound_3a_path(st, 0.0)], worst_seed=0)

        conds = {"3a": {}, "3b": {"gamma_b <= 1/(2 mu) (hidden, Lemma 8)": 1 / (2 * mu) if mu > 0 else math.inf},
                 "6a": {"gamma_b <= min{1/(2cL), 1/(20 L tau)}": step_cap(c, L, tau)}}[kind]
        cls = "L-smooth mu-strongly convex" if mu > 0 else "L-smooth convex"
        m = n * T if hi > lo else 0
        others = ({f"{C_CONDITION[kind]} = {DEFAULT_C[kind](tau):g} (c = {c:g})": c >= DEFAULT_C[kind](tau)}
                  if kind in C_CONDITION else {})
        return PEPForm(
            other_conditions=others,
            build=build, function_class=f"{cls} clients sharing a minimiser, ell_i* = f_i(x*) (interpolation, "
                                        f"sigma_f^2 = 0; L={L:g}, mu={mu:g}, n={n}, c={c:g})",
            bound_args=bound_args, exact=False,
            note="full participation, exact gradients; the interpolation subclass (sigma_f^2 = 0) of the theorem's "
                 "class; step sizes by branch and bound",
            lr_conditions=conds, n_adaptive=m, step_box=(lo, hi, gamma_b), strict=mu > 0,
            metric={"3a": "(1/(Tn)) sum_t sum_i f_i(x_t^i) - ell_i*", "3b": "||xbar_T - x*||^2",
                    "6a": "(1/T) sum_t f(xbar_t) - f*"}[kind],
            initial="||x_0 - x*||^2 <= 1", instances=instances,
            lr_max=1 / (2 * c * mu) if mu > 0 else None, metric_is_contraction=kind == "3b",
            geometric_bound=kind == "3b")
    return pep


# ------------------------------------------------------------------ conforming spaces --
def _space(kind):
    r"""Conforming space of Theorem ``kind`` ("3a", "3b", "6a", "6b", "18"), for
    :func:`fedtheory.testing.strategies.theorem_cases`: noise-free quadratics with uniform weights
    (A1 with the per-sample constants of :func:`sample_constants`; n in 2..5, d in 2..3, L = 1 or
    in [0.01, 100] (the errata are about scaling), mu/L in [0.05, 0.5], zeta_*^2 in [0, 2], shared
    or distinct Hessians, shared minimiser or not),
    x^0 at distance [0.1, 30] from x*, and each theorem's stated conditions:

    * 3(a), 3(b): c = 2 tau^2 (3(b): 4 tau^2) times [1, 3], gamma_b in [0.01, 10] (3(b)'s corrected
      variant: gamma_b <= 1/(2 mu), its hidden condition), ell_i* = f_i* - delta with delta 0 or in
      [1e-3, 1] (a valid lower bound), tau in 1..4, R in 2..25;
    * 6(a), 6(b): c in [0.1, 2], gamma_b a fraction [0.05, 1] of min{1/(2cL), 1/(20 L tau)},
      ell_i* = f_i* (every step then at the cap, the theorems' regime), tau in 1..4; R in 2..30
      (6(a)), 100..600 (6(b): a plateau to compare);
    * 6(a) also draws one-dimensional clients at every curvature scale (:func:`scaled_clients`:
      n in 2..5, h_i/h_1 in [0.01, 1], b_i in [-5, 5], the scale s in [1, 1e4], so L up to 1e8),
      tau in 1..2e4 (log scale), in the long-run regime of the bound's T-independent terms: started
      at the fixed point of the capped rounds (:func:`capped_fixed_point`), every round is the same,
      so T = R tau for R up to 1e9 is simulated by one round (the registered counterexample P13b is
      such a case up to the scaling x -> a x, which leaves every term of the theorem in the same
      ratio: its b_1 = 5.51, 5 after the scaling; the quadratics above cover the transient from any x^0);
    * 18: shared Hessian (zeta^2 and sigma^2 bounded for all x), gradient noise 0 or in
      [0.01, 1] (log scale; it covers the noise level, 0.5, of the registered case of
      ``fedsps.step_45_from_27``), gamma_b a fraction [0.05, 0.99] of min{1/(2cL), 1/(25 L tau)}, ell_i* = f_i*
      minus [1, 10] (with noise the Polyak ratio must stay above the cap), three seeds.
    """
    def cases(variant):
        from hypothesis import strategies as st
        from ..testing import draws as fts

        @st.composite
        def draw_case(draw):
            L = draw(fts.choice(1.0, fts.log_uniform(0.01, 100.0)))       # the scale of the curvature
            mu = L * draw(fts.log_uniform(0.05, 0.5))
            if kind == "18":
                p = draw(fts.quadratics(n_clients=fts.integers(2, 5), dim=fts.integers(2, 3), L=L, mu=mu,
                                        heterogeneity=fts.uniform(0.0, 2.0),
                                        noise=fts.choice(0.0, fts.log_uniform(0.01, 1.0)), hessian="shared"))
            else:
                p = draw(fts.quadratics(n_clients=fts.integers(2, 5), dim=fts.integers(2, 3), L=L, mu=mu,
                                        heterogeneity=fts.uniform(0.0, 2.0), shared_minimizer=fts.choice(False, True)))
            tau = draw(fts.integers(1, 4))
            fi = client_minima(p)
            x0 = draw(fts.around(p.info["x_star"]))
            if kind in ("3a", "3b"):
                c = DEFAULT_C[kind](tau) * draw(fts.uniform(1.0, 3.0))
                if kind == "3b" and variant == "corrected":
                    gamma_b = draw(fts.uniform(0.01, 1.0)) / (2 * sample_constants(p)[1])
                else:
                    gamma_b = draw(fts.log_uniform(0.01, 10.0))
                delta = draw(fts.choice(0.0, fts.log_uniform(1e-3, 1.0)))
                return p, dict(rounds=draw(fts.integers(2, 25)), local_steps=tau, c=c, gamma_b=gamma_b,
                               lower_bound=fi - delta, x0=x0, seeds=1)
            c = draw(fts.uniform(0.1, 2.0))
            L = _full_batch_L(p)
            if kind == "18":
                cap = step_cap(c, sample_constants(p)[0], tau, 25)
                return p, dict(rounds=draw(fts.integers(2, 30)), local_steps=tau, c=c,
                               gamma_b=draw(fts.uniform(0.05, 0.99)) * cap,
                               lower_bound=fi - draw(fts.uniform(1.0, 10.0)), x0=x0, seeds=3)
            gamma_b = draw(fts.uniform(0.05, 1.0)) * step_cap(c, L, tau, 20)
            R = draw(fts.integers(2, 30)) if kind == "6a" else draw(fts.integers(100, 600))
            return p, dict(rounds=R, local_steps=tau, c=c, gamma_b=gamma_b, x0=x0, seeds=1)

        @st.composite
        def draw_scaled(draw):
            # one-dimensional clients f_i = (h_i/2)(x - b_i)^2 at curvature scale s^2 (h_i = s^2 h0_i,
            # b_i = b0_i / s), tau up to 2e4, in the long-run regime: started at the fixed point of the
            # capped rounds, every round is the first (R = T / tau up to 1e9, simulated by one round)
            n, scale = draw(fts.integers(2, 5)), draw(fts.log_uniform(1.0, 1e4))
            h0 = np.array([1.0] + [draw(fts.log_uniform(0.01, 1.0)) for _ in range(n - 1)])
            b0 = np.array([draw(fts.uniform(-5.0, 5.0)) for _ in range(n)])
            p = scaled_clients(h0, b0, scale)
            tau, c = draw(fts.log_integers(1, 20000)), draw(fts.uniform(0.1, 2.0))
            gamma_b = draw(fts.uniform(0.05, 1.0)) * step_cap(c, _full_batch_L(p), tau, 20)
            return p, dict(rounds=draw(fts.log_integers(10, 10 ** 9)), simulate_rounds=1, local_steps=tau, c=c,
                           gamma_b=gamma_b, x0=capped_fixed_point(p, tau, gamma_b), seeds=1)
        if kind == "6a":
            return fts.choice(draw_case(), draw_scaled())
        return draw_case()
    return cases


def scaled_clients(h0, b0, scale=1.0):
    r"""One-dimensional clients :math:`f_i(x) = \frac{h_i}2 (x - b_i)^2` at curvature scale ``scale``^2:
    :math:`h_i = s^2 h^0_i`, :math:`b_i = b^0_i / s` (the problem of docs/papers/fedsps.md, §8, P13b, for
    any clients: the rescaling keeps :math:`\sigma_f^2` and multiplies L by :math:`s^2`).

    Examples
    --------
    >>> p = scaled_clients([1.0, 0.25], [2.0, -2.0], scale=10.0)
    >>> round(_full_batch_L(p), 9), p.info["recipe"]
    (100.0, 'fedtheory.theory.fedsps.scaled_clients([1.0, 0.25], [2.0, -2.0], scale=10.0)')
    """
    import problems
    h0, b0 = np.asarray(h0, dtype=float), np.asarray(b0, dtype=float)
    h, b = scale ** 2 * h0, b0 / scale
    p = problems.explicit_quadratic(h[:, None, None], (h * b)[:, None], name="scaled_clients")
    p.info = dict(p.info or {}, recipe=f"fedtheory.theory.fedsps.scaled_clients({h0.tolist()!r}, {b0.tolist()!r}, "
                                       f"scale={float(scale)!r})")
    return p


def capped_fixed_point(problem, tau, gamma_b):
    r"""The fixed point of one round of FedAvg with step ``gamma_b`` (FedSPS when every step is capped,
    the regime of Theorem 6) on quadratic clients :math:`f_i = \frac12 x^\top Q_i x - c_i^\top x`:
    the solution of :math:`x = \sum_i w_i [A_i^\tau x + (I - A_i^\tau) Q_i^{-1} c_i]`,
    :math:`A_i = I - \gamma_b Q_i`. A run started there is periodic with period one round.

    Examples
    --------
    >>> p = scaled_clients([1.0, 0.25], [2.0, -2.0])
    >>> x = capped_fixed_point(p, 3, 0.5)
    >>> import fedtheory as ft
    >>> bool(abs(ft.run(p, "fedavg", rounds=1, local_steps=3, lr=0.5, x0=x).x[0] - x[0]) < 1e-12)
    True
    """
    d = problem.dim
    M, v = np.zeros((d, d)), np.zeros(d)
    for i in range(problem.n_clients):
        Q, c, _ = problem.datafit.client_quadratic(problem.data, i)
        A = np.linalg.matrix_power(np.eye(d) - gamma_b * Q, int(tau))
        xi = np.linalg.solve(Q, c)
        M += problem.weights[i] * A
        v += problem.weights[i] * (xi - A @ xi)
    return np.linalg.solve(np.eye(d) - M, v)


# ----------------------------------------------------------------------- Theorem 3 --
def _setup_3a(problem, rounds=50, local_steps=2, c=None, gamma_b=1.0, lower_bound=0.0, batch_size=None, seeds=5,
              x0=None):
    name = "fedsps.theorem_3a"
    _params(name, rounds, local_steps, seeds)
    tau = local_steps
    c = DEFAULT_C["3a"](tau) if c is None else c
    pc = _problem_conditions(problem)
    try:
        s = _constants(problem, c, gamma_b, lower_bound, x0)
    except (AssertionError, ValueError) as e:
        raise NotApplicable(f"constants not available: {str(e) or type(e).__name__}", pc) from None
    conds = pc + [Condition(C_CONDITION["3a"], c, DEFAULT_C["3a"](tau), c >= DEFAULT_C["3a"](tau)),
                  _lower_bound_condition(problem, s["ell"], batch_size),
                  Condition("f_i convex (mu >= 0 per sample)", s["mu"], 0.0, s["mu"] >= 0)]
    _stop_if_inapplicable(pc, conds)
    return dict(s, c=c, gamma_b=gamma_b, tau=tau, T=rounds * tau, R_run=rounds, batch_size=batch_size,
                seeds=seeds, conds=conds)


def measure_3a(st, runs):
    r"""Left-hand sides of Theorem 3(a) per seed, from the trace of the local iterates.

    ``lhs``: :math:`\frac1{Tn}\sum_t\sum_i f_i(x_t^i) - \ell_i^*` (printed, eq. 6);
    ``path_lhs``: the same with the drawn minibatch, :math:`F_i(x_t^i, B_t^i)` (pathwise, eq. 31);
    ``path_sigma``: :math:`\frac1T\sum_t\hat\sigma_t^2`, :math:`\hat\sigma_t^2 = \frac1n\sum_i
    F_i(x^*, B_t^i) - \ell_i^*` on the same rows. The pathwise variant is judged at the seed with
    the largest ratio of its left-hand side to its own bound.
    """
    p, ell, xs, T, tau = st["problem"], st["ell"], st["x_star"], st["T"], st["tau"]
    lhs, path, sig = [], [], []
    for k, res in enumerate(runs["main"]):
        _completed(res, k)
        a = b = s = 0.0
        for rt in res.trace:
            Y, B = rt["local"], rt.idx.shape[2]
            for j, i in enumerate(rt.clients):
                for step in range(tau):
                    fi = p.client_value(i, Y[j, step])
                    a += fi - ell[i]
                    if B:
                        rows = rt.idx[j, step]
                        b += p.client_value(i, Y[j, step], rows) - ell[i]
                        s += p.client_value(i, xs, rows) - ell[i]
                    else:                                   # exact clients: F_i(., B) = f_i
                        b += fi - ell[i]
                        s += p.client_value(i, xs) - ell[i]
        n = p.n_clients
        lhs.append(a / (T * n))
        path.append(b / (T * n))
        sig.append(s / (T * n))
    pb = [_bound_3a_path(st, sg) for sg in sig]
    with np.errstate(divide="ignore", invalid="ignore"):         # a bound of 0 (x^0 = x*, interpolation)
        worst = int(np.nanargmax([lh / bd for lh, bd in zip(path, pb)] + [-np.inf]) % len(path))
    return dict(values_by_variant={"printed": lhs, "corrected": [path[worst]]}, values=lhs, lhs=lhs,
                path_lhs=path, path_sigma=sig, path_bounds=pb, worst_seed=worst,
                **_gamma_stats(runs["main"], st["gamma_b"], st))


def _bound_3a_path(st, sigma_hat):
    a = st["alpha"]
    return 2 * st["D0"] / (st["T"] * a) + 4 * st["gamma_b"] / a * sigma_hat


SPEC_3A = register_spec(TheoremSpec(
    name="fedsps.theorem_3a", algorithm="fedsps",
    statement=r"(1/(Tn)) sum_t sum_i E[f_i(x_t^i) - ell_i*] <= 2 D0/(T alpha) + 4 gamma_b sigma_f^2/alpha "
              r"(convex, c >= 2 tau^2)",
    setup=_setup_3a, run_kwargs=_run_kwargs, measure=measure_3a,
    conditions=lambda st, m: st["conds"] + [_lemma14_condition(st, m)],
    variants={"printed": Variant("eq. (6) as printed: the seed mean of the average client loss at the local "
                                 "iterates against 2 D0/(T alpha) + 4 gamma_b sigma_f^2/alpha",
                                 lambda st, m: 2 * st["D0"] / (st["T"] * st["alpha"])
                                 + 4 * st["gamma_b"] * st["sigma_f_sq"] / st["alpha"]),
              "corrected": Variant("pathwise form (eq. 31, docs/papers/fedsps.md, §4.3) on every seed: the minibatch losses "
                                   "F_i(x_t^i, B_t^i) against 2 D0/(T alpha) + (4 gamma_b/alpha) mean_t "
                                   "sigma_hat_t^2 on the same batches; measured and bound at the worst seed",
                                   lambda st, m: m["path_bounds"][m["worst_seed"]],
                                   values=lambda st, m: m["values_by_variant"]["corrected"])},
    default_variant="printed",
    details=lambda st, m: {"pathwise": {k: m[k] for k in ("path_lhs", "path_bounds", "path_sigma", "worst_seed")}},
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Theorem 3(a), eq. (6) and (31); docs/papers/fedsps.md, §4.3",
    pep=_pep("3a"), assumptions=_A1, cases=_space("3a"), floor=_gap_floor, rounding=_rounding_sigma,
    quantity="(1/(Tn)) sum_t sum_i f_i(x_t^i) - ell_i*"))


def _setup_3b(problem, rounds=50, local_steps=2, c=None, gamma_b=1.0, lower_bound=0.0, batch_size=None, seeds=5,
              x0=None):
    name = "fedsps.theorem_3b"
    _params(name, rounds, local_steps, seeds)
    tau = local_steps
    c = DEFAULT_C["3b"](tau) if c is None else c
    pc = _problem_conditions(problem)
    try:
        s = _constants(problem, c, gamma_b, lower_bound, x0)
    except (AssertionError, ValueError) as e:
        raise NotApplicable(f"constants not available: {str(e) or type(e).__name__}", pc) from None
    mu = s["mu"]
    if mu <= 0:
        raise NotApplicable("Theorem 3(b) needs every sample function mu-strongly convex (mu = 0 here)",
                            pc + [Condition("mu > 0 (per sample)", mu, 0.0, False)])
    conds = pc + [Condition(C_CONDITION["3b"], c, DEFAULT_C["3b"](tau), c >= DEFAULT_C["3b"](tau)),
                  _lower_bound_condition(problem, s["ell"], batch_size),
                  Condition("mu > 0 (per sample)", mu, 0.0, mu > 0),
                  Condition("gamma_b <= 1/(2 mu) (hidden: Lemma 8's false bound)", gamma_b, 1 / (2 * mu),
                            gamma_b <= 1 / (2 * mu), role="hidden")]
    _stop_if_inapplicable(pc, conds)
    return dict(s, c=c, gamma_b=gamma_b, tau=tau, T=rounds * tau, R_run=rounds, batch_size=batch_size,
                seeds=seeds, conds=conds)


def measure_3b(st, runs):
    r""":math:`\|\bar x_T - x^*\|^2` per seed: :math:`\bar x_T` is the virtual average of the local
    iterates after the last step (the server model of Alg. 1), from the trace (weighted: equal to
    the paper's mean under the uniform weights the check requires)."""
    vals = []
    for k, res in enumerate(runs["main"]):
        _completed(res, k)
        xT = res.trace[-1].virtual_average("local")[-1]
        vals.append(float(np.sum((xT - st["x_star"]) ** 2)))
    return dict(values=vals, **_gamma_stats(runs["main"], st["gamma_b"], st))


def _bound_3b(st, m):
    a, mu = st["alpha"], st["mu"]
    return (1 - mu * a) ** st["T"] * st["D0"] / (mu * a) + 2 * st["gamma_b"] * st["sigma_f_sq"] / (a * mu)


SPEC_3B = register_spec(TheoremSpec(
    name="fedsps.theorem_3b", algorithm="fedsps",
    statement=r"E||xbar_T - x*||^2 <= (1/(mu alpha)) (1 - mu alpha)^T D0 + 2 gamma_b sigma_f^2/(alpha mu) "
              r"(strongly convex per sample, c >= 4 tau^2)",
    setup=_setup_3b, run_kwargs=_run_kwargs, measure=measure_3b,
    conditions=lambda st, m: st["conds"] + [_lemma14_condition(st, m)],
    variants={"printed": Variant("Theorem 3(b) as printed", _bound_3b, ("stated",)),
              "corrected": Variant("the same bound with the hidden condition gamma_b <= 1/(2 mu) the proof needs "
                                   "(Lemma 8's false upper bound, docs/papers/fedsps.md, erratum 1)", _bound_3b, ("stated", "hidden"))},
    default_variant="corrected",
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Theorem 3(b) and Corollary 5; docs/papers/fedsps.md, §4.3, §8",
    errata=(Erratum("corrected", "erratum 1", "Theorem 3(b) (Lemma 8)",
                    r"\mathbb E\lVert\bar x_T - x^*\rVert^2 \le \frac{(1-\mu\alpha)^T D_0}{\mu\alpha} + "
                    r"\frac{2\gamma_b\sigma_f^2}{\alpha\mu}\quad(c \ge 4\tau^2,\ \mu > 0)",
                    r"\text{the same bound, under } c \ge 4\tau^2,\ \mu > 0 \text{ and } \gamma_b \le \frac{1}{2\mu}",
                    "Lemma 8's upper bound 1/(2 c mu) on the Polyak step is false when ell* < f*; the proof needs "
                    "gamma_b <= 1/(2 mu), which the theorem does not state", level="fedsps.lemma_8"),),
    pep=_pep("3b"), assumptions=_A1, cases=_space("3b"), floor=_distance_floor, rounding=_rounding_sigma,
    quantity="||xbar_T - x*||^2"))


# ----------------------------------------------------------------------- Theorem 6 --
def bound_6a(T, gamma_b, L, tau, D0, sigma_f_sq, corrected=True):
    """Eq. (37): 3 D0/(T gb) + 12 gb L s_f^2 + 384 tau^2 gb^2 L^p s_f^2, p = 2 corrected, 1 printed.

    Examples
    --------
    >>> bound_6a(100, 0.01, 1.0, 2, 1.0, 0.0)          # sigma_f^2 = 0: the transient 3 D0/(T gb)
    3.0
    """
    p = 2 if corrected else 1
    return 3 * D0 / (T * gamma_b) + 12 * gamma_b * L * sigma_f_sq + 384 * tau ** 2 * gamma_b ** 2 * L ** p * sigma_f_sq


def _small_step_setup(problem, name, rounds, local_steps, c, batch_size, seeds, cap_div, pc):
    """tau, L (per sample with minibatches, full batch otherwise, docs/papers/fedsps.md, §4.6) and the cap on gamma_b."""
    _params(name, rounds, local_steps, seeds)
    tau = local_steps
    try:
        L = sample_constants(problem)[0] if batch_size is not None else _full_batch_L(problem)
    except (AssertionError, ValueError) as e:
        raise NotApplicable(f"constants not available: {str(e) or type(e).__name__}", pc) from None
    cap = step_cap(c, L, tau, cap_div)
    return tau, L, cap


def _constants_or_na(problem, c, gamma_b, ell, x0, pc):
    try:
        return _constants(problem, c, gamma_b, ell, x0)
    except (AssertionError, ValueError) as e:
        raise NotApplicable(f"constants not available: {str(e) or type(e).__name__}", pc) from None


def _setup_6a(problem, rounds=100, local_steps=5, c=0.5, gamma_b=None, lower_bound=None, seeds=1, x0=None,
              batch_size=None, simulate_rounds=None):
    pc = _problem_conditions(problem)
    tau, L, cap = _small_step_setup(problem, "fedsps.theorem_6a", rounds, local_steps, c, batch_size, seeds, 20, pc)
    gamma_b = cap if gamma_b is None else gamma_b
    ell = client_minima(problem) if lower_bound is None else lower_bound
    s = _constants_or_na(problem, c, gamma_b, ell, x0, pc)
    conds = pc + [Condition("gamma_b <= min{1/(2cL), 1/(20 L tau)}", gamma_b, cap, gamma_b <= cap * (1 + _REL)),
                  _lower_bound_condition(problem, s["ell"], batch_size)]
    _stop_if_inapplicable(pc, conds)
    R_sim = simulate_rounds or rounds
    if R_sim < rounds and batch_size is not None:
        raise NotApplicable("simulate_rounds < rounds needs deterministic clients (batch_size=None)", conds)
    return dict(s, L=L, c=c, gamma_b=gamma_b, tau=tau, T=rounds * tau, R_run=R_sim, batch_size=batch_size,
                seeds=seeds, conds=conds, extrapolated=R_sim < rounds)


def measure_6a(st, runs):
    r""":math:`\frac1T\sum_{t<T} f(\bar x_t) - f^*` per seed, :math:`\bar x_t` from the trace
    (:func:`virtual_averages`); with ``simulate_rounds`` the run covers those rounds and
    ``periodic`` says whether it ended where it started (relative 1e-12), so that the average over
    ``rounds`` rounds is the simulated one exactly."""
    p = st["problem"]
    fs = p.value(st["x_star"])
    vals, dev = [], 0.0
    scale = max(1.0, float(np.linalg.norm(st["x0"])))
    for k, res in enumerate(runs["main"]):
        _completed(res, k)
        vals.append(float(np.mean(objective_at(p, virtual_averages(res))) - fs))
        dev = max(dev, float(np.linalg.norm(res.x - st["x0"])) / scale)
    return dict(values=vals, periodic_deviation=dev, **_gamma_stats(runs["main"], st["gamma_b"], st))


def _conditions_6a(st, m):
    out = list(st["conds"])
    if st["extrapolated"]:
        # not a hypothesis of the theorem, but without it the measurement is not the theorem's left-hand side
        out.append(Condition("periodic run (simulate_rounds < rounds): ||x^R - x^0|| <= 1e-12 max(1, ||x^0||)",
                             m["periodic_deviation"], 1e-12, m["periodic_deviation"] <= 1e-12))
    return out + [_pinned_condition(m, st["gamma_b"])]


def _bound6a(corrected):
    return lambda st, m: bound_6a(st["T"], st["gamma_b"], st["L"], st["tau"], st["D0"], st["sigma_f_sq"], corrected)


SPEC_6A = register_spec(TheoremSpec(
    name="fedsps.theorem_6a", algorithm="fedsps",
    statement=r"(1/T) sum_{t<T} E[f(xbar_t) - f*] <= 3 D0/(T gb) + 12 gb L sigma_f^2 + 384 tau^2 gb^2 L^p sigma_f^2 "
              r"(convex, gamma_b <= min{1/(2cL), 1/(20 L tau)}; p = 1 printed, 2 corrected)",
    setup=_setup_6a, run_kwargs=_run_kwargs, measure=measure_6a, conditions=_conditions_6a,
    variants={"printed": Variant("eq. (37) as printed (one power of L in the drift term)", _bound6a(False)),
              "corrected": Variant("eq. (37) with L^2 in the drift term (docs/papers/fedsps.md, erratum 2: the proof's "
                                   "2 gamma_b L E R_t step gives 128 gamma_b^3 L^2 tau^2 sigma_f^2)", _bound6a(True))},
    default_variant="corrected",
    details=lambda st, m: {"periodic": (m["periodic_deviation"] <= 1e-12) if st["extrapolated"] else None},
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Theorem 6(a), eq. (37); docs/papers/fedsps.md, §4.4, §8",
    errata=(Erratum("corrected", "erratum 2", "Theorem 6(a), eq. (37)",
                    r"\frac1T\sum_{t<T}\mathbb E[f(\bar x_t) - f^*] \le \frac{3D_0}{T\gamma_b} + "
                    r"12\gamma_bL\sigma_f^2 + 384\tau^2\gamma_b^2L\sigma_f^2",
                    r"\frac1T\sum_{t<T}\mathbb E[f(\bar x_t) - f^*] \le \frac{3D_0}{T\gamma_b} + "
                    r"12\gamma_bL\sigma_f^2 + 384\tau^2\gamma_b^2L^2\sigma_f^2",
                    "the drift term needs L^2, not L: the proof's 2 gamma_b L E R_t step gives "
                    "128 gamma_b^3 L^2 tau^2 sigma_f^2"),),
    pep=_pep("6a"), assumptions=_A1, cases=_space("6a"), floor=_gap_floor, rounding=_rounding_sigma,
    quantity="(1/T) sum_{t<T} f(xbar_t) - f*"))


def _setup_6b(problem, rounds=3000, local_steps=5, c=0.5, gamma_b=None, lower_bound=None, seeds=1, x0=None,
              batch_size=None):
    pc = _problem_conditions(problem)
    tau, L, cap = _small_step_setup(problem, "fedsps.theorem_6b", rounds, local_steps, c, batch_size, seeds, 20, pc)
    gamma_b = cap if gamma_b is None else gamma_b
    ell = client_minima(problem) if lower_bound is None else lower_bound
    s = _constants_or_na(problem, c, gamma_b, ell, x0, pc)
    mu = s["mu"] if batch_size is not None else _full_batch_mu(problem)
    conds = pc + [Condition("gamma_b <= min{1/(2cL), 1/(20 L tau)}", gamma_b, cap, gamma_b <= cap * (1 + _REL)),
                  _lower_bound_condition(problem, s["ell"], batch_size),
                  Condition("mu > 0 (strongly convex sample functions)", mu, 0.0, mu > 0)]
    _stop_if_inapplicable(pc, conds)
    return dict(s, L=L, mu=mu, c=c, gamma_b=gamma_b, tau=tau, T=rounds * tau, R_run=rounds, batch_size=batch_size,
                seeds=seeds, conds=conds)


#: Theorem 6(b)'s plateau ratio is resolved when the plateau at gamma_b exceeds this many resolution floors.
PLATEAU_RESOLUTION = 100.0


def transient_6b(st, gamma):
    r"""The transient term of Theorem 6(b) at step gamma: :math:`D_0/(\mu\gamma)\,(1-\mu\gamma)^T`."""
    mu = st["mu"]
    if mu <= 0:
        return math.inf if st["D0"] > 0 else 0.0
    return st["D0"] / (mu * gamma) * (1 - mu * gamma) ** st["T"]


def measure_6b(st, runs):
    r"""Plateau ratio :math:`\mathbb E\|\bar x_T - x^*\|^2` at gamma_b/2 over that at gamma_b (seed
    means; :math:`\bar x_T` is the server model after the last round). The fraction of steps at the
    cap is the runs' own ``step_capped_frac_total`` (every step of the run; no trace needed).

    The ratio is resolved only when the plateau at gamma_b is above :data:`PLATEAU_RESOLUTION`
    resolution floors of a squared distance (rounding of a step amplified by L/mu): with one
    local step, or clients sharing a Hessian, FedAvg has no drift and both plateaus are rounding
    noise; the measurement then says ``"unresolved"``. Where both plateaus are within that many
    floors of zero (x^0 = x* without noise; one local step or a shared Hessian near the optimum),
    both are zero to rounding: plateau(gamma_b/2) is below any positive term of the theorem at
    gamma_b/2, the ratio is 0 and the shape holds (``note`` says so)."""
    pl, pinned = [], []
    for label in ("main", "half"):
        d = [float(np.sum((_completed(res, k).x - st["x_star"]) ** 2)) for k, res in enumerate(runs[label])]
        pl.append(float(np.mean(d)))
        pinned += [float(res.history["step_capped_frac_total"].iloc[-1]) for res in runs[label]]
    fl = _distance_floor(st, None)
    unresolved, note = "", ""
    if max(pl) <= PLATEAU_RESOLUTION * fl:     # both plateaus zero to rounding: below any positive term
        ratio = 0.0                            # of the theorem at gamma_b/2, and a zero under a zero one
        if max(pl) > 0.0:
            terms = rate_terms_6b(st, st["gamma_b"] / 2) + transient_6b(st, st["gamma_b"] / 2)
            note = (f"both plateaus ({pl[0]:.3g} at gamma_b, {pl[1]:.3g} at gamma_b/2) are within "
                    f"{PLATEAU_RESOLUTION:g} resolution floors ({fl:.3g}) of zero: zero to rounding, so "
                    + (f"plateau(gamma_b/2) is below the theorem's terms there ({terms:.3g} with constant 1)"
                       if pl[1] <= terms else
                       f"under the theorem's terms there ({terms:.3g} with constant 1; zero to rounding as well)"))
    elif pl[0] <= PLATEAU_RESOLUTION * fl:
        ratio = float(pl[1] / pl[0]) if pl[0] > 0 else float("inf")
        unresolved = (f"the plateau at gamma_b, {pl[0]:.3g}, is within {PLATEAU_RESOLUTION:g} resolution floors "
                      f"({fl:.3g}) of rounding: the ratio of the plateaus is noise")
    else:
        ratio = float(pl[1] / pl[0])
    if not unresolved and pl[0] > 0:
        half = st["gamma_b"] / 2
        shape, terms = 0.55 + transient_6b(st, half) / pl[0], rate_terms_6b(st, half)
        if ratio > shape and pl[1] <= terms:
            unresolved = (f"plateau(gamma_b/2) = {pl[1]:.3g} is below the theorem's own terms at gamma_b/2 with "
                          f"constant 1 ({terms:.3g}), so the O-statement holds there; the ratio exceeds the shape "
                          f"{shape:.3g} only because plateau(gamma_b) = {pl[0]:.3g} is far below its terms (FedAvg's "
                          f"first- and second-order bias in gamma can cancel), which an upper bound allows")
    return dict(values=[ratio], plateaus=pl, pinned_frac=float(np.mean(pinned)), unresolved=unresolved,
                plateau_floor=fl, note=note)


def rate_terms_6b(st, gamma):
    r"""The step-size terms of Theorem 6(b) at step gamma with constant 1,
    :math:`\gamma L\sigma_f^2/\mu + \gamma^2 L^2\tau^2\sigma_f^2/\mu`: a plateau below them is within the
    O-statement whatever the ratio of two plateaus says."""
    mu, L, tau, sf = st["mu"], st["L"], st["tau"], max(st["sigma_f_sq"], 0.0)
    if mu <= 0:
        return math.inf
    return gamma * L * sf / mu + gamma ** 2 * L ** 2 * tau ** 2 * sf / mu


def _bound_6b(st, m):
    """0.55 (1/2 plus 10%: the plateau shrinks at least linearly in gamma_b) plus the theorem's
    transient at gamma_b/2 relative to the plateau at gamma_b."""
    pl = m["plateaus"][0]
    extra = transient_6b(st, st["gamma_b"] / 2) / pl if pl > 0 else 0.0
    return 0.55 + extra


#: The most memory the trace of one run of Theorem 6(b) may take (MB): beyond it, only the first and the last
#: rounds are traced (:func:`traced_rounds_6b`).
TRACE_BUDGET_MB_6B = 32.0


def traced_rounds_6b(st):
    """The rounds Theorem 6(b)'s run traces (``trace_rounds``): every round (None) when the trace of
    the local iterates and step sizes fits in :data:`TRACE_BUDGET_MB_6B`, else as many as fit, half
    of them the first rounds (the transient) and half the last (the plateau): the lemmas of its proof
    are checked on those rounds only (docs/papers/fedsps.md, §4.7).

    Examples
    --------
    >>> import problems
    >>> p = problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3, hessian="distinct")
    >>> traced_rounds_6b(dict(problem=p, tau=4, R_run=3000)) is None           # about 1 MB: every round
    True
    >>> r = traced_rounds_6b(dict(problem=p, tau=4, R_run=10 ** 6))
    >>> r[:2], r[-1], len(r) < 10 ** 6
    ((0, 1), 999999, True)
    """
    p, tau, R = st["problem"], st["tau"], st["R_run"]
    n, d = p.n_clients, p.dim
    per_round = 8 * (d + 3 * n + tau + n * (tau + 1) * d + n * max(d, tau) + (n * tau * d if p.noise > 0 else 0))
    fit = int(TRACE_BUDGET_MB_6B * 2 ** 20 // per_round)
    if R <= fit:
        return None
    fit = max(fit, 2)
    return tuple(range(fit // 2)) + tuple(range(R - (fit - fit // 2), R))


def _run_kwargs_6b(st):
    """The run of Theorem 6(b): full participation, the trace of the local iterates and step sizes (the
    lemmas of its proof read it) on the rounds of :func:`traced_rounds_6b`."""
    kw = _run_kwargs(st)
    rounds = traced_rounds_6b(st)
    if rounds is not None:
        kw["trace_rounds"] = rounds
    return kw


SPEC_6B = register_spec(TheoremSpec(
    name="fedsps.theorem_6b", algorithm="fedsps",
    statement=r"E||xbar_T - x*||^2 = O(D0/(mu gb) (1 - mu gb)^T + gb L sigma_f^2/mu + gb^2 L^2 tau^2 sigma_f^2/mu): "
              r"the plateau shrinks at least linearly in gamma_b, plateau(gb/2)/plateau(gb) <= 0.55 + "
              r"D0/(mu gb/2) (1 - mu gb/2)^T / plateau(gb)",
    setup=_setup_6b, run_kwargs=_run_kwargs_6b, measure=measure_6b,
    conditions=lambda st, m: st["conds"] + [_pinned_condition(m, st["gamma_b"])],
    assumptions=_A1, cases=_space("6b"), quantity="plateau(gamma_b/2) / plateau(gamma_b), plateau = ||xbar_T - x*||^2",
    floor=lambda st, m: 0.0,
    extra_runs=lambda st: {"half": ("fedsps", dict(_run_kwargs(st, trace=None), gamma_b=st["gamma_b"] / 2))},
    variants={"printed": Variant("shape only (an O-statement): 1/2 plus 10%, plus the theorem's transient "
                                 "D0/(mu gb/2) (1 - mu gb/2)^T over plateau(gb)", _bound_6b),
              "corrected": Variant("the same shape (the L^2 correction changes no shape)", _bound_6b)},
    default_variant="corrected",
    details=lambda st, m: {"plateaus": m["plateaus"], "plateau_floor": m["plateau_floor"], "note": m.get("note", ""),
                           "transient_half": transient_6b(st, st["gamma_b"] / 2)},
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Theorem 6(b); docs/papers/fedsps.md, §4.4",
    pep=("An O-statement: the check is the shape of the plateau in gamma_b (plateau(gb/2)/plateau(gb) <= "
         "0.55), not a numeric right-hand side, and its plateau exists only without interpolation (sigma_f^2 >"
         " 0), where the Polyak ratio's lower bound ell_i* < f_i(x*) makes the step depend on an unknown f_i* "
         "- ell_i*; no worst case to set beside a bound. Not registered.")))


# ---------------------------------------------------------------------- Theorem 18 --
def bound_18(T, gamma_b, L, tau, n, Delta0, sigma2, zeta2, corrected=True):
    """8 Delta0/(gb T) + 4 gb L s^2/n + 512 gb^2 L^2 X, X = tau (s^2 + tau z^2) printed, tau^2 (s^2 + z^2) corrected.

    Examples
    --------
    >>> bound_18(10, 0.1, 1.0, 2, 4, 1.0, 0.0, 0.0)     # no noise, no heterogeneity: 8 Delta0/(gb T)
    8.0
    """
    X = tau ** 2 * (sigma2 + zeta2) if corrected else tau * (sigma2 + tau * zeta2)
    return 8 * Delta0 / (gamma_b * T) + 4 * gamma_b * L * sigma2 / n + 512 * gamma_b ** 2 * L ** 2 * X


def _setup_18(problem, rounds=100, local_steps=5, c=0.5, gamma_b=None, lower_bound=None, seeds=5, x0=None):
    pc = _problem_conditions(problem, noise=False)         # A3: the noise is the theorem's sigma^2
    if not _explicit_quadratic(problem):
        raise NotApplicable("sigma^2 and zeta^2 are computable only for explicit quadratics (a constant Hessian "
                            "without samples) with a shared Hessian", pc)
    n, d = problem.n_clients, problem.dim
    Q = [problem.datafit.client_quadratic(problem.data, i)[0] for i in range(n)]
    if not all(np.array_equal(Q[0], q) for q in Q[1:]):
        raise NotApplicable("zeta^2 is unbounded on R^d with distinct client Hessians", pc)
    tau, L, cap = _small_step_setup(problem, "fedsps.theorem_18", rounds, local_steps, c, None, seeds, 25, pc)
    gamma_b = 0.99 * cap if gamma_b is None else gamma_b
    ell = client_minima(problem) if lower_bound is None else lower_bound
    s = _constants_or_na(problem, c, gamma_b, ell, x0, pc)
    conds = pc + [Condition("gamma_b < min{1/(2cL), 1/(25 L tau)}", gamma_b, cap, gamma_b < cap),
                  _lower_bound_condition(problem, s["ell"], None)]
    _stop_if_inapplicable(pc, conds)
    G = np.array([problem.client_grad(i, np.zeros(d)) for i in range(n)])
    return dict(s, L=L, c=c, gamma_b=gamma_b, tau=tau, T=rounds * tau, R_run=rounds, batch_size=None, seeds=seeds,
                conds=conds, n=n, zeta2=float(np.mean(np.sum((G - G.mean(0)) ** 2, axis=1))),
                sigma2=d * problem.noise ** 2, Delta0=float(problem.value(s["x0"]) - s["f_star"]))


def measure_18(st, runs):
    r""":math:`\frac1T\sum_{t<T}\|\nabla f(\bar x_t)\|^2` per seed, :math:`\bar x_t` from the trace."""
    p = st["problem"]
    vals = []
    for k, res in enumerate(runs["main"]):
        _completed(res, k)
        G = gradient_at(p, virtual_averages(res))
        vals.append(float(np.mean(np.einsum("tj,tj->t", G, G))))
    return dict(values=vals, **_gamma_stats(runs["main"], st["gamma_b"], st))


def _rounding_18(st, m):
    """Delta0 = f(x^0) - f* of bound (18) is resolved to eps max(|f(x^0)|, |f*|) only."""
    return {("setup", "Delta0"): gap_floor(st["f_star"], st["f_star"] + st["Delta0"])}


def _bound18(corrected):
    return lambda st, m: bound_18(st["T"], st["gamma_b"], st["L"], st["tau"], st["n"], st["Delta0"], st["sigma2"],
                                  st["zeta2"], corrected)


SPEC_18 = register_spec(TheoremSpec(
    name="fedsps.theorem_18", algorithm="fedsps",
    statement=r"(1/T) sum_t E||grad f(xbar_t)||^2 <= 8 Delta0/(gb T) + 4 gb L sigma^2/n + 512 gb^2 L^2 X "
              r"(non-convex, gamma_b < min{1/(2cL), 1/(25 L tau)}; X = tau (sigma^2 + tau zeta^2) printed, "
              r"tau^2 (sigma^2 + zeta^2) corrected)",
    setup=_setup_18, run_kwargs=_run_kwargs, measure=measure_18,
    conditions=lambda st, m: st["conds"] + [_pinned_condition(m, st["gamma_b"])],
    variants={"printed": Variant("explicit form of the proof's last line as printed", _bound18(False)),
              "corrected": Variant("X = tau^2 (sigma^2 + zeta^2): what the paper's bound (27) yields (docs/papers/fedsps.md, erratum 5)",
                                   _bound18(True))},
    default_variant="corrected",
    details=lambda st, m: {"sigma2": st["sigma2"], "zeta2": st["zeta2"]},
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Theorem 18 and eq. (45); docs/papers/fedsps.md, §4.5",
    errata=(Erratum("corrected", "erratum 5", "Theorem 18, eq. (45)",
                    r"\frac1T\sum_t\mathbb E\lVert\nabla f(\bar x_t)\rVert^2 \le \frac{8\Delta_0}{\gamma_bT} + "
                    r"\frac{4\gamma_bL\sigma^2}{n} + 512\gamma_b^2L^2\tau(\sigma^2 + \tau\zeta^2)",
                    r"\frac1T\sum_t\mathbb E\lVert\nabla f(\bar x_t)\rVert^2 \le \frac{8\Delta_0}{\gamma_bT} + "
                    r"\frac{4\gamma_bL\sigma^2}{n} + 512\gamma_b^2L^2\tau^2(\sigma^2 + \zeta^2)",
                    "the paper's own bound (27) on the drift yields tau^2 (sigma^2 + zeta^2), not the printed "
                    "tau (sigma^2 + tau zeta^2): the step from (27) to (45) fails, although (45) itself is true with "
                    "every step at gamma_b (the noise in the drift is a martingale; fedsps.step_45)",
                    level="fedsps.step_45_from_27"),),
    assumptions=_A1, cases=_space("18"), floor=_grad_floor,
    rounding=_rounding_18, quantity="(1/T) sum_{t<T} ||grad f(xbar_t)||^2",
    pep=("Non-convex, with gradient noise sigma^2 and heterogeneity zeta^2 bounded for all x: L-smooth non-"
         "convex functions have exact interpolation conditions, but zeta^2 can be imposed only at the "
         "evaluated points (a relaxation: the value would be an upper bound, a bracket, not exact) and the "
         "noise enters as an expectation. Not registered.")))


theorem_3a, theorem_3b = THEOREMS["fedsps.theorem_3a"], THEOREMS["fedsps.theorem_3b"]
theorem_6a, theorem_6b = THEOREMS["fedsps.theorem_6a"], THEOREMS["fedsps.theorem_6b"]
theorem_18 = THEOREMS["fedsps.theorem_18"]


# ------------------------------------------------------------------- default cases --
def interpolating_quadratic(seed=0):
    """Per-sample strongly convex quadratics with a shared minimiser (sigma_f^2 = 0 with ell_i* = f_i*)."""
    import problems
    return problems.quadratic(4, 3, L=1.0, mu=0.3, shared_minimizer=True, hessian="distinct", seed=seed)


def rescaled_thm6_problem(s=1000.0):
    """docs/papers/fedsps.md, §8, P13b: 1-D clients f_i = (h_i/2)(x - b_i)^2 rescaled by s (h -> s^2 h, b -> b/s)."""
    return scaled_clients([1.0, 0.1056, 0.0308, 0.1573], [5.51, -0.84, -1.07, 0.17], s)


def _thm6_case(quick):
    p = rescaled_thm6_problem()
    tau = 10000
    L = float(max(p.client_data(i)[0][0, 0] for i in range(4)))
    gb = 1 / (20 * L * tau)
    return dict(rounds=10 ** 5, simulate_rounds=1, local_steps=tau, c=0.5, gamma_b=gb,
                x0=capped_fixed_point(p, tau, gb))


@register_cases("fedsps.theorem_3a")
def _cases_3a(quick=False):
    def build():
        return interpolating_quadratic(0)
    p = build()
    lb = [p.client_value(i, p.info["x_star"]) for i in range(4)]
    return [Case("interpolating quadratic, c = 2 tau^2", "conforming", build,
                 dict(rounds=30, local_steps=2, lower_bound=lb, seeds=1, x0=np.ones(3)),
                 {"printed": True, "corrected": True})], []


@register_cases("fedsps.theorem_3b")
def _cases_3b(quick=False):
    p = interpolating_quadratic(1)
    lb = [p.client_value(i, p.info["x_star"]) for i in range(4)]
    return [Case("interpolating quadratic (Corollary 5), c = 4 tau^2", "conforming", lambda: interpolating_quadratic(1),
                 dict(rounds=40, local_steps=2, gamma_b=1.0, lower_bound=lb, seeds=1, x0=np.ones(3)),
                 {"printed": True, "corrected": True})], []


@register_cases("fedsps.theorem_6a")
def _cases_6a(quick=False):
    return [Case("docs/papers/fedsps.md, §8 rescaled 1-D problem (s = 1000, tau = 1e4), periodic from the FedAvg fixed point",
                 "counterexample", rescaled_thm6_problem, _thm6_case(quick), {"printed": False, "corrected": True})], []


@register_cases("fedsps.theorem_18")
def _cases_18(quick=False):
    import problems

    def build():
        return problems.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=0.5, noise=0.5, seed=2)
    return [Case("shared-Hessian quadratic with gradient noise", "conforming", build,
                 dict(rounds=60 if quick else 200, local_steps=5, seeds=5 if quick else 20, x0=np.full(3, 2.0),
                      lower_bound=-10.0), {"printed": True, "corrected": True})], []


@register_cases("fedsps.theorem_6b")
def _cases_6b(quick=False):
    import problems

    def build():
        return problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3, hessian="distinct")
    return [Case("strongly convex heterogeneous quadratic: plateau(gb/2)/plateau(gb) <= 0.55", "conforming", build,
                 dict(rounds=3000, local_steps=4, seeds=1), {"printed": True, "corrected": True})], []
