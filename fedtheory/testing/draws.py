r"""The building blocks of the hypothesis strategies of :mod:`fedtheory.testing.strategies`:
problems with exactly known constants and parameters drawn from ranges. The theorem modules draw
their conforming spaces (``TheoremSpec.cases``) with these; :mod:`~fedtheory.testing.strategies`
hands them on to users with :func:`~fedtheory.testing.strategies.theorem_cases`.

Needs ``hypothesis`` (the ``test`` extra: ``pip install -e ".[test]"``).
"""
from __future__ import annotations

import math

try:
    from hypothesis import strategies as st
except ImportError as e:  # pragma: no cover - the test extra is missing
    raise ImportError("fedtheory.testing needs hypothesis: pip install -e \".[test]\" "
                      "(the 'test' extra)") from e

import numpy as np

def as_strategy(value):
    """``value`` itself when it is a strategy, else the strategy that always draws it.

    Examples
    --------
    >>> from hypothesis import find
    >>> find(as_strategy(3), lambda v: True)
    3
    """
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


def integers(lo, hi):
    """Integers in [lo, hi] (shrinking towards lo).

    Examples
    --------
    >>> from hypothesis import find
    >>> find(integers(1, 4), lambda v: v > 2)                    # shrinks to the smallest such value
    3
    """
    _check_range("integers", lo, hi, integral=True)
    return st.integers(int(lo), int(hi))


def _check_range(fn, lo, hi, integral=False, positive=False):
    """A clear error for a range the strategy cannot draw from (a draw outside it was silent)."""
    from .._argcheck import check_param, Interval
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

    Examples
    --------
    >>> from hypothesis import find
    >>> find(uniform(0.5, 1.0), lambda v: True)
    1.0
    """
    _check_range("uniform", lo, hi)
    return st.floats(float(lo), float(hi), allow_nan=False, allow_infinity=False)


def log_uniform(lo, hi):
    """Floats in [lo, hi] drawn uniformly in log scale (for constants spanning decades; 0 < lo).

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
    return st.floats(a, b, allow_nan=False, allow_infinity=False).map(back)


@st.composite
def quadratics(draw, n_clients=integers(2, 6), dim=integers(2, 4), L=1.0, mu=None,
               heterogeneity=uniform(0.0, 2.0), noise=0.0, hessian=st.sampled_from(["shared", "distinct"]),
               shared_minimizer=False, seed=integers(0, 2 ** 16)):
    r"""``problems.quadratic`` with every argument drawn (a value or a strategy; the same problem,
    built from the components): exactly
    L-smooth, mu-strongly convex averages with heterogeneity :math:`\zeta_*^2` and gradient noise
    of the given std (``mu`` by default L times a log-uniform draw in [0.02, 0.5]). ``shared_minimizer=True``, or one client, forces heterogeneity 0; ``dim=1``
    forces mu = L (a 1 x 1 Hessian has one eigenvalue: draw ``dim`` from 2 up for a mu below L). The
    construction is kept as ``problem.info["recipe"]`` (a call that rebuilds it), with the values used.

    Examples
    --------
    >>> from hypothesis import find
    >>> p = find(quadratics(n_clients=3, dim=2, mu=0.1, heterogeneity=1.0, hessian="distinct", seed=0), lambda p: True)
    >>> p.info["recipe"]
    "problems.quadratic(3, 2, L=1.0, mu=0.1, heterogeneity=1.0, noise=0.0, seed=0, hessian='distinct', shared_minimizer=False)"
    """
    from ..components import Quadratic
    from ..components.quadratic import synthetic_quadratic
    from ..problem import FederatedProblem
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
    """Unit vectors of R^dim (a normalised draw of integers, so that shrinking reaches e_1).

    Examples
    --------
    >>> from hypothesis import find
    >>> find(unit_vectors(3), lambda u: True).tolist()                # shrinks to e_1
    [1.0, 0.0, 0.0]
    """
    if not (isinstance(dim, (int, np.integer)) and dim >= 1):
        raise ValueError(f"The 'dim' parameter of fedtheory.testing.strategies.unit_vectors must be an int >= 1. "
                         f"Got {dim!r} instead.")
    v = np.array(draw(st.lists(st.integers(-8, 8), min_size=dim, max_size=dim)), dtype=float)
    if not v.any():
        v[0] = 1.0
    return v / np.linalg.norm(v)


@st.composite
def around(draw, center, radius=log_uniform(0.1, 30.0)):
    """A point ``center + r u``: u a unit vector, r drawn from ``radius`` (a value or a strategy).

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
