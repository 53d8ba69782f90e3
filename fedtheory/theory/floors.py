"""What a verdict can resolve: rounding floors, the scales they are computed from, the worst instance of
a lemma over rounds, clients and steps, and the mean and standard error over seeds.

A measured value and a bound closer than the rounding of the quantities they are computed from are
a tie, not a violation: each theorem spec declares its floor (:func:`gap_floor`,
:func:`distance_floor`, :func:`grad_sq_floor`, ...) and the default is the rounding of the
comparison itself (:func:`comparison_floor`).
"""
from __future__ import annotations

import math

import numpy as np
from . import NOISE_SE
from ..components import capabilities


def worst_instance(lhs, rhs, where, floor=None, keep=None, se=None):
    """The worst instance of a lemma: of the pairs ``lhs[k] <= rhs[k]`` (one per round, client, local
    step, ...), the one with the largest excess ``lhs - rhs - floor - NOISE_SE se`` relative to
    ``max(|rhs| + floor + NOISE_SE se, tiny)``, i.e. the largest ratio where the right-hand side is
    positive and resolved. The verdict follows the engine's rules: an excess within the floor of
    its instance rests on rounding (UNRESOLVED, through the lemma's floor), and an expectation
    estimated by a mean over seeds (``se``) whose excess is within :data:`NOISE_SE` standard errors
    is UNRESOLVED (``"unresolved"`` says why), at every instance: a resolved excess anywhere is a
    violation even where a larger, noisier one is not.

    Parameters
    ----------
    lhs, rhs : array_like
        The two sides at every instance (same shape, flattened).
    where : list of dict
        Where each instance is (``dict(round=, client=, step=)``), one per instance.
    floor : array_like, optional
        The resolution floor of each comparison (its rounding level; default 0).
    keep : array_like of bool, optional
        The instances the lemma speaks of (default all): e.g. not a step taken at a point whose
        Polyak numerator is a rounding residue.
    se : array_like, optional
        The standard error of ``lhs - rhs`` at each instance, for sides that are means over seeds
        estimating expectations (default: exact sides).

    Returns
    -------
    dict
        ``values`` (the left-hand side at the worst instance, as the engine's one value),
        ``rhs`` (its right-hand side), ``floor`` (its floor), ``where``, ``instances`` (how many
        were compared) and, where the worst excess is within the sampling noise, ``unresolved``.

    Examples
    --------
    >>> worst_instance([1.0, 3.0, 2.0], [2.0, 4.0, 1.0], [dict(step=0), dict(step=1), dict(step=2)])
    {'values': [2.0], 'rhs': 1.0, 'floor': 0.0, 'where': {'step': 2}, 'instances': 3}
    >>> worst_instance([1.5, 3.0], [1.0, 2.5], [dict(step=0), dict(step=1)], se=[1.0, 0.1])["where"]
    {'step': 1}
    """
    a, b = np.asarray(lhs, dtype=float).ravel(), np.asarray(rhs, dtype=float).ravel()
    f = np.zeros_like(a) if floor is None else np.broadcast_to(np.asarray(floor, dtype=float).ravel(), a.shape)
    noise = np.zeros_like(a) if se is None else NOISE_SE * np.nan_to_num(
        np.broadcast_to(np.asarray(se, dtype=float).ravel(), a.shape), nan=0.0)
    idx = np.arange(a.size) if keep is None else np.flatnonzero(np.asarray(keep, dtype=bool).ravel())
    if idx.size == 0:
        return dict(values=[0.0], rhs=0.0, floor=0.0, where=None, instances=0,
                    unresolved="no instance of the lemma in this run")
    allow = f[idx] + noise[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        score = (a[idx] - b[idx] - allow) / np.maximum(np.abs(b[idx]) + allow, np.finfo(float).tiny)
    score = np.where(np.isnan(score), -np.inf, score)
    k = int(idx[int(np.argmax(score))])
    out = dict(values=[float(a[k])], rhs=float(b[k]), floor=float(f[k]), where=dict(where[k]), instances=int(idx.size))
    if f[k] < a[k] - b[k] <= f[k] + noise[k]:
        out["unresolved"] = (f"the mean over the seeds exceeds the bound at {dict(where[k])} by {a[k] - b[k]:.3g}, "
                             f"within {NOISE_SE:g} standard errors ({noise[k]:.3g}): sampling noise, more seeds "
                             "resolve it")
    return out


#: Machine epsilon of float64.
EPS = float(np.finfo(float).eps)
#: Rounding allowance of a floor, in units of machine epsilon times the scale (the error of a few
#: dozen floating-point operations on quantities of that scale).
FLOOR_ULPS = 64


def comparison_floor(measured, bound):
    """The default resolution floor: the rounding of the comparison itself,
    ``FLOOR_ULPS * eps * max(|measured|, |bound|)``.

    Parameters
    ----------
    measured, bound : float
        The two sides compared.

    Returns
    -------
    float
        The floor (>= 0).

    Examples
    --------
    >>> comparison_floor(1.0, 0.5) == 64 * EPS
    True
    """
    return FLOOR_ULPS * EPS * max(abs(measured), abs(bound))


def gap_floor(*values):
    """Resolution floor of a difference of objective values f(x) - f*: ``FLOOR_ULPS * eps`` times
    the scale of the values subtracted (the largest magnitude given, e.g. |f*| and |f(x^0)|).

    Parameters
    ----------
    *values : float
        The objective values the gap is computed from.

    Returns
    -------
    float
        The floor (>= 0).

    Examples
    --------
    >>> gap_floor(2.0, -3.0) == 64 * EPS * 3.0
    True
    """
    return FLOOR_ULPS * EPS * max([abs(float(v)) for v in values] + [0.0])


def distance_floor(scale_x, amplification=1.0):
    """Resolution floor of a squared distance ||x - x*||^2: ``(FLOOR_ULPS * eps * scale_x *
    amplification)^2``, with ``scale_x`` the size of the points (max(||x*||, ||x^0||)) and
    ``amplification`` the factor by which rounding in a step is amplified at a fixed point
    (the condition number L/mu for gradient steps).

    Parameters
    ----------
    scale_x : float
        The size of the points.
    amplification : float, default 1
        How much a step amplifies rounding at a fixed point.

    Returns
    -------
    float
        The floor (>= 0).

    Examples
    --------
    >>> distance_floor(1.0) == (64 * EPS) ** 2
    True
    """
    return (FLOOR_ULPS * EPS * float(scale_x) * float(amplification)) ** 2


def point_scale(problem, x0, L, x_star=None):
    """The size of the points of a run, for rounding floors: max(||x*||, ||x^0||, max_i
    ||grad f_i(0)||/L) (a gradient L x - c rounds at about eps (L ||x|| + ||c||)).

    Parameters
    ----------
    problem : FederatedProblem
        The problem of the run.
    x0 : array or None
        The run's starting point (zeros for None).
    L : float
        The smoothness constant.
    x_star : array, optional
        The minimiser (the ground truth's otherwise).

    Returns
    -------
    float
        The scale (>= 0).
    """
    z = np.zeros(problem.dim)
    g0 = max(float(np.linalg.norm(problem.client_grad(i, z))) for i in range(problem.n_clients))
    xs = 0.0 if x_star is None else float(np.linalg.norm(x_star))
    x0n = 0.0 if x0 is None else float(np.linalg.norm(np.asarray(x0, dtype=float)))
    return max(xs, x0n, g0 / L if L > 0 else 0.0)


def setup_scale(st, L, x_star=None):
    """:func:`point_scale` of a check's setup (its ``problem`` and ``x0``), computed once and kept in
    the setup (``"_scale_x"``); ``x_star`` may be a function, called only then.

    Parameters
    ----------
    st : dict
        A check's setup (with ``problem`` and ``x0``); the scale is kept in it.
    L : float
        The smoothness constant.
    x_star : array or callable, optional
        The minimiser, or a function returning it.

    Returns
    -------
    float
        :func:`point_scale` of the setup.
    """
    if "_scale_x" not in st:
        st["_scale_x"] = point_scale(st["problem"], st.get("x0"), L, x_star() if callable(x_star) else x_star)
    return st["_scale_x"]


def grad_sq_floor(scale_x, L):
    """Resolution floor of a squared gradient norm ||grad f(x)||^2 at points of size ``scale_x``:
    ``(FLOOR_ULPS * eps * L * scale_x)^2`` (:func:`distance_floor` of ``L scale_x``).

    Parameters
    ----------
    scale_x : float
        The size of the points.
    L : float
        The smoothness constant.

    Returns
    -------
    float
        The floor (>= 0).

    Examples
    --------
    >>> grad_sq_floor(1.0, 2.0) == (64 * EPS * 2.0) ** 2
    True
    """
    return distance_floor(float(scale_x) * float(L))


def propagated_floor(bound, setup, m, deltas):
    """How far the rounding ``deltas`` of the bound's inputs ({(where, key): delta}, ``where``
    "setup" or "measure") can move ``bound(setup, m)``: for each input the larger change under
    +delta and -delta, summed over the inputs.

    Parameters
    ----------
    bound : callable
        ``bound(setup, m)``, the theorem's right-hand side.
    setup, m : dict
        The check's setup and measurement.
    deltas : dict
        ``{(where, key): delta}``: the rounding of each input, ``where`` "setup" or "measure".

    Returns
    -------
    float
        The summed largest change of the bound.
    """
    base = float(bound(setup, m))
    total = 0.0
    for (where, key), delta in deltas.items():
        worst = 0.0
        for sgn in (1.0, -1.0):
            st2 = dict(setup, **{key: setup[key] + sgn * delta}) if where == "setup" else setup
            m2 = dict(m, **{key: m[key] + sgn * delta}) if where == "measure" else m
            with np.errstate(all="ignore"):
                b = float(bound(st2, m2))
            if math.isfinite(b) and math.isfinite(base):
                worst = max(worst, abs(b - base))
        total += worst
    return total


def assumption_failures(problem, assumptions):
    """The assumptions (``(capability, assumption name)`` pairs) the problem's components do not
    declare (:func:`fedtheory.components.capabilities`), as a list of names.

    Parameters
    ----------
    problem : FederatedProblem
        The problem checked.
    assumptions : sequence of tuple
        ``(capability, assumption name)`` pairs.

    Returns
    -------
    list of str
        The names of the assumptions the components do not declare.
    """
    caps = capabilities(problem)
    return [name for cap, name in assumptions if not caps.get(cap, False)]


def mean_stderr(values):
    """Mean and standard error of the mean (nan for a single value).

    Parameters
    ----------
    values : array_like
        One value per seed.

    Returns
    -------
    tuple of float
        ``(mean, standard error)``.
    """
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float(v.mean()), float("nan")
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


def instance_floor(setup, measurement):
    """The floor of a lemma whose measurement is a worst instance (:func:`worst_instance`): the
    instance's own floor plus :func:`comparison_floor` of its two sides (``TheoremSpec(floor=...)``).

    Parameters
    ----------
    setup : dict
        The lemma's setup (not read).
    measurement : dict
        A :func:`worst_instance` result (``values``, ``rhs``, ``floor``).

    Returns
    -------
    float
        The floor.

    Examples
    --------
    >>> instance_floor({}, worst_instance([2.0], [1.0], [dict(step=0)], [0.5])) == 0.5 + comparison_floor(2.0, 1.0)
    True
    """
    return measurement.get("floor", 0.0) + comparison_floor(measurement["values"][0], measurement.get("rhs", 0.0))
