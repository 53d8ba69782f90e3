"""A user's theorem, as docs/how-a-theorem-is-checked.md describes one: a spec, its default cases with
a geometric rate study, its conforming space and its PEP (the exact worst case that ``fedtheory
verify --tightness`` sets beside the bound), registered when the module is imported (``fedtheory
verify --theorem userpkg.gd_contraction --import userpkg.theory``).

Gradient descent (FedAvg, one local step, exact gradients) on an L-smooth, mu-strongly convex
objective contracts the gap: f(x^T) - f* <= (1 - mu eta)^T (f(x^0) - f*) for eta <= 1/L. One default
case is the user's own problem (log-cosh regression, :mod:`userpkg.logcosh`), whose L, mu and f*
come from the library's certified ground truth.
"""
import numpy as np

import userpkg  # noqa: F401  (the user's algorithm and problem factory, registered beside the theorem)
from fedtheory.theory import (Case, Condition, NotApplicable, RateStudy, TheoremSpec, Variant, register_cases,
                              register_spec)
from fedtheory.theory.floors import gap_floor
from fedtheory.theory.tightness import PEPForm, shared_minimiser_clients, tightness_case

NAME = "userpkg.gd_contraction"


def setup(problem, rounds=30, lr=None, seeds=1, x0=None):
    """Constants of the theorem: L, mu and f* of the problem (exact for a problems.quadratic, else
    the certified ground truth's), the gap at x0."""
    if problem.info is not None and "mu" in problem.info:
        L, mu, f_star = problem.info["L"], problem.info["mu"], problem.info["f_star"]
    else:
        import validation
        from fedtheory.exceptions import DataError
        gt = validation.ground_truth(problem)
        try:
            c = validation.constants(problem, gt)
        except DataError as e:
            raise NotApplicable(f"no certified smoothness constant: {e}") from None
        L, mu, f_star = c.L, c.mu, gt.f
    if not mu > 0:
        raise NotApplicable(f"the problem is not strongly convex (mu = {mu:g})")
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


def gd_pep(L, mu, local_steps, rounds, lr, n_clients=1):
    """Gradient descent over L-smooth mu-strongly convex functions, f(x^0) - f* <= 1 (one client:
    FedAvg with one local step is gradient descent on F)."""
    if local_steps != 1 or n_clients != 1:
        from fedtheory.exceptions import InvalidParameterError
        raise InvalidParameterError(f"The 'local_steps' and 'n_clients' parameters of {NAME}'s PEP must be 1 "
                                    f"(gradient descent). Got {local_steps!r} and {n_clients!r} instead.")

    def build(steps, metric):
        pep, (f,), _, (fs,) = shared_minimiser_clients(1, L, mu)
        x = x0 = pep.set_initial_point()
        pep.set_initial_condition(f.value(x0) - fs <= 1)
        for _ in range(rounds):
            x = x - lr * f.gradient(x)
        pep.set_performance_metric(f.value(x) - fs)
        return pep

    def instances(R, cases=None):
        """f(x^r) - f* of the registered fedavg (one local step) on quadratics of the class."""
        import fedtheory as ft
        from fedtheory.theory.tightness import class_quadratics, normalised_x0
        cases = [(p, normalised_x0(p, "gap")) for p in class_quadratics(1, L, mu)] if cases is None else cases
        out = []
        for p, x0 in cases:
            res = ft.run(p, "fedavg", rounds=R, local_steps=1, lr=lr, x0=x0, record_iterates=True, eval_every=R)
            out.append([p.value(x) for x in res.iterates[1:R + 1]])
        return np.array(out)

    return PEPForm(build=build, function_class=f"L-smooth mu-strongly convex (L={L:g}, mu={mu:g})",
                   bound_args=lambda R: (dict(T=R, lr=lr, mu=mu, f0=1.0), {}), exact=True,
                   lr_conditions={"eta <= 1/L": 1 / L}, strict=mu > 0, metric="f(x^T) - f*",
                   initial="f(x^0) - f* <= 1", instances=instances, metric_is_contraction=True)


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
    pep=gd_pep,
    reference="a test fixture (gradient descent's linear rate)"))


@tightness_case(NAME)
def _tightness_case(quick, local_steps=1):
    """``fedtheory verify --tightness``: eta = 1/L, mu = L/10 (the worst case is (1 - mu eta)^(2T))."""
    return dict(L=1.0, mu=0.1, local_steps=1, rounds=3 if quick else 6, lr=1.0, n_clients=1)


def _problem():
    import problems
    return problems.quadratic(2, 3, mu=0.2, heterogeneity=1.0, seed=0)


def _logcosh_problem():
    from fedtheory.reporting.config import make_problem
    return make_problem({"factory": "userpkg_logcosh", "l2": 0.2})


@register_cases(NAME)
def default_cases(quick=False):
    """eta = 1/L and eta = 0.5/L on a quadratic, eta = 1/L on the user's log-cosh regression, and the
    linear rate over T."""
    rounds = 20 if quick else 60
    cases = [Case("C1: eta = 1/L", "conforming", _problem, dict(rounds=rounds, lr=1.0), {"printed": True}),
             Case("C2: eta = 0.5/L", "conforming", _problem, dict(rounds=rounds, lr=0.5), {"printed": True}),
             Case("C3: log-cosh regression (the user's datafit), eta = 1/L", "conforming", _logcosh_problem,
                  dict(rounds=rounds), {"printed": True})]
    rates = [RateStudy("linear rate, eta = 0.5/L", _problem, [4, 8, 12, 16, 20], lambda T: dict(rounds=T, lr=0.5),
                       variants=("printed",), form="geometric",
                       predicted_factor=lambda v: 1 - v.details["mu"] * v.details["lr"])]
    return cases, rates
