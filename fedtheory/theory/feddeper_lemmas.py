r"""FedDeper, Theorems 1 and 2: the lemmas and proof steps as code (docs/papers/feddeper.md, §4.8).

Each is an inequality between quantities of one run at every round, checked on the ``"personal"``
trace of the registered ``feddeper`` (the path :math:`v_{i,k}^t` of every client; the theorems' own
runs: ``validation.verify(theorem, ..., lemmas=True)`` reuses them). With :math:`a = \eta_lK\beta`,
:math:`p = S/n`,

.. math:: \phi^t = \frac{1}{nK}\sum_{i,k<K}\|v_{i,k}^t - x^t\|^2,\qquad
          \tilde\phi^t = \frac1n\sum_i\|v_{i,0}^t - x^t\|^2,\qquad
          F^t = f(x^t) + 2\eta_lK\beta^2\phi^t + 40(\tfrac1p - \tfrac18)\eta_lK\beta^2\tilde\phi^t,

and :math:`g_t = \|\nabla f(x^t)\|^2`:

* ``feddeper.step_triangle`` (first display of the proof of Theorem 2'):
  :math:`\frac{1}{nK}\sum_{i,k}\|v_{i,k}^t - x^*\|^2 \le 2\xi^t + 4\|x^t - x^*\|^2`,
  :math:`\xi^t = \phi^t + 20(\frac1p - \frac18)\tilde\phi^t`;
* ``feddeper.lemma_5`` (Lemma 5 with :math:`\varepsilon = \eta_lK\beta`, the recursion of the proofs of
  Theorems 1' and 2'): :math:`\xi^{t} \le \xi^{t-1} - \frac5{12}(1 - \frac p8)\tilde\phi^{t-1}
  + (X a^2 - 1)\phi^{t-1} + c_1\eta_l^2K^2g_{t-1} + \frac{25}{12}\eta_l^2K^2B^2g_t + \dots`
  (the constants as printed);
* ``feddeper.lemma_6`` (Lemma 6, one round progress): :math:`F^{t+1} \le F^t - \frac{1}{24}\eta_lKg_t
  + \frac{25}{6}\eta_l^3K^3\beta^2B^2(g_{t+1} - g_t) + C`, with :math:`C = \frac{\eta_lK}{24}` times the
  :math:`a^1 \dots a^6` terms of Theorem 1;
* ``feddeper.step_telescope`` (the proof of Theorem 1', telescoping Lemma 6): printed
  :math:`F^0 - F^t \le \Gamma = f(x^0) - f^*` (the proof's :math:`24\Gamma/(\eta_lKT)`); corrected
  :math:`F^0 - F^t \le \Gamma + 2\eta_lK\beta^2\phi^0` (:math:`\tilde\phi^0 = 0`, but
  :math:`\phi^0 > 0` for K > 1: docs/papers/feddeper.md, §4.2).

The lemmas bound expectations over the gradient noise and the sampling; a run is its own
expectation, and its trace holds every client's path, only with exact gradients and full
participation: a stated condition of each except ``step_triangle`` (pathwise). Each reports the
worst instance and where it is (``Verification.where = dict(round=t)``, ``seed`` too with several
seeds).

Examples
--------
>>> import problems, validation
>>> p = problems.quadratic(2, 2, L=1.0, mu=1.0, heterogeneity=0.0, seed=0)
>>> kw = dict(rounds=1500, local_steps=5, x0=p.info["x_star"] + 1.0)
>>> v = validation.verify("feddeper.step_telescope", p, variant="printed", **kw)
>>> v.verdict(), 1 < v.ratio < 1 + 1e-6                 # F^0 exceeds f(x^0) by 2 eta K beta^2 phi^0
('VIOLATED', True)
>>> validation.verify("feddeper.step_telescope", p, variant="corrected", **kw).verdict()
'holds'
"""
from __future__ import annotations

import math

import numpy as np

