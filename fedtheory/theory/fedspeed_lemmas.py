r"""FedSpeed (Sun et al. 2023), Theorem 4.4: the proof steps of Appendix C.4 as code (docs/papers/fedspeed.md, §4.9).

Each step is an inequality between quantities of one run at every round t = 1, ..., T-1, checked on
the trace of the registered ``fedspeed`` (``trace=("z", "ghat", "gbar")``, every round: the
theorem's own runs, which trace every round when the gradients are exact;
``validation.verify("fedspeed.theorem_4_4", ..., lemmas=True)`` reuses them). With
:math:`q = \eta_l/\lambda`, :math:`\gamma = 1 - (1-q)^K`, :math:`\kappa` of the theorem,
:math:`\hat g_i^t` the prox-corrections (line 13), :math:`\bar g^t = \frac1n\sum_i\hat g_i^t`,
:math:`z^t = x^t + \lambda(2 - 1/\gamma)\bar g^{t-1}` and
:math:`G^t = \frac1n\sum_i\sum_k\frac{\gamma_k}{\gamma}\tilde g_{i,k}^t = (\bar g^t - (1-\gamma)\bar g^{t-1})/\gamma`
(eq. (12)):

* ``fedspeed.step_R2`` (the term :math:`\mathbf{R2} = \mathbb E_t\|z^{t+1} - z^t\|^2` of C.4.1):
  :math:`\|z^{t+1} - z^t\|^2 \le \lambda^2\|G^t\|^2` (eq. (13); an identity, checked between the
  traced auxiliary sequence and the clients' messages). The proof then cancels the noise of
  :math:`G^t` against a noise-free term (erratum E3, separated at the theorem's level);
* ``fedspeed.step_descent`` (C.4.3, the per-round inequality the theorem telescopes), with the
  potential :math:`\Psi^t = \frac{F(z^t) - F^*}{\lambda\kappa} + c_A\frac1n\sum_i\|\hat g_i^{t-1}\|^2
  + c_B\|\bar g^{t-1}\|^2`, :math:`c_B = \frac{4\lambda^2L^2(1-2\gamma)^2}{\kappa\gamma^3}`:

  .. math:: \|\nabla F(z^t)\|^2 + \Psi^{t+1} \le \Psi^t + \Phi;

  ``printed``: :math:`c_A = \frac{32\eta_lL^2K}{\kappa\gamma}` and :math:`\Phi = \Phi_{(7)}` (as the
  proof and eq. (7) print them); ``derived``: :math:`c_A = \frac{32\eta_l^2L^2K}{\kappa\gamma}` (E2)
  and :math:`\Phi = \Phi_{(7)}/\lambda` (E1).

Both bound conditional expectations over a round's gradient noise; one run is its own expectation
only with exact gradients, a stated condition of the steps (with noise they are NOT APPLICABLE).
Each reports the worst instance (largest measured/bound) and where: ``Verification.where =
dict(round=t)`` (``seed`` too with several seeds).

Examples
--------
>>> import problems, validation
>>> from fedtheory.theory.fedspeed import spec_problem
>>> p, C = spec_problem(10, 1.0, 0.0)                           # exact gradients, heterogeneous clients
>>> kw = dict(rounds=20, local_steps=4, lr=0.5 / (32 * 12 ** 0.5), alpha=0.0, x0=C.mean(0))
>>> kw["lam"] = kw["lr"] / 0.6
>>> validation.verify("fedspeed.step_descent", p, variant="printed", **kw).verdict()
'VIOLATED'
>>> validation.verify("fedspeed.step_descent", p, variant="derived", **kw).verdict()
'holds'
"""
from __future__ import annotations

import math

import numpy as np

from . import Case, Condition, register_cases
from .floors import EPS, FLOOR_ULPS, grad_sq_floor, worst_instance, instance_floor
from .engine import instance_variant, register_spec, TheoremSpec, Variant
from .fedspeed import _conditions, gamma_total, kappa, _run_kwargs, _scale, _setup, spec_problem

_THEOREM = "fedspeed.theorem_4_4"


def _exact_condition(st):
    return Condition("exact gradients (sigma_l^2 = 0): the step bounds conditional expectations over a round's "
                     "noise, which one run is only without noise", st["sigma_l_sq"], 0.0, bool(st["exact"]))


