"""Solving a PEP and bracketing its worst case: :func:`solve_pep`, :func:`worst_case`, and the
branch and bound over the step sizes of methods with adaptive (Polyak) steps."""
from __future__ import annotations

import heapq
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .pepit_adapter import SOLVERS, PolyakSteps
from ..._argcheck import Bool, check_param, Interval


# ------------------------------------------------------------------------- solving --
def _check_solver_options(caller, **options):
    """check_param of the solver options given (rtol >= 0, rel_tol > 0, time_limit > 0, max_nodes >= 1,
    threshold a bool), shared by tightness, lr_threshold and branch_and_bound."""
    ranges = {"rtol": Interval(float, 0, None, "left"), "rel_tol": Interval(float, 0, None, "neither"),
              "time_limit": Interval(float, 0, None, "neither"), "max_nodes": Interval(int, 1, None),
              "threshold": Bool()}
    for k, v in options.items():
        check_param(k, v, [ranges[k]], caller)


@dataclass
class Solve:
    """One SDP: the primal value of the solver's instance, PEPit's dual value, residuals.

    Parameters
    ----------
    primal : float
        The solver's primal value.
    dual : float
        PEPit's dual value.
    residual : float
        The primal residual.
    status : str
        The solver's status.
    seconds : float
        The solve time.
    """

    primal: float
    dual: float
    residual: float
    status: str
    seconds: float

    @property
    def lower(self):
        return min(self.primal, self.dual)

    @property
    def upper(self):
        return max(self.primal, self.dual)


def solve_pep(pep, solver="CLARABEL"):
    """Solve a built PEP; returns a :class:`Solve` (primal value, dual value, primal residual).

    The primal residual is the largest violation of a scalar constraint of the PEP (equalities
    in absolute value) or of the Gram matrix's positive semidefiniteness (minus its smallest
    eigenvalue), at the solver's solution.

    Parameters
    ----------
    pep : PEP
        A built PEP.
    solver : str, default "CLARABEL"
        The SDP solver.

    Returns
    -------
    Solve
        Primal value, dual value, primal residual.
    """
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dual = pep.solve(wrapper="cvxpy", solver=solver, verbose=0)
    if dual is None:
        raise RuntimeError(f"the PEP is unbounded or the solver failed ({pep.wrapper.prob.status})")
    primal = float(pep.objective.eval())
    viol = [0.0]
    for con in pep._list_of_prepared_constraints:
        v = float(con.eval())
        viol.append(abs(v) if con.equality_or_inequality == "equality" else v)
    viol.append(-float(np.linalg.eigvalsh(pep.G_value)[0]))
    return Solve(primal, float(dual), max(viol), str(pep.wrapper.prob.status), time.perf_counter() - t0)


