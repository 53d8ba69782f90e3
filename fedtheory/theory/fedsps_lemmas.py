r"""FedSPS (Mukherjee, Loizou, Stich 2023): the lemmas and proof steps of Theorems 3, 6 and 18, as code
(docs/papers/fedsps.md, §4.7).

Each is an inequality between quantities of one run at every global step t = r tau + k, client i,
checked on the trace of the registered ``fedsps`` (``trace=("local", "gammas")``, the theorems' own
runs: ``validation.verify(theorem, ..., lemmas=True)`` reuses them). With
:math:`x_t^i` the local iterate, :math:`B_t^i` its minibatch (the client's data without minibatches),
:math:`g_t^i = \nabla F_i(x_t^i, B_t^i)`, :math:`F_t^i = F_i(x_t^i, B_t^i)` and
:math:`\gamma_t^i` the step used:

* ``fedsps.lemma_14`` (Lemma 14): :math:`\alpha \le \gamma_t^i \le \gamma_b`,
  :math:`\alpha = \min\{1/(2cL), \gamma_b\}`; measured as :math:`\max(\alpha/\gamma_t^i,
  \gamma_t^i/\gamma_b) \le 1`;
* ``fedsps.lemma_8`` (Lemma 8, after Orvieto et al.): printed, the Polyak ratio
  :math:`(F_t^i - \ell_i^*)/(c\|g_t^i\|^2) \le 1/(2c\mu)`, false when :math:`\ell_i^* < F_i^*`
  (erratum 1); corrected, what the proof of Theorem 3(b) uses, :math:`\gamma_t^i \le 1/(2\mu)`, under the
  hidden condition :math:`\gamma_b \le 1/(2\mu)`;
* ``fedsps.lemma_15`` (Lemma 15): :math:`\|\gamma_t^i g_t^i\|^2 \le (\gamma_t^i/c)(F_t^i - \ell_i^*)`;
* ``fedsps.lemma_16`` (Lemma 16): :math:`V_t \le \frac{\tau}{nc}\sum_i\sum_{j=s(t)}^{t-1}\gamma_j^i
  (F_j^i - \ell_i^*)`, :math:`V_t = \frac1n\sum_i\|x_t^i - \bar x_t\|^2`, s(t) the round's start;
* ``fedsps.step_28`` (the one-step inequality (28), the per-step recursion of every proof):
  :math:`\|\bar x_{t+1} - x^*\|^2 \le \|\bar x_t - x^*\|^2 - \frac2n\sum_i\langle x_t^i - x^*,
  \gamma_t^i g_t^i\rangle + \frac2n\sum_i\|\gamma_t^i g_t^i\|^2 + V_t`.

Each reports the worst instance (largest measured/bound) and where it is:
``Verification.where = dict(round=, client=, step=)`` (``seed`` too with several seeds).

Examples
--------
>>> import numpy as np, problems, validation
>>> p = problems.quadratic(3, 2, L=1.0, mu=0.2, heterogeneity=1.0, hessian="distinct", seed=0)
>>> from fedtheory.theory.fedsps import client_minima
>>> ell = client_minima(p) - 1.0                         # lower bounds 1 below each client's minimum
>>> v = validation.verify("fedsps.lemma_8", p, variant="printed", rounds=3, local_steps=2, c=8.0,
...                       gamma_b=2.0, lower_bound=ell, x0=np.ones(2))
>>> v.verdict(), sorted(v.where)
('VIOLATED', ['client', 'round', 'step'])
>>> validation.verify("fedsps.lemma_8", p, variant="corrected", rounds=3, local_steps=2, c=8.0,
...                   gamma_b=2.0, lower_bound=ell, x0=np.ones(2)).verdict()
'holds'
"""
from __future__ import annotations

import numpy as np

from . import Case, Condition, register_cases
from .engine import EPS, FLOOR_ULPS, NotApplicable, TheoremSpec, Variant, comparison_floor, register_spec, worst_instance
from .fedsps import (_A1, _space, _completed, _constants, _explicit_quadratic, _params, _problem_conditions,
                     _quadratic_blocks, _run_kwargs, _stop_if_inapplicable, _lower_bound_condition, client_minima)

