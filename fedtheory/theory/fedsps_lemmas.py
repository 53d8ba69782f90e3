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

The small-step proofs (Theorems 6(a), 6(b), 18, with :math:`\gamma_b \le 1/(20L\tau)`, L per sample
with minibatches, the full-batch constant without), with :math:`\xi_j^i` the sample client i drew at
step j (its minibatch rows and its additive gradient noise, both in the trace):

* ``fedsps.step_27`` (the first line of eq. (27), in the proof of Lemma 17; Theorem 18 uses it as
  it is), pathwise, for :math:`\gamma_b \le 1/(10L\tau)`:
  :math:`V_t \le \frac{32\gamma_b^2\tau}{n}\sum_i\sum_{j=s(t)}^{t-1}\|\nabla F_i(\bar x_j, \xi_j^i)\|^2`;
* ``fedsps.lemma_17`` (Lemma 17, eq. (26); Theorems 6(a), 6(b)):
  :math:`\mathbb E V_t \le \frac1{3L\tau}\sum_{j=s(t)}^{t-1}\mathbb E[f(\bar x_j) - f^*] +
  64L\gamma_b^2\tau\sum_{j=s(t)}^{t-1}\sigma_f^2`;
* ``fedsps.step_36b`` (the one-step recursion of Theorem 6(b), the strongly convex form of (36),
  Appendix B.3.2; every step at :math:`\gamma_b`):
  :math:`\mathbb E\|\bar x_{t+1} - x^*\|^2 \le (1 - \gamma_b\mu)\mathbb E\|\bar x_t - x^*\|^2 -
  \gamma_b\mathbb E[f(\bar x_t) - f^*] + 4\gamma_bL\,\mathbb E V_t + 4L\gamma_b^2\sigma_f^2`;
* ``fedsps.step_45`` (eq. (45), Theorem 18), as printed:
  :math:`\mathbb E V_t \le 32\gamma_b^2\tau\sum_{j=s(t)}^{t-1}[\mathbb E\|\nabla f(\bar x_j)\|^2 +
  \sigma^2/\tau + \zeta^2]`, under Theorem 18's condition that every step is at :math:`\gamma_b` (true as
  printed there: the noise in the drift is a martingale, so E V_t grows like k sigma^2);
* ``fedsps.step_45_from_27`` (the step from (27) to (45), both lines of (45): (27)'s right-hand side in
  expectation over each step's noise, given the run's :math:`\bar x_j`): printed,
  :math:`\mathbb E[\frac{32\gamma_b^2\tau}{n}\sum_i\sum_{j=s(t)}^{t-1}\|\nabla F_i(\bar x_j, \xi_j^i)\|^2] \le \frac{1}{16L^2\tau}\sum_{j=s(t)}^{t-1}
  \mathbb E\|\nabla f(\bar x_j)\|^2 + 32\gamma_b^2\tau^2[\sigma^2/\tau + \zeta^2]`; corrected,
  :math:`\sigma^2` for :math:`\sigma^2/\tau` (erratum 5, separated here: the step fails, although
  (45) itself holds). Its verdicts are algebra on the run's :math:`\|\nabla f(\bar x_j)\|^2`: with a shared
  Hessian, :math:`\frac1n\sum_i\|\nabla f_i\|^2 = \|\nabla f\|^2 + \zeta^2` exactly, so the corrected form
  holds with the margin the step's caps leave, and the printed one fails where
  :math:`(k - 1)\sigma^2 - (\tau - k)\zeta^2` outweighs the gradient terms' margin.

An expectation is checked on the means over the seeds at each step (:func:`expectation`): an excess
within 2 standard errors (NOISE_SE) of that mean, or one seed of a random run, is UNRESOLVED; a run without
noise and minibatches is its own expectation. Theorem 6(b)'s run traces every round unless the trace
would be large (:func:`fedtheory.theory.fedsps_theorem6.traced_rounds_6b`): its lemmas are then checked on the
traced rounds only, which ``Verification.details["checked_on"]`` says.

Each reports the worst instance (largest measured/bound) and where it is:
``Verification.where = dict(round=, client=, step=)`` (``seed`` too with several seeds; no ``client``
for a lemma about all clients at once, no ``seed`` for an expectation).

