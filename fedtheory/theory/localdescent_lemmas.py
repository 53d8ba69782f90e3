r"""Haddadpour & Mahdavi (2019): the lemmas and proof steps of Theorems 4.1, 4.2, 4.4 and 4.7, as code
(docs/papers/localdescent.md, §4.5).

Each is an inequality at every local step, round or period of one run of the registered algorithm
(``lfd`` for Theorems 4.1-4.4, ``nfsgd`` for 4.7), read from the theorem's own runs and traces
(``trace="local"``: ``validation.verify(theorem, ..., lemmas=True)`` reuses them). With
:math:`y_{s,k}` the local iterate of participant s after k local steps of a round, :math:`w_s` its
aggregation weight (q under full participation and for NFSGD), :math:`d_{s,k}` the direction it used
(the exact gradient plus the traced noise, or the traced minibatch gradient), the virtual average
:math:`\bar x^{(t)} = \sum_s w_s y_{s,k}` and :math:`\tilde g^{(t)} = \sum_s w_s d_{s,k}` (t = rE + k):

* the descent step of every proof, pathwise (``localdescent.step_35`` for Theorem 4.1,
  ``step_48`` for 4.2, ``step_65`` for 4.4, ``step_79`` for 4.7, with the averaging identity (75)):

  .. math:: f(\bar x^{(t+1)}) - f^* \le f(\bar x^{(t)}) - f^* - \eta_t\langle\nabla f(\bar x^{(t)}), \tilde g^{(t)}\rangle
            + \frac{L\eta_t^2}{2}\|\tilde g^{(t)}\|^2 ;

* ``localdescent.lemma_a5`` (Lemma A.5, what closes the proof of Theorem 4.1): the implication "step
  condition <= 1 => (43) <= 1" at the run's step, (43) being the recursion's requirement
  :math:`\eta L\lambda[1 + 4\kappa E((1-\mu\eta)^{1-E} - 1)] \le 1`: the premise is the theorem's
  condition (19) (printed, stated) or (46) (corrected); the step is the only thing the run supplies
  (erratum §4.1: not separable, since (46) bounds (43) from above);
* ``localdescent.lemma_a4`` (Lemma A.4, the recursion (42) reduced): per round,
  :math:`f(x^{r+1}) - f^* \le (1-\mu\eta)^E (f(x^r) - f^*)` (full participation: pathwise is the
  expectation);
* ``localdescent.lemma_b6`` (Lemma B.6): its step-size requirement (60) on every period [s, e] of the
  run's step sizes, :math:`\max_{k}\eta_k[D + 2\sum_{m=k+1}^{e} c\,\eta_m/\prod_{i=k+1}^{m}(1-\mu\eta_i)]
  \le 1`, printed under (i)-(iv) of Theorem 4.2, corrected under the direct check (erratum §4.2);
* ``localdescent.step_165`` (the C1 term of (164) -> (165), per unit C1, per period): with
  :math:`G_k = \sum_s w_s\|\nabla f_{j_s}(y_{s,k})\|^2`,
  :math:`\sum_{r=1}^{E}\sum_{k=1}^{r} G_k \le \sum_{k=1}^{E} G_k` printed, :math:`\le E\sum_k G_k`
  corrected (erratum §4.3);
* ``localdescent.step_87`` ((87) -> (88): the first term of (87) at the run's step,
  :math:`\lambda\eta L(C_1/n + 2) \le \tfrac12\sqrt{T_0/T}`, the threshold :math:`T_0` of the informal
  Theorem 3.4, :math:`4\lambda^2(C_1/n+2)^2` printed, :math:`4\lambda^2 n(C_1/n+2)^2` corrected (erratum §4.4)).

Each reports the worst instance (largest measured/bound) and where it is (``Verification.where``).

Examples
--------
>>> import numpy as np, problems, validation
>>> p = problems.quadratic(4, 3, L=12.0, mu=10.0, shared_minimizer=True, hessian="distinct", seed=0)
>>> kw = dict(rounds=3, local_steps=3, seeds=1, x0=np.ones(3), eta_rule="19")
>>> v = validation.verify("localdescent.lemma_a5", p, variant="printed", **kw)   # (19) holds, (43) fails
>>> v.verdict(), round(v.ratio, 2)
('VIOLATED', 2.42)
>>> validation.verify("localdescent.lemma_a5", p, variant="corrected", **kw).verdict()   # (46) fails here
'NOT APPLICABLE'
"""
from __future__ import annotations

