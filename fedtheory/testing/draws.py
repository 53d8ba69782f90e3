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
    return st.integers(int(lo), int(hi))


def uniform(lo, hi):
    """Finite floats in [lo, hi] (shrinking towards the simplest value inside, an integer if any).

    Examples
    --------
    >>> from hypothesis import find
    >>> find(uniform(0.5, 1.0), lambda v: True)
    1.0
    """
    return st.floats(float(lo), float(hi), allow_nan=False, allow_infinity=False)


def log_uniform(lo, hi):
    """Floats in [lo, hi] drawn uniformly in log scale (for constants spanning decades; 0 < lo).

    Examples
    --------
    >>> from hypothesis import find
    >>> 0.5 <= find(log_uniform(1e-3, 10.0), lambda v: v >= 0.5) <= 10.0
    True
    """
    a, b = math.log(lo), math.log(hi)
    return st.floats(a, b, allow_nan=False, allow_infinity=False).map(lambda t: float(min(max(math.exp(t), lo), hi)))


@st.composite
def quadratics(draw, n_clients=integers(2, 6), dim=integers(2, 4), L=1.0, mu=log_uniform(0.02, 0.5),
               heterogeneity=uniform(0.0, 2.0), noise=0.0, hessian=st.sampled_from(["shared", "distinct"]),
               shared_minimizer=False, seed=integers(0, 2 ** 16)):
    r"""``problems.quadratic`` with every argument drawn (a value or a strategy; the same problem,
    built from the components): exactly
    L-smooth, mu-strongly convex averages with heterogeneity :math:`\zeta_*^2` and gradient noise
    of the given std. ``shared_minimizer=True``, or one client, forces heterogeneity 0; ``dim=1``
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
    kw = dict(L=draw(as_strategy(L)), mu=draw(as_strategy(mu)), heterogeneity=draw(as_strategy(heterogeneity)),
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
    return center + draw(as_strategy(radius)) * draw(unit_vectors(center.size))