from . import families, Case, Condition, register_cases
from .floors import EPS, FLOOR_ULPS, worst_instance, instance_floor
from .engine import instance_variant, register_spec, TheoremSpec, Variant
from .feddeper import (a_cap, problem_constants, _run_kwargs1, _run_kwargs2, sampling_constants, _scale, _setup1,
                       _setup2, _theorem1_conditions, theorem1_terms, _theorem2_conditions, tilde, xi_weight)

_THEOREMS = ("feddeper.theorem_1", "feddeper.theorem_2")


def _setup(problem, rounds=200, local_steps=5, lr=None, rho=None, mix=0.5, clients_per_round=None, batch_size=None,
           seeds=1, x0=None):
    """The run of Theorems 1 and 2 (:func:`fedtheory.theory.feddeper._run_kwargs2`), with Theorem 1's constants."""
    return _setup1(problem, rounds, local_steps, lr, rho, mix, clients_per_round, batch_size, seeds, x0)


def _exact(st):
    ok = (st["S"] == st["n"]) and st["sigma2"] == 0
    return Condition("the run is its own expectation: exact gradients (sigma^2 = 0) and S = n (the potentials "
                     "average the paths of all n clients, A10)", st["sigma2"] + (st["n"] - st["S"]), 0.0, ok)


def paths(st, runs):
    r"""Per run: :math:`x^t` (T, d), :math:`v_{i,k}^t` (T, n, K+1, d) by client, :math:`f(x^t) - f^*` and
    :math:`\|\nabla f(x^t)\|^2` (T,); None unless every client is traced in every round.

    Parameters
    ----------
    st : dict
        The check's setup.
    runs : dict
        The check's runs by label.

    Returns
    -------
    list of dict
        One per run.
    """
    p, out = st["problem"], []
    for s, res in enumerate(runs["main"]):
        if not res.finished:
            raise RuntimeError(f"FedDeper did not complete the run for seed {s}: {res.message}")
        tr = res.trace
        if tr is None or any(len(rt.clients) != st["n"] for rt in tr):
            return None
        X = np.stack([rt.x for rt in tr])
        V = np.zeros((len(tr), st["n"]) + tr[0]["personal"].shape[1:])
        for j, rt in enumerate(tr):
            V[j, np.asarray(rt.clients, dtype=int)] = rt["personal"]
        f = np.array([p.value(x) for x in X])
        g = np.array([float(p.grad(x) @ p.grad(x)) for x in X])
        out.append(dict(X=X, V=V, f=f, g=g))
    return out


def _potentials(st, r):
    K = st["K"]
    X, V = r["X"], r["V"]
    phi = np.mean(np.sum((V[:, :, :K] - X[:, None, None]) ** 2, 3), (1, 2))
    phit = np.mean(np.sum((V[:, :, 0] - X[:, None]) ** 2, 2), 1)
    return phi, phit


def _dx(st, r):
    """The rounding of a traced point's coordinates (their size: the points of the run)."""
    scale = max(float(np.max(np.abs(r["V"]))), float(np.max(np.abs(r["X"]))), _scale(st))
    return FLOOR_ULPS * EPS * scale * math.sqrt(r["X"].shape[1])


def _where(st, s, t):
    return [dict(round=int(k), **({"seed": s} if len(st.get("_runs", ())) > 1 else {})) for k in t]


def _collect(st, runs, one):
    """worst_instance over every run of ``one(seed, paths) -> (lhs, rhs, floor, rounds)``."""
    rs = paths(st, runs)
    st["_runs"] = runs["main"]
    if rs is None:
        return worst_instance([], [], [])
    L_, R_, F_, W = [], [], [], []
    for s, r in enumerate(rs):
        lhs, rhs, fl, t = one(r)
        L_.append(lhs), R_.append(rhs), F_.append(fl)
        W += _where(st, s, t)
    return worst_instance(np.concatenate(L_), np.concatenate(R_), W, np.concatenate(F_))


def _fround(st, f):
    """The rounding of f(x) - f* at each f(x) (f* included)."""
    return FLOOR_ULPS * EPS * (np.abs(f) + abs(st["f_star"]))