Examples
--------
>>> import numpy as np, problems, validation
>>> p = problems.quadratic(3, 2, L=1.0, mu=0.2, heterogeneity=1.0, hessian="distinct", seed=0)
>>> from fedtheory.theory.fedsps_quantities import client_minima
>>> ell = client_minima(p) - 1.0                         # lower bounds 1 below each client's minimum
>>> v = validation.verify("fedsps.lemma_8", p, variant="printed", rounds=3, local_steps=2, c=8.0,
...                       gamma_b=2.0, lower_bound=ell, x0=np.ones(2))
>>> v.verdict(), sorted(v.where)
('VIOLATED', ['client', 'round', 'step'])
>>> validation.verify("fedsps.lemma_8", p, variant="corrected", rounds=3, local_steps=2, c=8.0,
...                   gamma_b=2.0, lower_bound=ell, x0=np.ones(2)).verdict()
'holds'

Theorem 6(b)'s proof on its own runs:

>>> q = problems.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3, hessian="distinct")
>>> v = validation.verify("fedsps.theorem_6b", q, rounds=300, local_steps=4, lemmas=True)
>>> [lv.name for lv in v.lemmas], v.first_failure
(['fedsps.step_27', 'fedsps.lemma_17', 'fedsps.step_36b'], None)
>>> all(lv.runs[0] is v.runs[0] for lv in v.lemmas)
True
"""
from __future__ import annotations

import numpy as np

from . import families
from . import Case, Condition, register_cases
from .floors import comparison_floor, EPS, FLOOR_ULPS, worst_instance
from .floors import instance_floor
from .engine import instance_variant, NotApplicable, register_spec, TheoremSpec, Variant
from .fedsps_quantities import (_A1, client_minima, _completed, _constants, expectation, _explicit_quadratic,
                                _full_batch_mu, _gamma_stats, _lower_bound_condition, _params, _pinned_condition,
                                _problem_conditions, _quadratic_blocks, rounds_of, _run_kwargs,
                                _stop_if_inapplicable, _traced_note, _where, _window)
from .fedsps import _space
from .fedsps_theorem6 import _constants_or_na, _setup_18, _small_step_setup

_THEOREMS = ("fedsps.theorem_3a", "fedsps.theorem_3b", "fedsps.theorem_6a", "fedsps.theorem_18")


def _setup(problem, rounds=20, local_steps=2, c=0.5, gamma_b=1.0, lower_bound=None, batch_size=None, seeds=1,
           x0=None):
    """The run of a FedSPS theorem (:func:`fedtheory.theory.fedsps_quantities._run_kwargs`): ``lower_bound``
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

    Parameters
    ----------
    st : dict
        The check's setup.
    runs : dict
        The check's runs by label.

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
    assumptions=_A1, floor=instance_floor, cases=_space("3a"),
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
              "corrected": instance_variant("what the proof of Theorem 3(b) uses, gamma_t^i mu <= 1/2, under the hidden "
                                   "condition gamma_b <= 1/(2 mu) (erratum 1)", "step", ("stated", "hidden"), quantity="gamma_t^i")},
    default_variant="corrected", assumptions=_A1, floor=instance_floor, cases=_space("3a"),
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
    assumptions=_A1, floor=instance_floor, cases=_space("3a"),
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
    assumptions=_A1, floor=instance_floor, cases=_space("3a"),
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
    assumptions=_A1, floor=instance_floor, cases=_space("3a"),
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), eq. (28); docs/papers/fedsps.md, §4.7"),
    proof_of=_THEOREMS[:3])


# -- registered cases ------------------------------------------------------------------------------------
def _below_minima_case():
    p = families.quadratic(3, 2, L=1.0, mu=0.2, heterogeneity=1.0, hessian="distinct", seed=0)
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