import math

import numpy as np

from . import families
from . import Case, Condition, register_cases
from .floors import EPS, FLOOR_ULPS, worst_instance
from .floors import instance_floor
from .engine import instance_variant, NotApplicable, register_spec, TheoremSpec, Variant
from .localdescent import (cond19_printed, cond43, cond46, conforming_quadratic, _run_kwargs_4_1, _setup_4_1,
                           _space)
from .localdescent_pl import _conditions_4_2, counterexample_4_2, lemma_b6_worst, _run_kwargs_4_2, _setup_4_2
from .localdescent_quantities import client_gradients, _f_star, objective_gradients
from .localdescent_nonconvex import _run_kwargs_4_4, _run_kwargs_4_7, _setup_4_4, _setup_4_7

_REF = "Haddadpour & Mahdavi 2019"
_PAGE = "docs/papers/localdescent.md, §4.5"


def _trace(res, s):
    if res.trace is None:
        raise ValueError(f"run {s} has no trace: the lemma reads the traced local iterates (trace='local')")
    return res.trace


def _directions(problem, rt, K):
    r"""The directions :math:`d_{s,k}` participant s used at local step k < K: the exact gradient at its
    traced iterate plus the traced noise, or its traced minibatch gradient."""
    Y = rt["local"][:, :K]
    if rt.idx.shape[2]:
        return np.array([[problem.client_grad(int(c), Y[s, k], rt.idx[s, k]) for k in range(K)]
                         for s, c in enumerate(rt.clients)])
    G = client_gradients(problem, rt.clients, Y)
    if rt.noise.shape[0]:
        G = G + rt.noise[:, :K]
    return G


def _where(st, s, r, **kw):
    return dict(round=r, **kw, **({"seed": s} if st["seeds"] > 1 else {}))


# -- the descent step, pathwise (35), (48), (65), (79) -----------------------------------------------------
def _measure_descent(st, runs):
    r"""At every local step of every run: f(xbar^{(t+1)}) against the right-hand side of the smoothness
    inequality with the averaged direction :math:`\tilde g^{(t)}` the participants used."""
    p, L = st["problem"], st["L"]
    fs = _f_star(p)
    lhs, rhs, floor, where = [], [], [], []
    for s, res in enumerate(runs["main"]):
        for r, rt in enumerate(_trace(res, s)):
            if not rt.completed:
                continue
            K = rt.K
            w = np.asarray(rt.weights, dtype=float)
            w = w / w.sum()
            Y = rt["local"]
            X = np.einsum("s,skd->kd", w, Y)                     # xbar at k = 0..K
            D = _directions(p, rt, K)
            g = np.einsum("s,skd->kd", w, D)                     # (K, d)
            with np.errstate(all="ignore"):
                F = np.array([p.value(x) for x in X]) - fs           # the gaps f(xbar) - f*
                gf = objective_gradients(p, X[:K])
                eta = np.asarray(rt.lrs, dtype=float)
                inner = eta * np.einsum("kd,kd->k", gf, g)
                quad = L * eta ** 2 / 2 * np.sum(g * g, axis=1)
                scale = max(float(np.max(np.abs(Y))), float(np.max(np.abs(X))))
                gsc = np.linalg.norm(gf, axis=1) + L * scale
            lhs.append(F[1:])
            rhs.append(F[:K] - inner + quad)
            # rounding: of f at both points, of the two terms, and of the points themselves (a weighted
            # average of local iterates of size `scale`, moved through the gradient)
            floor.append(FLOOR_ULPS * EPS * (np.abs(F[1:] + fs) + np.abs(F[:K] + fs) + 2 * abs(fs) + np.abs(inner)
                                             + quad + gsc * scale))
            where.extend(_where(st, s, r, step=k) for k in range(K))
    if not where:
        return dict(values=[0.0], rhs=0.0, floor=0.0, where=None, instances=0)
    return worst_instance(np.concatenate(lhs), np.concatenate(rhs), where, np.concatenate(floor))


def _descent_conditions(st, m):
    return [Condition("L = max_j L_j bounds the smoothness of f (Assumption 1)", st["L"], 0.0, st["L"] > 0)]


