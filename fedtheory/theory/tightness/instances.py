"""Instances of a theorem's class as federated problems: the class quadratics the registered
algorithm is measured on, the normalised start, and the worst case extracted from a solved PEP
(:func:`worst_case_instance`)."""
from __future__ import annotations

import math
import warnings

import numpy as np
from .. import families


# ----------------------------------------------------------- instances of the class --
def class_quadratics(n, L, mu, dim=3, seeds=(0, 1)):
    r"""Quadratics of the class for measuring the registered algorithm: :math:`f_i = \frac12
    x^\top Q_i x` with every eigenvalue of :math:`Q_i` in [mu, L] (so x* = 0 and every
    :math:`f_i^* = f_i(x^*) = 0`, a shared minimiser): identical one-dimensional clients with
    curvature mu, (mu + L)/2 and L, and clients with random rotations of
    diag(linspace(max(mu, L/20), L, dim)).

    Parameters
    ----------
    n : int
        Clients.
    L, mu : float
        The class's constants.
    dim : int, default 3
        Dimension.
    seeds : tuple of int, default (0, 1)
        Seeds of the constructions.

    Returns
    -------
    list of FederatedProblem
        The quadratics.

    Examples
    --------
    >>> ps = class_quadratics(2, 1.0, 0.1)
    >>> len(ps), ps[0].n_clients
    (5, 2)
    """
    out = [families.explicit_quadratic(np.full((n, 1, 1), h), np.zeros((n, 1)), name=f"identical_{h:g}")
           for h in sorted({mu, 0.5 * (mu + L), L}) if h > 0]
    ev = np.linspace(max(mu, L / 20), L, dim)
    for s in seeds:
        rng = np.random.default_rng(s)
        Q = []
        for _ in range(n):
            U, _r = np.linalg.qr(rng.normal(size=(dim, dim)))
            Q.append(U @ np.diag(ev) @ U.T)
        out.append(families.explicit_quadratic(np.array(Q), np.zeros((n, dim)), name=f"rotated_{s}"))
    return out


def normalised_x0(problem, initial):
    """x0 along the all-ones direction scaled so that the initial condition ``"distance"``
    (||x0 - x*||^2) or ``"gap"`` (f(x0) - f*) equals 1 (x* = 0, f* = 0).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    initial : str
        The initial condition's quantity (``"distance"``, ...).

    Returns
    -------
    ndarray
        x0.
    """
    v = np.ones(problem.dim)
    if initial == "distance":
        return v / np.linalg.norm(v)
    return v / math.sqrt(problem.value(v))


def worst_case_instance(form, metric="theorem", solver="SCS", tol=1e-2, tol_value=1e-5):
    r"""A worst-case instance of a fixed-step PEP as a federated quadratic, when it is one.

    Solves the PEP minimising the trace of the Gram matrix among solutions within ``tol_value`` of
    the worst case (PEPit's dimension-reduction heuristic; SCS, which solves that problem where
    Clarabel fails) to find a low-dimensional worst case. When that Gram matrix has rank one and
    every client's gradients at its points are :math:`h_i (x - x^*)` (relative ``tol``), the worst
    case is attained by the one-dimensional quadratics :math:`f_i = \frac{h_i}2 x^2`, h_i clipped
    to [mu, L]: returns ``(problem, x0)`` (x* = 0) to run the registered algorithm on; None
    otherwise (the worst case is not such a quadratic, or the method has adaptive steps). The
    extraction is a heuristic: the instance is checked by running it
    (tests/test_tightness.py: measured on it = the PEP's worst case).

    Parameters
    ----------
    form : PEPForm
        The method and class (:func:`form_of`), built with its ``L`` and ``mu``.
    metric : {"theorem", "contraction"}, default "theorem"
        The performance metric of the PEP.
    solver : str, default "SCS"
        The CVXPY solver of the dimension-reduction problem.
    tol : float, default 1e-2
        Relative tolerance of the rank-one and proportional-gradient tests.
    tol_value : float, default 1e-5
        How far from the worst case the dimension-reduction solution may be.

    Returns
    -------
    tuple of (FederatedProblem, ndarray) or None
        ``(problem, x0)``, or None when the worst case is not such a quadratic.
    """
    if form.n_adaptive:
        return None
    pep = form.build(None, metric)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pep.solve(wrapper="cvxpy", solver=solver, verbose=0, dimension_reduction_heuristic="trace",
                      tol_dimension_reduction=tol_value)
    except Exception:                          # the solver fails on the heuristic's problem
        return None
    ev = np.linalg.eigvalsh(pep.G_value)
    if ev[-1] <= 0 or (ev[-2] if ev.size > 1 else 0.0) > tol * ev[-1]:
        return None
    xs = np.asarray(pep.fedtheory_x_star.eval(), dtype=float)
    U, hs = None, []
    L, mu = form.constants["L"], form.constants["mu"]
    for f in pep.fedtheory_clients:
        X = np.array([np.asarray(p.eval(), dtype=float) - xs for p, g, v in f.list_of_points])
        G = np.array([np.asarray(g.eval(), dtype=float) for p, g, v in f.list_of_points])
        if U is None:                          # the Gram matrix's one direction
            U = np.linalg.svd(np.vstack([X, G]), full_matrices=False)[2][0]
        s_, t_ = X @ U, G @ U
        scale = max(np.abs(s_).max(), np.abs(t_).max(), 1e-12)
        h = float(s_ @ t_ / (s_ @ s_)) if s_ @ s_ > 0 else math.nan
        if not (math.isfinite(h) and np.max(np.abs(t_ - h * s_)) <= tol * scale
                and mu - tol * L <= h <= L * (1 + tol)):
            return None
        h = min(max(h, mu), L)
        for edge in (mu, L):                   # a curvature at the class's boundary, up to SDP accuracy
            if abs(h - edge) <= 5 * tol * (L - mu):
                h = edge
        hs.append(h)
    if len(pep.list_of_points) != 1:           # PEPit's record of pep.set_initial_point(): one start
        return None
    x0 = np.array([float((np.asarray(pep.list_of_points[0].eval(), dtype=float) - xs) @ U)])
    prob = families.explicit_quadratic(np.array(hs)[:, None, None], np.zeros((len(hs), 1)),
                                       name="pep_worst_case")
    init = prob.value(x0) if form.initial.startswith("f(") else float(x0 @ x0)
    return prob, x0 / math.sqrt(init)          # the initial condition holds with equality