# -- the small-step proofs (Theorems 6 and 18): step (27), Lemma 17, the recursion of 6(b), eq. (45) -----
def _small_setup(name, div, noise, lower):
    r"""The setup of a lemma of the small-step proofs (Theorems 6(a), 6(b), 18), whose run is the
    theorem's (:func:`fedtheory.theory.fedsps_quantities._run_kwargs`, with the theorem's ``trace_rounds`` when it
    traces only some rounds): ``gamma_b`` defaults to min{1/(2cL), 1/(20 L tau)} (Theorem 6's cap), L is
    per sample with minibatches and the full-batch constant without (docs/papers/fedsps.md, §4.6).
    The stated condition is gamma_b <= 1/(div L tau); ``noise``: whether additive gradient noise is
    allowed (A3); ``lower``: whether ell_i* <= F_i* is stated."""
    def setup(problem, rounds=100, local_steps=5, c=0.5, gamma_b=None, lower_bound=None, seeds=1, x0=None,
              batch_size=None, simulate_rounds=None, trace_rounds=None):
        pc = _problem_conditions(problem, noise=not noise)
        tau, L, cap = _small_step_setup(problem, name, rounds, local_steps, c, batch_size, seeds, 20, pc)
        gamma_b = cap if gamma_b is None else gamma_b
        ell = client_minima(problem) if lower_bound is None else lower_bound
        s = _constants_or_na(problem, c, gamma_b, ell, x0, pc)
        mu = s["mu"] if batch_size is not None else _full_batch_mu(problem)
        lim = 1 / (div * L * tau)
        conds = pc + [Condition(f"gamma_b <= 1/({div} L tau)", gamma_b, lim, gamma_b <= lim * (1 + 1e-12))]
        if lower:
            conds.append(_lower_bound_condition(problem, s["ell"], batch_size))
        _stop_if_inapplicable(pc, conds)
        R_sim = simulate_rounds or rounds
        if R_sim < rounds and (batch_size is not None or problem.noise > 0):
            raise NotApplicable("simulate_rounds < rounds needs deterministic clients (batch_size=None, no noise)",
                                conds)
        traced = None if trace_rounds is None else tuple(sorted(int(t) for t in trace_rounds))
        return dict(s, L=L, mu=mu, c=c, gamma_b=gamma_b, tau=tau, T=rounds * tau, R_run=R_sim,
                    batch_size=batch_size, seeds=seeds, conds=conds, trace_rounds=traced,
                    sigma2=problem.dim * problem.noise ** 2)
    return setup


def _small_run(st):
    """The theorem's run (:func:`fedtheory.theory.fedsps_quantities._run_kwargs`), with its ``trace_rounds``."""
    kw = _run_kwargs(st)
    if st.get("trace_rounds") is not None:
        kw["trace_rounds"] = st["trace_rounds"]
    return kw


def _details(st, m):
    """The rounds checked, and for an expectation the number of seeds averaged at each step."""
    return {"checked_on": m.get("checked_on", ""), **({"seeds_averaged": m["seeds"]} if "seeds" in m else {})}


# -- step (27) --------------------------------------------------------------------------------------------
def _measure_27(st, runs):
    q = rounds_of(st, runs, grads=True)
    coef = 32 * st["gamma_b"] ** 2 * st["tau"]
    rhs, floor = coef * _window(q["GF2"]), q["dV"] + coef * _window(q["dGF2"])
    out = worst_instance(q["V"].ravel(), rhs.ravel(), _where(q), floor.ravel())
    return dict(out, checked_on=_traced_note(st, q))


_setup_27 = _small_setup("fedsps.step_27", 10, noise=True, lower=False)

STEP_27 = register_spec(TheoremSpec(
    name="fedsps.step_27", algorithm="fedsps", quantity="V_t = (1/n) sum_i ||x_t^i - xbar_t||^2",
    statement=r"V_t <= (32 gamma_b^2 tau/n) sum_i sum_{j=s(t)}^{t-1} ||grad F_i(xbar_j, xi_j^i)||^2 (pathwise, "
              r"gamma_b <= 1/(10 L tau); xi_j^i the sample client i drew at step j)",
    setup=_setup_27, run_kwargs=_small_run, measure=_measure_27, conditions=_conditions,
    variants={"printed": Variant("the first line of eq. (27) as printed (the proof of Lemma 17; Theorem 18 "
                                 "uses it as it is)", lambda st, m: m["rhs"])},
    assumptions=_A1, floor=instance_floor, cases=_space("6a"), details=_details,
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), eq. (27) in the proof of Lemma 17; "
              "docs/papers/fedsps.md, §4.7"),
    proof_of=("fedsps.theorem_6a", "fedsps.theorem_6b", "fedsps.theorem_18"))