def _descent_spec(name, theorem, eq, algorithm, setup, run_kwargs, space, what):
    return register_spec(TheoremSpec(
        name=name, algorithm=algorithm, quantity="f(xbar^(t+1)) - f*",
        statement=rf"f(xbar^(t+1)) - f* <= f(xbar^(t)) - f* - eta_t <grad f(xbar^(t)), g~^(t)> + (L eta_t^2/2) ||g~^(t)||^2 at "
                  rf"every local step ({eq} pathwise; g~^(t) the {what})",
        setup=setup, run_kwargs=run_kwargs, measure=_measure_descent, conditions=_descent_conditions,
        variants={"printed": Variant(f"{eq} for the realised draw and noise (its expectation is what the proof "
                                     "takes)", lambda st, m: m["rhs"])},
        floor=instance_floor, cases=space,
        reference=f"{_REF}, {eq} (proof of Theorem {theorem}); {_PAGE}"),
        proof_of=(f"localdescent.theorem_{theorem.replace('.', '_')}",))


_LFD_G = "participants' directions averaged with the round's aggregation weights"
STEP_35 = _descent_spec("localdescent.step_35", "4.1", "eq. (35)", "lfd", _setup_4_1, _run_kwargs_4_1,
                        _space("4.1"), _LFD_G)


# -- Lemma A.5 (closes the proof of Theorem 4.1) -----------------------------------------------------------
def _measure_a5(st, runs):
    """(43), (46) and (19) at the step each round of each run took."""
    L, mu, lam = st["L"], st["mu"], st["lam_sup"]
    v43, v46, v19, where = [], [], [], []
    for s, res in enumerate(runs["main"]):
        for r, rt in enumerate(_trace(res, s)):
            eta, E = float(rt.lrs[0]), rt.K
            v43.append(cond43(eta, L, lam, mu, E))
            v46.append(cond46(eta, L, lam, mu, E))
            v19.append(cond19_printed(eta, L, lam, mu, E) if mu * eta < 1 else math.inf)
            where.append(_where(st, s, r))
    v43 = np.array(v43)
    return worst_instance(v43, np.ones_like(v43), where, FLOOR_ULPS * EPS * v43)


def _conditions_a5(st, m):
    """The premise of each form: (19) <= 1 (printed, stated) or (46) <= 1 (corrected, hidden), with mu eta < 1."""
    eta, L, mu, lam, E = st["lr"], st["L"], st["mu"], st["lam_sup"], st["E"]
    c19 = cond19_printed(eta, L, lam, mu, E) if mu * eta < 1 else math.inf
    c46 = cond46(eta, L, lam, mu, E) if mu * eta < 1 else math.inf
    return [Condition("(19) as printed: eta lambda [L + 4 kappa L E/(mu (1-mu eta)^{E-1})] <= 1 (lambda = sup)",
                      c19, 1.0, c19 <= 1, role="stated"),
            Condition("mu eta < 1 (Delta = 1 - mu eta > 0 in (40)-(46))", mu * eta, 1.0, mu * eta < 1, role="hidden"),
            Condition("(46) <= 1 (the premise of Lemma A.5 as proved)", c46, 1.0, c46 <= 1, role="hidden")]


def _space_a5(variant):
    r"""Theorem 4.1's space with the curvature's scale drawn too (``curvature_scales``: (19) is not scale
    invariant, its extra 1/mu; it covers the registered counterexample, mu = 10) and the step at the bound
    of each form's premise: (19) printed, (46) corrected."""
    return _space("4.1", curvature_scales=True)(variant).map(
        lambda c: (c[0], dict(c[1], eta_rule="46" if variant == "corrected" else "19")))


