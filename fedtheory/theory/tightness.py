r"""How loose is a bound: the exact worst case of the method over the theorem's function class,
by performance estimation (PEP; Drori & Teboulle 2014, Taylor, Hendrickx & Glineur 2017).

A theorem spec (:class:`~fedtheory.theory.engine.TheoremSpec`) registers its PEP with one
optional function, ``pep=``. Called with the constants,

``spec.pep(L=..., mu=..., local_steps=..., rounds=..., lr=..., n_clients=..., **kw) -> PEPForm``

it returns a :class:`PEPForm`: a builder of the PEPit problem of the registered method (the
same update rule, weights and server step as ``fedtheory/algorithms``) over the theorem's class
with the initial condition normalised to 1, the arguments that evaluate the theorem spec's own bound
variants for the same constants, and the theorem's step conditions. :func:`tightness` does the
rest: it solves the PEP (an SDP, through CVXPY with Clarabel by default, ``solver="SCS"`` also
works), brackets the worst case, evaluates the bound of the chosen variant, the per-round
contraction of both (from ``rounds=1`` PEPs: the methods covered are Markov, a round is the same
map every round), the largest step for which the worst case contracts (bisection) and, for
methods with adaptive steps, runs a branch and bound. Where a theorem's method or class cannot
be written as a PEP, ``pep`` is a string saying why, and :func:`tightness` raises
:class:`NotExpressible` with it.

What is certified
-----------------
PEPit 0.5.1 returns, for a solved PEP, the **dual** value it reconstructs from the solver's
multipliers (an upper bound on the worst case, exact up to the solver's dual residual, which
PEPit prints but does not return) and the solver's **primal** Gram matrix (a worst-case instance,
feasible up to the primal residual we measure: the largest violation of a constraint and the most
negative eigenvalue of the Gram matrix, :attr:`Tightness.residual`). The bracket
``worst_case = (lower, upper)`` is ``(min, max)`` of the primal value of an instance and the
dual bound; for fixed-step methods the two agree to the solver tolerance (~1e-8). For methods
with adaptive (Polyak) steps the lower end is the primal value of a PEP with every step size
fixed at a value (a function of the class whose Polyak steps are exactly those values, so a
true lower bound), and the upper end is the largest dual value of a relaxation over the boxes
left open by the branch and bound (:func:`branch_and_bound`): the bracket is then as tight as
the time budget allows (``Tightness.gap``).

Examples
--------
>>> import validation
>>> t = validation.tightness("localdescent.theorem_4_1", L=1.0, mu=0.1, local_steps=2, rounds=2,
...                          lr=0.5, n_clients=2, threshold=False)
>>> lo, hi = t.worst_case
>>> round(hi, 6), round(0.95 ** 8, 6)           # the worst case is (1 - lr mu)^(2 E R): a quadratic
(0.66342, 0.66342)
>>> round(t.looseness, 3), round(t.exponent_ratio, 3)
(1.234, 2.052)
"""
from __future__ import annotations

import heapq
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._validation import did_you_mean
from ..exceptions import InvalidParameterError

EXTRA = "pep"
SOLVERS = ("CLARABEL", "SCS")


class NotExpressible(ValueError):
    """The theorem's method or function class has no PEP here; the message says why."""


class PEPSolveError(RuntimeError):
    """The SDP solver failed on a PEP whose worst case is finite (a numerical failure, typically a
    step so large that the worst case is beyond the solver's accuracy); the message names lr."""


def require_pepit():
    """Import PEPit, or raise an ImportError naming the optional extra ``[pep]``."""
    try:
        import PEPit  # noqa: F401
    except ImportError as e:
        raise ImportError("validation.tightness needs the optional PEPit package: install the extra with "
                          "pip install 'fedtheory[pep]' (PyPI name pepit)") from e
    return PEPit


# ------------------------------------------------------------------ building blocks --
@dataclass
class PEPForm:
    """The PEP of a theorem's method for given constants (returned by ``spec.pep``).

    The parameters are kept as attributes of the same names. A built PEP carries
    ``fedtheory_clients`` and ``fedtheory_x_star`` (set by :func:`shared_minimiser_clients`),
    which :func:`worst_case_instance` reads, with the initial point the builder made by
    ``pep.set_initial_point()`` (PEPit records it).

    Parameters
    ----------
    build : callable
        ``build(steps, metric) -> PEPit.PEP`` with its initial condition (normalised to 1) and
        performance metric set. ``metric`` is ``"theorem"`` (the theorem's left-hand side) or
        ``"contraction"`` (the Lyapunov quantity of the initial condition after the rounds, used
        with ``rounds=1`` for the per-round contraction); ``steps`` is a :class:`PolyakSteps`
        for methods with adaptive steps (``None`` otherwise).
    function_class : str
        The class the worst case is over, in words.
    bound_args : callable
        ``bound_args(rounds) -> (setup, measurement)``: the arguments of the theorem spec's
        ``Variant.bound`` for these constants and ``rounds`` (the paper module's own bound).
    exact : bool
        Whether the class is the theorem's class (``False``: a subclass, then the worst case
        is a lower bound on the theorem's worst case; the note says which).
    note : str
        What is modelled (weights, participation, subclass).
    lr_conditions : dict
        ``{condition: largest lr it allows}``: the theorem's own step conditions.
    n_adaptive : int
        Number of adaptive step sizes (0 for fixed steps).
    step_box : tuple
        ``(lo, hi, cap)``: every adaptive step lies in [lo, hi], hi <= cap; it equals the cap
        when the min's cap branch is active.
    strict : bool
        Whether "contracts" means a one-round worst case < 1 (mu > 0) or <= 1 (convex).
    metric, initial : str
        The performance metric and the initial condition, in words.
    instances : callable, optional
        ``instances(rounds, cases=None) -> array (quadratics, rounds)``: the theorem's left-hand
        side after 1..rounds rounds of the registered algorithm run through ``fedtheory.run`` on
        ``cases`` (a list of ``(problem, x0)`` with x* = 0 and every f_i* = 0; default: the
        :func:`class_quadratics` with a normalised initial condition); each value <= the worst
        case.
    lr_max : float, optional
        A step beyond which the method no longer changes (FedSPS: the cap stops binding once
        gamma_b >= 1/(2 c mu)); the step threshold is inf when it contracts there.
    metric_is_contraction : bool
        Whether the theorem's metric is the contraction's Lyapunov quantity (then a ``rounds=1``
        call reuses its worst case as the contraction).
    constants : dict
        The constants the form was built with (set by :func:`form_of`).
    geometric_bound : bool
        Whether the bound decays geometrically in the rounds (otherwise, e.g. an O(1/T) bound,
        there is no exponent to compare: ``exponent_ratio`` is nan).
    """

    build: Callable
    function_class: str
    bound_args: Callable
    exact: bool = True
    note: str = ""
    lr_conditions: dict = field(default_factory=dict)
    n_adaptive: int = 0
    step_box: tuple = ()
    strict: bool = True
    metric: str = ""
    initial: str = ""
    instances: Callable | None = None
    lr_max: float | None = None
    metric_is_contraction: bool = False
    constants: dict = field(default_factory=dict)
    geometric_bound: bool = True