def _space(variant, long=False):
    r"""Exact-gradient, full-participation quadratics (the conforming space of Theorem 2,
    :func:`fedtheory.theory.feddeper._space`, without noise): n in 2..6, d in 2..4, mu in [0.02, 0.5],
    heterogeneity in [0, 1], shared or distinct Hessians, K in 1..5, T in 5..40, a a fraction in [0.1, 1] of
    the cap, rho in [0, eta_l beta], lambda in [1/2, 1], x^0 at distance [0.1, 30] from x*. ``long``: mu 1 (= L)
    or in [0.02, 1], heterogeneity 0 (identical clients) or in [0, 1], and T in 5..3000 (log scale): the
    horizons over which a run converges to rounding level, as the telescoped sum needs (it covers the
    registered counterexample of §4.2)."""
    from hypothesis import strategies as st
    from ..testing import draws as fts          # (hypothesis: the test extra, for searches only)

    @st.composite
    def draw_case(draw):
        if long:                                    # the edges: identical clients, condition number 1
            mu, het = fts.choice(1.0, fts.log_uniform(0.02, 1.0)), fts.choice(0.0, fts.uniform(0.0, 1.0))
        else:
            mu, het = fts.log_uniform(0.02, 0.5), fts.uniform(0.0, 1.0)
        p = draw(fts.quadratics(n_clients=fts.integers(2, 6), dim=fts.integers(2, 4), mu=mu, heterogeneity=het,
                                noise=0.0))
        n = p.n_clients
        K, T = draw(fts.integers(1, 5)), draw(fts.log_integers(5, 3000) if long else fts.integers(5, 40))
        beta, _, B2min, G2, _ = problem_constants(p)
        B2 = B2min if math.isfinite(G2(B2min)) else 2 * B2min
        lr = draw(fts.uniform(0.1, 1.0)) * a_cap(B2, n, n) / (K * beta)
        return p, dict(rounds=T, local_steps=K, lr=lr, rho=draw(fts.uniform(0.0, 1.0)) * lr * beta,
                       mix=draw(fts.uniform(0.5, 1.0)), x0=draw(fts.around(p.info["x_star"])), seeds=1)
    return draw_case()


def _cases_fn(variant="printed"):
    return _space(variant)


# -- the first display of the proof of Theorem 2' ------------------------------------------------------------
def _measure_triangle(st, runs):
    K, xs, h = st["K"], st["x_star"], xi_weight(1.0)

    def one(r):
        phi, phit = _potentials(st, r)
        lhs = np.mean(np.sum((r["V"][:, :, :K] - xs) ** 2, 3), (1, 2))
        d2 = np.sum((r["X"] - xs) ** 2, 1)
        rhs = 2 * (phi + h * phit) + 4 * d2
        dx = _dx(st, r)
        fl = FLOOR_ULPS * EPS * (lhs + rhs) + 2 * dx * (np.sqrt(lhs) + 2 * np.sqrt(d2) + 3 * np.sqrt(phi + phit)) + 8 * dx ** 2
        return lhs, rhs, fl, np.arange(len(lhs))
    return _collect(st, runs, one)


STEP_TRIANGLE = register_spec(TheoremSpec(
    name="feddeper.step_triangle", algorithm="feddeper", quantity="(1/(nK)) sum_{i,k} ||v_{i,k}^t - x*||^2",
    statement=r"(1/(nK)) sum_{i,k<K} ||v_{i,k}^t - x*||^2 <= 2 xi^t + 4 ||x^t - x*||^2 at every round t, "
              r"xi^t = phi^t + 20(1/p - 1/8) phi~^t (the triangle inequality of the proof of Theorem 2')",
    setup=_setup2, run_kwargs=_run_kwargs2, measure=_measure_triangle,
    conditions=lambda st, m: _theorem2_conditions(st),
    variants={"printed": Variant("the first display of the proof of Theorem 2', before its false last step",
                                 lambda st, m: m["rhs"], ("stated",))},
    floor=instance_floor, cases=_cases_fn,
    reference="FedDeper, proof of Theorem 2' (first display); docs/papers/feddeper.md, §4.6, §4.8"),
    proof_of="feddeper.theorem_2")


