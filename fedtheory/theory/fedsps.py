r"""FedSPS (Mukherjee, Loizou, Stich 2023): Theorems 3(a), 3(b), 6(a), 6(b) and 18 as code,
with the errata of spec/fedsps.md §4 and §8.

Constants (spec §4.6): L is the per-sample smoothness (A1; the maximum over all sample
functions), mu the per-sample strong convexity (A2; the ridge weight for least squares and
logistic regression, lambda_min(Q_i) for quadratic clients), :math:`\alpha = \min\{1/(2cL),\gamma_b\}`,
:math:`D_0 = \|x_0 - x^*\|^2`, :math:`\sigma_f^2 = f^* - \frac1n\sum_i\ell_i^*` and T = R tau.

The theorems bound quantities along the *local* iterates and the per-step virtual average
:math:`\bar x_t = \frac1n\sum_i x_t^i`, which the runner does not expose between rounds; the
measurements therefore use :func:`simulate`, a NumPy simulation of FedSPS (full participation,
the same rule as the kernels) that records them at every step, tested against the library's
runs at the round ends.
"""
from __future__ import annotations

import math

import numpy as np

from . import Case, Condition, Verification, mean_stderr, register_cases, register_theorem

VARIANTS = ("printed", "corrected")


def _sps(F, gg, ell, c, cap):
    if gg == 0:
        return cap
    return min(max(F - ell, 0.0) / (c * gg), cap)


def simulate(problem, rounds, tau, c, gamma_b, lower_bound=0.0, batch_size=None, seed=0, x0=None,
             x_star=None, record_local=True):
    """FedSPS with full participation, recording the theorems' quantities at every local step.

    Returns a dict of arrays over t = 0..T-1: ``loc_loss`` (1/n sum_i f_i(x_t^i) - ell_i),
    ``loc_batch_loss`` (the same with the drawn batch F_i(x_t^i, B)), ``sigma_hat`` (1/n sum_i
    F_i(x*, B_t^i) - ell_i), ``gap`` (f(xbar_t) - f*; needs ``x_star``), ``grad_sq``
    (||grad f(xbar_t)||^2), ``gammas`` (n,), and ``xbar`` (the virtual average at T) and
    ``dist_sq_T``. Minibatches are drawn without replacement within a batch (own stream).
    """
    rng = np.random.default_rng(seed)
    n, d = problem.n_clients, problem.dim
    ell = np.broadcast_to(np.asarray(lower_bound, dtype=float), (n,))
    x = np.zeros(d) if x0 is None else np.asarray(x0, dtype=float).copy()
    X = np.repeat(x[None], n, axis=0)
    ptr, sizes = problem.client_ptr, problem.client_sizes
    T = rounds * tau
    out = {k: np.zeros(T) for k in ("loc_loss", "loc_batch_loss", "sigma_hat", "gap", "grad_sq")}
    fs = problem.value(x_star) if x_star is not None else np.nan
    for t in range(T):
        xbar = X.mean(0)
        g = problem.grad(xbar)
        out["grad_sq"][t] = g @ g
        out["gap"][t] = problem.value(xbar) - fs
        for i in range(n):
            rows = None
            if batch_size is not None:
                rows = ptr[i] + rng.choice(sizes[i], batch_size, replace=False)
            F = problem.client_value(i, X[i], rows)
            gi = problem.client_grad(i, X[i], rows)
            if problem.noise > 0:                              # additive gradient noise (quadratics)
                gi = gi + problem.noise * rng.standard_normal(d)
            if record_local:
                out["loc_loss"][t] += (problem.client_value(i, X[i]) - ell[i]) / n
                out["loc_batch_loss"][t] += (F - ell[i]) / n
                if x_star is not None:
                    out["sigma_hat"][t] += (problem.client_value(i, x_star, rows) - ell[i]) / n
            gam = _sps(F, float(gi @ gi), ell[i], c, gamma_b)
            X[i] = X[i] - gam * gi
        if (t + 1) % tau == 0:
            X[:] = X.mean(0)
    out["xbar"] = X.mean(0)
    out["dist_sq_T"] = float(np.sum((out["xbar"] - x_star) ** 2)) if x_star is not None else np.nan
    return out