def shared_minimiser_clients(n, L, mu):
    """A PEP with n clients, each L-smooth and mu-strongly convex (convex when mu = 0), all
    stationary at one point x*.

    Parameters
    ----------
    n : int
        Number of clients.
    L : float
        Smoothness of every client function.
    mu : float
        Strong convexity of every client function (0: convex).

    Returns
    -------
    pep : PEPit.PEP
        The problem, with ``fedtheory_clients`` and ``fedtheory_x_star`` set (read by
        :func:`worst_case_instance`).
    fs : list of PEPit functions
        The client functions.
    xs : PEPit.Point
        The shared stationary point x*.
    fstar : list of PEPit.Expression
        ``fstar[i] = f_i(x*)``.
    """
    require_pepit()
    from PEPit import PEP, Expression, Point
    from PEPit.functions import SmoothConvexFunction, SmoothStronglyConvexFunction
    pep = PEP()
    if mu > 0:
        fs = [pep.declare_function(SmoothStronglyConvexFunction, mu=mu, L=L) for _ in range(n)]
    else:
        fs = [pep.declare_function(SmoothConvexFunction, L=L) for _ in range(n)]
    xs = Point()
    zero = Point(is_leaf=False, decomposition_dict={})
    fstar = []
    for f in fs:
        v = Expression()
        f.add_point((xs, zero, v))
        fstar.append(v)
    pep.fedtheory_clients, pep.fedtheory_x_star = fs, xs     # read by worst_case_instance
    return pep, fs, xs, fstar


def average(points, weights=None):
    """Weighted average of PEP points (uniform weights by default)."""
    n = len(points)
    w = [1.0 / n] * n if weights is None else list(weights)
    out = w[0] * points[0]
    for wi, p in zip(w[1:], points[1:]):
        out = out + wi * p
    return out


class PolyakSteps:
    r"""The adaptive steps :math:`\gamma = \min\{(f_i(x) - \ell_i)/(c\|g\|^2), \gamma_b\}` of a PEP.

    With ``fixed`` (one value per step) every step is a number: :math:`\gamma = \gamma_b` adds
    the cap branch's condition :math:`f_i(x) - \ell_i \ge c\gamma_b\|g\|^2`, :math:`\gamma <
    \gamma_b` the Polyak branch's :math:`c\gamma\|g\|^2 = f_i(x) - \ell_i` (both linear in the
    Gram matrix): the PEP is exact, its value a lower bound on the method's worst case. Without
    ``fixed``, step j is a new point :math:`d_j = \gamma_j g` with :math:`\gamma_j` only known to
    lie in ``boxes[j] = (lo, hi)``: the valid quadratic constraints
    :math:`\langle d - \mathrm{lo}\,g, \mathrm{hi}\,g - d\rangle \ge 0` and
    :math:`c\langle d, g\rangle \le f_i(x) - \ell_i` (equality when hi < cap: the Polyak branch)
    relax the product, so the PEP's value is an upper bound over the box; at lo = hi they force
    :math:`d = \gamma g` and the relaxation is exact.
    """

    def __init__(self, boxes, cap, fixed=None):
        self.boxes, self.cap, self.fixed = list(boxes), float(cap), fixed
        self.j = 0
        self.pairs = []

    def step(self, pep, x, g, fx, ell, c):
        """The next local iterate x - gamma g (adds the step's constraints to ``pep``)."""
        from PEPit import Point
        j = self.j
        self.j += 1
        lo, hi = self.boxes[j]
        cap = self.cap
        if self.fixed is not None or lo == hi:
            gam = float(self.fixed[j]) if self.fixed is not None else lo
            if gam >= cap:
                pep.add_constraint(fx - ell >= c * cap * (g ** 2))
                return x - cap * g
            pep.add_constraint(c * gam * (g ** 2) == fx - ell)
            return x - gam * g
        d = Point()
        self.pairs.append((j, d, g))
        if hi < cap:
            pep.add_constraint(c * (d * g) == fx - ell)
        else:
            pep.add_constraint(c * (d * g) <= fx - ell)
        pep.add_constraint((d - lo * g) * (hi * g - d) >= 0)
        return x - d

    def estimates(self):
        """The step sizes of the relaxation's solution, <d, g>/||g||^2 clipped to each box
        (the box's midpoint where g = 0)."""
        out = [0.5 * (lo + hi) for lo, hi in self.boxes]
        for j, d, g in self.pairs:
            gv, dv = np.asarray(g.eval(), dtype=float), np.asarray(d.eval(), dtype=float)
            gg = float(gv @ gv)
            lo, hi = self.boxes[j]
            if gg > 1e-14:
                out[j] = min(max(float(dv @ gv) / gg, lo), hi)
        for j, (lo, hi) in enumerate(self.boxes):
            if lo == hi:
                out[j] = lo
        return out


# ------------------------------------------------------------------------- solving --
@dataclass
class Solve:
    """One SDP: the primal value of the solver's instance, PEPit's dual value, residuals."""

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

    Returns
    -------
    lower, upper : float
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


