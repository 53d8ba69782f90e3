"""The compiled evaluation: rows computed inside the compiled rounds are the Python evaluation's rows.

On the numba backend a run evaluates the rounds due in compiled code (``Plan.compiled_eval``,
:mod:`fedtheory._kernels.evaluation`) where it can. Here every such run is compared with the same
run evaluated in Python (``fedtheory.runs.plan.COMPILED_EVALUATION = False``), on configurations
drawn by hypothesis: the same iterates bit for bit, the same evaluated rounds, counters, status,
message and columns, and the metrics and the algorithms' compiled extras equal to rounding. The
stops an evaluation decides (``tol``, F grown past its start, a metric that overflows) are compared
on runs built to reach them.
"""
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import fedtheory as ft
import problems
from fedtheory.runs import plan as plan_module
from fedtheory.runs.plan import Plan
from fedtheory.testing import checks


def _problems():
    ps = dict(checks.suite_problems())
    rng = np.random.default_rng(0)
    A = [rng.normal(size=(12, 6)) for _ in range(3)]
    b = [a @ np.ones(6) + rng.normal(size=12) for a in A]
    ps["lasso"] = problems.lasso(A, b, l1=0.1)
    ps["group_lasso"] = problems.group_lasso(A, b, 0.2, groups=[0, 0, 1, 1, -1, 2])
    ps["matrix_completion"] = problems.matrix_completion(3, shape=(3, 4), samples=8, l_nuc=0.05, shared_rank=1)
    ps["noisy_quadratic"] = problems.quadratic(4, 3, heterogeneity=0.5, noise=0.1, seed=1)
    return ps


PROBLEMS = _problems()
#: algorithms without extras (FedMiD also on the composite problems), and those whose rules compute their
#: extras (FedSpeed, FedDeper)
ALGORITHMS = ("fedavg", "scaffold", "fedprox", "fedmirror", "fedspeed", "feddeper")


def _run(p, name, compiled, **kw):
    old = plan_module.COMPILED_EVALUATION
    plan_module.COMPILED_EVALUATION = compiled
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ft.run(p, name, **kw)
    finally:
        plan_module.COMPILED_EVALUATION = old


def _same(a, b, where):
    """Two runs of one configuration, one evaluated in compiled code and one in Python."""
    assert np.array_equal(a.x, b.x, equal_nan=True), f"{where}: final models differ"
    # an overflowed metric may be nan in one evaluation and inf in the other (inf - inf in another order)
    ma, mb = (re.sub(r"is not finite \((-?inf|nan)\)", "is not finite", m) for m in (a.message, b.message))
    assert (a.status, a.rounds, ma, a.grad_evals, a.comm_up) == \
        (b.status, b.rounds, mb, b.grad_evals, b.comm_up), f"{where}: {a.message!r} vs {b.message!r}"
    ha, hb = a.history.drop(columns="time"), b.history.drop(columns="time")
    assert list(ha.columns) == list(hb.columns) and list(ha.dtypes) == list(hb.dtypes), where
    assert ha["round"].tolist() == hb["round"].tolist(), where
    for col in ha.columns:
        u, v = ha[col].to_numpy(dtype=float), hb[col].to_numpy(dtype=float)
        scale = np.maximum(1.0, np.maximum(np.abs(u), np.abs(v)))
        assert np.array_equal(np.isnan(u), np.isnan(v)), f"{where}: {col} NaN in one only"
        ok = np.isnan(u) | (np.abs(u - v) <= 1e-12 * scale)
        assert ok.all(), f"{where}: {col} differs by {np.nanmax(np.abs(u - v) / scale):.3e} (relative)"


def test_runs_that_evaluate_in_compiled_code():
    """Compiled rules on the numba backend, kernels for the datafit and the regularizer, no reference,
    extras compiled code computes; else Python evaluates."""
    p = PROBLEMS["quadratic"]

    def plan(name="fedavg", problem=p, **kw):
        args = dict(rounds=2, local_steps=1, lr=0.1, clients_per_round=None, batch_size=None, seed=0, x0=None,
                    record_iterates=False, backend="numba", device=None, eval_every=None, callback=None,
                    sampling=None, q=None, participation=None, batch_replacement=False, reference=None, tol=None,
                    trace=None, trace_max_mb=1024.0, trace_rounds=None, hyperparameters={})
        args.update(kw)
        return Plan(problem, name, **args)
    assert plan().compiled_eval and plan().extras_names == ()
    assert plan("fedspeed").extras_names == ("z_grad_sq",)
    assert plan("feddeper").extras_names == ("pm_loss", "gm_local_loss")
    assert plan(callback=lambda r, x: False).compiled_eval              # a segment per round: compiled too
    assert not plan(backend="python").compiled_eval
    assert not plan(reference=validation_truth(p)).compiled_eval
    assert not plan("pfedme").compiled_eval                             # extras only Python computes
    assert not plan("fedsps_global").compiled_eval                      # scalars
    assert plan("fedmirror", problem=PROBLEMS["lasso"]).compiled_eval
    # F of a smooth quadratic from its weighted sums (one product, not one per client); a composite
    # problem's gradient mapping with its step; another smooth problem client by client
    step, quad, smooth = plan().evaluation_form()
    assert step is None and smooth is None and quad[0].shape == (p.dim, p.dim)
    assert plan("fedmirror", problem=PROBLEMS["lasso"]).evaluation_form()[1:] == (None, None)
    assert plan(problem=PROBLEMS["least_squares"]).evaluation_form() == (None, None, True)


