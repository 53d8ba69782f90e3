"""Local descent (Haddadpour & Mahdavi 2019): Theorems 4.4 and 4.7, local SGD on non-convex
objectives, with device sampling (4.4) and on a network (4.7), as code.

Their bounds and step-size conditions, the set-up and measurement of a check, and their default
cases; the quantities they share with Theorems 4.1 and 4.2 are in
:mod:`fedtheory.theory.localdescent_quantities`, the conforming space in
:mod:`fedtheory.theory.localdescent`.
"""
from __future__ import annotations

import math

import numpy as np

from . import Case, Condition, RateStudy, register_cases
from .engine import Erratum, NotApplicable, register_spec, TheoremSpec, Variant
from .localdescent_quantities import (_agnostic_runs, _assumption_constants, _check_common, _f_star,
                                      _grad_sq_average, _lambda_traj, _nonconvex_floor, _nonconvex_rounding,
                                      pl_constants, _traj_runs, _x0)
from .localdescent import conforming_quadratic, _space
from .._argcheck import Bool, check_param, Interval, NoneOk, Options
from ..runs.topology import TOPOLOGIES, check_mixing, mixing_matrix, zeta as zeta_of


# --------------------------------------------------------------- Theorems 4.4 and 4.7 --
def cond23(eta, S, E, L, lam, C1=0.0, corrected=True):
    """Left-hand side of (23) (must be <= 0); ``corrected`` restores the factor E on C1 (step 165).

    Parameters
    ----------
    eta : float
        The local step size.
    S : int
        Clients per round.
    E : int
        Local steps.
    L : float
        Smoothness.
    lam : float
        The gradient diversity bound lambda.
    C1 : float, default 0
        The constant C1 of Assumption 3 (the gradient noise model).
    corrected : bool, default True
        Whether the factor E on C1 is restored.

    Returns
    -------
    float
        The left-hand side.
    """
    c1 = 2 * C1 * E if corrected else 2 * C1
    return -eta / (2 * lam) + (S + 1) * L ** 2 * eta ** 3 * (c1 + E * (E + 1)) / (2 * S) + L * eta ** 2 / 2 * (C1 / S + 1)


def lfsgd_nc_eta_max(S, E, L, lam, C1=0.0, corrected=True):
    """Corollary 4.5: the positive root of (23).

    Parameters
    ----------
    S : int
        Clients per round.
    E : int
        Local steps.
    L : float
        Smoothness.
    lam : float
        The gradient diversity bound lambda.
    C1 : float, default 0
        The constant C1 of Assumption 3 (the gradient noise model).
    corrected : bool, default True
        The corrected (23) or the printed one.

    Returns
    -------
    float
        The largest admissible eta.
    """
    c1 = 2 * C1 * E if corrected else 2 * C1
    c = (S + 1) / S * L ** 2 * (c1 + E * (E + 1))
    b = L * (C1 / S + 1)
    return (-b + math.sqrt(b * b + 4 * c / lam)) / (2 * c)


def bound24(T, eta, S, B, E, L, sigma2, f0):
    """Eq. (24): 2 f0/(eta T) + eta L s^2/(S B) + 2 eta^2 L^2 (E+1) s^2 (S+1)/(S B).

    Parameters
    ----------
    T : int
        Total local steps.
    eta : float
        The local step size.
    S : int
        Clients per round.
    B : int
        Minibatch size.
    E : int
        Local steps.
    L : float
        Smoothness.
    sigma2 : float
        The gradient noise.
    f0 : float
        f(x^0) - f*.

    Returns
    -------
    float
        The bound.
    """
    return 2 * f0 / (eta * T) + eta * L * sigma2 / (S * B) + 2 * eta ** 2 * L ** 2 * (E + 1) * sigma2 * (S + 1) / (S * B)


def cond28(eta, n, E, L, lam, zeta, C1=0.0):
    """Left-hand side of (28) minus 1/lambda (must be <= 0).

    Parameters
    ----------
    eta : float
        The local step size.
    n : int
        Clients.
    E : int
        Local steps.
    L : float
        Smoothness.
    lam : float
        The gradient diversity bound lambda.
    zeta : float
        The mixing rate max(|lambda_2|, |lambda_n|) of W (:func:`fedtheory.runs.topology.zeta`).
    C1 : float, default 0
        The constant C1 of Assumption 3 (the gradient noise model).

    Returns
    -------
    float
        The left-hand side.
    """
    z = zeta
    lhs = (2 * L ** 2 * eta ** 2 * C1 * E / (1 - z ** 2)
           + L ** 2 * eta ** 2 * E ** 2 / (1 - z) * (2 * z ** 2 / (1 + z) + 2 * z / (1 - z) + (E - 1) / E)
           + eta * L * (C1 / n + 1))
    return lhs - 1 / lam


def bound29(T, eta, n, B, E, L, sigma2, zeta, f0):
    """Eq. (29): 2 f0/(eta T) + eta L s^2/(n B) + (L^2 eta^2 s^2/B)((1+z^2)/(1-z^2) E - 1).

    Parameters
    ----------
    T : int
        Total local steps.
    eta : float
        The local step size.
    n : int
        Clients.
    B : int
        Minibatch size.
    E : int
        Local steps.
    L : float
        Smoothness.
    sigma2 : float
        The gradient noise.
    zeta : float
        The mixing rate max(|lambda_2|, |lambda_n|) of W (:func:`fedtheory.runs.topology.zeta`).
    f0 : float
        f(x^0) - f*.

    Returns
    -------
    float
        The bound.
    """
    return (2 * f0 / (eta * T) + eta * L * sigma2 / (n * B)
            + L ** 2 * eta ** 2 * sigma2 / B * ((1 + zeta ** 2) / (1 - zeta ** 2) * E - 1))


def lfsgd_nc_E_max(T, S, lam, C1=0.0):
    """Remark 7: the largest E with 2 C1 + E(E+1) <= (T/S)[S/(lambda (S+1)) - sqrt(S/T)(S+C1)/(S+1)]
    (condition (23) at eta = sqrt(S/T)/L); 0 when none.

    Parameters
    ----------
    T : int
        Total local steps.
    S : int
        Clients per round.
    lam : float
        The gradient diversity bound lambda.
    C1 : float, default 0
        The constant C1 of Assumption 3 (the gradient noise model).

    Returns
    -------
    int
        The largest E (0 when none).
    """
    rhs = T / S * (S / (lam * (S + 1)) - math.sqrt(S / T) * (S + C1) / (S + 1))
    E = 0
    while 2 * C1 + (E + 1) * (E + 2) <= rhs:
        E += 1
    return E


def _setup_4_4(problem, rounds=256, local_steps=4, clients_per_round=2, seeds=10, x0=None, lr=None,
               replicate_duplicates=True, trajectory=True):
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