# ------------------------------------------------------------------------ tightness --
@dataclass
class Tightness:
    """Worst case of a theorem's method over its class beside the theorem's bound.

    Attributes
    ----------
    name, variant : str
        Theorem and the bound variant used.
    constants : dict
        L, mu, local_steps, rounds, lr, n_clients and the theorem's own keywords.
    worst_case : (float, float)
        Certified bracket (lower, upper) of the worst case of the left-hand side over the class,
        initial condition normalised to 1 (module docstring: what is certified).
    bound : float
        The theorem's right-hand side for the same constants (the variant's own bound function).
    looseness : float
        bound / worst case (upper end: the smallest looseness the bracket allows).
    looseness_range : (float, float)
        bound / upper, bound / lower.
    contraction : (float, float)
        Bracket of the one-round worst-case contraction of the form's Lyapunov quantity.
    bound_contraction : float
        The bound's per-round factor, bound(rounds=2) / bound(rounds=1).
    exponent_ratio : float
        ln(worst-case contraction) / ln(bound contraction): how many times faster the worst
        case contracts than the bound says (1: the bound's rate is exact; nan when either does
        not contract or the bound is not geometric). Computed from the contraction's upper
        end: a certified lower estimate of the ratio when that bracket is wide.
    lr_threshold : float
        The largest step for which the one-round worst case is certified to contract
        (bisection; inf when every step up to ``100/L`` contracts; nan when not computed).
    lr_threshold_exact : bool
        False when a probe of the bisection could not decide (adaptive steps: its branch and
        bound's bracket straddled 1; typical for convex classes, whose worst case is exactly 1):
        ``lr_threshold`` is then only a certified lower estimate of the threshold.
    lr_conditions : dict
        The theorem's own step conditions, ``{condition: largest step it allows}``.
    function_class, metric, initial, note : str
    exact : bool
        Whether the PEP's class is the theorem's class.
    residual : float
        Largest primal residual of the solves behind ``worst_case``.
    gap : float
        Relative width of ``worst_case``.
    nodes : int
        SDPs of the branch and bound (1 for fixed steps).
    solve_time : float
        Seconds of the whole call.
    conditions_ok : bool
        Whether ``lr`` meets every one of the theorem's step conditions (``lr_conditions``).
        Outside them the theorem promises nothing: a worst case above the bound (looseness < 1)
        is then no refutation.
    failing_conditions : tuple of str
        The step conditions ``lr`` exceeds, as ``"condition: lr <= limit"``.
    """

    name: str
    variant: str
    constants: dict
    worst_case: tuple
    bound: float
    looseness: float
    looseness_range: tuple
    contraction: tuple
    bound_contraction: float
    exponent_ratio: float
    lr_threshold: float
    lr_threshold_exact: bool
    lr_conditions: dict
    function_class: str
    metric: str
    initial: str
    note: str
    exact: bool
    residual: float
    gap: float
    nodes: int
    solve_time: float
    conditions_ok: bool = True
    failing_conditions: tuple = ()

    def _conditions_text(self):
        if self.conditions_ok:
            return "lr meets the theorem's step conditions" if self.lr_conditions else "no step condition"
        return (f"lr outside the theorem's step conditions ({'; '.join(self.failing_conditions)}): "
                "looseness < 1 here would be no refutation")

    def summary(self):
        """One line: worst case, bound, looseness, exponent ratio, threshold, step conditions."""
        lo, hi = self.worst_case
        return (f"{self.name} [{self.variant}]: worst case in [{lo:.6g}, {hi:.6g}], bound {self.bound:.6g}, "
                f"looseness {self.looseness:.4g}, exponent ratio {self.exponent_ratio:.4g}, "
                f"lr threshold {self.lr_threshold:.4g} (given lr {self.constants['lr']:.4g}); "
                f"{self._conditions_text()}")

    def __repr__(self):
        lo, hi = self.worst_case
        return (f"Tightness({self.name!r}, worst_case=[{lo:.6g}, {hi:.6g}], bound={self.bound:.6g}, "
                f"looseness={self.looseness:.4g}, conditions_ok={self.conditions_ok}"
                + ("" if self.conditions_ok else f" (fails {'; '.join(self.failing_conditions)})") + ")")


def _spec(name):
    from . import SPECS
    if name not in SPECS:
        raise InvalidParameterError(f"The 'name' parameter of tightness must be a registered theorem "
                                    f"({', '.join(sorted(SPECS))}). Got {name!r} instead."
                                    f"{did_you_mean(name, SPECS)}")
    return SPECS[name]


def _check_keywords(name, builder, constants):
    """Every keyword must be a parameter of the theorem's PEP builder (InvalidParameterError naming
    the accepted ones otherwise)."""
    import inspect
    params = inspect.signature(builder).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    unknown = [k for k in constants if k not in params]
    if unknown:
        core = ("L", "mu", "local_steps", "rounds", "lr", "n_clients")
        own = [k for k in params if k not in core]
        raise InvalidParameterError(
            f"Unknown keyword {', '.join(map(repr, unknown))} for the PEP of {name}: tightness accepts "
            f"{', '.join(core)}, variant, threshold, solver, rtol, time_limit, max_nodes, max_constraints and the "
            f"theorem's own {', '.join(own) if own else '(none)'}. Got "
            f"{', '.join(f'{k}={constants[k]!r}' for k in unknown)}.")


def form_of(name, **constants):
    """The :class:`PEPForm` of a registered theorem.

    Raises :class:`NotExpressible`, with the reason its TheoremSpec gives, where there is none.

    Parameters
    ----------
    name : str
        A registered theorem.
    **constants
        The keywords of its ``pep`` function: ``L``, ``mu``, ``local_steps``, ``rounds``, ``lr``,
        ``n_clients``, ...

    Returns
    -------
    PEPForm
        With ``constants`` set to these keywords.
    """
    spec = _spec(name)
    if spec.pep is None or isinstance(spec.pep, str):
        raise NotExpressible(f"{name} has no PEP: {spec.pep or 'none registered'}")
    _check_keywords(name, spec.pep, constants)
    form = spec.pep(**constants)
    form.constants = dict(constants)
    return form


def _check_solver_options(caller, **options):
    """check_param of the solver options given (rtol >= 0, rel_tol > 0, time_limit > 0, max_nodes >= 1,
    threshold a bool), shared by tightness, lr_threshold and branch_and_bound."""
    from .._validation import Bool, Interval, check_param
    ranges = {"rtol": Interval(float, 0, None, "left"), "rel_tol": Interval(float, 0, None, "neither"),
              "time_limit": Interval(float, 0, None, "neither"), "max_nodes": Interval(int, 1, None),
              "threshold": Bool()}
    for k, v in options.items():
        check_param(k, v, [ranges[k]], caller)