# -- Lemma 5 ---------------------------------------------------------------------------------------------------
def lemma5_constants(st):
    """The coefficients of Lemma 5 (epsilon = eta_l K beta), as printed.

    Parameters
    ----------
    st : dict
        The check's setup.

    Returns
    -------
    dict
        The coefficients by name.
    """
    n, S, eta, K, beta, a = st["n"], st["S"], st["lr"], st["K"], st["beta"], st["a"]
    c = sampling_constants(n, S)
    p, q = c["p"], c["q"]
    cp = 20 * (1 / p - 1 / 48)
    Q = 6 * q * a ** 2 * (1 + 4 * a ** 2) + 34 * p
    Bt2, Gt2 = tilde(st["B2"], st["G2"], n, S)
    B2, G2, s2 = st["B2"], st["G2"], st["sigma2"]
    e2K2 = eta ** 2 * K ** 2
    return dict(h=xi_weight(p), phi=(24 * cp * q * a ** 4 + 12 * cp * (1 - p) ** 2 / p + 4 * cp + 62 * cp * p) * a ** 2,
                phit=xi_weight(p) - 5 / 12 * (1 - p / 8),
                g_prev=(cp * Q * B2 + 12 * cp * (1 - p) ** 2 / p + 4 * cp * (1 + 7 * p) * Bt2) * e2K2,
                g_next=25 / 12 * e2K2 * B2,
                const=((33 * cp * p / 4 + (1 + 7 * p) * cp / S + 25 / 24) * eta ** 2 * K * s2
                       + 2 * cp * q * eta ** 4 * K ** 3 * beta ** 2 * s2 + 6 * cp * q * eta ** 6 * K ** 5 * beta ** 4 * s2
                       + (cp * Q + 25 / 12) * e2K2 * G2 + 4 * cp * (1 + 7 * p) * e2K2 * Gt2),
                cap=min(0.1, (p / (2 * q)) ** 0.25 / (2 * math.sqrt(3))))


def _measure_5(st, runs):
    c = lemma5_constants(st)

    def one(r):
        phi, phit = _potentials(st, r)
        g = r["g"]
        lhs = phi[1:] + c["h"] * phit[1:]
        terms = (c["phi"] * phi[:-1], c["phit"] * phit[:-1], c["g_prev"] * g[:-1], c["g_next"] * g[1:],
                 np.full(lhs.shape, c["const"]))
        rhs = sum(terms)
        dx = _dx(st, r)
        fl = (FLOOR_ULPS * EPS * (lhs + sum(terms)) + 2 * dx * (1 + c["h"]) * (np.sqrt(phi[1:]) + np.sqrt(phit[1:]))
              + 2 * (1 + c["h"]) * dx ** 2)
        return lhs, rhs, fl, np.arange(1, len(phi))
    return _collect(st, runs, one)


def _conditions_5(st, m):
    c = lemma5_constants(st)
    keep = [x for x in _theorem1_conditions(st) if not x.name.startswith(("lambda", "a = "))]
    return keep + [Condition("lambda >= 1/2", st["mix"], 0.5, 0.5 <= st["mix"] <= 1),
                   Condition("a = eta_l K beta <= min{1/10, (p/(2q))^(1/4)/(2 sqrt 3)}", st["a"], c["cap"],
                             st["a"] <= c["cap"] * (1 + 1e-12)),
                   _exact(st)]