# ------------------------------------------------------------------------- constants --
def sample_constants(problem):
    """(L, mu): per-sample smoothness and strong convexity (A1, A2; spec §4.6)."""
    from .._kernels.oracles import KIND_LEAST_SQUARES, KIND_LOGISTIC, KIND_QUADRATIC
    l2 = problem.l2
    if problem.kind == KIND_QUADRATIC:
        ev = np.array([np.linalg.eigvalsh(problem.client_data(i)[0])[[0, -1]] for i in range(problem.n_clients)])
        return float(ev[:, 1].max() + l2), float(max(ev[:, 0].min(), 0.0) + l2)
    M = problem.M
    sq = np.asarray(M.multiply(M).sum(axis=1)).ravel() if problem.sparse else np.sum(M * M, axis=1)
    scale = 0.25 if problem.kind == KIND_LOGISTIC else 1.0
    assert problem.kind in (KIND_LOGISTIC, KIND_LEAST_SQUARES)
    return float(scale * sq.max() + l2), float(l2)


def _gt(problem):
    info = problem.info or {}
    if "x_star" in info and "f_star" in info:
        return np.asarray(info["x_star"]), float(info["f_star"])
    from ..truth import ground_truth
    gt = ground_truth(problem)
    return gt.x, gt.f


def client_minima(problem):
    """f_i* = min f_i of every client (quadratic clients in closed form, else validation)."""
    from .._kernels.oracles import KIND_QUADRATIC
    if problem.kind == KIND_QUADRATIC:
        out = []
        for i in range(problem.n_clients):
            Q, c = problem.client_data(i)
            Q = Q + problem.l2 * np.eye(problem.dim)
            if np.linalg.eigvalsh(Q)[0] <= 0:
                out.append(-math.inf)
            else:
                out.append(float(-0.5 * c @ np.linalg.solve(Q, c)))
        return np.array(out)
    from ..truth import ground_truth
    return np.asarray(ground_truth(problem).client_f)


def _lower_bound_condition(problem, ell, batch_size=None):
    """ell_i* <= F_i*, the infimum over the client's sample functions: with deterministic clients
    (``batch_size=None``) the sample function is f_i, so F_i* = f_i*; with minibatches of least
    squares or logistic losses F_i* >= 0."""
    from .._kernels.oracles import KIND_QUADRATIC
    if problem.kind != KIND_QUADRATIC and batch_size is None:
        fi = client_minima(problem)
        gap = float(np.max(ell - fi))
        return Condition("ell_i* <= f_i* (deterministic clients)", gap, 0.0, gap <= 1e-10 * max(1.0, np.abs(fi).max()))
    if problem.kind != KIND_QUADRATIC:
        v = float(np.max(ell))
        return Condition("ell_i* <= inf of every sample loss (>= 0 here)", v, 0.0, v <= 0.0)
    fi = client_minima(problem)
    gap = float(np.max(ell - fi))
    return Condition("ell_i* <= f_i* (quadratic clients)", gap, 0.0, gap <= 1e-12 * max(1.0, np.abs(fi).max()))


def _na(name, variant, reason):
    return Verification(name, variant, False, reason, [], float("nan"), float("nan"))


def _setup(problem, c, gamma_b, lower_bound, x0):
    L, mu = sample_constants(problem)
    xs, fs = _gt(problem)
    n = problem.n_clients
    ell = np.broadcast_to(np.asarray(lower_bound, dtype=float), (n,)).copy()
    x0 = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    alpha = min(1 / (2 * c * L), gamma_b)
    return dict(L=L, mu=mu, x_star=xs, f_star=fs, ell=ell, x0=x0, alpha=alpha,
                D0=float(np.sum((x0 - xs) ** 2)), sigma_f_sq=float(fs - ell.mean()))