def _check_constants(L, mu, local_steps, rounds, lr, n_clients):
    from .._validation import Interval, check_param
    name = "tightness"
    check_param("L", L, [Interval(float, 0, None, "neither")], name)
    check_param("mu", mu, [Interval(float, 0, None, "left")], name)
    if mu >= L:                  # mu = L: PEPit's interpolation conditions divide by L - mu
        raise InvalidParameterError(f"The 'mu' parameter of tightness must be a float in the range [0, L={L}) "
                                    f"(mu = L is not supported by the PEP's interpolation conditions). Got {mu} "
                                    f"instead.")
    check_param("local_steps", local_steps, [Interval(int, 1, None)], name)
    check_param("rounds", rounds, [Interval(int, 1, None)], name)
    check_param("lr", lr, [Interval(float, 0, None, "neither")], name)
    check_param("n_clients", n_clients, [Interval(int, 1, None)], name)


def pep_size(local_steps, rounds, n_clients):
    """The size of the PEP of n clients, K local steps and R rounds.

    Each client's function is evaluated at its K R local iterates, the final model and x*: about
    K R + 2 points, and interpolation needs a constraint per ordered pair of them, so the PEP has
    about n (K R + 2) points and n (K R + 2)(K R + 1) constraints (measured for local GD, n = 2,
    K R = 16: 612 interpolation constraints of PEPit's 614).

    Parameters
    ----------
    local_steps : int
        K.
    rounds : int
        R.
    n_clients : int
        n.

    Returns
    -------
    points, constraints : int
        About n (K R + 2) and n (K R + 2)(K R + 1).
    """
    m = local_steps * rounds + 2
    return n_clients * m, n_clients * m * (m - 1)


#: The default ``max_constraints`` of :func:`tightness`: the size of n = 2, K R = 16 (measured on the
#: 2-core machine: K R = 8 0.7 s, K R = 16 2 s and 0.35 GB for one solve; K R = 32 71 s and 1.25 GB,
#: K R = 200 was killed for memory on a 23 GB machine).
MAX_CONSTRAINTS = pep_size(16, 1, 2)[1]


def _check_size(local_steps, rounds, n_clients, max_constraints):
    """Refuse a PEP above ``max_constraints`` interpolation constraints (None: no limit)."""
    if max_constraints is None:
        return
    from .._validation import Interval, check_param
    check_param("max_constraints", max_constraints, [Interval(int, 1, None)], "tightness")
    points, cons = pep_size(local_steps, rounds, n_clients)
    if cons > max_constraints:
        raise InvalidParameterError(
            f"The PEP of tightness is too large: local_steps*rounds = {local_steps * rounds} with n_clients = "
            f"{n_clients} gives about {points} points and {cons} interpolation constraints, above "
            f"max_constraints={max_constraints} (the default allows local_steps*rounds <= 16 with two clients, a "
            f"few seconds; time and memory grow like n (K R)^2: K R = 32 took 71 s and 1.25 GB). Use fewer steps or "
            f"rounds, or pass max_constraints={cons} (or None) to solve it anyway.")


def _contraction_target(strict):
    """The one-round worst case below which a round "contracts": 1 - 1e-7 for strongly convex
    classes, 1 + 1e-4 (non-expansive, to solver accuracy) for convex ones."""
    return 1 - 1e-7 if strict else 1 + 1e-4


def lr_threshold(name, *, L, mu, local_steps, n_clients=2, lr_max=None, rel_tol=1e-3, solver="CLARABEL", bnb=None,
                 time_limit=10.0, **kw):
    """Largest step for which the one-round worst case of the theorem's Lyapunov quantity is
    certified to contract (upper end of its bracket < 1, or <= 1 for convex classes), by
    bisection on (0, lr_max] (default: the form's ``lr_max``, else 100/L); inf when lr_max
    contracts. The bisection assumes the contracting steps form an interval. For adaptive steps
    each probe is a branch and bound that stops once the bracket is on one side of the target
    (``bnb``: 2 s, 60 nodes); an undecided probe counts as not contracting, so the threshold is
    a certified lower estimate (relative tolerance >= 2e-2; nan when no step could be
    certified). After ``time_limit`` seconds every further probe counts as undecided. For
    adaptive steps over a convex class (mu = 0) every probe where the steps are adaptive is
    undecided (the worst case is exactly 1 and a relaxation cannot certify it): the threshold is
    then where the steps stop being fixed (FedSPS: gamma_b <= 1/(2cL), every step at the cap), a
    lower estimate.

    Returns
    -------
    threshold : float
    undecided : list of float
        The probed steps whose bracket straddled the target (empty: the threshold is exact to
        the tolerance).
    """
    _check_solver_options("lr_threshold", rel_tol=rel_tol, time_limit=time_limit)
    if lr_max is None:
        probe = form_of(name, L=L, mu=mu, local_steps=local_steps, rounds=1, lr=1.0 / L, n_clients=n_clients, **kw)
        lr_max = probe.lr_max if probe.lr_max is not None else 100.0 / L
        if probe.n_adaptive:
            rel_tol = max(rel_tol, 2e-2)
    bnb = dict(time_limit=2.0, max_nodes=60) if bnb is None else bnb

    deadline = time.perf_counter() + time_limit

    def ok(lr):
        if time.perf_counter() > deadline:     # out of time: not certified (the estimate stays a lower one)
            undecided.append(lr)
            return False
        form = form_of(name, L=L, mu=mu, local_steps=local_steps, rounds=1, lr=lr, n_clients=n_clients, **kw)
        target = _contraction_target(form.strict)
        if form.n_adaptive and not form.strict:
            # a convex class: the worst case is exactly 1 wherever the method is non-expansive, and a
            # relaxation over step boxes cannot certify exactly 1; undecided without solving
            undecided.append(lr)
            return False
        try:
            lo, hi, _ = worst_case(form, "contraction", solver,
                                   **(dict(bnb, target=target) if form.n_adaptive else {}))
        except Exception:                      # the solver fails on a huge worst case: not certified
            return False
        if lo < target <= hi:
            undecided.append(lr)
        return hi < target

    undecided = []

    if lr_max < 2.0 / L:
        if ok(lr_max):
            return math.inf, undecided
        a, b = 0.0, lr_max
    else:
        a, b = 0.0, 2.0 / L
    while ok(b):
        if b >= lr_max:
            return math.inf, undecided
        a, b = b, min(2 * b, lr_max)
    while b - a > rel_tol * b:
        m = 0.5 * (a + b)
        a, b = (m, b) if ok(m) else (a, m)
    if a == 0.0 and undecided:                 # no step certified: no estimate at all
        return math.nan, undecided
    return a, undecided