_THEOREMS = ("fedsps.theorem_3a", "fedsps.theorem_3b", "fedsps.theorem_6a", "fedsps.theorem_18")


def _setup(problem, rounds=20, local_steps=2, c=0.5, gamma_b=1.0, lower_bound=None, batch_size=None, seeds=1,
           x0=None):
    """The run of a FedSPS theorem (:func:`fedtheory.theory.fedsps._run_kwargs`): ``lower_bound``
    defaults to the client minima f_i*."""
    pc = _problem_conditions(problem, noise=False)
    _params("fedsps lemma", rounds, local_steps, seeds)
    ell = client_minima(problem) if lower_bound is None else lower_bound
    try:
        s = _constants(problem, c, gamma_b, ell, x0)
    except (AssertionError, ValueError) as e:
        raise NotApplicable(f"constants not available: {str(e) or type(e).__name__}", pc) from None
    conds = pc + [_lower_bound_condition(problem, s["ell"], batch_size)]
    _stop_if_inapplicable(pc, conds)
    return dict(s, c=c, gamma_b=gamma_b, tau=local_steps, T=rounds * local_steps, R_run=rounds,
                batch_size=batch_size, seeds=seeds, conds=conds)


def steps(st, runs):
    r"""Every local step of every run: arrays over the steps (seed, round, client, step) of
    :math:`x_t^i` (m, d), :math:`x_{t+1}^i`, :math:`\gamma_t^i`, :math:`F_t^i`, :math:`g_t^i` and
    ``where`` (dicts), from the trace; vectorised for quadratic clients without minibatches.

    Returns
    -------
    dict
        ``x``, ``x_next``, ``gamma``, ``F``, ``g``, ``client`` (index), ``key`` ((seed, round, step)
        of each), ``where``.
    """
    p = st["problem"]
    X, Xn, G, C, K, W, rows = [], [], [], [], [], [], []
    for s, res in enumerate(runs["main"]):
        _completed(res, s)
        for r, rt in enumerate(res.trace):
            Y, gam = rt["local"], np.asarray(rt["gammas"], dtype=float)
            S, tau = gam.shape
            for j in range(S):
                X.append(Y[j, :tau])
                Xn.append(Y[j, 1:tau + 1])
                G.append(gam[j])
                C.append(np.full(tau, int(rt.clients[j])))
                K.extend((s, r, k) for k in range(tau))
                W.extend(dict(round=r, client=int(rt.clients[j]), step=k, **({"seed": s} if st["seeds"] > 1 else {}))
                         for k in range(tau))
                rows.extend(rt.idx[j, k] if rt.idx.shape[2] else None for k in range(tau))
    X, Xn, G, C = np.concatenate(X), np.concatenate(Xn), np.concatenate(G), np.concatenate(C)
    if _explicit_quadratic(p) and all(r is None for r in rows):
        _, Q, c = _quadratic_blocks(p)
        g = np.einsum("mjk,mk->mj", Q[C], X) - c[C] + p.l2 * X
        F = 0.5 * np.einsum("mj,mjk,mk->m", X, Q[C], X) - np.einsum("mj,mj->m", c[C], X) + 0.5 * p.l2 * np.sum(X * X, 1)
    else:
        g = np.array([p.client_grad(int(i), x, r) for i, x, r in zip(C, X, rows)])
        F = np.array([p.client_value(int(i), x, r) for i, x, r in zip(C, X, rows)])
    ell = st["ell"][C]
    # the rounding of F_t^i - ell_i*: a step taken where it is a rounding residue (a converged run under
    # interpolation) has a Polyak ratio of noise, and no lemma speaks of it
    dF = FLOOR_ULPS * EPS * np.maximum(np.abs(F), np.abs(ell))
    return dict(x=X, x_next=Xn, gamma=G, F=F, g=g, client=C, key=K, where=W, ell=ell, dF=dF, resolved=F - ell > dF)