def validation_truth(p):
    import validation
    return validation.ground_truth(p)


@settings(max_examples=max(6, settings().max_examples // 3), deadline=None)
@given(name=st.sampled_from(ALGORITHMS), key=st.sampled_from(sorted(PROBLEMS)), every=st.sampled_from([None, 1, 3]),
       sampled=st.booleans(), rounds=st.integers(1, 12), local_steps=st.integers(1, 3),
       seed=st.integers(0, 2 ** 16), callback=st.booleans())
def test_compiled_rows_are_the_python_rows(name, key, every, sampled, rounds, local_steps, seed, callback):
    p = PROBLEMS[key]
    assume(not p.is_composite or name == "fedmirror")
    kw = checks._params(name, rounds=rounds, local_steps=local_steps, seed=seed, eval_every=every,
                        x0=np.random.default_rng(seed).normal(size=p.dim))
    if sampled:
        kw["clients_per_round"] = max(1, p.n_clients // 2)
    if callback:
        kw["callback"] = lambda r, x: r == rounds - 1            # a stop on a round not due as well
    a, b = _run(p, name, True, **kw), _run(p, name, False, **kw)
    _same(a, b, f"{name} on {key}, {kw}")


@pytest.mark.parametrize("name", ALGORITHMS)
def test_stops_decided_by_an_evaluation_are_the_same(name):
    """``tol`` met, F grown past 1e20 times its start, and a metric that overflows: the same round,
    status and message with the compiled evaluation as with Python's."""
    p = PROBLEMS["quadratic"]
    cases = [dict(lr=0.05, rounds=400, tol=1e-3),                     # converged
             dict(lr=3.0, rounds=400, eval_every=1),                  # F grows past 1e20 F(x^0)
             dict(lr=3.0, rounds=400, eval_every=7),
             dict(lr=3.0, rounds=2000, eval_every=500)]               # F overflows to inf first
    seen = set()
    for kw in cases:
        kw = checks._params(name, local_steps=2, **kw)
        a, b = _run(p, name, True, **kw), _run(p, name, False, **kw)
        _same(a, b, f"{name} {kw}")
        seen.add(a.status if a.status != "diverged" else ("grown" if "grown" in a.message else "not finite"))
    assert seen == {"converged", "grown", "not finite"}, seen


def test_compiled_extras_are_the_python_extras():
    """FedSpeed's z_grad_sq and FedDeper's pm_loss and gm_local_loss computed by the rules' ``extras``
    equal their ``history_extras`` on the states of a run (full and partial participation)."""
    p = PROBLEMS["noisy_quadratic"]
    for name, kw in (("fedspeed", dict(lam=0.3)), ("feddeper", dict(rho=0.05)),
                     ("feddeper", dict(rho=0.05, clients_per_round=2))):
        res = ft.run(p, name, rounds=6, local_steps=2, lr=0.05, **kw)
        alg = res.algorithm
        driver = __import__("fedtheory._kernels.drivers", fromlist=["driver"]).driver(alg.rules_module())
        got = driver.extras(p.compiled_pack(), alg.compiled_params(), alg.state_tuple(res.state))
        want = alg.history_extras(res.state, p)
        assert list(want) == list(type(alg).compiled_extras())
        for v, w in zip(got.tolist(), want.values()):
            assert (math.isnan(v) and math.isnan(w)) or abs(v - w) <= 1e-12 * max(1.0, abs(w)), (name, v, w)
        last = res.history.iloc[-1]
        for k, w in want.items():
            assert math.isnan(w) or abs(last[k] - w) <= 1e-12 * max(1.0, abs(w)), (name, k, last[k], w)
