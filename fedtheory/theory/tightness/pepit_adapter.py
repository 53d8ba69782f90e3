"""The PEPit adapter: what a theorem module uses to write its method as a PEP.

:class:`PEPForm` (what a theorem spec's ``pep=`` returns), the building blocks of its ``build``
(:func:`shared_minimiser_clients`, :func:`average`, :class:`PolyakSteps`), PEPit's import with the
extra's name (:func:`require_pepit`) and the registry of the ``fedtheory verify --tightness``
configurations (:func:`tightness_case`). Imports no theorem module: the theorem modules import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


EXTRA = "pep"
SOLVERS = ("CLARABEL", "SCS")


class NotExpressible(ValueError):
    """The theorem's method or function class has no PEP here; the message says why."""


class PEPSolveError(RuntimeError):
    """The SDP solver failed on a PEP whose worst case is finite (a numerical failure, typically a
    step so large that the worst case is beyond the solver's accuracy); the message names lr."""


def require_pepit():
    """Import PEPit, or raise an ImportError naming the optional extra ``[pep]``.

    Returns
    -------
    module
        PEPit.
    """
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
    other_conditions : dict
        ``{condition: whether it holds}``: the theorem's conditions on the other constants (FedSPS's
        c >= 2 tau^2), for these constants; one that fails makes ``conditions_ok`` False.
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
    other_conditions: dict = field(default_factory=dict)
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
    """Build a PEP of n clients that share a minimiser x*.

    Each client is L-smooth and mu-strongly convex (convex when mu = 0); all are stationary at one
    point x*.

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
    """Weighted average of PEP points (uniform weights by default).

    Parameters
    ----------
    points : list
        PEP points.
    weights : sequence of float, optional
        The weights (uniform by default).

    Returns
    -------
    Point
        The average.
    """
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

    Parameters
    ----------
    boxes : sequence of tuple
        ``(lo, hi)`` of every step size.
    cap : float
        gamma_b.
    fixed : sequence of float, optional
        One value per step (the exact PEP at those steps).
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


# -------------------------------------------------------- fedtheory verify --tightness --
#: The configuration ``fedtheory verify --tightness`` checks for each covered theorem: a function
#: ``(quick, local_steps=2) -> constants``, registered by the theorem's module with
#: :func:`tightness_case` (``benchmarks/bench_tightness.py`` calls it for other K).
TIGHTNESS_CASES = {}


def tightness_case(name):
    """Register the decorated function as the ``fedtheory verify --tightness`` configuration of the
    theorem ``name`` (in :data:`TIGHTNESS_CASES`).

    Parameters
    ----------
    name : str
        A registered theorem with a PEP (``"paper.theorem"``).

    Returns
    -------
    callable
        The decorator; it returns the function ``(quick, local_steps=2) -> constants`` unchanged.

    Examples
    --------
    >>> @tightness_case("example.theorem")
    ... def _case(quick, local_steps=2):
    ...     return dict(L=1.0, mu=0.1, local_steps=local_steps, rounds=1 if quick else 2, lr=0.5, n_clients=2)
    >>> TIGHTNESS_CASES.pop("example.theorem")(True)["rounds"]
    1
    """
    def register(case):
        TIGHTNESS_CASES[name] = case
        return case
    return register