def _solved(fn, name, lr, local_steps, rounds, L, *args, **kw):
    """``fn(*args, **kw)``, a solver failure raised as a :class:`PEPSolveError` naming lr."""
    from cvxpy.error import SolverError
    try:
        return fn(*args, **kw)
    except (SolverError, RuntimeError) as e:
        with np.errstate(over="ignore"):
            size = max(1.0, abs(1 - lr * L)) ** (2 * local_steps * rounds)
        raise PEPSolveError(
            f"The PEP of {name} at lr={lr:g} (local_steps={local_steps}, rounds={rounds}) could not be solved: {e}. "
            f"The worst case is finite (a fixed number of steps over a class of bounded curvature; one gradient "
            f"step multiplies the squared distance by at most max(|1 - lr mu|, |1 - lr L|)^2), of order "
            f"max(1, |1 - lr L|)^(2 local_steps rounds) = {size:.3g} here: a numerical failure of the SDP solver, "
            f"not an unbounded worst case. Use a smaller lr (the one-round worst case contracts only below "
            f"lr_threshold, 2/L for local GD).") from e


def tightness(name, *, L, mu, local_steps, rounds, lr, n_clients=2, variant="printed", threshold=True,
              solver="CLARABEL", rtol=1e-3, time_limit=8.0, max_nodes=400, max_constraints=MAX_CONSTRAINTS, **kw):
    r"""Exact worst case of a theorem's method over its class, beside the theorem's bound.

    Parameters
    ----------
    name : str
        A registered theorem with a PEP (``localdescent.theorem_4_1``, ``fedsps.theorem_3a``,
        ``fedsps.theorem_3b``, ``fedsps.theorem_6a``; docs/tightness.md lists why the others
        have none).
    L, mu : float
        Smoothness and strong convexity of every client (0 <= mu < L; mu = 0: convex).
    local_steps, rounds, n_clients : int
        K (tau, E), R and the number of clients (uniform weights, full participation).
    lr : float
        The method's step: the local step size (local GD) or the cap gamma_b (FedSPS).
    variant : str, default "printed"
        The spec's bound variant (what the paper prints by default).
    threshold : bool, default True
        Compute :attr:`Tightness.lr_threshold` (a bisection of one-round PEPs).
    solver : {"CLARABEL", "SCS"}
        CVXPY's SDP solver.
    rtol, time_limit, max_nodes
        Branch and bound of adaptive steps (:func:`branch_and_bound`): ``time_limit`` seconds
        for the worst case, a quarter of it for the one-round contraction and as much again for
        the threshold's bisection (about 2.3 ``time_limit`` in all, at most).
    max_constraints : int or None, default :data:`MAX_CONSTRAINTS` (612)
        Refuse (``InvalidParameterError``) a PEP with more interpolation constraints than this,
        estimated up front by :func:`pep_size` as n (K R + 2)(K R + 1): the default allows
        K R <= 16 with two clients (seconds); time and memory grow like n (K R)^2 (K R = 32: 71 s,
        1.25 GB). Pass a larger value, or None, to solve a larger PEP anyway.
    **kw
        The theorem's own constants (``c`` of FedSPS, ``lam`` of Theorem 4.1's step conditions,
        ``server_lr``).

    Returns
    -------
    Tightness

    Raises
    ------
    ImportError
        PEPit is missing (the ``[pep]`` extra).
    NotExpressible
        The theorem has no PEP (the reason is the message).
    InvalidParameterError
        A constant outside its range (0 <= mu < L, ...), a solver option outside its range
        (``rtol >= 0``, ``time_limit > 0``, ``max_nodes >= 1`` an int, ``threshold`` a bool), an
        unknown theorem or keyword, or a PEP above ``max_constraints``.
    PEPSolveError
        The SDP solver failed (a step so large that the finite worst case is beyond its accuracy);
        the message names lr.

    Examples
    --------
    >>> import validation
    >>> t = validation.tightness("fedsps.theorem_3b", L=1.0, mu=0.1, local_steps=1, rounds=1, lr=0.3,
    ...                          n_clients=2, threshold=False, time_limit=2.0)
    >>> lo, hi = t.worst_case
    >>> bool(lo <= hi < t.bound), t.function_class.startswith("L-smooth")
    (True, True)
    """
    t0 = time.perf_counter()
    from .._validation import Options, check_param
    _check_constants(L, mu, local_steps, rounds, lr, n_clients)
    _check_size(local_steps, rounds, n_clients, max_constraints)
    check_param("solver", solver, [Options(*SOLVERS)], "tightness")
    _check_solver_options("tightness", threshold=threshold, rtol=rtol, time_limit=time_limit, max_nodes=max_nodes)
    spec = _spec(name)
    check_param("variant", variant, [Options(*spec.variants)], "tightness")
    require_pepit()                     # after the arguments: a bad one is named even without PEPit
    consts = dict(L=L, mu=mu, local_steps=local_steps, n_clients=n_clients, **kw)
    bnb = dict(rtol=rtol, time_limit=time_limit, max_nodes=max_nodes)
    form = form_of(name, rounds=rounds, lr=lr, **consts)
    lo, hi, info = _solved(worst_case, name, lr, local_steps, rounds, L, form, "theorem", solver, **bnb)
    var = spec.variants[variant]
    bound = float(var.bound(*form.bound_args(rounds)))
    if rounds == 1 and form.metric_is_contraction:
        clo, chi, cinfo = lo, hi, info
    else:
        one = form_of(name, rounds=1, lr=lr, **consts)
        clo, chi, cinfo = _solved(worst_case, name, lr, local_steps, 1, L, one, "contraction", solver,
                                  **dict(bnb, time_limit=time_limit / 4))
    b1, b2 = float(var.bound(*form.bound_args(1))), float(var.bound(*form.bound_args(2)))
    rho_b = b2 / b1 if b1 > 0 else math.nan
    with np.errstate(all="ignore"):
        ratio = (math.log(chi) / math.log(rho_b) if form.geometric_bound and 0 < chi < 1 and 0 < rho_b < 1
                 else math.nan)
    failing = tuple(f"{c}: lr <= {v:.4g}" for c, v in form.lr_conditions.items() if not lr <= v * (1 + 1e-9))
    thr, undecided = lr_threshold(name, L=L, mu=mu, local_steps=local_steps, n_clients=n_clients, solver=solver,
                                  time_limit=time_limit, **kw) if threshold else (math.nan, [])
    return Tightness(
        name=name, variant=variant, constants=dict(consts, rounds=rounds, lr=lr), worst_case=(lo, hi), bound=bound,
        looseness=bound / hi if hi > 0 else math.inf,
        looseness_range=(bound / hi if hi > 0 else math.inf, bound / lo if lo > 0 else math.inf),
        contraction=(clo, chi), bound_contraction=rho_b, exponent_ratio=ratio, lr_threshold=thr,
        lr_threshold_exact=threshold and not undecided,
        lr_conditions=dict(form.lr_conditions), function_class=form.function_class, metric=form.metric,
        initial=form.initial, note=form.note, exact=form.exact, residual=max(info["residual"], cinfo["residual"]),
        gap=info["gap"], nodes=info["nodes"], solve_time=time.perf_counter() - t0, conditions_ok=not failing,
        failing_conditions=failing)