LEMMA_5 = register_spec(TheoremSpec(
    name="feddeper.lemma_5", algorithm="feddeper", quantity="xi^t = phi^t + 20(1/p - 1/8) phi~^t",
    statement=r"xi^t <= xi^{t-1} - (5/12)(1 - p/8) phi~^{t-1} + (X a^2 - 1) phi^{t-1} + c_1 eta^2 K^2 ||grad f(x^{t-1})||^2 "
              r"+ (25/12) eta^2 K^2 B^2 ||grad f(x^t)||^2 + c_0 at every round t >= 1 (Lemma 5 with epsilon = eta K beta)",
    setup=_setup, run_kwargs=_run_kwargs1, measure=_measure_5, conditions=_conditions_5,
    variants={"printed": Variant("Lemma 5 as printed (epsilon = eta_l K beta, as the proof of Theorem 2' uses it)",
                                 lambda st, m: m["rhs"])},
    floor=instance_floor, cases=_cases_fn, details=lambda st, m: {"constants": lemma5_constants(st)},
    reference="FedDeper, Lemma 5; docs/papers/feddeper.md, §4.8"),
    proof_of=_THEOREMS)


# -- Lemma 6 and the telescoping of the proof of Theorem 1' ------------------------------------------------------
def _F(st, r):
    phi, phit = _potentials(st, r)
    eta, K, beta = st["lr"], st["K"], st["beta"]
    w1, w2 = 2 * eta * K * beta ** 2, 2 * xi_weight(st["S"] / st["n"]) * eta * K * beta ** 2
    return r["f"] - st["f_star"] + w1 * phi + w2 * phit, w1, w2, phi, phit


def lemma6_constant(st):
    """C of Lemma 6: (eta_l K/24) times the a^1 .. a^6 terms of Theorem 1.

    Parameters
    ----------
    st : dict
        The check's setup.

    Returns
    -------
    float
        C.
    """
    t = theorem1_terms(0.0, st["lr"], st["K"], st["T"], st["beta"], st["n"], st["S"], st["G2"], st["sigma2"], st["B2"])
    return st["lr"] * st["K"] / 24 * sum(t[k] for k in ("a1", "a2", "a3", "a4", "a5", "a6"))


def _measure_6(st, runs):
    C = lemma6_constant(st)
    eta, K, beta = st["lr"], st["K"], st["beta"]
    c = 25 / 6 * eta ** 3 * K ** 3 * beta ** 2 * st["B2"]

    def one(r):
        F, w1, w2, phi, phit = _F(st, r)
        g = r["g"]
        lhs = F[1:] + (eta * K / 24 + c) * g[:-1]
        rhs = F[:-1] + c * g[1:] + C
        dx = _dx(st, r)
        dF = _fround(st, r["f"]) + 2 * dx * (w1 * np.sqrt(phi) + w2 * np.sqrt(phit)) + (w1 + w2) * dx ** 2
        fl = FLOOR_ULPS * EPS * (np.abs(lhs) + np.abs(rhs)) + dF[1:] + dF[:-1]
        return lhs, rhs, fl, np.arange(len(F) - 1)
    return _collect(st, runs, one)


def _conditions_6(st, m):
    return _theorem1_conditions(st) + [_exact(st)]


LEMMA_6 = register_spec(TheoremSpec(
    name="feddeper.lemma_6", algorithm="feddeper", quantity="F^{t+1} - f* + (eta K/24 + (25/6) eta^3 K^3 beta^2 B^2) g_t",
    statement=r"F^{t+1} <= F^t - (1/24) eta K ||grad f(x^t)||^2 + (25/6) eta^3 K^3 beta^2 B^2 (||grad f(x^{t+1})||^2 - "
              r"||grad f(x^t)||^2) + C at every round t (Lemma 6), F^t = f(x^t) + 2 eta K beta^2 phi^t + "
              r"40(1/p - 1/8) eta K beta^2 phi~^t",
    setup=_setup, run_kwargs=_run_kwargs1, measure=_measure_6, conditions=_conditions_6,
    variants={"printed": Variant("Lemma 6 as printed", lambda st, m: m["rhs"], ("stated", "hidden"))},
    floor=instance_floor, cases=_cases_fn, details=lambda st, m: {"C": lemma6_constant(st)},
    reference="FedDeper, Lemma 6 (one round progress); docs/papers/feddeper.md, §4.8"),
    proof_of="feddeper.theorem_1")