# ----------------------------------------------------------------------- Theorem 3 --
@register_theorem("fedsps.theorem_3a")
def theorem_3a(problem, rounds=50, local_steps=2, c=None, gamma_b=1.0, lower_bound=0.0, batch_size=None,
               variant="printed", seeds=5, x0=None, measurement=None):
    r"""Theorem 3(a) (convex, c >= 2 tau^2):
    :math:`\frac{1}{Tn}\sum_t\sum_i \mathbb E[f_i(x_t^i) - \ell_i^*] \le 2D_0/(T\alpha) + 4\gamma_b\sigma_f^2/\alpha`.

    ``variant="printed"`` compares the seed mean of the left-hand side with the bound;
    ``"corrected"`` checks the pathwise form (eq. 31, spec §4.3) on every seed: the batch losses
    F_i(x_t^i, B) against :math:`2D_0/(T\alpha) + (4\gamma_b/\alpha)\frac1T\sum_t\hat\sigma_t^2`
    (``measured``/``bound`` at the worst seed). ``c`` defaults to 2 tau^2.

    Examples
    --------
    >>> import problems, validation
    >>> p = problems.quadratic(4, 3, L=1.0, mu=0.2, shared_minimizer=True, hessian="distinct", seed=0)
    >>> lb = [p.client_value(i, p.info["x_star"]) for i in range(4)]
    >>> v = validation.verify("fedsps.theorem_3a", p, rounds=20, local_steps=2, lower_bound=lb, seeds=1,
    ...                       x0=[1.0, 1.0, 1.0])
    >>> v.applicable, v.holds
    (True, True)
    """
    from .._validation import Options, check_param
    name = "fedsps.theorem_3a"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    tau = local_steps
    c = 2 * tau ** 2 if c is None else c
    try:
        s = _setup(problem, c, gamma_b, lower_bound, x0)
    except (AssertionError, ValueError) as e:
        return _na(name, variant, f"constants not available: {e}")
    T = rounds * tau
    if measurement is None:
        runs = [simulate(problem, rounds, tau, c, gamma_b, s["ell"], batch_size, k, s["x0"], s["x_star"])
                for k in range(seeds)]
        measurement = dict(lhs=[r["loc_loss"].mean() for r in runs], path_lhs=[r["loc_batch_loss"].mean() for r in runs],
                           path_sigma=[r["sigma_hat"].mean() for r in runs])
    conds = [Condition("c >= 2 tau^2", c, 2 * tau ** 2, c >= 2 * tau ** 2),
             _lower_bound_condition(problem, s["ell"], batch_size),
             Condition("f_i convex (mu >= 0 per sample)", s["mu"], 0.0, s["mu"] >= 0)]
    a = s["alpha"]
    if variant == "printed":
        m, se = mean_stderr(measurement["lhs"])
        bound = 2 * s["D0"] / (T * a) + 4 * gamma_b * s["sigma_f_sq"] / a
    else:
        b_each = [2 * s["D0"] / (T * a) + 4 * gamma_b / a * sg for sg in measurement["path_sigma"]]
        ratios = [lh / bd for lh, bd in zip(measurement["path_lhs"], b_each)]
        k = int(np.argmax(ratios))
        m, se, bound = measurement["path_lhs"][k], float("nan"), b_each[k]
    failed = [cd.name for cd in conds if not cd.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed), conds, float(m),
                        float(bound), se, dict(s, c=c, T=T, measurement=measurement))


@register_theorem("fedsps.theorem_3b")
def theorem_3b(problem, rounds=50, local_steps=2, c=None, gamma_b=1.0, lower_bound=0.0, batch_size=None,
               variant="corrected", seeds=5, x0=None, measurement=None):
    r"""Theorem 3(b) (strongly convex per sample, c >= 4 tau^2):
    :math:`\mathbb E\|\bar x_T - x^*\|^2 \le \frac{1}{\mu\alpha}(1-\mu\alpha)^T D_0 + \frac{2\gamma_b\sigma_f^2}{\alpha\mu}`.

    ``"corrected"`` adds the hidden condition gamma_b <= 1/(2 mu) the proof needs (Lemma 8's
    false upper bound, spec erratum 1). ``c`` defaults to 4 tau^2.
    """
    from .._validation import Options, check_param
    name = "fedsps.theorem_3b"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    tau = local_steps
    c = 4 * tau ** 2 if c is None else c
    try:
        s = _setup(problem, c, gamma_b, lower_bound, x0)
    except (AssertionError, ValueError) as e:
        return _na(name, variant, f"constants not available: {e}")
    if s["mu"] <= 0:
        return _na(name, variant, "Theorem 3(b) needs every sample function mu-strongly convex (mu = 0 here)")
    T = rounds * tau
    if measurement is None:
        measurement = dict(values=[simulate(problem, rounds, tau, c, gamma_b, s["ell"], batch_size, k, s["x0"],
                                            s["x_star"], record_local=False)["dist_sq_T"] for k in range(seeds)])
    m, se = mean_stderr(measurement["values"])
    a, mu = s["alpha"], s["mu"]
    bound = (1 - mu * a) ** T * s["D0"] / (mu * a) + 2 * gamma_b * s["sigma_f_sq"] / (a * mu)
    conds = [Condition("c >= 4 tau^2", c, 4 * tau ** 2, c >= 4 * tau ** 2),
             _lower_bound_condition(problem, s["ell"], batch_size),
             Condition("mu > 0 (per sample)", mu, 0.0, mu > 0),
             Condition("gamma_b <= 1/(2 mu) (hidden: Lemma 8's false bound)", gamma_b, 1 / (2 * mu), gamma_b <= 1 / (2 * mu))]
    need = conds[:3] if variant == "printed" else conds
    failed = [cd.name for cd in need if not cd.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed), conds, m, float(bound),
                        se, dict(s, c=c, T=T, measurement=measurement))


