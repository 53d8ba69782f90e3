r"""FedDeper: Theorem 1 (global model, non-convex) printed and corrected, Theorem 2 (personalized
models) with its flaw, and the constants of spec/feddeper.md §4.

Notation (spec §1.2): T rounds, K local steps, eta_l, rho, lambda (``mix``), p = S/n,
:math:`a = \eta_l K\beta`. Assumptions: beta-smooth clients (A1), gradient variance sigma^2 (A2),
:math:`\frac1n\sum_i\|\nabla f_i(x)\|^2 \le B^2\|\nabla f(x)\|^2 + G^2` (A3).
"""
from __future__ import annotations

import math

import numpy as np

from . import Case, Condition, Verification, mean_stderr, register_cases, register_theorem

VARIANTS = ("printed", "corrected")


# ------------------------------------------------------------------------- constants --
def sampling_constants(n, S):
    """p, q, l1, l2, l3 of Theorem 1 (spec §4.2)."""
    p = S / n
    q = 5 + 75 * p + 15 * (1 - p) ** 2 / p
    l1 = 15 * (1 - p) ** 2 / (49 * p ** 2)
    l2 = 1 + 25 / (3136 * p) + 75 * (1 - p) ** 2 / (3136 * p ** 2)
    l3 = 5 / 7 + 5 / (49 * p)
    return dict(p=p, q=q, l1=l1, l2=l2, l3=l3)


def tilde(B2, G2, n, S):
    """B~^2 = 2 B^2 (1/S - 1/n) + 1 and G~^2 = 2 G^2 (1/S - 1/n)."""
    f = 2 * (1 / S - 1 / n)
    return f * B2 + 1, f * G2


def a_cap(B2, n, S):
    """The cap on a = eta_l K beta: min{1/(144 B~^2), 1/(84 sqrt(2) sqrt(l1 + l2 B^2 + l3 B~^2))}."""
    c = sampling_constants(n, S)
    Bt2, _ = tilde(B2, 0.0, n, S)
    return min(1 / (144 * Bt2), 1 / (84 * math.sqrt(2) * math.sqrt(c["l1"] + c["l2"] * B2 + c["l3"] * Bt2)))


def quadratic_BG(problem):
    """(B^2_min, G2(B^2)) for quadratic clients (spec §4.7): B^2_min = max(1, lambda_max(Abar^-1 M Abar^-1))
    and G^2(B) = max_x [(1/n) sum ||A_i x - b_i||^2 - B^2 ||Abar x - bbar||^2] (a linear solve)."""
    n, d = problem.n_clients, problem.dim
    As = np.array([problem.client_hessian(i, np.zeros(d)) for i in range(n)])
    bs = np.array([-problem.client_grad(i, np.zeros(d)) for i in range(n)])      # grad f_i(x) = A_i x - b_i
    Ab, bb = As.mean(0), bs.mean(0)
    M = np.einsum("iab,ibc->ac", As, As) / n
    Ai = np.linalg.inv(Ab)
    equal = all(np.array_equal(As[0], a) for a in As[1:])
    B2min = 1.0 if equal else max(1.0, float(np.linalg.eigvalsh(Ai @ M @ Ai)[-1]))

    def G2(B2):
        if equal:           # equal Hessians: (1/n) sum ||grad f_i||^2 = ||grad f||^2 + mean ||b_i - bbar||^2
            return float(np.mean(np.sum((bs - bb) ** 2, axis=1)))
        H = M - B2 * Ab @ Ab                                          # the quadratic form (negative definite)
        r = np.einsum("iab,ib->a", As, bs) / n - B2 * Ab @ bb
        x = np.linalg.solve(H, r)
        return float(np.mean(np.sum((As @ x - bs) ** 2, axis=1)) - B2 * np.sum((Ab @ x - bb) ** 2))
    return B2min, G2, equal