def _lemma_conditions(st, m):
    return _conditions(st, m) + [_exact_condition(st)]


def rounds(st, runs):
    r"""Per round j = 0..T-1 of every run (from the trace): :math:`z^{j+1}` (``Z``),
    :math:`\hat g_i^j` by client (``GH``, (n, d)) and :math:`\bar g^j` (``GB``); None where the runs
    do not trace every round (noisy gradients).

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
    out = []
    for s, res in enumerate(runs["main"]):
        if not res.finished:
            raise RuntimeError(f"FedSpeed did not complete the run for seed {s}: {res.message}")
        tr = res.trace
        if len(tr) < st["T"]:
            return None
        n, d = st["n"], st["problem"].dim
        GH = np.zeros((len(tr), n, d))
        for j, rt in enumerate(tr):
            GH[j, np.asarray(rt.clients, dtype=int)] = rt["ghat"]
        out.append(dict(Z=np.stack([rt["z"] for rt in tr]), GH=GH, GB=np.stack([rt["gbar"] for rt in tr])))
    return out


def _where(st, s, t):
    return [dict(round=int(r), **({"seed": s} if st["seeds"] > 1 else {})) for r in t]


def _empty():
    return worst_instance([], [], [])


def _constants(st):
    L, lam, eta, K, a, rho = st["L"], st["lam"], st["lr"], st["K"], st["alpha"], st["rho"]
    kap, gam = kappa(L, eta, K, a, rho), gamma_total(eta / lam, K)
    sg, sl = st["sigma_g_sq"], st["sigma_l_sq"]
    phi = (32 * lam * eta ** 2 * L ** 2 * K * (16 * sg + sl) + lam * a ** 2 * L ** 2 * rho ** 2 * (3 * sg + sl)) / kap
    return dict(kappa=kap, gamma=gam, phi_printed=phi, phi_derived=phi / lam,
                cA_printed=32 * eta * L ** 2 * K / (kap * gam), cA_derived=32 * eta ** 2 * L ** 2 * K / (kap * gam),
                cB=4 * lam ** 2 * L ** 2 * (1 - 2 * gam) ** 2 / (kap * gam ** 3))


# -- R2 ----------------------------------------------------------------------------------------------------
def _measure_R2(st, runs):
    rs = rounds(st, runs)
    if rs is None:
        return _empty()
    lam, gam = st["lam"], gamma_total(st["lr"] / st["lam"], st["K"])
    L_, R_, F_, W = [], [], [], []
    for s, r in enumerate(rs):
        Z, gbar = r["Z"], r["GH"].mean(axis=1)                   # the clients' messages, not the server's state
        t = np.arange(1, len(Z))
        dz = Z[t] - Z[t - 1]
        G = (gbar[t] - (1 - gam) * gbar[t - 1]) / gam
        lhs, rhs = np.sum(dz ** 2, 1), lam ** 2 * np.sum(G ** 2, 1)
        # the rounding of a difference of z's (of size |z|) and of G (of size |gbar|/gamma)
        e = FLOOR_ULPS * EPS * np.maximum(np.linalg.norm(Z[t], axis=1) + np.linalg.norm(Z[t - 1], axis=1),
                                          lam * (np.linalg.norm(gbar[t], axis=1) + np.linalg.norm(gbar[t - 1], axis=1)) / gam)
        L_.append(lhs), R_.append(rhs), F_.append(2 * e * (np.sqrt(lhs) + np.sqrt(rhs)) + 2 * e ** 2)
        W += _where(st, s, t)
    return worst_instance(np.concatenate(L_), np.concatenate(R_), W, np.concatenate(F_))


def _space(variant):
    r"""The exact-gradient quadratics of docs/papers/fedspeed.md, §4.6 (:func:`spec_problem` with noise 0: n in
    1..10, heterogeneity in [0, 1.5], construction seed drawn), K in 1..4, eta_l = c/(32 sqrt(3K)) with c in
    [0.01, 0.99] (S2a), q = eta_l/lambda in [max(1/K, 0.3), 1] (S3 and H1-H2), alpha 0 or in [0.05, 1] with
    rho as in the theorem's space (S1, S4), T in 5..2000 (log scale), x^0 at x* or at distance [0.1, 3]."""
    from hypothesis import strategies as st
    from ..testing import draws as fts          # (hypothesis: the test extra, for searches only)

    @st.composite
    def draw_case(draw):
        n, het = draw(fts.integers(1, 10)), draw(fts.uniform(0.0, 1.5))
        seed = draw(fts.integers(0, 2 ** 16))
        p, C = spec_problem(n, het, 0.0, seed)
        p.info = dict(p.info or {}, recipe=f"fedtheory.theory.fedspeed.spec_problem({n}, {het!r}, 0.0, seed={seed})[0]")
        K = draw(fts.integers(1, 4))
        c = draw(fts.uniform(0.01, 0.99))
        eta = c / (32 * math.sqrt(3 * K))
        alpha = draw(fts.choice(0.0, fts.uniform(0.05, 1.0)))
        frac = draw(fts.uniform(0.0, 0.99)) * math.sqrt(1 - c * c)
        rho = frac / (math.sqrt(6) * alpha) if alpha > 0 else 0.0
        q = draw(fts.uniform(max(1.0 / K, 0.3), 1.0))
        return p, dict(rounds=draw(fts.log_integers(5, 2000)), local_steps=K, lr=eta, lam=eta / q, alpha=alpha,
                       rho=rho, x0=draw(fts.around(C.mean(0), radius=fts.choice(0.0, fts.log_uniform(0.1, 3.0)))),
                       seeds=1)
    return draw_case()