def covered():
    """Which registered theorems :func:`tightness` covers.

    Returns
    -------
    dict
        ``{theorem: True}`` for theorems with a PEP, ``{theorem: reason}`` for the others.
    """
    from . import SPECS
    return {n: (True if callable(s.pep) else (s.pep or "no PEP registered")) for n, s in sorted(SPECS.items())}


# ----------------------------------------------------------- instances of the class --
def class_quadratics(n, L, mu, dim=3, seeds=(0, 1)):
    r"""Quadratics of the class for measuring the registered algorithm: :math:`f_i = \frac12
    x^\top Q_i x` with every eigenvalue of :math:`Q_i` in [mu, L] (so x* = 0 and every
    :math:`f_i^* = f_i(x^*) = 0`, a shared minimiser): identical one-dimensional clients with
    curvature mu, (mu + L)/2 and L, and clients with random rotations of
    diag(linspace(max(mu, L/20), L, dim)).

    Examples
    --------
    >>> ps = class_quadratics(2, 1.0, 0.1)
    >>> len(ps), ps[0].n_clients
    (5, 2)
    """
    import problems
    out = [problems.explicit_quadratic(np.full((n, 1, 1), h), np.zeros((n, 1)), name=f"identical_{h:g}")
           for h in sorted({mu, 0.5 * (mu + L), L}) if h > 0]
    ev = np.linspace(max(mu, L / 20), L, dim)
    for s in seeds:
        rng = np.random.default_rng(s)
        Q = []
        for _ in range(n):
            U, _r = np.linalg.qr(rng.normal(size=(dim, dim)))
            Q.append(U @ np.diag(ev) @ U.T)
        out.append(problems.explicit_quadratic(np.array(Q), np.zeros((n, dim)), name=f"rotated_{s}"))
    return out


def normalised_x0(problem, initial):
    """x0 along the all-ones direction scaled so that the initial condition ``"distance"``
    (||x0 - x*||^2) or ``"gap"`` (f(x0) - f*) equals 1 (x* = 0, f* = 0)."""
    v = np.ones(problem.dim)
    if initial == "distance":
        return v / np.linalg.norm(v)
    return v / math.sqrt(problem.value(v))


# ------------------------------------------------------------- fedtheory verify --tightness --
def _case_4_1(quick, local_steps=2):
    from .localdescent import lfgd_eta_max
    E = local_steps
    return dict(L=1.0, mu=0.1, local_steps=E, rounds=2 if quick else 4, lr=lfgd_eta_max(1.0, 0.1, 1.0, E, "43"),
                n_clients=2)


def _case_6a(quick, local_steps=2):
    from .fedsps import DEFAULT_C, step_cap
    return dict(L=1.0, mu=0.0, local_steps=local_steps, rounds=2 if quick else 4,
                lr=step_cap(DEFAULT_C["6a"](local_steps), 1.0, local_steps), n_clients=2)


#: The configuration ``fedtheory verify --tightness`` checks for each covered theorem: a function
#: ``(quick, local_steps=2) -> constants`` (local GD at the step its proof's condition (43) allows
#: for those local steps; FedSPS at the default cap gamma_b = 1 (3(a), 3(b)) or at Theorem 6(a)'s
#: own cap, ``fedsps.step_cap``). ``benchmarks/bench_tightness.py`` calls it for other K.
TIGHTNESS_CASES = {
    "localdescent.theorem_4_1": _case_4_1,
    "fedsps.theorem_3a": lambda quick, local_steps=2: dict(L=1.0, mu=0.0, local_steps=local_steps,
                                                           rounds=1 if quick else 2, lr=1.0, n_clients=2),
    "fedsps.theorem_3b": lambda quick, local_steps=2: dict(L=1.0, mu=0.1, local_steps=local_steps,
                                                           rounds=1 if quick else 2, lr=1.0, n_clients=2),
    "fedsps.theorem_6a": _case_6a,
}

TIGHTNESS_COLUMNS = ["worst_case_lower", "worst_case_upper", "looseness"]


def curves(name, *, rounds, variant="printed", solver="CLARABEL", time_limit=3.0, known=None, **consts):
    """Measured (the largest over the class quadratics and the extracted worst-case instance,
    :func:`worst_case_instance`, when there is one), worst case (bracket) and bound after
    1..rounds rounds: a dict of arrays ``rounds``, ``measured``, ``lower``, ``upper``, ``bound``.
    ``known`` maps rounds r to a bracket already solved (e.g. :func:`tightness`'s), used as is."""
    spec = _spec(name)
    var = spec.variants[variant]
    form = form_of(name, rounds=rounds, **consts)
    meas = form.instances(rounds).max(axis=0) if form.instances is not None else np.full(rounds, np.nan)
    inst = worst_case_instance(form) if form.instances is not None else None
    if inst is not None:                       # the extracted worst-case quadratic, run the same way
        meas = np.maximum(meas, form.instances(rounds, [inst])[0])
    lo, hi, bd = [], [], []
    for r in range(1, rounds + 1):
        f = form_of(name, rounds=r, **consts)
        if known and r in known:
            a, b = known[r]
        elif f.n_adaptive:
            a, b, _ = worst_case(f, "theorem", solver, time_limit=time_limit)
        else:
            a, b, _ = worst_case(f, "theorem", solver)
        lo.append(a)
        hi.append(b)
        bd.append(float(var.bound(*f.bound_args(r))))
    return dict(rounds=np.arange(1, rounds + 1), measured=np.asarray(meas), lower=np.array(lo), upper=np.array(hi),
                bound=np.array(bd))