def problem_constants(problem, batch_size=None):
    """(beta, sigma^2, B2min, G2 function, notes) of Assumptions 1-3 (spec §4.7)."""
    from .._kernels.oracles import KIND_LOGISTIC, KIND_QUADRATIC
    from ..constants import client_smoothness
    n, d = problem.n_clients, problem.dim
    beta = float(np.max(client_smoothness(problem)))
    if problem.kind == KIND_QUADRATIC:
        if batch_size is not None:
            raise ValueError("quadratic problems have no samples; use their noise (batch_size=None).")
        B2min, G2, _ = quadratic_BG(problem)
        return beta, d * problem.noise ** 2, B2min, G2, ["quadratic: B and G(B) exact, sigma^2 = d noise^2"]
    if problem.kind != KIND_LOGISTIC:
        raise ValueError("Assumption 3 with finite B, G is computed for quadratics and logistic regression only.")
    R, var = [], []
    for i in range(n):
        A = problem.client_data(i)[0]
        nrm = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel() if problem.sparse else np.sum(A * A, axis=1))
        R.append(nrm.mean())
        if batch_size is not None:
            m = A.shape[0]
            var.append(np.mean(nrm ** 2) / batch_size * ((m - batch_size) / (m - 1) if m > 1 else 1.0))
    G2u = float(np.mean(np.square(R)))
    return beta, (max(var) if var else 0.0) + d * problem.noise ** 2, 1.0, (lambda B2: G2u), \
        ["logistic: B = 1 (the ridge cancels), G^2 <= mean R_i^2 (an upper bound), sigma^2 a bound"]


# ------------------------------------------------------------------------- Theorem 1 --
def theorem1_rhs(Gamma, eta, K, T, beta, n, S, G2, sigma2, B2, phi0=0.0, grad_T=0.0, grad_0=0.0, corrected=True):
    """Theorem 1's right-hand side (spec §4.2); ``corrected`` adds 48 beta^2 phi^0/T and
    100 a^2 B^2 (E||grad f(x^T)||^2 - ||grad f(x^0)||^2)/T (the dropped terms)."""
    c = sampling_constants(n, S)
    p, q = c["p"], c["q"]
    a = eta * K * beta
    _, Gt2 = tilde(B2, G2, n, S)
    s2K = sigma2 / K
    rhs = (24 * Gamma / (eta * K * T)
           + 12 * a * (4 * Gt2 + sigma2 / (K * S))
           + 24 * a ** 2 * ((1120 + 160 / p) * Gt2
                            + (1548 + 97 / 6 + 25 / (2 * p) + 37.5 * (1 - p) ** 2 / p ** 2) * G2
                            + (330 * p + 40 / (S * p) + 280 / S + 73 / 12) * s2K)
           + 192 * a ** 3 * (3 * G2 + s2K)
           + 96 * a ** 4 * (12 * G2 + (3 * p + 20 * q) * sigma2 / (p * K))
           + 576 * a ** 5 * (4 * G2 + s2K)
           + 5760 * a ** 6 * q * sigma2 / (p * K))
    if corrected:
        rhs += (48 * beta ** 2 * phi0 + 100 * a ** 2 * B2 * (grad_T - grad_0)) / T
    return rhs


def phi0(problem, x0, eta, K, seeds=4):
    """phi^0 = (1/(nK)) sum_{i,k} E||v_{i,k}^0 - x^0||^2: every client's (virtual) round-0 v-run,
    plain local SGD from x^0 with exact gradients plus the problem's noise (averaged over seeds)."""
    rng = np.random.default_rng(0)
    n, d = problem.n_clients, problem.dim
    acc = 0.0
    reps = seeds if problem.noise > 0 else 1
    for _ in range(reps):
        for i in range(n):
            v = np.array(x0, dtype=float)
            for _ in range(K):
                acc += float(np.sum((v - x0) ** 2))
                g = problem.client_grad(i, v)
                if problem.noise > 0:
                    g = g + problem.noise * rng.standard_normal(d)
                v = v - eta * g
    return acc / (reps * n * K)


