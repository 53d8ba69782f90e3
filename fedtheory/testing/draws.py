r"""The building blocks of the hypothesis strategies of :mod:`fedtheory.testing.strategies`:
problems with exactly known constants and parameters drawn from ranges. The theorem modules draw
their conforming spaces (``TheoremSpec.cases``) with these; :mod:`~fedtheory.testing.strategies`
hands them on to users with :func:`~fedtheory.testing.strategies.theorem_cases`.

Needs ``hypothesis`` (the ``test`` extra: ``pip install -e ".[test]"``).
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from .._argcheck import check_param, Interval

try:
    from hypothesis import strategies as st
except ImportError as e:  # pragma: no cover - the test extra is missing
    raise ImportError("fedtheory.testing needs hypothesis: pip install -e \".[test]\" "
                      "(the 'test' extra)") from e

import numpy as np
from ..components import Quadratic
from ..components.quadratic import synthetic_quadratic
from ..problem import FederatedProblem

#: The tape of the draw being made (:class:`Tape`), or None outside :func:`recording` and :func:`replay`.
_TAPE = contextvars.ContextVar("fedtheory_draw_tape", default=None)

#: The kinds of a taped draw: a float in a linear range, a float in a log range, an integer, an integer
#: in a log range (a continuous coordinate for a local search, rounded), an index among options.
KINDS = ("float", "log", "int", "logint", "choice")


class Tape:
    r"""The coordinates of one drawn case: every draw of the primitives below, in order.

    Each entry is ``(kind, lo, hi, u)``: ``u`` is the draw's coordinate, in [0, 1] for a float
    (``(v - lo)/(hi - lo)``, or the same in log scale for ``"log"`` and ``"logint"``) and the value
    itself for ``"int"`` and ``"choice"`` (an index). A case is a point of the unit cube of its
    continuous coordinates and a choice of its discrete ones: :func:`replay` draws the case of
    changed coordinates, mapped into the ranges of that draw (a range that depends on an earlier
    draw follows it). ``validation.falsify`` searches these coordinates after hypothesis: the edges
    of every range, then a local optimiser.

    Parameters
    ----------
    given : sequence of float, optional
        Coordinates to draw instead of hypothesis' values (replay); past its end, hypothesis' draws.
    """

    def __init__(self, given=None):
        self.given = None if given is None else list(given)
        self.entries = []

    def restart(self):
        """Forget the draws made (a new attempt at the same case: a filter rejected the last)."""
        self.entries = []

    def take(self, kind, lo, hi, value):
        """Record a draw of ``kind`` in [lo, hi] (hypothesis drew ``value``); returns the value used."""
        i = len(self.entries)
        if self.given is not None and i < len(self.given):
            value = _from_unit(kind, lo, hi, self.given[i])
        self.entries.append((kind, lo, hi, _to_unit(kind, lo, hi, value)))
        return value


@contextlib.contextmanager
def fixed_constants():
    """Within this block, hypothesis draws no constant harvested from the modules this process loaded.

    Hypothesis (6.131 and later) draws a few of its values (5% of integers, 15% of floats) from the
    literals of the "local" modules in ``sys.modules``: the project's, the tests', a user's. Which of
    them are loaded differs between a command, a test worker and a notebook, and so would the draws
    of one seed. Inside this block only hypothesis's own fixed constants are drawn, and a seed gives
    the same search in any process (``validation.falsify`` searches inside it). With a hypothesis
    that has no such pool there is nothing to do.

    Yields
    ------
    None
        Nothing: the block runs with the pool of local constants empty.

    Examples
    --------
    >>> from hypothesis import find
    >>> with fixed_constants():
    ...     find(integers(0, 10), lambda v: v >= 3)
    3
    """
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
        harvest, cache = providers._get_local_constants, providers.CONSTANTS_CACHE.cache
    except (ImportError, AttributeError):      # an older hypothesis: no pool of local constants
        yield
        return
    providers._get_local_constants = Constants  # an empty pool for every test case
    cache.clear()                               # the values allowed per range, cached with the old pool
    try:
        yield
    finally:
        providers._get_local_constants = harvest
        cache.clear()


def _to_unit(kind, lo, hi, v):
    if kind in ("int", "choice"):
        return int(v)
    if kind in ("log", "logint"):
        a, b = math.log(lo), math.log(hi)
        return 0.0 if b == a else (math.log(v) - a) / (b - a)
    return 0.0 if hi == lo else (float(v) - lo) / (hi - lo)


def _from_unit(kind, lo, hi, u):
    if kind in ("int", "choice"):
        return int(min(max(int(round(u)), lo), hi))
    u = min(max(float(u), 0.0), 1.0)
    if kind in ("log", "logint"):
        a, b = math.log(lo), math.log(hi)
        v = lo if u <= 0 else hi if u >= 1 else min(max(math.exp(a + u * (b - a)), lo), hi)
        return int(min(max(round(v), lo), hi)) if kind == "logint" else float(v)
    return float(lo if u <= 0 else hi if u >= 1 else min(max(lo + u * (hi - lo), lo), hi))


def _taped(kind, lo, hi):
    def use(value):
        tape = _TAPE.get()
        return value if tape is None else tape.take(kind, lo, hi, value)
    return use


@st.composite
def _fresh(draw, strategy):
    tape = _TAPE.get()
    if tape is not None:
        tape.restart()
    return draw(strategy)


@st.composite
def _recorded(draw, strategy):
    outer = _TAPE.get()
    tape = Tape(None if outer is None else outer.given)          # inside replay: its coordinates
    token = _TAPE.set(tape)
    try:
        value = draw(_fresh(strategy))
    finally:
        _TAPE.reset(token)
    return value, tuple(tape.entries)


def recording(strategy):
    """``strategy`` drawing ``(value, tape)``: the value and its coordinates (:class:`Tape` entries).

    Parameters
    ----------
    strategy : hypothesis strategy
        The strategy.

    Returns
    -------
    hypothesis strategy
        Of ``(value, tape)``.

    Examples
    --------
    >>> from hypothesis import find
    >>> value, tape = find(recording(uniform(1.0, 3.0)), lambda vt: vt[0] >= 2.0)
    >>> value, tape
    (2.0, (('float', 1.0, 3.0, 0.5),))
    """
    return _recorded(strategy)


def replay(strategy, coordinates):
    """The value ``strategy`` draws at ``coordinates`` (a :class:`Tape`'s ``u`` of each draw, in order).

    Deterministic where every draw of the strategy goes through the primitives of this module; a
    coordinate outside its range is clipped to it.

    Parameters
    ----------
    strategy : hypothesis strategy
        The strategy.
    coordinates : sequence of float
        The ``u`` of each draw, in order.

    Returns
    -------
    object
        The value drawn.

    Examples
    --------
    >>> replay(uniform(1.0, 3.0), [0.25]), replay(log_uniform(1.0, 100.0), [1.0]), replay(integers(2, 5), [9])
    (1.5, 100.0, 5)
    """
    from hypothesis import HealthCheck, Phase, find, settings
    tape = Tape(coordinates)
    token = _TAPE.set(tape)
    try:
        return find(_fresh(strategy), lambda v: True,
                    settings=settings(database=None, max_examples=1, phases=[Phase.generate], derandomize=True,
                                      deadline=None, suppress_health_check=list(HealthCheck)))
    finally:
        _TAPE.reset(token)


def as_strategy(value):
    """``value`` itself when it is a strategy, else the strategy that always draws it.

    Parameters
    ----------
    value : object
        A strategy or a value.

    Returns
    -------
    hypothesis strategy
        The strategy.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(as_strategy(3), lambda v: True)
    3
    """
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


def integers(lo, hi):
    """Integers in [lo, hi] (shrinking towards lo).

    Parameters
    ----------
    lo, hi : int
        The range, both ends included.

    Returns
    -------
    hypothesis strategy
        Of int.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(integers(1, 4), lambda v: v > 2)                    # shrinks to the smallest such value
    3
    """
    _check_range("integers", lo, hi, integral=True)
    return st.integers(int(lo), int(hi)).map(_taped("int", int(lo), int(hi)))


def log_integers(lo, hi):
    """Integers in [lo, hi] drawn uniformly in log scale (a horizon spanning decades; 1 <= lo),
    shrinking towards lo; a local search moves them as one continuous coordinate.

    Parameters
    ----------
    lo, hi : int
        The range, both ends included.

    Returns
    -------
    hypothesis strategy
        Of int.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(log_integers(10, 10000), lambda v: v >= 500) >= 500
    True
    """
    _check_range("log_integers", lo, hi, integral=True, positive=True)
    lo, hi = int(lo), int(hi)
    a, b = math.log(lo), math.log(hi)
    return st.floats(a, b, allow_nan=False, allow_infinity=False).map(
        lambda t: int(min(max(round(math.exp(t)), lo), hi))).map(_taped("logint", lo, hi))


def choice(*options):
    """One of ``options`` (values or strategies), shrinking towards the first: an edge of a range
    drawn beside the range (``choice(0.0, uniform(0.1, 1.0))``), or a discrete setting.

    Parameters
    ----------
    *options : object
        Values or strategies.

    Returns
    -------
    hypothesis strategy
        Of one of them.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(choice(0.0, uniform(0.5, 1.0)), lambda v: True), find(choice("ring", "complete"), lambda v: v != "ring")
    (0.0, 'complete')
    """
    if not options:
        raise ValueError("fedtheory.testing.strategies.choice needs at least one option.")
    k = len(options) - 1
    index = st.integers(0, k).map(_taped("choice", 0, k))
    return index.flatmap(lambda i: as_strategy(options[i]))


def _check_range(fn, lo, hi, integral=False, positive=False):
    """A clear error for a range the strategy cannot draw from (a draw outside it was silent)."""
    kind = int if integral else float
    for name, v in (("lo", lo), ("hi", hi)):
        if integral and not float(v).is_integer():
            raise ValueError(f"The {name!r} parameter of fedtheory.testing.strategies.{fn} must be an integer. "
                             f"Got {v!r} instead.")
        check_param(name, kind(v), [Interval(kind, 0 if positive else None, None, "neither" if positive else "both")],
                    f"fedtheory.testing.strategies.{fn}")
    if hi < lo:
        raise ValueError(f"fedtheory.testing.strategies.{fn}: the range is empty (lo={lo!r} > hi={hi!r}).")


def uniform(lo, hi):
    """Finite floats in [lo, hi] (shrinking towards the simplest value inside, an integer if any).

    Parameters
    ----------
    lo, hi : float
        The range, both ends included.

    Returns
    -------
    hypothesis strategy
        Of float.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(uniform(0.5, 1.0), lambda v: True)
    1.0
    """
    _check_range("uniform", lo, hi)
    return st.floats(float(lo), float(hi), allow_nan=False, allow_infinity=False).map(
        _taped("float", float(lo), float(hi)))


def log_uniform(lo, hi):
    """Floats in [lo, hi] drawn uniformly in log scale (for constants spanning decades; 0 < lo).

    Parameters
    ----------
    lo, hi : float
        The range, both ends included.

    Returns
    -------
    hypothesis strategy
        Of float.

    Examples
    --------
    >>> from hypothesis import find
    >>> 0.5 <= find(log_uniform(1e-3, 10.0), lambda v: v >= 0.5) <= 10.0
    True
    """
    _check_range("log_uniform", lo, hi, positive=True)
    lo, hi = float(lo), float(hi)
    a, b = math.log(lo), math.log(hi)

    def back(t):                        # the ends exactly (exp(log(lo)) may round above lo)
        return lo if t <= a else hi if t >= b else float(min(max(math.exp(t), lo), hi))
    return st.floats(a, b, allow_nan=False, allow_infinity=False).map(back).map(_taped("log", lo, hi))


@st.composite
def quadratics(draw, n_clients=integers(2, 6), dim=integers(2, 4), L=1.0, mu=None,
               heterogeneity=uniform(0.0, 2.0), noise=0.0, hessian=choice("shared", "distinct"),
               shared_minimizer=False, seed=integers(0, 2 ** 16)):
    r"""``problems.quadratic`` with every argument drawn (a value or a strategy; the same problem,
    built from the components): exactly
    L-smooth, mu-strongly convex averages with heterogeneity :math:`\zeta_*^2` and gradient noise
    of the given std (``mu`` by default L times a log-uniform draw in [0.02, 0.5]). ``shared_minimizer=True``, or one client, forces heterogeneity 0; ``dim=1``
    forces mu = L (a 1 x 1 Hessian has one eigenvalue: draw ``dim`` from 2 up for a mu below L). The
    construction is kept as ``problem.info["recipe"]`` (a call that rebuilds it), with the values used.

    Parameters
    ----------
    n_clients, dim : int or strategy
        Clients and dimension (a value or a strategy).
    L : float or strategy, default 1
        The largest eigenvalue of the average Hessian.
    mu : float or strategy, optional
        The smallest one (default drawn as above).
    heterogeneity, noise : float or strategy
        zeta_*^2 and the gradient noise's std.
    hessian : str or strategy
        "shared" or "distinct".
    shared_minimizer : bool or strategy, default False
        Interpolation.
    seed : int or strategy
        Seed of the construction.

    Returns
    -------
    hypothesis strategy
        Of FederatedProblem.

    Examples
    --------
    >>> from hypothesis import find
    >>> p = find(quadratics(n_clients=3, dim=2, mu=0.1, heterogeneity=1.0, hessian="distinct", seed=0), lambda p: True)
    >>> p.info["recipe"]
    "problems.quadratic(3, 2, L=1.0, mu=0.1, heterogeneity=1.0, noise=0.0, seed=0, hessian='distinct', shared_minimizer=False)"
    """
    L_ = draw(as_strategy(L))
    mu_ = L_ * draw(log_uniform(0.02, 0.5)) if mu is None else draw(as_strategy(mu))    # default: relative to L
    kw = dict(L=L_, mu=mu_, heterogeneity=draw(as_strategy(heterogeneity)),
              noise=draw(as_strategy(noise)), seed=draw(as_strategy(seed)), hessian=draw(as_strategy(hessian)),
              shared_minimizer=draw(as_strategy(shared_minimizer)))
    n, d = draw(as_strategy(n_clients)), draw(as_strategy(dim))
    if kw["shared_minimizer"] or n == 1:
        kw["heterogeneity"] = 0.0
    if d == 1:
        kw["mu"] = kw["L"]
    Q, C, w, info = synthetic_quadratic(n, d, caller="fedtheory.testing.strategies.quadratics", **kw)
    p = FederatedProblem.from_clients(list(Q), list(C), Quadratic(), weights=w, noise=kw["noise"], name="quadratic",
                                      info=info, caller="fedtheory.testing.strategies.quadratics")
    p.info["recipe"] = f"problems.quadratic({n}, {d}, " + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")"
    return p


@st.composite
def unit_vectors(draw, dim):
    """Unit vectors of R^dim (a normalised draw in [-1, 1]^dim, e_1 for the zero draw, so that
    shrinking reaches e_1).

    Parameters
    ----------
    dim : int
        The dimension.

    Returns
    -------
    hypothesis strategy
        Of ndarray of shape (dim,).

    Examples
    --------
    >>> from hypothesis import find
    >>> find(unit_vectors(3), lambda u: True).tolist()                # shrinks to e_1
    [1.0, 0.0, 0.0]
    """
    if not (isinstance(dim, (int, np.integer)) and dim >= 1):
        raise ValueError(f"The 'dim' parameter of fedtheory.testing.strategies.unit_vectors must be an int >= 1. "
                         f"Got {dim!r} instead.")
    v = np.array([draw(uniform(-1.0, 1.0)) for _ in range(int(dim))], dtype=float)
    norm = float(np.linalg.norm(v))
    if not norm > 1e-12:                    # the zero draw (or one whose norm underflows)
        v, norm = np.eye(int(dim))[0], 1.0
    return v / norm


@st.composite
def around(draw, center, radius=log_uniform(0.1, 30.0)):
    """A point ``center + r u``: u a unit vector, r drawn from ``radius`` (a value or a strategy).

    Parameters
    ----------
    center : array_like
        The centre.
    radius : float or strategy
        The distance r.

    Returns
    -------
    hypothesis strategy
        Of ndarray.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(around(np.zeros(2), radius=2.0), lambda x: x[1] > 0).tolist()
    [0.0, 2.0]
    """
    center = np.asarray(center, dtype=float)
    if center.ndim != 1 or center.size == 0:
        raise ValueError(f"The 'center' parameter of fedtheory.testing.strategies.around must be a non-empty "
                         f"vector (1-D). Got shape {center.shape} instead.")
    return center + draw(as_strategy(radius)) * draw(unit_vectors(center.size))