# -- Lemma 17 -------------------------------------------------------------------------------------------
def _measure_17(st, runs):
    q = rounds_of(st, runs)
    L, tau, gb = st["L"], st["tau"], st["gamma_b"]
    k = np.arange(tau)
    sf, dsf = st["sigma_f_sq"], FLOOR_ULPS * EPS * max(abs(st["f_star"]), float(np.max(np.abs(st["ell"]))))
    rhs = _window(q["gap"][..., :tau]) / (3 * L * tau) + 64 * L * gb ** 2 * tau * k * sf
    floor = q["dV"] + _window(q["dgap"][..., :tau]) / (3 * L * tau) + 64 * L * gb ** 2 * tau * k * dsf
    return dict(expectation(st, q, q["V"], rhs, floor, "Lemma 17"), checked_on=_traced_note(st, q))


_setup_17 = _small_setup("fedsps.lemma_17", 20, noise=False, lower=True)

LEMMA_17 = register_spec(TheoremSpec(
    name="fedsps.lemma_17", algorithm="fedsps", quantity="E V_t (the mean over the seeds at each step)",
    statement=r"E V_t <= (1/(3 L tau)) sum_{j=s(t)}^{t-1} E[f(xbar_j) - f*] + 64 L gamma_b^2 tau sum_{j=s(t)}^{t-1} "
              r"sigma_f^2 (gamma_b <= 1/(20 L tau), ell_i* <= F_i*)",
    setup=_setup_17, run_kwargs=_small_run, measure=_measure_17, conditions=_conditions,
    variants={"printed": Variant("Lemma 17 as printed; both sides the means over the seeds at each step",
                                 lambda st, m: m["rhs"])},
    assumptions=_A1, floor=instance_floor, cases=_space("6a"), details=_details,
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), Lemma 17 (eq. (26)); docs/papers/fedsps.md, §4.7"),
    proof_of=("fedsps.theorem_6a", "fedsps.theorem_6b"))


# -- the one-step recursion of Theorem 6(b) (the strongly convex (36)) -------------------------------------
def _measure_36b(st, runs):
    q = rounds_of(st, runs)
    L, tau, gb, mu = st["L"], st["tau"], st["gamma_b"], st["mu"]
    xs = st["x_star"]
    D = np.sum((q["xbar"] - xs) ** 2, axis=-1)                         # (S, R, tau + 1)
    lhs, d0 = D[..., 1:], D[..., :tau]
    sf, dsf = st["sigma_f_sq"], FLOOR_ULPS * EPS * max(abs(st["f_star"]), float(np.max(np.abs(st["ell"]))))
    terms = ((1 - gb * mu) * d0, gb * q["gap"][..., :tau], 4 * gb * L * q["V"], np.full(d0.shape, 4 * L * gb ** 2 * sf))
    rhs = terms[0] - terms[1] + terms[2] + terms[3]
    dx = q["dx"]
    floor = (FLOOR_ULPS * EPS * sum(np.abs(t) for t in terms) + 2 * dx * (np.sqrt(lhs) + np.sqrt(d0)) + 2 * dx ** 2
             + gb * q["dgap"][..., :tau] + 4 * gb * L * q["dV"] + 4 * L * gb ** 2 * dsf)
    out = expectation(st, q, lhs, rhs, floor, "the recursion of Theorem 6(b)")
    return dict(out, checked_on=_traced_note(st, q), **_gamma_stats(runs["main"], gb, st))


def _conditions_36b(st, m):
    mu = st["mu"]
    return list(st["conds"]) + [Condition("mu > 0 (strongly convex sample functions)", mu, 0.0, mu > 0),
                                _pinned_condition(m, st["gamma_b"])]


_setup_36b = _small_setup("fedsps.step_36b", 20, noise=False, lower=True)

STEP_36B = register_spec(TheoremSpec(
    name="fedsps.step_36b", algorithm="fedsps", quantity="E||xbar_{t+1} - x*||^2 (the mean over the seeds)",
    statement=r"E||xbar_{t+1} - x*||^2 <= (1 - gamma_b mu) E||xbar_t - x*||^2 - gamma_b E[f(xbar_t) - f*] "
              r"+ 4 gamma_b L E V_t + 4 L gamma_b^2 sigma_f^2 (mu-strongly convex, every step at gamma_b)",
    setup=_setup_36b, run_kwargs=_small_run, measure=_measure_36b, conditions=_conditions_36b,
    variants={"printed": Variant("the one-step recursion of the proof of Theorem 6(b) as printed (the strongly "
                                 "convex (36), Appendix B.3.2); both sides the means over the seeds",
                                 lambda st, m: m["rhs"])},
    assumptions=_A1, floor=instance_floor, cases=_space("6b"), details=_details,
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), proof of Theorem 6(b) (Appendix B.3.2, the strongly convex "
              "form of eq. (36)); docs/papers/fedsps.md, §4.7"),
    proof_of=("fedsps.theorem_6b",))