@register_theorem("feddeper.theorem_1")
def theorem_1(problem, rounds=200, local_steps=5, lr=None, rho=None, mix=0.5, clients_per_round=None,
              batch_size=None, variant="corrected", seeds=5, x0=None, measurement=None):
    r"""Theorem 1: :math:`\frac1T\sum_{t<T}\mathbb E\|\nabla f(x^t)\|^2 \le` RHS (spec §4.2).

    The measurement runs ``feddeper`` (the library's kernels) for ``seeds`` seeds. ``lr``
    defaults to a = a_cap(B^2_min); ``rho`` to eta_l beta (its cap). B is the largest value whose
    cap still admits eta_l (G^2(B) decreases in B). Conditions: lambda in [1/2, 1] (Lemma 5; not
    restated by the theorem), rho <= eta_l beta, a <= a_cap. ``"corrected"`` adds the two dropped
    O(1/T) terms.

    Examples
    --------
    >>> import problems, validation
    >>> p = problems.quadratic(10, 3, L=1.0, mu=0.2, heterogeneity=1.0, noise=0.2, seed=0)
    >>> v = validation.verify("feddeper.theorem_1", p, rounds=50, local_steps=5, clients_per_round=5,
    ...                       seeds=2)
    >>> v.applicable, v.holds
    (True, True)
    """
    from .._validation import Options, check_param
    from ..runner import run
    name = "feddeper.theorem_1"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    n = problem.n_clients
    S = clients_per_round or n
    K, T = local_steps, rounds
    try:
        beta, sigma2, B2min, G2fn, notes = problem_constants(problem, batch_size)
    except ValueError as e:
        return Verification(name, variant, False, str(e), [], float("nan"), float("nan"))
    if lr is None:
        lr = a_cap(B2min, n, S) / (K * beta)
    a = lr * K * beta
    rho = lr * beta if rho is None else rho
    # the largest B^2 whose cap admits a (a_cap decreases in B^2)
    lo, hi = B2min, B2min
    if a_cap(B2min, n, S) >= a:
        while a_cap(hi * 2, n, S) >= a and hi < 1e12:
            hi *= 2
        hi = hi * 2
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if a_cap(mid, n, S) >= a else (lo, mid)
    B2 = lo
    G2 = G2fn(B2)
    x0 = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    fs = problem.info.get("f_star") if problem.info else None
    if fs is None:
        from ..truth import ground_truth
        fs = ground_truth(problem).f
    if measurement is None:
        lhs, gT = [], []
        for s in range(seeds):
            res = run(problem, "feddeper", rounds=T, local_steps=K, lr=lr, rho=rho, mix=mix,
                      clients_per_round=clients_per_round, batch_size=batch_size, seed=s, x0=x0)
            h = res.history
            lhs.append(float(h.loc[h["round"] < T, "grad_mapping_sq"].sum() / T))
            gT.append(float(h.grad_mapping_sq.iloc[-1]))
        measurement = dict(lhs=lhs, grad_T=float(np.mean(gT)))
    m, se = mean_stderr(measurement["lhs"])
    g0 = problem.grad(x0)
    rhs = theorem1_rhs(problem.value(x0) - fs, lr, K, T, beta, n, S, G2, sigma2, B2,
                       phi0(problem, x0, lr, K), measurement["grad_T"], float(g0 @ g0), variant == "corrected")
    cap = a_cap(B2, n, S)
    conds = [Condition("lambda in [1/2, 1] (Lemma 5)", mix, 0.5, 0.5 <= mix <= 1),
             Condition("rho <= eta_l beta", rho, lr * beta, rho <= lr * beta * (1 + 1e-12)),
             Condition("a = eta_l K beta <= a_cap(B)", a, cap, a <= cap * (1 + 1e-12)),
             Condition("B^2 >= B^2_min (Assumption 3 holds)", B2, B2min, B2 >= B2min * (1 - 1e-12))]
    failed = [c.name for c in conds if not c.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed), conds, m, float(rhs), se,
                        dict(beta=beta, sigma2=sigma2, B2=B2, G2=G2, a=a, lr=lr, rho=rho, notes=notes,
                             measurement=measurement))


# ------------------------------------------------------------------------- Theorem 2 --
def simulate_personalized(problem, rounds, K, lr, rho, mix, x0, seed=0):
    """Full-participation FedDeper in NumPy recording, per round, sum_{i,k} ||v_{i,k}^t - x*||^2 and
    phi^t = (1/(nK)) sum_{i,k} ||v_{i,k}^t - x^t||^2, and ||grad f(x^t)||^2."""
    rng = np.random.default_rng(seed)
    n, d = problem.n_clients, problem.dim
    xs = problem.info["x_star"]
    x = np.asarray(x0, dtype=float).copy()
    V = np.repeat(x[None], n, axis=0)
    pm, phi, gsq = [], [], []
    for _ in range(rounds):
        g = problem.grad(x)
        gsq.append(float(g @ g))
        Y, Vn = np.repeat(x[None], n, axis=0), V.copy()
        acc_pm = acc_phi = 0.0
        for k in range(K):
            acc_pm += float(np.sum((Vn - xs) ** 2))
            acc_phi += float(np.sum((Vn - x) ** 2))
            noise = problem.noise * rng.standard_normal((n, d)) if problem.noise > 0 else 0.0
            Gy = np.array([problem.client_grad(i, Y[i]) for i in range(n)]) + noise
            Gv = np.array([problem.client_grad(i, Vn[i]) for i in range(n)]) + noise
            Vk = Vn
            Vn = Vn - lr * Gv
            Y = Y - lr * Gy - rho * (Vk + Y - 2 * x)
        pm.append(acc_pm / (n * K))
        phi.append(acc_phi / (n * K))
        V = (1 - mix) * Vn + mix * Y
        x = Y.mean(0)
    return np.array(pm), np.array(phi), np.array(gsq)