LEMMA_A5 = register_spec(TheoremSpec(
    name="localdescent.lemma_a5", algorithm="lfd", quantity="the left-hand side of (43) at the run's step",
    statement=r"(43) at the run's step: eta L lambda [1 + 4 kappa E ((1-mu eta)^{1-E} - 1)] <= 1, under the "
              r"theorem's step condition (19) <= 1 (printed) or (46) <= 1 (corrected): the implication of Lemma A.5",
    setup=_setup_4_1, run_kwargs=_run_kwargs_4_1, measure=_measure_a5, conditions=_conditions_a5,
    variants={"printed": Variant("Theorem 4.1's stated condition (19) implies (43), as Lemma A.5 has (46) do",
                                 lambda st, m: m["rhs"], ("stated",)),
              "corrected": Variant("Lemma A.5 as proved: (46) <= 1 implies (43) <= 1, for mu eta < 1 "
                                   "(docs/papers/localdescent.md, §4.1)", lambda st, m: m["rhs"], ("hidden",))},
    default_variant="corrected", floor=instance_floor, cases=_space_a5,
    reference=f"{_REF}, Lemma A.5, eqs. (19), (43), (46); docs/papers/localdescent.md, §4.1"),
    proof_of=("localdescent.theorem_4_1",))


# -- Lemma A.4 (the recursion, per round) ------------------------------------------------------------------
def _measure_a4(st, runs):
    p, fs, mu, eta = st["problem"], st["f_star"], st["mu"], st["lr"]
    lhs, rhs, floor, where = [], [], [], []
    for s, res in enumerate(runs["main"]):
        tr = _trace(res, s)
        X = list(res.iterates[:len(tr) + 1])
        for r, rt in enumerate(tr):
            if r + 1 >= len(X) or not rt.completed:
                break
            with np.errstate(all="ignore"):
                a0, a1 = p.value(X[r]) - fs, p.value(X[r + 1]) - fs
            lhs.append(a1)
            rhs.append((1 - mu * eta) ** rt.K * a0)
            floor.append(FLOOR_ULPS * EPS * (abs(fs) + abs(a0 + fs) + abs(a1 + fs)))
            where.append(_where(st, s, r))
    return worst_instance(lhs, rhs, where, floor)


def _conditions_a4(st, m):
    eta, L, mu, lam, E = st["lr"], st["L"], st["mu"], st["lam_sup"], st["E"]
    c43 = cond43(eta, L, lam, mu, E)
    cpr = st["clients_per_round"]
    return [Condition("(43): eta L lambda [1 + 4 kappa E ((1-mu eta)^{1-E} - 1)] <= 1 (lambda = sup)", c43, 1.0,
                      c43 <= 1),
            Condition("mu eta < 1 (Delta = 1 - mu eta > 0)", mu * eta, 1.0, mu * eta < 1),
            Condition("full participation (the lemma bounds an expectation over the draw: pathwise only without "
                      "sampling)", 0.0 if cpr is None else float(cpr), 0.0, cpr is None)]


def _setup_a4(problem, rounds=50, local_steps=5, lr=None, clients_per_round=None, seeds=10, x0=None,
              trajectory=True, eta_rule="43"):
    st = _setup_4_1(problem, rounds, local_steps, lr, clients_per_round, seeds, x0, trajectory, eta_rule)
    if clients_per_round is not None:
        raise NotApplicable("Lemma A.4 bounds E[f(xbar^(t)) - f*] over the draw of the clients; one sampled run "
                            "does not measure it (checked with full participation, clients_per_round=None)",
                            _conditions_a4(st, {}))
    return st


LEMMA_A4 = register_spec(TheoremSpec(
    name="localdescent.lemma_a4", algorithm="lfd", quantity="f(x^{r+1}) - f*",
    statement=r"f(x^{r+1}) - f* <= (1 - mu eta)^E (f(x^r) - f*) at every round (Lemma A.4 iterated over a period, "
              r"(44); full participation)",
    setup=_setup_a4, run_kwargs=_run_kwargs_4_1, measure=_measure_a4, conditions=_conditions_a4,
    variants={"printed": Variant("Lemma A.4 as printed: under (43) the recursion (42) contracts by 1 - mu eta per "
                                 "step, (1 - mu eta)^E per period", lambda st, m: m["rhs"])},
    floor=instance_floor, cases=_space("4.1"),
    reference=f"{_REF}, Lemma A.4, eqs. (42)-(45); docs/papers/localdescent.md, §4.1"),
    proof_of=("localdescent.theorem_4_1",))


# -- Theorem 4.2: (48) and Lemma B.6 -----------------------------------------------------------------------
STEP_48 = _descent_spec("localdescent.step_48", "4.2", "eq. (48) of Lemma B.1", "lfd", _setup_4_2,
                        _run_kwargs_4_2, _space("4.2"), _LFD_G)