# ----------------------------------------------------------------------- Theorem 6 --
def bound_6a(T, gamma_b, L, tau, D0, sigma_f_sq, corrected=True):
    """Eq. (37): 3 D0/(T gb) + 12 gb L s_f^2 + 384 tau^2 gb^2 L^p s_f^2, p = 2 corrected, 1 printed."""
    p = 2 if corrected else 1
    return 3 * D0 / (T * gamma_b) + 12 * gamma_b * L * sigma_f_sq + 384 * tau ** 2 * gamma_b ** 2 * L ** p * sigma_f_sq


@register_theorem("fedsps.theorem_6a")
def theorem_6a(problem, rounds=100, local_steps=5, c=0.5, gamma_b=None, lower_bound=None, variant="corrected",
               seeds=1, x0=None, batch_size=None, simulate_rounds=None, measurement=None):
    r"""Theorem 6(a) (convex, gamma_b <= min{1/(2cL), 1/(20 L tau)}: FedSPS == FedAvg(gamma_b)):
    :math:`\frac1T\sum_t \mathbb E[f(\bar x_t) - f^*] \le 3D_0/(T\gamma_b) + 12\gamma_bL\sigma_f^2 + 384\tau^2\gamma_b^2L^p\sigma_f^2`
    with p = 1 printed and p = 2 corrected (spec erratum 2).

    In this regime the algorithm does not depend on ell_i*, so the bound uses the largest valid
    one, ell_i* = f_i* (``lower_bound=None``), i.e. sigma_f^2 = Gamma. ``gamma_b`` defaults to its
    cap. With deterministic clients and ``simulate_rounds`` < ``rounds``, the trajectory is simulated
    for ``simulate_rounds`` rounds and must be periodic (round-end models repeating to 1e-12
    relative, e.g. from the FedAvg fixed point); the time average over ``rounds`` rounds is then
    the simulated one exactly (``details["periodic"]``), otherwise the check is not applicable.
    """
    from .._validation import Options, check_param
    name = "fedsps.theorem_6a"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    tau = local_steps
    L, _ = sample_constants(problem) if batch_size is not None else _full_batch_L(problem)
    if gamma_b is None:
        gamma_b = min(1 / (2 * c * L), 1 / (20 * L * tau))
    ell = client_minima(problem) if lower_bound is None else lower_bound
    s = _setup(problem, c, gamma_b, ell, x0)
    T = rounds * tau
    R_sim = simulate_rounds or rounds
    if measurement is None:
        vals, periodic = [], None
        for k in range(seeds):
            r = simulate(problem, R_sim, tau, c, gamma_b, s["ell"], batch_size, k, s["x0"], s["x_star"],
                         record_local=False)
            vals.append(r["gap"].mean())
            if R_sim < rounds:
                per = float(np.linalg.norm(r["xbar"] - s["x0"])) <= 1e-12 * max(1.0, float(np.linalg.norm(s["x0"])))
                periodic = per if periodic is None else (periodic and per)
        measurement = dict(values=vals, periodic=periodic)
    if R_sim < rounds and (batch_size is not None or not measurement["periodic"]):
        return _na(name, variant, "simulate_rounds < rounds needs deterministic clients and a periodic trajectory")
    m, se = mean_stderr(measurement["values"])
    bound = bound_6a(T, gamma_b, L, tau, s["D0"], s["sigma_f_sq"], variant == "corrected")
    cap = min(1 / (2 * c * L), 1 / (20 * L * tau))
    conds = [Condition("gamma_b <= min{1/(2cL), 1/(20 L tau)}", gamma_b, cap, gamma_b <= cap * (1 + 1e-12)),
             _lower_bound_condition(problem, s["ell"], batch_size)]
    failed = [cd.name for cd in conds if not cd.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed), conds, m, float(bound),
                        se, dict(s, L=L, gamma_b=gamma_b, T=T, periodic=measurement.get("periodic"),
                                 measurement=measurement))