def _measure_telescope(st, runs):
    eta, K, beta = st["lr"], st["K"], st["beta"]
    G = st["Gamma"]
    out = {}

    def make(corrected):
        def one(r):
            F, w1, w2, phi, phit = _F(st, r)
            lhs = F[0] - F[1:]
            rhs = np.full(lhs.shape, G + (2 * eta * K * beta ** 2 * phi[0] if corrected else 0.0))
            dx = _dx(st, r)
            dF = _fround(st, r["f"]) + 2 * dx * (w1 * np.sqrt(phi) + w2 * np.sqrt(phit)) + (w1 + w2) * dx ** 2
            fl = FLOOR_ULPS * EPS * (np.abs(lhs) + np.abs(rhs)) + dF[0] + dF[1:] + _fround(st, r["f"][:1])
            return lhs, rhs, fl, np.arange(1, len(F))
        return one
    for v in ("printed", "corrected"):
        out[v] = _collect(st, runs, make(v == "corrected"))
    m = dict(out["printed"], corrected=out["corrected"])
    m["floor"] = max(out["printed"]["floor"], out["corrected"]["floor"])
    return m


STEP_TELESCOPE = register_spec(TheoremSpec(
    name="feddeper.step_telescope", algorithm="feddeper", quantity="F^0 - F^t",
    statement=r"F^0 - F^t <= Gamma = f(x^0) - f* at every round t (the proof of Theorem 1' telescopes Lemma 6 into "
              r"24 Gamma/(eta K T)); corrected: F^0 - F^t <= Gamma + 2 eta K beta^2 phi^0",
    setup=_setup, run_kwargs=_run_kwargs1, measure=_measure_telescope, conditions=_conditions_6,
    variants={"printed": Variant("the telescoped potential as the proof of Theorem 1' bounds it, by Gamma (F^0 = f(x^0))",
                                 lambda st, m: m["rhs"], ("stated",)),
              "corrected": instance_variant("Gamma + 2 eta_l K beta^2 phi^0: F^0 = f(x^0) + 2 eta_l K beta^2 phi^0 (phi~^0 = 0) "
                                   "and F^t >= f*", "corrected", ("stated", "hidden"))},
    default_variant="corrected", floor=instance_floor, cases=lambda variant="printed": _space(variant, long=True),
    reference="FedDeper, proof of Theorem 1'; docs/papers/feddeper.md, §4.2, §4.8"),
    proof_of="feddeper.theorem_1")


# -- registered cases ----------------------------------------------------------------------------------------------
def _homogeneous():
    return families.quadratic(2, 2, L=1.0, mu=1.0, heterogeneity=0.0, seed=0)


def _heterogeneous():
    return families.quadratic(10, 3, L=1.0, mu=0.2, heterogeneity=1.0, seed=0)


def _hom_params():
    return dict(rounds=1500, local_steps=5, x0=_homogeneous().info["x_star"] + 1.0)


def _conforming():
    return Case("exact-gradient heterogeneous quadratic, n = S = 10, K = 5, a = a_cap, rho = eta beta", "conforming",
                _heterogeneous, dict(rounds=100, local_steps=5), {"printed": True})


for _name in ("feddeper.step_triangle", "feddeper.lemma_5", "feddeper.lemma_6"):
    register_cases(_name)(lambda quick=False: ([_conforming()], []))


@register_cases("feddeper.step_telescope")
def _cases_telescope(quick=False):
    """The first O(1/T) term of §4.2: identical clients (G = 0), x^0 - x* = (1, 1), a = a_cap. The run reaches x*
    and phi^t, phi~^t -> 0, so F^0 - F^t -> Gamma + 2 eta K beta^2 phi^0 > Gamma."""
    return [Case("identical clients (G = 0), x^0 = x* + 1, K = 5, a = a_cap, 1500 rounds", "counterexample",
                 _homogeneous, _hom_params(), {"printed": False, "corrected": True},
                 "every condition of Theorem 1 holds; the proof takes F^0 = f(x^0) (docs/papers/feddeper.md, §4.2)"),
            Case(_conforming().label, "conforming", _heterogeneous, dict(rounds=100, local_steps=5),
                 {"printed": True, "corrected": True})], []