def contraction_curve(name, *, lrs, solver="CLARABEL", time_limit=1.0, **consts):
    """One-round worst-case contraction (bracket) of the form's Lyapunov quantity at each step in
    ``lrs``: arrays ``lr``, ``lower``, ``upper``."""
    lo, hi = [], []
    for lr in lrs:
        f = form_of(name, rounds=1, lr=float(lr), **consts)
        try:
            a, b, _ = worst_case(f, "contraction", solver, time_limit=time_limit, max_nodes=40) if f.n_adaptive \
                else worst_case(f, "contraction", solver)
        except Exception:                          # solver failure on a huge worst case
            a = b = math.nan
        lo.append(a)
        hi.append(b)
    return dict(lr=np.asarray(lrs, dtype=float), lower=np.array(lo), upper=np.array(hi))


def figure(t, cur, con):
    """The tightness figure of one theorem: measured, worst case and bound against rounds (left);
    the one-round worst-case contraction (its bracket: the band) against the step with the
    theorem's step conditions and the threshold marked (right). Returns a matplotlib Figure
    (never shown).

    Both value axes are logarithmic (linear when their values span less than a factor 3 or none
    is positive), placed by :func:`fedtheory.plotting.log_limits`; a value at or below 0 is marked
    at the axis' bottom and +inf at its top (:func:`fedtheory.plotting.mark_off_axis`), a NaN
    (a solver failure) is left out.
    """
    import matplotlib.pyplot as plt

    from ..plotting import (PREDICTED_COLOR, _legend_entries, _usable_mask, bound_style, linear_limits, log_limits,
                            log_ticks, mark_off_axis)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")

    def value_axis(ax, *arrays):
        """Scale and limits before drawing (no autoscaling over the data); returns the limits of
        a log axis, or None for a linear one."""
        lim = log_limits(*arrays)
        if lim is not None and lim[1] >= 3 * lim[0] * 10 ** 0.3:    # (log_limits pads 0.15 decade a side)
            ax.set_yscale("log")
            ax.set_ylim(*lim)
            return lim
        ax.set_ylim(*linear_limits(*arrays))
        return None

    def shown(v, lim):
        v = np.asarray(v, dtype=float)
        return np.where(_usable_mask(v) if lim is not None else np.isfinite(v), v, np.nan)

    r = np.asarray(cur["rounds"], dtype=float)
    bound, lower, upper, measured = (np.asarray(cur[k], dtype=float) for k in ("bound", "lower", "upper", "measured"))
    lim1 = value_axis(a1, bound, lower, upper, measured)
    st = bound_style(t.variant)                  # the variant's colour, as in every figure
    a1.plot(r, shown(bound, lim1), color=st["color"], ls="--", marker="x", ms=7, label=f"bound ({t.variant})")
    ok = np.isfinite(shown(lower, lim1)) & np.isfinite(shown(upper, lim1))
    if ok.any():
        a1.fill_between(r, np.where(ok, lower, np.nan), np.where(ok, upper, np.nan), color="C0", alpha=0.3)
    # open circles around filled squares: the measured value can equal the worst case (its instance)
    a1.plot(r, shown(upper, lim1), color="C0", marker="o", ms=9, mfc="none", label="worst case (PEP)")
    a1.plot(r, shown(measured, lim1), color="black", ls=":", marker="s", ms=4,
            label="measured (fedtheory.run, class quadratics)")
    if lim1 is not None:
        for v, c in ((bound, st["color"]), (upper, "C0"), (measured, "black")):
            mark_off_axis(a1, r, v, *lim1, color=c)
        log_ticks(a1, "y")
    if np.isfinite(r).any():
        a1.set_xticks(r[np.isfinite(r)])
        a1.set_xlim(np.nanmin(r) - 0.5, np.nanmax(r) + 0.5)
    a1.set_xlabel("rounds R")
    a1.set_ylabel(t.metric)
    h, lab = _legend_entries(a1)
    a1.legend(h, lab, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=2, frameon=False)
    a1.set_title(f"{t.name}: looseness {t.looseness:.3g}", fontsize=9)
    lr = np.asarray(con["lr"], dtype=float)
    c_lo, c_hi = np.asarray(con["lower"], dtype=float), np.asarray(con["upper"], dtype=float)
    ok = np.isfinite(c_hi) & np.isfinite(lr)
    lim2 = value_axis(a2, c_lo[ok], c_hi[ok], [1.0])
    lr_max = np.nanmax(lr) if np.isfinite(lr).any() else -math.inf
    marked = [v for v in list(t.lr_conditions.values()) + [t.lr_threshold] if math.isfinite(v) and v <= lr_max]
    a2.set_xlim(*linear_limits(lr, [t.constants["lr"]], marked, margin=0.03))    # every step marked is shown
    band = ok & np.isfinite(shown(c_lo, lim2)) & np.isfinite(shown(c_hi, lim2))
    if band.any():
        a2.fill_between(lr, np.where(band, c_lo, np.nan), np.where(band, c_hi, np.nan), color="C0", alpha=0.3)
    a2.plot(lr[ok], shown(c_lo[ok], lim2), "C0-o", ms=3, label="one-round worst case (lower end)")
    with np.errstate(invalid="ignore"):
        wide = np.any(c_hi[ok] > c_lo[ok] * (1 + 1e-6))
    if wide:
        a2.plot(lr[ok], shown(c_hi[ok], lim2), "C0--", lw=0.8, label="upper end (branch and bound)")
    if lim2 is not None:
        mark_off_axis(a2, lr[ok], c_lo[ok], *lim2, color="C0")
    a2.axhline(1.0, color="k", lw=0.8)
    steps = {}                # conditions at steps that one line cannot tell apart (0.5 % of the axis) share it
    width = 0.005 * (np.nanmax(lr) - np.nanmin(lr)) if np.isfinite(lr).any() else 0.0
    for cname, val in t.lr_conditions.items():
        if math.isfinite(val) and val <= lr_max:
            key = next((v for v in steps if abs(v - val) <= width), val)
            steps.setdefault(key, []).append(f"{cname} (lr <= {val:.4g})")
    for k, (val, names) in enumerate(steps.items()):
        a2.axvline(val, color=("tab:red", "tab:brown", "tab:pink", "tab:gray")[k % 4],
                   ls=(":", "-.", "--", (0, (1, 3)))[k % 4], lw=1.4, label="theorem: " + ";\n".join(names))
    if math.isfinite(t.lr_threshold):
        a2.axvline(t.lr_threshold, color=PREDICTED_COLOR, ls="--", label=f"threshold {t.lr_threshold:.3g}"
                   + ("" if t.lr_threshold_exact else " (lower estimate)"))
    a2.axvline(t.constants["lr"], color="0.5", lw=0.8, label=f"lr = {t.constants['lr']:.3g}")
    if lim2 is not None:
        log_ticks(a2, "y")
    a2.set_xlabel("step (lr; gamma_b for FedSPS)")
    a2.set_ylabel("worst-case contraction per round")
    h, lab = _legend_entries(a2)
    a2.legend(h, lab, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=2, frameon=False)
    return fig