def _full_batch_L(problem):
    """Deterministic clients: the full-batch constants max_i lambda_max(Hessian of f_i) (spec §4.6 item 1)."""
    from ..constants import client_smoothness
    return float(np.max(client_smoothness(problem))), 0.0


@register_theorem("fedsps.theorem_6b")
def theorem_6b(problem, rounds=3000, local_steps=5, c=0.5, gamma_b=None, variant="corrected", seeds=1, x0=None,
               batch_size=None, measurement=None):
    r"""Theorem 6(b) (strongly convex, small gamma_b) is an O-statement without constants: its shape
    is checked. The plateau of :math:`\|\bar x_T - x^*\|^2` must shrink at least linearly in gamma_b:
    ``measured`` = plateau(gamma_b/2)/plateau(gamma_b), ``bound`` = 0.55 (1/2 plus 10% for the
    transient). ``applicable`` is False when a condition fails; both variants share the shape."""
    from .._validation import Options, check_param
    name = "fedsps.theorem_6b"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    tau = local_steps
    L, _ = sample_constants(problem) if batch_size is not None else _full_batch_L(problem)
    _, mu = sample_constants(problem)
    if gamma_b is None:
        gamma_b = min(1 / (2 * c * L), 1 / (20 * L * tau))
    s = _setup(problem, c, gamma_b, client_minima(problem), x0)
    if measurement is None:
        from ..runner import run
        pl = []
        for gb in (gamma_b, gamma_b / 2):           # ||xbar_T - x*||^2 at a round end: the library's run
            vals = []
            for k in range(seeds):
                res = run(problem, "fedsps", rounds=rounds, local_steps=tau, c=c, gamma_b=gb, lower_bound=s["ell"],
                          batch_size=batch_size, seed=k, x0=s["x0"])
                vals.append(float(np.sum((res.x - s["x_star"]) ** 2)))
            pl.append(float(np.mean(vals)))
        measurement = dict(plateaus=pl)
    pl = measurement["plateaus"]
    cap = min(1 / (2 * c * L), 1 / (20 * L * tau))
    conds = [Condition("gamma_b <= min{1/(2cL), 1/(20 L tau)}", gamma_b, cap, gamma_b <= cap * (1 + 1e-12)),
             Condition("mu > 0 (strongly convex f)", mu if mu > 0 else s["mu"], 0.0, True)]
    failed = [cd.name for cd in conds if not cd.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed), conds,
                        float(pl[1] / pl[0]) if pl[0] > 0 else 0.0, 0.55, float("nan"),
                        dict(s, plateaus=pl, gamma_b=gamma_b, measurement=measurement))


# ---------------------------------------------------------------------- Theorem 18 --
def bound_18(T, gamma_b, L, tau, n, Delta0, sigma2, zeta2, corrected=True):
    """8 Delta0/(gb T) + 4 gb L s^2/n + 512 gb^2 L^2 X, X = tau (s^2 + tau z^2) printed, tau^2 (s^2 + z^2) corrected."""
    X = tau ** 2 * (sigma2 + zeta2) if corrected else tau * (sigma2 + tau * zeta2)
    return 8 * Delta0 / (gamma_b * T) + 4 * gamma_b * L * sigma2 / n + 512 * gamma_b ** 2 * L ** 2 * X