# -- eq. (45) as the proof derives it from (27) (Theorem 18) ---------------------------------------------
def _measure_45_from_27(st, runs):
    q = rounds_of(st, runs, grads=True, drawn_noise=False)
    L, tau, gb = st["L"], st["tau"], st["gamma_b"]
    coef = 32 * gb ** 2 * tau
    # (27)'s right-hand side in expectation over the noise of each step, given the run's xbar_j (the noise
    # is independent of xbar_j, zero-mean, E||xi||^2 = sigma^2): (1/n) sum_i ||grad f_i(xbar_j)||^2 + sigma^2
    lhs = coef * _window(q["GF2"] + st["sigma2"])
    g2, dg2 = _window(q["grad2"][..., :tau]), _window(q["d_grad2"][..., :tau])
    floor = coef * _window(q["dGF2"]) + dg2 / (16 * L ** 2 * tau)
    out = {}
    for name, noise in (("printed", st["sigma2"] / tau), ("corrected", st["sigma2"])):
        const = coef * tau * (noise + st["zeta2"])
        rhs = g2 / (16 * L ** 2 * tau) + const
        out[name] = expectation(st, q, lhs, rhs, floor + FLOOR_ULPS * EPS * const,
                                f"(27) -> (45) {name}")
    # each variant its own sampling-noise verdict: the corrected one's in its own part (instance_variant)
    return dict(out["printed"], corrected=out["corrected"], unresolved=out["printed"].get("unresolved") or "",
                checked_on=_traced_note(st, q))


STEP_45_FROM_27 = register_spec(TheoremSpec(
    name="fedsps.step_45_from_27", algorithm="fedsps",
    quantity="E[(27)'s right-hand side] = 32 gamma_b^2 tau sum_{j=s(t)}^{t-1} (1/n) sum_i "
             "E||grad F_i(xbar_j, xi_j^i)||^2",
    statement=r"E[(32 gamma_b^2 tau/n) sum_i sum_{j=s(t)}^{t-1} ||grad F_i(xbar_j, xi_j^i)||^2] <= "
              r"(1/(16 L^2 tau)) sum_{j=s(t)}^{t-1} E||grad f(xbar_j)||^2 + 32 gamma_b^2 tau^2 [sigma^2/tau + zeta^2] "
              r"(the two lines of (45), from (27) and A3, gamma_b <= 1/(25 tau L); corrected: sigma^2 for sigma^2/tau)",
    setup=_setup_18, run_kwargs=_run_kwargs, measure=_measure_45_from_27, conditions=lambda st, m: list(st["conds"]),
    variants={"printed": Variant("eq. (45) as the proof derives it from (27), as printed (sigma^2/tau)",
                                 lambda st, m: m["rhs"]),
              "corrected": instance_variant("what (27) and A3 yield: sigma^2 in place of sigma^2/tau (erratum 5)",
                                            "corrected")},
    default_variant="corrected", assumptions=_A1,
    floor=lambda st, m: max(m["floor"], m["corrected"]["floor"]) + comparison_floor(m["values"][0], m["rhs"]),
    cases=_space("18"), details=_details,
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), eqs. (27) and (45) in the proof of Theorem 18; "
              "docs/papers/fedsps.md, §4.7, erratum 5"),
    proof_of=("fedsps.theorem_18",))

# -- eq. (45) (Theorem 18) -------------------------------------------------------------------------------
def _measure_45(st, runs):
    q = rounds_of(st, runs)
    tau, gb = st["tau"], st["gamma_b"]
    coef = 32 * gb ** 2 * tau
    k = np.arange(tau)
    const = st["sigma2"] / tau + st["zeta2"]
    rhs = coef * (_window(q["grad2"][..., :tau]) + k * const)
    floor = q["dV"] + coef * (_window(q["d_grad2"][..., :tau]) + k * FLOOR_ULPS * EPS * const)
    return dict(expectation(st, q, q["V"], rhs, floor, "eq. (45)"), checked_on=_traced_note(st, q),
                **_gamma_stats(runs["main"], gb, st))