@register_theorem("feddeper.theorem_2")
def theorem_2(problem, rounds=200, local_steps=5, lr=0.05, rho=0.01, mix=0.5, variant="corrected", seeds=1,
              x0=None, measurement=None):
    r"""Theorem 2 (personalized models), full participation. The paper's proof uses
    :math:`\|x - x^*\|^2 \le \|\nabla f(x)\|^2/\beta^2` (false; spec §4.6). Checked forms:

    * ``"corrected"``: :math:`\frac{1}{nKT}\sum\|v_{i,k}^t - x^*\|^2 \le 2\,\overline{\phi} + \frac{2}{\mu^2}\varepsilon`
      (mu-strongly convex f), with :math:`\varepsilon` the measured left-hand side of Theorem 1;
    * ``"printed"``: the same with :math:`1/\beta^2` in place of :math:`1/\mu^2` (the paper's step; it can fail).

    Needs a quadratic with known x* and mu > 0 (``problems.quadratic``).
    """
    from .._validation import Options, check_param
    name = "feddeper.theorem_2"
    check_param("variant", variant, [Options(*VARIANTS)], name)
    info = problem.info or {}
    if "x_star" not in info or info.get("mu", 0) <= 0:
        return Verification(name, variant, False, "needs a mu-strongly convex problem with known x* (the paper's "
                            "proof step is false without strong convexity)", [], float("nan"), float("nan"))
    from ..constants import client_smoothness
    beta = float(np.max(client_smoothness(problem)))
    mu = float(info["mu"])
    x0 = np.zeros(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    if measurement is None:
        runs = [simulate_personalized(problem, rounds, local_steps, lr, rho, mix, x0, s) for s in range(seeds)]
        measurement = dict(pm=float(np.mean([r[0].mean() for r in runs])), phi=float(np.mean([r[1].mean() for r in runs])),
                           eps=float(np.mean([r[2].mean() for r in runs])))
    m = measurement
    c = 1 / mu ** 2 if variant == "corrected" else 1 / beta ** 2
    bound = 2 * m["phi"] + 2 * c * m["eps"]
    conds = [Condition("lambda in [1/2, 1]", mix, 0.5, 0.5 <= mix <= 1),
             Condition("mu > 0 (strong convexity; needed by the corrected step)", mu, 0.0, mu > 0)]
    failed = [cd.name for cd in conds if not cd.ok]
    return Verification(name, variant, not failed, "; ".join(f"fails {f}" for f in failed), conds, m["pm"], float(bound),
                        float("nan"), dict(beta=beta, mu=mu, measurement=m))


# -------------------------------------------------------------------- default cases --
@register_cases("feddeper.theorem_1")
def _cases_1(quick=False):
    import problems

    def build():
        return problems.quadratic(10, 3, L=1.0, mu=0.2, heterogeneity=1.0, noise=0.2, seed=0)
    return [Case(f"noisy equal-Hessian quadratic, n=10, S={S}, K=5, a = a_cap, rho = eta beta", "conforming", build,
                 dict(rounds=100 if quick else 400, local_steps=5, clients_per_round=S, seeds=3 if quick else 10),
                 {"printed": True, "corrected": True}) for S in (5, 10)], []


@register_cases("feddeper.theorem_2")
def _cases_2(quick=False):
    import problems

    def build():
        return problems.quadratic(6, 3, L=1.0, mu=0.05, heterogeneity=1.0, seed=1, hessian="distinct")
    return [Case("ill-conditioned quadratic (mu = 0.05), from far away: the paper's 1/beta^2 step", "counterexample",
                 build, dict(rounds=100, local_steps=5, lr=0.05, rho=0.01, mix=0.5, x0=np.full(3, 20.0)),
                 {"printed": False, "corrected": True})], []