STEP_R2 = register_spec(TheoremSpec(
    name="fedspeed.step_R2", algorithm="fedspeed", quantity="||z^{t+1} - z^t||^2",
    statement=r"R2: ||z^{t+1} - z^t||^2 <= lam^2 ||(1/n) sum_i sum_k (gamma_k/gamma) gt_{i,k}^t||^2 at every round "
              r"t >= 1 (eq. (13); the quasi-gradient average from the corrections, eq. (12))",
    setup=_setup, run_kwargs=_run_kwargs, measure=_measure_R2, conditions=_lemma_conditions,
    variants={"printed": Variant("R2 as the proof of C.4.1 writes it (eq. (13))", lambda st, m: m["rhs"])},
    floor=instance_floor, cases=lambda variant="printed": _space(variant),
    reference="Sun et al., FedSpeed (ICLR 2023), Appendix C.4.1 (R2), Lemma C.3 and eq. (13); "
              "docs/papers/fedspeed.md, §4.9"),
    proof_of=_THEOREM)


# -- the per-round inequality of C.4.3 -----------------------------------------------------------------------
def _measure_descent(st, runs):
    rs = rounds(st, runs)
    if rs is None:
        return dict(_empty(), derived=_empty())
    p, c, Fs, lam = st["problem"], _constants(st), st["f_star"], st["lam"]
    lk = lam * c["kappa"]
    gfl = grad_sq_floor(_scale(st), st["L"])
    out = {}
    for v in ("printed", "derived"):
        L_, R_, F_, W = [], [], [], []
        for s, r in enumerate(rs):
            Z, GH, GB = r["Z"], r["GH"], r["GB"]
            t = np.arange(1, len(Z))
            Fz = np.array([p.value(z) for z in Z])
            g2 = np.array([float(p.grad(z) @ p.grad(z)) for z in Z])
            A, B = np.mean(np.sum(GH ** 2, 2), 1), np.sum(GB ** 2, 1)
            lhs_terms = (g2[t - 1], (Fz[t] - Fs) / lk, c["cA_" + v] * A[t], c["cB"] * B[t])
            # the display of C.4.3 divided by lam kappa: Phi/lam in both forms (the spurious lam of E1 enters
            # only when the theorem telescopes it); the forms differ in c_A (eta_l printed, E2; eta_l^2 derived)
            rhs_terms = ((Fz[t - 1] - Fs) / lk, c["cA_" + v] * A[t - 1], c["cB"] * B[t - 1],
                         np.full(t.shape, c["phi_derived"]))
            lhs, rhs = sum(lhs_terms), sum(rhs_terms)
            fl = (FLOOR_ULPS * EPS * (sum(np.abs(x) for x in lhs_terms + rhs_terms)
                                      + (np.abs(Fz[t]) + np.abs(Fz[t - 1]) + 2 * abs(Fs)) / lk) + gfl)
            L_.append(lhs), R_.append(rhs), F_.append(fl)
            W += _where(st, s, t)
        out[v] = worst_instance(np.concatenate(L_), np.concatenate(R_), W, np.concatenate(F_))
    m = dict(out["printed"], derived=out["derived"])
    m["floor"] = max(out["printed"]["floor"], out["derived"]["floor"])
    return m