@register_theorem("fedsps.theorem_18")
def theorem_18(problem, rounds=100, local_steps=5, c=0.5, gamma_b=None, lower_bound=0.0, variant="corrected",
               seeds=5, x0=None, measurement=None):
    r"""Theorem 18 (non-convex, gamma_b < min{1/(2cL), 1/(25 L tau)}):
    :math:`\frac1T\sum_t\mathbb E\|\nabla f(\bar x_t)\|^2 \le 8\Delta_0/(\gamma_bT) + 4\gamma_bL\sigma^2/n + 512\gamma_b^2L^2 X`
    with :math:`X = \tau(\sigma^2+\tau\zeta^2)` printed and :math:`\tau^2(\sigma^2+\zeta^2)` corrected (erratum 5).
    sigma^2 and zeta^2 are uniform constants: exact for quadratics with a shared Hessian and
    additive gradient noise (sigma^2 = d noise^2); other problems are not applicable.
    """
    from .._kernels.oracles import KIND_QUADRATIC
    from .._validation import Options, check_param
    name = "fedsps.theorem_18"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    if problem.kind != KIND_QUADRATIC:
        return _na(name, variant, "sigma^2 and zeta^2 are computable only for quadratics with a shared Hessian")
    n, d = problem.n_clients, problem.dim
    Q = [problem.client_data(i)[0] for i in range(n)]
    if not all(np.array_equal(Q[0], q) for q in Q[1:]):
        return _na(name, variant, "zeta^2 is unbounded on R^d with distinct client Hessians")
    tau = local_steps
    L, _ = _full_batch_L(problem)
    if gamma_b is None:
        gamma_b = 0.99 * min(1 / (2 * c * L), 1 / (25 * L * tau))
    s = _setup(problem, c, gamma_b, lower_bound, x0)
    G = np.array([problem.client_grad(i, np.zeros(d)) for i in range(n)])
    zeta2 = float(np.mean(np.sum((G - G.mean(0)) ** 2, axis=1)))
    sigma2 = d * problem.noise ** 2
    T = rounds * tau
    if measurement is None:
        measurement = dict(values=[simulate(problem, rounds, tau, c, gamma_b, s["ell"], None, k, s["x0"], s["x_star"],
                                            record_local=False)["grad_sq"].mean() for k in range(seeds)])
    m, se = mean_stderr(measurement["values"])
    Delta0 = problem.value(s["x0"]) - s["f_star"]
    cap = min(1 / (2 * c * L), 1 / (25 * L * tau))
    conds = [Condition("gamma_b < min{1/(2cL), 1/(25 L tau)}", gamma_b, cap, gamma_b < cap)]
    failed = [cd.name for cd in conds if not cd.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed), conds, m,
                        float(bound_18(T, gamma_b, L, tau, n, Delta0, sigma2, zeta2, variant == "corrected")), se,
                        dict(s, sigma2=sigma2, zeta2=zeta2, gamma_b=gamma_b, measurement=measurement))


# ------------------------------------------------------------------- default cases --
def interpolating_quadratic(seed=0):
    """Per-sample strongly convex quadratics with a shared minimiser (sigma_f^2 = 0 with ell_i* = f_i*)."""
    import problems
    return problems.quadratic(4, 3, L=1.0, mu=0.3, shared_minimizer=True, hessian="distinct", seed=seed)


def rescaled_thm6_problem(s=1000.0):
    """spec §8 / P13b: 1-D clients f_i = (h_i/2)(x - b_i)^2 rescaled by s (h -> s^2 h, b -> b/s)."""
    import problems
    h0 = np.array([1.0, 0.1056, 0.0308, 0.1573])
    b0 = np.array([5.51, -0.84, -1.07, 0.17])
    h, b = s ** 2 * h0, b0 / s
    return problems.explicit_quadratic(h[:, None, None], (h * b)[:, None], name="thm6_rescaled")


def thm6_fixed_point(problem, tau, gamma_b):
    """The FedAvg(gamma_b) fixed point of the 1-D rescaled problem (start of the periodic orbit)."""
    h = np.array([problem.client_data(i)[0][0, 0] for i in range(problem.n_clients)])
    b = np.array([problem.client_data(i)[1][0] for i in range(problem.n_clients)]) / h
    q = (1 - gamma_b * h) ** tau
    return np.array([np.sum(b * (1 - q)) / np.sum(1 - q)])


def _thm6_case(quick):
    p = rescaled_thm6_problem()
    tau = 10000
    L = float(max(p.client_data(i)[0][0, 0] for i in range(4)))
    gb = 1 / (20 * L * tau)
    return dict(rounds=10 ** 5, simulate_rounds=1, local_steps=tau, c=0.5, gamma_b=gb,
                x0=thm6_fixed_point(p, tau, gb))


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
    return [Case("spec §8 rescaled 1-D problem (s = 1000, tau = 1e4), periodic from the FedAvg fixed point",
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
