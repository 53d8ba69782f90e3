r"""The public API of tightness (``validation.tightness``): how loose is a bound: the exact worst case of the method over the theorem's function class,
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

import math
import time
from dataclasses import dataclass

import numpy as np

from ...exceptions import InvalidParameterError
from .solve import _check_solver_options, worst_case
from .pepit_adapter import SOLVERS, NotExpressible, PEPSolveError, require_pepit
from ..._argcheck import check_param, did_you_mean, Interval, Options
from .. import SPECS, is_lemma


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
        Whether ``lr`` meets every one of the theorem's step conditions (``lr_conditions``) and the
        other constants the theorem's other conditions (FedSPS's c >= 2 tau^2).
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
        return (f"outside the theorem's conditions ({'; '.join(self.failing_conditions)}): "
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


def _check_constants(L, mu, local_steps, rounds, lr, n_clients):
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
        The local steps K.
    rounds : int
        The rounds R.
    n_clients : int
        The clients n.

    Returns
    -------
    points : int
        About n (K R + 2): the points of the PEP.
    constraints : int
        About n (K R + 2)(K R + 1): its interpolation constraints.
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

    Parameters
    ----------
    name : str
        The theorem (its PEP form).
    L, mu : float
        The class's constants.
    local_steps : int
        Local steps.
    n_clients : int, default 2
        Clients of the PEP.
    lr_max : float, optional
        The upper end of the bisection.
    rel_tol : float, default 1e-3
        Relative tolerance of the bisection.
    solver : str, default "CLARABEL"
        The SDP solver.
    bnb : dict, optional
        Options of the branch and bound of adaptive steps.
    time_limit : float, optional
        Seconds, after which every probe counts as undecided.
    **kw
        More parameters of the form.

    Returns
    -------
    threshold : float
        The largest certified step (inf or nan as described above).
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
    local_steps, rounds : int
        K (tau, E) and R.
    lr : float
        The method's step: the local step size (local GD) or the cap gamma_b (FedSPS).
    n_clients : int, default 2
        The number of clients (uniform weights, full participation).
    variant : str, default "printed"
        The spec's bound variant (what the paper prints by default).
    threshold : bool, default True
        Compute :attr:`Tightness.lr_threshold` (a bisection of one-round PEPs).
    solver : {"CLARABEL", "SCS"}
        CVXPY's SDP solver.
    rtol : float, default 1e-3
        Relative gap at which the branch and bound of adaptive steps (:func:`branch_and_bound`)
        stops.
    time_limit : float, default 8
        Its seconds for the worst case, a quarter of it for the one-round contraction and as much
        again for the threshold's bisection (about 2.3 ``time_limit`` in all, at most).
    max_nodes : int, default 400
        Its largest number of nodes.
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
        The worst case, the theorem's bound at the same constants and their ratio (``looseness``),
        with the one-round contractions and the step-size threshold.

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
    failing = tuple(f"{c}: lr <= {v:.4g}" for c, v in form.lr_conditions.items() if not lr <= v * (1 + 1e-9)) \
        + tuple(c for c, holds in form.other_conditions.items() if not holds)
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
        ``{theorem: True}`` for theorems with a PEP, ``{theorem: reason}`` for the others (lemmas and
        proof steps are steps of a theorem's proof, checked on its runs: the PEP is the theorem's).
    """
    return {n: (True if callable(s.pep) else (s.pep or "no PEP registered")) for n, s in sorted(SPECS.items())
            if not is_lemma(n)}