def branch_and_bound(form, metric="theorem", solver="CLARABEL", rtol=1e-3, time_limit=10.0, max_nodes=400,
                     target=None):
    r"""Worst case of a method with adaptive steps: branch and bound over the step sizes.

    Each step size :math:`\gamma_j` lies in ``form.step_box[:2]``; a node is a box of step
    sizes. Its upper bound is the relaxed PEP (:class:`PolyakSteps` without ``fixed``); its
    lower bound the exact PEP at the relaxation's step sizes (or the cap branch where they reach
    the cap). The node with the largest upper bound is split at the middle of its widest step;
    the search stops when the bracket's relative gap is below ``rtol``, or at ``time_limit``
    seconds or ``max_nodes`` nodes (the bracket is then wider: still certified). With ``target``
    it also stops as soon as the bracket is on one side of it (upper < target or lower >=
    target): a decision, used by :func:`lr_threshold`.

    A node whose exact PEP fails on every solver still gives its relaxation's upper bound and
    stays in the queue (``upper`` remains certified); only its lower bound is missing. When no
    exact PEP could be solved at all, ``lower`` is -inf (no lower bound certified), ``gap`` is
    inf and ``info["lower_certified"]`` is False.

    Parameters
    ----------
    form : PEPForm
        The method's PEP form.
    metric : str, default "theorem"
        The quantity bounded.
    solver : str, default "CLARABEL"
        The SDP solver.
    rtol : float, default 1e-3
        The bracket's relative gap to stop at.
    time_limit : float, default 10
        Seconds.
    max_nodes : int, default 400
        Nodes.
    target : float, optional
        Stop once the bracket is on one side of it.

    Returns
    -------
    lower, upper : float
        The bracket on the worst case.
    info : dict
        ``nodes``, ``gap``, ``residual`` (largest primal residual), ``steps`` (the incumbent's
        step sizes), ``seconds``, ``exact_failures`` (exact PEPs no solver could solve),
        ``lower_certified``.
    """
    t0 = time.perf_counter()
    _check_solver_options("branch_and_bound", rtol=rtol, time_limit=time_limit, max_nodes=max_nodes)
    lo0, hi0, cap = form.step_box
    m = form.n_adaptive
    residual = 0.0

    def attempt(make):
        """Solve with the chosen solver, then the other one; None when both fail."""
        for sv in (solver,) + tuple(x for x in SOLVERS if x != solver):
            try:
                return solve_pep(make(), sv)
            except Exception:                      # solver failure (ill-posed SDP): try the next one
                continue
        return None

    def relax(box, parent_upper=math.inf):
        steps = PolyakSteps(box, cap)
        s = attempt(lambda: form.build(steps, metric))
        if s is None:                              # a child's worst case is at most its parent's
            return Solve(parent_upper, parent_upper, 0.0, "failed", 0.0), [0.5 * (a + b) for a, b in box]
        return s, steps.estimates()

    def exact(gammas):
        box = [(g, g) for g in gammas]
        return attempt(lambda: form.build(PolyakSteps(box, cap, fixed=gammas), metric))

    root = [(lo0, hi0)] * m
    s, est = relax(root)
    if s.status == "failed":
        raise RuntimeError("the relaxed PEP could not be solved by any solver")
    residual = s.residual
    best_lower, incumbent = -math.inf, None
    failures = 0
    for cand in (est, [hi0] * m, [lo0] * m):
        e = exact(cand)
        if e is None:
            failures += 1
            continue
        residual = max(residual, e.residual)
        if e.lower > best_lower:
            best_lower, incumbent = e.lower, list(cand)
    counter = 0
    heap = [(-s.upper, counter, root)]
    nodes = 1
    while heap:
        ub = -heap[0][0]
        if math.isfinite(best_lower) and ub - best_lower <= rtol * max(abs(best_lower), 1e-12):
            break
        if target is not None and (ub < target or best_lower >= target):
            break
        if time.perf_counter() - t0 > time_limit or nodes >= max_nodes:
            break
        negub, _, box = heapq.heappop(heap)
        widths = [hi - lo for lo, hi in box]
        j = int(np.argmax(widths))
        if widths[j] <= 1e-9 * max(cap, 1.0):       # a point box: its relaxation is exact
            best_lower = max(best_lower, ub)
            continue
        mid = 0.5 * (box[j][0] + box[j][1])
        for part in ((box[j][0], mid), (mid, box[j][1])):
            child = list(box)
            child[j] = part
            cs, cest = relax(child, -negub)
            nodes += 1
            residual = max(residual, cs.residual)
            e = exact(cest)
            if e is None:                           # no lower bound from this child; its upper bound stays
                failures += 1
            else:
                residual = max(residual, e.residual)
                if e.lower > best_lower:
                    best_lower, incumbent = e.lower, list(cest)
            if cs.upper > best_lower:               # kept whether or not its exact solve succeeded
                counter += 1
                heapq.heappush(heap, (-cs.upper, counter, child))
    upper = max([-h[0] for h in heap] + [best_lower])
    gap = (upper - best_lower) / max(abs(best_lower), 1e-12) if math.isfinite(best_lower) else math.inf
    return best_lower, upper, dict(nodes=nodes, gap=gap, residual=residual, steps=incumbent,
                                   seconds=time.perf_counter() - t0, exact_failures=failures,
                                   lower_certified=math.isfinite(best_lower))


def worst_case(form, metric="theorem", solver="CLARABEL", **bnb):
    """The certified worst case of the form's PEP.

    One SDP for fixed steps, a :func:`branch_and_bound` for adaptive ones.

    Parameters
    ----------
    form : PEPForm
        The method and class (:func:`form_of`).
    metric : {"theorem", "contraction"}, default "theorem"
        The theorem's left-hand side, or the Lyapunov quantity of the initial condition.
    solver : str, default "CLARABEL"
        The CVXPY solver.
    **bnb
        ``rtol``, ``time_limit``, ``max_nodes`` of :func:`branch_and_bound` (adaptive steps).

    Returns
    -------
    lower, upper : float
        Certified bracket of the worst case.
    info : dict
        ``nodes``, ``gap``, ``residual``, ``steps``, ``seconds``, ``status`` of the solve.
    """
    if form.n_adaptive:
        return branch_and_bound(form, metric, solver, **bnb)
    s = solve_pep(form.build(None, metric), solver)
    return s.lower, s.upper, dict(nodes=1, gap=(s.upper - s.lower) / max(abs(s.lower), 1e-12),
                                  residual=s.residual, steps=None, seconds=s.seconds, status=s.status)