STEP_DESCENT = register_spec(TheoremSpec(
    name="fedspeed.step_descent", algorithm="fedspeed", quantity="||grad F(z^t)||^2 + Psi^{t+1}",
    statement=r"||grad F(z^t)||^2 + Psi^{t+1} <= Psi^t + Phi at every round t >= 1, Psi^t = (F(z^t) - F*)/(lam kappa) "
              r"+ c_A (1/n) sum_i ||ghat_i^{t-1}||^2 + c_B ||gbar^{t-1}||^2 (C.4.3, the inequality the theorem "
              r"telescopes; Phi/lam in both; printed: c_A = 32 eta_l L^2 K/(kappa gamma); derived: eta_l^2 in c_A)",
    setup=_setup, run_kwargs=_run_kwargs, measure=_measure_descent, conditions=_lemma_conditions,
    variants={"printed": Variant("the per-round inequality as the proof prints it: c_A with eta_l (E2), and "
                                 "Phi/lambda (the display of C.4.3 divided by lambda kappa)", lambda st, m: m["rhs"],
                                 ("stated",)),
              "derived": instance_variant("c_A with eta_l^2 (erratum E2), and Phi/lambda", "derived",
                                          ("stated", "hidden"))},
    default_variant="derived", floor=instance_floor, cases=lambda variant="derived": _space(variant),
    details=lambda st, m: {"constants": _constants(st)},
    reference="Sun et al., FedSpeed (ICLR 2023), Appendix C.4.2-C.4.3; docs/papers/fedspeed.md, §4.5 (E1, E2), §4.9"),
    proof_of=_THEOREM)


# -- registered cases ------------------------------------------------------------------------------------------
def _params(shift, rounds=50):
    eta = 0.5 / (32 * math.sqrt(12))
    C = spec_problem(10, 1.0, 0.0)[1]
    return dict(rounds=rounds, local_steps=4, lr=eta, lam=eta / 0.6, alpha=0.5, rho=0.5 / (math.sqrt(6) * 0.5),
                x0=C.mean(0) + shift, seeds=1)


def _build():
    return spec_problem(10, 1.0, 0.0)[0]


@register_cases("fedspeed.step_R2")
def _cases_R2(quick=False):
    return [Case("C1 with exact gradients, x^0 = x* + 1", "conforming", _build, _params(1.0), {"printed": True})], []


@register_cases("fedspeed.step_descent")
def _cases_descent(quick=False):
    """Erratum E2 at the per-round inequality (the display of C.4.3, divided by lam kappa): two
    heterogeneous clients with exact gradients, found by ``validation.falsify("fedspeed.step_descent",
    variant="printed", seed=0)``. The corrections grow from 0 in the first rounds, so the telescoped
    term c_A (mean ||ghat^{t-1}||^2 - mean ||ghat^t||^2) is negative; with eta_l in c_A (E2) it
    outweighs the step's slack at round 1. E1 (the spurious lambda of eq. (7)) enters only when the
    theorem telescopes this inequality: both forms here carry Phi/lambda."""
    return [Case("two heterogeneous clients with exact gradients, K = 2, 7 rounds", "counterexample",
                 lambda: spec_problem(2, 1.0, 0.0, seed=0)[0],
                 dict(rounds=7, local_steps=2, lr=0.0063788795384978605, lam=0.012757759076995721, alpha=0.0,
                      rho=0.0, x0=np.array([0.243662638001439, 0.5859475909194176, 0.7937518067862621,
                                            -0.29941755932697645, -0.9005454221035818]), seeds=1),
                 {"printed": False, "derived": True},
                 "every stated and hidden condition holds; erratum E2 (docs/papers/fedspeed.md, §4.5)"),
            Case("C1 with exact gradients, x^0 = x* + 1", "conforming", _build, _params(1.0),
                 {"printed": True, "derived": True})], []