def _floor(st, m):
    """The floor of the worst instance (:func:`~fedtheory.theory.engine.worst_instance`) and of the comparison."""
    return m.get("floor", 0.0) + comparison_floor(m["values"][0], m.get("rhs", 0.0))


def _run(st):
    return _run_kwargs(st)


def _conditions(st, m):
    return list(st["conds"])


# -- Lemma 14 --------------------------------------------------------------------------------------------
def _measure_14(st, runs):
    q = steps(st, runs)
    with np.errstate(divide="ignore"):
        lhs = np.maximum(st["alpha"] / q["gamma"], q["gamma"] / st["gamma_b"])
    return worst_instance(lhs, np.ones_like(lhs), q["where"], FLOOR_ULPS * EPS, keep=q["resolved"])


LEMMA_14 = register_spec(TheoremSpec(
    name="fedsps.lemma_14", algorithm="fedsps", quantity="max(alpha/gamma_t^i, gamma_t^i/gamma_b)",
    statement=r"alpha <= gamma_t^i <= gamma_b for every t, i (alpha = min{1/(2cL), gamma_b}; A1 and ell_i* <= F_i*)",
    setup=_setup, run_kwargs=_run, measure=_measure_14, conditions=_conditions,
    variants={"printed": Variant("Lemma 14 as printed", lambda st, m: 1.0)},
    assumptions=_A1, floor=_floor, cases=_space("3a"),
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Lemma 14; docs/papers/fedsps.md, §4.7"),
    proof_of=_THEOREMS)


# -- Lemma 8 ---------------------------------------------------------------------------------------------
def _measure_8(st, runs):
    q = steps(st, runs)
    mu, c = st["mu"], st["c"]
    gsq = np.sum(q["g"] ** 2, axis=1)
    ok = (gsq > 0) & q["resolved"]
    with np.errstate(divide="ignore", invalid="ignore"):
        polyak = np.where(ok, (q["F"] - q["ell"]) / (c * gsq), 0.0)
        dpolyak = np.where(ok, q["dF"] / (c * gsq), 0.0)
    cap = 1 / (2 * c * mu) if mu > 0 else np.inf
    printed = worst_instance(polyak, np.full(polyak.shape, cap), q["where"], dpolyak, keep=ok)
    used = worst_instance(q["gamma"], np.full(q["gamma"].shape, 1 / (2 * mu) if mu > 0 else np.inf), q["where"])
    return dict(printed, step=used)


def _conditions_8(st, m):
    mu = st["mu"]
    return list(st["conds"]) + [
        Condition("mu > 0 (per sample)", mu, 0.0, mu > 0),
        Condition("gamma_b <= 1/(2 mu) (hidden: what the proof of Theorem 3(b) uses)", st["gamma_b"],
                  1 / (2 * mu) if mu > 0 else np.inf, mu > 0 and st["gamma_b"] <= 1 / (2 * mu), role="hidden")]


LEMMA_8 = register_spec(TheoremSpec(
    name="fedsps.lemma_8", algorithm="fedsps", quantity="the Polyak ratio (F_t^i - ell_i*)/(c ||g_t^i||^2)",
    statement=r"(F_i(x) - ell_i*)/(c ||grad F_i(x)||^2) <= 1/(2 c mu) (printed); gamma_t^i <= 1/(2 mu) (corrected)",
    setup=_setup, run_kwargs=_run, measure=_measure_8, conditions=_conditions_8,
    variants={"printed": Variant("Lemma 8's upper bound as printed: the Polyak ratio at most 1/(2 c mu)",
                                 lambda st, m: m["rhs"], ("stated",)),
              "corrected": Variant("what the proof of Theorem 3(b) uses, gamma_t^i mu <= 1/2, under the hidden "
                                   "condition gamma_b <= 1/(2 mu) (erratum 1)", lambda st, m: m["step"]["rhs"],
                                   ("stated", "hidden"), values=lambda st, m: m["step"]["values"],
                                   quantity="gamma_t^i", where=lambda st, m: m["step"]["where"])},
    default_variant="corrected", assumptions=_A1, floor=_floor, cases=_space("3a"),
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Lemma 8 (after Orvieto et al.); docs/papers/fedsps.md, §8, "
              "erratum 1"),
    proof_of=("fedsps.theorem_3b",))


# -- Lemma 15 --------------------------------------------------------------------------------------------
def _measure_15(st, runs):
    q = steps(st, runs)
    lhs = q["gamma"] ** 2 * np.sum(q["g"] ** 2, axis=1)
    rhs = q["gamma"] / st["c"] * (q["F"] - q["ell"])
    return worst_instance(lhs, rhs, q["where"], q["gamma"] / st["c"] * q["dF"] + FLOOR_ULPS * EPS * lhs)


LEMMA_15 = register_spec(TheoremSpec(
    name="fedsps.lemma_15", algorithm="fedsps", quantity="||gamma_t^i g_t^i||^2",
    statement=r"||gamma_t^i g_t^i||^2 <= (gamma_t^i / c) (F_i(x_t^i, B_t^i) - ell_i*)",
    setup=_setup, run_kwargs=_run, measure=_measure_15, conditions=_conditions,
    variants={"printed": Variant("Lemma 15 as printed", lambda st, m: m["rhs"])},
    assumptions=_A1, floor=_floor, cases=_space("3a"),
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Lemma 15; docs/papers/fedsps.md, §4.7"),
    proof_of=("fedsps.theorem_3a", "fedsps.theorem_3b"))


# -- Lemma 16 and step (28) --------------------------------------------------------------------------------
def _consensus(st, q):
    """Per global step (seed, round, step): V_t, the virtual averages xbar_t and xbar_{t+1}, the sums
    of (28) and the right-hand side of Lemma 16."""
    n = st["problem"].n_clients
    keys = sorted(set(q["key"]))
    index = {k: a for a, k in enumerate(keys)}
    at = np.array([index[k] for k in q["key"]])
    T, d = len(keys), q["x"].shape[1]
    xbar, xbar_next = np.zeros((T, d)), np.zeros((T, d))
    np.add.at(xbar, at, q["x"] / n)
    np.add.at(xbar_next, at, q["x_next"] / n)
    V = np.zeros(T)
    np.add.at(V, at, np.sum((q["x"] - xbar[at]) ** 2, axis=1) / n)
    step = q["gamma"][:, None] * q["g"]
    inner, sq = np.zeros(T), np.zeros(T)
    np.add.at(inner, at, np.einsum("mj,mj->m", q["x"] - st["x_star"], step))
    np.add.at(sq, at, np.sum(step ** 2, axis=1))
    per, dper = np.zeros(T), np.zeros(T)
    np.add.at(per, at, q["gamma"] * (q["F"] - q["ell"]))    # sum_i gamma_t^i (F_t^i - ell_i*) at each t
    np.add.at(dper, at, q["gamma"] * q["dF"])                # and its rounding
    ks = np.array([k for _, _, k in keys])
    starts = np.flatnonzero(ks == 0)                         # s(t): the first step of each round (and seed)
    csum, dsum = np.cumsum(per) - per, np.cumsum(dper) - dper       # sums over j < t
    first = starts[np.searchsorted(starts, np.arange(T), side="right") - 1]
    rhs16 = st["tau"] / (n * st["c"]) * (csum - csum[first])        # sum over j = s(t) .. t - 1
    d16 = st["tau"] / (n * st["c"]) * (dsum - dsum[first])
    where = [dict(round=r, step=k, **({"seed": s} if st["seeds"] > 1 else {})) for s, r, k in keys]
    scale = max(float(np.max(np.abs(q["x"]))), float(np.max(np.abs(st["x_star"]))), float(np.finfo(float).tiny))
    dx = FLOOR_ULPS * EPS * scale * np.sqrt(q["x"].shape[1])          # the rounding of a point's coordinates
    return dict(V=V, xbar=xbar, xbar_next=xbar_next, inner=inner, sq=sq, rhs16=rhs16, where=where, n=n,
                d16=d16 + dx ** 2 + 2 * dx * np.sqrt(V), dx=dx)


def _measure_16(st, runs):
    c = _consensus(st, steps(st, runs))
    return worst_instance(c["V"], c["rhs16"], c["where"], c["d16"])


LEMMA_16 = register_spec(TheoremSpec(
    name="fedsps.lemma_16", algorithm="fedsps", quantity="V_t = (1/n) sum_i ||x_t^i - xbar_t||^2",
    statement=r"V_t <= (tau/(n c)) sum_i sum_{j=s(t)}^{t-1} gamma_j^i (F_i(x_j^i, B_j^i) - ell_i*)",
    setup=_setup, run_kwargs=_run, measure=_measure_16, conditions=_conditions,
    variants={"printed": Variant("Lemma 16 as printed", lambda st, m: m["rhs"])},
    assumptions=_A1, floor=_floor, cases=_space("3a"),
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Lemma 16; docs/papers/fedsps.md, §4.7"),
    proof_of=("fedsps.theorem_3a", "fedsps.theorem_3b", "fedsps.theorem_6a"))


def _measure_28(st, runs):
    c = _consensus(st, steps(st, runs))
    xs = st["x_star"]
    d0 = np.sum((c["xbar"] - xs) ** 2, axis=1)
    lhs = np.sum((c["xbar_next"] - xs) ** 2, axis=1)
    terms = (d0, 2 / c["n"] * c["inner"], 2 / c["n"] * c["sq"], c["V"])
    rhs = terms[0] - terms[1] + terms[2] + terms[3]
    dx = c["dx"]
    floor = (FLOOR_ULPS * EPS * sum(np.abs(t) for t in terms)
             + 2 * dx * (np.sqrt(d0) + np.sqrt(lhs) + np.sqrt(c["sq"]) + np.sqrt(c["V"])) + 4 * dx ** 2)
    return worst_instance(lhs, rhs, c["where"], floor)


STEP_28 = register_spec(TheoremSpec(
    name="fedsps.step_28", algorithm="fedsps", quantity="||xbar_{t+1} - x*||^2",
    statement=r"||xbar_{t+1} - x*||^2 <= ||xbar_t - x*||^2 - (2/n) sum_i <x_t^i - x*, gamma_t^i g_t^i> "
              r"+ (2/n) sum_i ||gamma_t^i g_t^i||^2 + V_t (pathwise, no convexity)",
    setup=_setup, run_kwargs=_run, measure=_measure_28, conditions=_conditions,
    variants={"printed": Variant("the one-step inequality (28) as printed", lambda st, m: m["rhs"])},
    assumptions=_A1, floor=_floor, cases=_space("3a"),
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), eq. (28); docs/papers/fedsps.md, §4.7"),
    proof_of=_THEOREMS[:3])


# -- registered cases ------------------------------------------------------------------------------------
def _below_minima_case():
    import problems
    p = problems.quadratic(3, 2, L=1.0, mu=0.2, heterogeneity=1.0, hessian="distinct", seed=0)
    return p


def _case_params(delta):
    ell = client_minima(_below_minima_case()) - delta
    return dict(rounds=3, local_steps=2, c=8.0, gamma_b=2.0, lower_bound=ell, x0=np.ones(2))


def _cases(quick=False):
    return [Case("lower bounds 1 below the client minima, gamma_b = 2 < 1/(2 mu)", "conforming", _below_minima_case,
                 _case_params(1.0), {"printed": True})], []


for _name in ("fedsps.lemma_14", "fedsps.lemma_15", "fedsps.lemma_16", "fedsps.step_28"):
    register_cases(_name)(_cases)


@register_cases("fedsps.lemma_8")
def _cases_8(quick=False):
    """The counterexample of erratum 1: lower bounds below the client minima, 1/(2 c mu) < gamma_b <
    1/(2 mu): the Polyak ratio exceeds 1/(2 c mu), the step used stays at most 1/(2 mu)."""
    return [Case("lower bounds 1 below the client minima, gamma_b = 2 < 1/(2 mu)", "counterexample", _below_minima_case,
                 _case_params(1.0), {"printed": False, "corrected": True},
                 "docs/papers/fedsps.md, §8, erratum 1")], []