def _measure_b6(st, runs):
    """Lemma B.6's requirement (60) on every period of the run's step sizes (the traced lrs)."""
    L, mu, lam, S, C1, E = st["L"], st["mu"], st["lam_sup"], st["S"], st["C1"], st["E"]
    D = lam * L * (C1 + S) / S
    c = lam * L ** 2 * (S + 1) * (C1 + E) / S
    vals, where = [], []
    for s, res in enumerate(runs["main"]):
        for r, rt in enumerate(_trace(res, s)):
            etas = np.asarray(rt.lrs, dtype=float)
            vals.append(lemma_b6_worst(etas, len(etas), mu, D, c))
            where.append(_where(st, s, r))
    vals = np.array(vals)
    return worst_instance(vals, np.ones_like(vals), where, FLOOR_ULPS * EPS * vals)


LEMMA_B6 = register_spec(TheoremSpec(
    name="localdescent.lemma_b6", algorithm="lfd", quantity="max_k eta_k (D + 2 sum_m c eta_m / prod (1 - mu eta_i))",
    statement=r"(60) on every period [s, e] of the run: eta_k (D + 2 sum_{m=k+1}^{e} c eta_m / prod_{i=k+1}^{m} "
              r"(1 - mu eta_i)) <= 1, D = lambda L (C1+S)/S, c = lambda L^2 (S+1)(C1+E)/S",
    setup=_setup_4_2, run_kwargs=_run_kwargs_4_2, measure=_measure_b6, conditions=_conditions_4_2,
    variants={"printed": Variant("Lemma B.6's requirement (60), as Theorem 4.2 derives it from (i)-(iv) (Lemma B.7)",
                                 lambda st, m: 1.0, ("stated",)),
              "corrected": Variant("(60) under the direct per-period check, a >= E - 1 and a >= 4 lambda kappa "
                                   "(C1+S)/S (docs/papers/localdescent.md, §4.2)", lambda st, m: 1.0, ("hidden",))},
    default_variant="corrected", floor=instance_floor, cases=_space("4.2"),
    reference=f"{_REF}, Lemmas B.6-B.7, eqs. (58)-(61); docs/papers/localdescent.md, §4.2"),
    proof_of=("localdescent.theorem_4_2",))


# -- Theorem 4.4: (65) and step (165) ----------------------------------------------------------------------
STEP_65 = _descent_spec("localdescent.step_65", "4.4", "eq. (65)", "lfd", _setup_4_4, _run_kwargs_4_4,
                        _space("4.4"), _LFD_G)


def _measure_165(st, runs):
    r"""Per period (round): :math:`\sum_{r=1}^{E}\sum_{k=1}^{r} G_k = \sum_k (E - k) G_k` (k = 0..E-1) and
    :math:`\sum_k G_k`, :math:`G_k` the weighted squared exact gradients at the participants' iterates."""
    p = st["problem"]
    lhs, psum, where = [], [], []
    for s, res in enumerate(runs["main"]):
        for r, rt in enumerate(_trace(res, s)):
            if not rt.completed:
                continue
            K = rt.K
            w = np.asarray(rt.weights, dtype=float)
            w = w / w.sum()
            G = np.einsum("s,sk->k", w, np.sum(client_gradients(p, rt.clients, rt["local"][:, :K]) ** 2, axis=2))
            lhs.append(float(np.sum((K - np.arange(K)) * G)))
            psum.append(float(np.sum(G)))
            where.append(_where(st, s, r))
    lhs, psum, E = np.array(lhs), np.array(psum), st["E"]
    fl = FLOOR_ULPS * EPS * lhs
    return dict(worst_instance(lhs, psum, where, fl), corrected=worst_instance(lhs, E * psum, where, fl))


def _conditions_165(st, m):
    return [Condition("C1 of Assumption 3 (the step is linear in C1: checked per unit C1, for every C1 > 0)",
                      st["C1"], math.inf, True, role="informational")]


