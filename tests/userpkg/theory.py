"""A user's theorem, as docs/how-a-theorem-is-checked.md describes one: a spec, its default cases with
a geometric rate study, and its conforming space, registered when the module is imported
(``fedtheory verify --theorem userpkg.gd_contraction --import userpkg.theory``).

Gradient descent (FedAvg, one local step, exact gradients) on an L-smooth, mu-strongly convex
quadratic contracts the gap: f(x^T) - f* <= (1 - mu eta)^T (f(x^0) - f*) for eta <= 1/L.
"""
import numpy as np

import userpkg  # noqa: F401  (the user's algorithm, userpkg_heavyball, registered beside the theorem)
from fedtheory.theory import (Case, Condition, NotApplicable, RateStudy, TheoremSpec, Variant, register_cases,
                              register_spec)
from fedtheory.theory.engine import gap_floor

NAME = "userpkg.gd_contraction"


def setup(problem, rounds=30, lr=None, seeds=1, x0=None):
    """Constants of the theorem: L, mu and f* of the problem, the gap at x0."""
    if problem.info is None or "mu" not in problem.info:
        raise NotApplicable("the problem does not state L, mu and f* (a problems.quadratic)")
    L, mu, f_star = problem.info["L"], problem.info["mu"], problem.info["f_star"]
    x0 = np.ones(problem.dim) if x0 is None else np.asarray(x0, dtype=float)
    return dict(T=rounds, lr=1.0 / L if lr is None else lr, L=L, mu=mu, seeds=seeds, x0=x0, f_star=f_star,
                f0=problem.value(x0) - f_star)


def measure(st, runs):
    return {"values": [st["problem"].value(r.x) - st["f_star"] for r in runs["main"]]}


def bound(st, m):
    return (1 - st["mu"] * st["lr"]) ** st["T"] * st["f0"]


def space(variant):
    """One to four clients sharing the Hessian (exact gradients), eta up to 1/L, 1 to 30 rounds."""
    from hypothesis import strategies as st
    from fedtheory.testing import strategies as fts

    @st.composite
    def draw(d):
        p = d(fts.quadratics(n_clients=fts.integers(1, 4), dim=fts.integers(1, 3), mu=fts.log_uniform(0.05, 1.0),
                             heterogeneity=fts.uniform(0.0, 1.0)))
        return p, dict(rounds=d(fts.integers(1, 30)), lr=d(fts.uniform(0.1, 1.0)) / p.info["L"],
                       x0=d(fts.around(p.info["x_star"], radius=fts.log_uniform(0.1, 10.0))))
    return draw()


SPEC = register_spec(TheoremSpec(
    name=NAME, algorithm="fedavg",
    statement="f(x^T) - f* <= (1 - mu eta)^T (f(x^0) - f*) for eta <= 1/L",
    setup=setup,
    run_kwargs=lambda st: dict(rounds=st["T"], local_steps=1, lr=st["lr"], x0=st["x0"]),
    measure=measure,
    conditions=lambda st, m: [Condition("eta <= 1/L", st["lr"], 1 / st["L"], st["lr"] <= 1 / st["L"])],
    variants={"printed": Variant("as stated", bound)},
    quantity="f(x^T) - f*",
    floor=lambda st, m: gap_floor(st["f_star"], st["f0"] + st["f_star"]),
    assumptions=(("smooth", "L-smoothness"), ("strongly_convex", "mu-strong convexity")),
    cases=space,
    reference="a test fixture (gradient descent's linear rate)"))


def _problem():
    import problems
    return problems.quadratic(2, 3, mu=0.2, heterogeneity=1.0, seed=0)


@register_cases(NAME)
def default_cases(quick=False):
    """eta = 1/L (conforming), eta = 2.5/L (outside the condition), and the linear rate over T."""
    rounds = 20 if quick else 60
    cases = [Case("C1: eta = 1/L", "conforming", _problem, dict(rounds=rounds, lr=1.0), {"printed": True}),
             Case("C2: eta = 0.5/L", "conforming", _problem, dict(rounds=rounds, lr=0.5), {"printed": True})]
    rates = [RateStudy("linear rate, eta = 0.5/L", _problem, [4, 8, 12, 16, 20], lambda T: dict(rounds=T, lr=0.5),
                       variants=("printed",), form="geometric",
                       predicted_factor=lambda v: 1 - v.details["mu"] * v.details["lr"])]
    return cases, rates