STEP_45 = register_spec(TheoremSpec(
    name="fedsps.step_45", algorithm="fedsps", quantity="E V_t (the mean over the seeds at each step)",
    statement=r"E V_t <= 32 gamma_b^2 tau sum_{j=s(t)}^{t-1} [E||grad f(xbar_j)||^2 + sigma^2/tau + zeta^2] "
              r"(every step at gamma_b, Theorem 18's regime; its derivation from (27) is fedsps.step_45_from_27)",
    setup=_setup_18, run_kwargs=_run_kwargs, measure=_measure_45,
    conditions=lambda st, m: st["conds"] + [_pinned_condition(m, st["gamma_b"])],
    variants={"printed": Variant("eq. (45) as printed (sigma^2/tau), a statement about E V_t",
                                 lambda st, m: m["rhs"])},
    assumptions=_A1, floor=instance_floor, cases=_space("18"), details=_details,
    reference="Mukherjee, Loizou, Stich 2023 (FedSPS), eq. (45) in the proof of Theorem 18; "
              "docs/papers/fedsps.md, §4.7"),
    proof_of=("fedsps.theorem_18",))


def _heterogeneous_case():
    """Theorem 6(b)'s case: a strongly convex heterogeneous quadratic (distinct Hessians, sigma_f^2 > 0)."""
    return families.quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=3, hessian="distinct")


def _noisy_case():
    """Theorem 18's case: a shared-Hessian quadratic with additive gradient noise."""
    return families.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=0.5, noise=0.5, seed=2)


def _sampled_case():
    """Least squares with samples (per-sample L, minibatches): a random run whose expectation needs seeds."""
    rng = np.random.default_rng(0)
    return families.least_squares([rng.standard_normal((8, 3)) for _ in range(3)],
                                  [rng.standard_normal(8) for _ in range(3)], l2=0.1)


_NOISY = dict(local_steps=5, x0=np.full(3, 2.0), lower_bound=-10.0)


@register_cases("fedsps.step_27")
def _cases_27(quick=False):
    return [Case("strongly convex heterogeneous quadratic at Theorem 6's cap", "conforming", _heterogeneous_case,
                 dict(rounds=200, local_steps=4), {"printed": True}),
            Case("shared-Hessian quadratic with gradient noise (Theorem 18's case), every seed", "conforming",
                 _noisy_case, dict(_NOISY, rounds=60, seeds=5), {"printed": True})], []


@register_cases("fedsps.lemma_17")
def _cases_17(quick=False):
    return [Case("strongly convex heterogeneous quadratic at Theorem 6's cap (deterministic: one seed is E)",
                 "conforming", _heterogeneous_case, dict(rounds=200, local_steps=4), {"printed": True}),
            Case("least squares with minibatches of 2, the mean over 4 seeds", "conforming", _sampled_case,
                 dict(rounds=40, local_steps=3, batch_size=2, seeds=4, lower_bound=0.0, x0=np.ones(3)),
                 {"printed": True})], []


@register_cases("fedsps.step_36b")
def _cases_36b(quick=False):
    return [Case("strongly convex heterogeneous quadratic at Theorem 6's cap", "conforming", _heterogeneous_case,
                 dict(rounds=200, local_steps=4), {"printed": True})], []


@register_cases("fedsps.step_45_from_27")
def _cases_45_from_27(quick=False):
    """Theorem 18's case: (27) in expectation spends k sigma^2 on the drift, (45) only sigma^2 (erratum 5)."""
    return [Case("shared-Hessian quadratic with gradient noise (Theorem 18's case), the mean over the seeds",
                 "counterexample", _noisy_case, dict(_NOISY, rounds=60, seeds=5 if quick else 20),
                 {"printed": False, "corrected": True})], []


@register_cases("fedsps.step_45")
def _cases_45(quick=False):
    """Theorem 18's case: the printed sigma^2/tau holds as well (erratum 5 is a gap in the derivation)."""
    return [Case("shared-Hessian quadratic with gradient noise (Theorem 18's case), the mean over the seeds",
                 "conforming", _noisy_case, dict(_NOISY, rounds=60, seeds=5 if quick else 20),
                 {"printed": True})], []