STEP_165 = register_spec(TheoremSpec(
    name="localdescent.step_165", algorithm="lfd", quantity="sum_{r=1}^E sum_{k=1}^r G_k per period",
    statement=r"the C1 term of (164) -> (165), per unit C1, on every period: sum_{r=1}^{E} sum_{k=1}^{r} G_k <= "
              r"sum_{k=1}^{E} G_k (printed; E sum_k G_k corrected), G_k = sum_s w_s ||grad f_{j_s}(y_{s,k})||^2",
    setup=_setup_4_4, run_kwargs=_run_kwargs_4_4, measure=_measure_165, conditions=_conditions_165,
    variants={"printed": Variant("step (165) as printed: the C1 term of (164) bounded by 2 C1 sum_k G_k",
                                 lambda st, m: m["rhs"]),
              "corrected": instance_variant("with the factor E the step drops: 2 C1 E sum_k G_k "
                                   "(docs/papers/localdescent.md, §4.3)", "corrected")},
    default_variant="corrected", floor=instance_floor, cases=_space("4.4"),
    reference=f"{_REF}, proof of Lemma C.1, eqs. (164)-(166); docs/papers/localdescent.md, §4.3"),
    proof_of=("localdescent.theorem_4_4",))


# -- Theorem 4.7: (79) and step (87) -> (88) ---------------------------------------------------------------
STEP_79 = _descent_spec("localdescent.step_79", "4.7", "eq. (79) with the averaging identity (75)", "nfsgd",
                        _setup_4_7, _run_kwargs_4_7, _space("4.7"), "q-average of all clients' directions")


def _measure_87(st, runs):
    r"""Per round: :math:`\lambda\eta L(C_1/n + 2)` at the round's step, and the two thresholds' right-hand
    sides :math:`\frac12\sqrt{T_0/T}`."""
    lam, L, C1, n, T = st["lam_sup"], st["L"], st["C1"], st["n"], st["T"]
    first, where = [], []
    for s, res in enumerate(runs["main"]):
        for r, rt in enumerate(_trace(res, s)):
            first.extend(lam * float(e) * L * (C1 / n + 2) for e in rt.lrs)
            where.extend(_where(st, s, r, step=k) for k in range(rt.K))
    first = np.array(first)
    t_p, t_c = 4 * lam ** 2 * (C1 / n + 2) ** 2, 4 * lam ** 2 * n * (C1 / n + 2) ** 2
    fl = FLOOR_ULPS * EPS * first
    return dict(worst_instance(first, np.full(first.shape, 0.5 * math.sqrt(t_p / T)), where, fl),
                corrected=worst_instance(first, np.full(first.shape, 0.5 * math.sqrt(t_c / T)), where, fl))


def _conditions_87(st, m):
    eta, target = st["eta"], math.sqrt(st["n"] / st["T"]) / st["L"]
    return [Condition("eta = sqrt(n/T)/L, the step (87) substitutes", eta, target,
                      abs(eta - target) <= FLOOR_ULPS * EPS * target)]


STEP_87 = register_spec(TheoremSpec(
    name="localdescent.step_87", algorithm="nfsgd", quantity="lambda eta L (C1/n + 2), the first term of (87)",
    statement=r"(87) -> (88): lambda eta L (C1/n + 2) <= (1/2) sqrt(T_0/T) at eta = sqrt(n/T)/L, i.e. T >= T_0 makes "
              r"the first term of (87) at most 1/(2 lambda); T_0 = 4 lambda^2 (C1/n+2)^2 printed, "
              r"4 lambda^2 n (C1/n+2)^2 corrected",
    setup=_setup_4_7, run_kwargs=_run_kwargs_4_7, measure=_measure_87, conditions=_conditions_87,
    variants={"printed": Variant("the informal Theorem 3.4's threshold T >= 4 lambda^2 (C1/n + 2)^2",
                                 lambda st, m: m["rhs"]),
              "corrected": instance_variant("the threshold with the factor n it misses, T >= 4 lambda^2 n (C1/n + 2)^2 "
                                   "(docs/papers/localdescent.md, §4.4)", "corrected")},
    default_variant="corrected", floor=instance_floor, cases=_space("4.7"),
    reference=f"{_REF}, Appendix D.1, eqs. (86)-(88), Theorem 3.4 (informal); docs/papers/localdescent.md, §4.4"),
    proof_of=("localdescent.theorem_4_7",))


# -- registered cases --------------------------------------------------------------------------------------
def _large_mu():
    """A shared-minimiser quadratic with mu = 10 > 1 (L ~ 15.4, lambda ~ 1.11): the regime where (19)
    admits steps above (43)."""
    return families.quadratic(4, 3, L=12.0, mu=10.0, shared_minimizer=True, hessian="distinct", seed=0)