def tightness_rows(quick=False, theorems=None, out=None, echo=None):
    """``fedtheory verify --tightness``: one verdict-table row per covered theorem (its
    :data:`TIGHTNESS_CASES` configuration) with measured <= worst case <= bound checked, the
    figures written to ``out``, and the report's section (list of Markdown lines).

    Returns
    -------
    rows : list of dict
        The verdict table's columns plus :data:`TIGHTNESS_COLUMNS`.
    lines : list of str
    """
    require_pepit()
    from pathlib import Path
    rows, lines = [], ["## Tightness: exact worst cases by performance estimation", "",
                       "For each theorem with a PEP (docs/tightness.md), the worst case of its method over its "
                       "function class (PEPit, Clarabel) beside the bound of the printed variant, for the "
                       "configuration below: `measured` is the largest left-hand side of the registered "
                       "algorithm on quadratics of the class, and the verdict checks measured <= worst case "
                       "<= bound.", "",
                       "| theorem | configuration | measured | worst case | bound | looseness | exponent ratio "
                       "| lr threshold | theorem's step conditions | class | seconds |", "|" + "---|" * 11]
    figs = []
    for name, case in TIGHTNESS_CASES.items():
        if theorems and name not in theorems:
            continue
        c = case(quick)
        t = tightness(name, time_limit=5.0 if quick else 8.0, **c)
        other = {k: v for k, v in c.items() if k not in ("rounds", "lr")}
        cur = curves(name, rounds=c["rounds"], lr=c["lr"], time_limit=2.0 if quick else 4.0,
                     known={c["rounds"]: t.worst_case}, **other)       # the last round: tightness's bracket
        lr_top = max([c["lr"], t.lr_threshold if math.isfinite(t.lr_threshold) else 0.0]
                     + [v for v in t.lr_conditions.values() if math.isfinite(v)]) * 1.5
        con = contraction_curve(name, lrs=np.linspace(lr_top / (8 if quick else 16), lr_top, 8 if quick else 16),
                                **other)
        meas = float(cur["measured"][-1])
        lo, hi = t.worst_case
        tol = 1e-6 * max(1.0, hi)
        ok = meas <= hi + tol and lo <= t.bound
        cfg = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in c.items())
        if ok:
            verdict = "OK: measured <= worst case <= bound"
        elif meas > hi + tol:
            verdict = "UNEXPECTED: measured > worst case"      # the PEP or the registered method is wrong
        elif t.conditions_ok:
            verdict = "UNEXPECTED: worst case > bound"         # a refutation of the theorem
        else:                                                  # the step is outside the theorem: no claim
            verdict = ("worst case > bound outside the theorem's step conditions (no refutation): "
                       + "; ".join(map(str, t.failing_conditions)))
        rows.append(dict(theorem=name, case=f"tightness: {cfg}", kind="tightness", variant=t.variant,
                         conditions_ok=(f"{sum(c['lr'] <= v for v in t.lr_conditions.values())}/{len(t.lr_conditions)} "
                                        "step conditions" if t.lr_conditions else "-"), measured=meas,
                         stderr=math.nan, bound=t.bound, ratio=meas / t.bound, fitted_rate=math.nan,
                         predicted_rate=math.nan, verdict=verdict, failing_conditions="",
                         worst_case_lower=lo, worst_case_upper=hi, looseness=t.looseness))
        conds = "; ".join(f"{k}: lr <= {v:.4g}" for k, v in t.lr_conditions.items()) or "-"
        thr = f"{t.lr_threshold:.4g}" + ("" if t.lr_threshold_exact else " (lower estimate)")
        lines.append(f"| {name} | {cfg} | {meas:.4g} | [{lo:.6g}, {hi:.6g}] | {t.bound:.4g} | {t.looseness:.3g} | "
                     f"{t.exponent_ratio:.3g} | {thr} | {conds} | {t.function_class} | {t.solve_time:.1f} |")
        if out is not None:
            import matplotlib
            matplotlib.use("Agg")
            from ..verification import save_figure
            fname = f"tightness_{name.replace('.', '_')}.png"
            Path(out).mkdir(parents=True, exist_ok=True)
            save_figure(figure(t, cur, con), Path(out) / fname, dpi=130)
            figs.append((name, fname))
        if echo is not None:
            echo(t.summary())
    reasons = [f"* `{n}`: no PEP: {r}" for n, r in covered().items()
               if theorems and n in theorems and r is not True]
    if not rows:                               # no covered theorem asked for: the reasons, not an empty table
        lines = lines[:2] + ["No theorem asked for has a PEP (docs/tightness.md):", ""]
    elif reasons:
        lines += ["", "Without a PEP (docs/tightness.md):", ""]
    lines += reasons
    lines.append("")
    for name, fname in figs:
        lines += [f"![{name}]({fname})", ""]
    return rows, lines


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
    import problems
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
    prob = problems.explicit_quadratic(np.array(hs)[:, None, None], np.zeros((len(hs), 1)),
                                       name="pep_worst_case")
    init = prob.value(x0) if form.initial.startswith("f(") else float(x0 @ x0)
    return prob, x0 / math.sqrt(init)          # the initial condition holds with equality