def _x0(d=6):
    return np.full(d, 2.0)


def _fp_case(label="shared-minimiser quadratic, full participation, E=5, eta from (43)", expect=None):
    return Case(label, "conforming", conforming_quadratic,
                dict(rounds=8, local_steps=5, clients_per_round=None, seeds=1, x0=_x0()), dict(expect or {}))


def _cases_35(quick=False):
    return [_fp_case(), Case("shared-minimiser quadratic, S=3, E=5, eta from (43)", "conforming", conforming_quadratic,
                             dict(rounds=8, local_steps=5, clients_per_round=3, seeds=2, x0=_x0()), {})], []


def _cases_a4(quick=False):
    return [_fp_case()], []


def _cases_a5(quick=False):
    return [Case("mu = 10, E = 3, eta at the bound of the printed (19)", "counterexample", _large_mu,
                 dict(rounds=3, local_steps=3, seeds=1, x0=np.ones(3), eta_rule="19"),
                 {"printed": False, "corrected": False},
                 "docs/papers/localdescent.md, §4.1 (the corrected premise (46) <= 1 fails here)"),
            Case("shared-minimiser quadratic, full participation, E=5, eta from (46)", "conforming", conforming_quadratic,
                 dict(rounds=8, local_steps=5, clients_per_round=None, seeds=1, x0=_x0(), eta_rule="46"),
                 {"corrected": True})], []


def _cases_48(quick=False):
    return [Case("noisy shared-minimiser quadratic, S=2, alpha from Lemma B.6", "conforming",
                 lambda: conforming_quadratic(noise=0.3),
                 dict(rounds=10, local_steps=4, clients_per_round=2, seeds=1, x0=_x0(), trajectory=False), {})], []


def _cases_b6(quick=False):
    return [Case("docs/papers/localdescent.md, §4.2 counterexample: kappa~21, alpha=0.1, E=10, S=2", "counterexample",
                 counterexample_4_2, dict(rounds=5, local_steps=10, alpha=0.1, clients_per_round=2, seeds=1,
                                          x0=2 * np.ones(3), trajectory=False),
                 {"printed": False, "corrected": False}, "docs/papers/localdescent.md, §4.2"),
            Case("noisy shared-minimiser quadratic, S=2, alpha from Lemma B.6", "conforming",
                 lambda: conforming_quadratic(noise=0.3),
                 dict(rounds=10, local_steps=4, clients_per_round=2, seeds=1, x0=_x0(), trajectory=False),
                 {"corrected": True})], []


def _case_44(expect):
    return Case("noisy shared-minimiser quadratic, eta = sqrt(S/T)/L, E=4, S=2", "counterexample" if expect else
                "conforming", lambda: conforming_quadratic(noise=0.3),
                dict(rounds=16, local_steps=4, clients_per_round=2, seeds=1, x0=_x0(), trajectory=False),
                expect, "docs/papers/localdescent.md, §4.3" if expect else "")


def _case_47(expect, topology="ring"):
    return Case(f"noisy shared-minimiser quadratic, {topology} graph, n=8, E=2", "counterexample" if expect else
                "conforming", lambda: conforming_quadratic(noise=0.3),
                dict(rounds=32, local_steps=2, topology=topology, seeds=1, x0=_x0(), trajectory=False),
                expect, "docs/papers/localdescent.md, §4.4" if expect else "")


register_cases("localdescent.step_35")(_cases_35)
register_cases("localdescent.lemma_a5")(_cases_a5)
register_cases("localdescent.lemma_a4")(_cases_a4)
register_cases("localdescent.step_48")(_cases_48)
register_cases("localdescent.lemma_b6")(_cases_b6)
register_cases("localdescent.step_65")(lambda quick=False: ([_case_44({})], []))
register_cases("localdescent.step_165")(lambda quick=False: ([_case_44({"printed": False, "corrected": True})], []))
register_cases("localdescent.step_79")(lambda quick=False: ([_case_47({}), _case_47({}, "complete")], []))
register_cases("localdescent.step_87")(lambda quick=False: ([_case_47({"printed": False, "corrected": True})], []))
