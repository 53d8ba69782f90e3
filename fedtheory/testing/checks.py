"""The common check suite run on every registered algorithm (docs/add-your-own-algorithm.md).

Public, like scikit-learn's ``estimator_checks``: a researcher can run the same checks on an
algorithm of their own after registering it::

    from fedtheory.testing import yield_checks
    for check in yield_checks("myalg"):
        check("myalg")

Each check raises AssertionError with a message on failure.
"""
from __future__ import annotations

import re

import numpy as np

from .. import run
from .._kernels import local_steps as _ls, fbe as _fbe, sps as _sps
from ..components import LeastSquares, Logistic, Quadratic
from ..components.quadratic import synthetic_quadratic
from ..problem import FederatedProblem
from ..registry import get_algorithm
from .._argcheck import Bool, Interval, Options
from ..exceptions import DeclarationError, InvalidParameterError
from .._kernels.drivers import driver
from ..algorithms.context import RoundContext

#: The row storages the checks run the margin datafits on: dense rows and CSR rows (a storage is a
#: specialisation of the compiled rounds of its own, ``oracles.kernel_form``). A check that takes
#: ``storages`` runs on those given; ``storages=("dense",)`` leaves out the CSR problem (one
#: compilation of the rounds fewer: a quicker loop while an algorithm is being edited).
STORAGES = ("dense", "csr")

HISTORY_COLUMNS = ("round", "comm_up", "comm_down", "grad_evals", "sample_grads", "time", "value",
                   "grad_mapping_sq")


def _rng_data(seed, n=6, m=30, d=5, sparse=False, labels=False):
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    A, b = [], []
    for i in range(n):
        a = rng.normal(size=(m + i, d)) * (1 + i / n)
        if sparse:
            a = sp.csr_matrix(a * (rng.random(a.shape) < 0.4))
        A.append(a)
        xt = rng.normal(size=d) + i
        t = (a @ xt) + 0.3 * rng.normal(size=m + i)
        b.append(np.where(t > np.median(t), 1.0, -1.0) if labels else t)
    return A, b


def suite_problems():
    """Small heterogeneous problems for the suite: least squares, logistic (dense and CSR), quadratic.

    Built from the components (the same problems as ``problems.least_squares(A, b, l2=0.01)``,
    ``problems.logistic(A, y, l2=0.05)`` and ``problems.quadratic(6, 5, L=1.0, mu=0.2,
    heterogeneity=1.0, seed=0, hessian="distinct")``, without importing the ``problems`` package).

    Returns
    -------
    dict
        ``{key: FederatedProblem}``: ``least_squares``, ``logistic``, ``logistic_csr``, ``quadratic``.
    """
    A, b = _rng_data(0)
    Al, yl = _rng_data(1, labels=True)
    As, ys = _rng_data(2, sparse=True, labels=True)
    Q, C, w, info = synthetic_quadratic(6, 5, L=1.0, mu=0.2, heterogeneity=1.0, seed=0, hessian="distinct")
    return {
        "least_squares": FederatedProblem.from_clients(A, b, LeastSquares(l2=0.01), name="least_squares"),
        "logistic": FederatedProblem.from_clients(Al, yl, Logistic(l2=0.05), name="logistic"),
        "logistic_csr": FederatedProblem.from_clients(As, ys, Logistic(l2=0.05), name="logistic"),
        "quadratic": FederatedProblem.from_clients(list(Q), list(C), Quadratic(), weights=w, name="quadratic",
                                                   info=info),
    }


def _storages(storages):
    """``storages`` checked: a non-empty subset of :data:`STORAGES` that includes dense rows (the
    checks' least squares, logistic and quadratic problems are dense)."""
    storages = tuple(storages)
    if "dense" not in storages or not set(storages) <= set(STORAGES):
        raise InvalidParameterError(
            f"The 'storages' parameter of the checks must be a subset of {STORAGES} that includes 'dense'. "
            f"Got {storages!r} instead.")
    return storages


def _csr_or_dense(storages):
    """The key of the sampled logistic problem: CSR rows when ``storages`` has them, else dense."""
    return "logistic_csr" if "csr" in storages else "logistic"


def _params(name, **extra):
    cls = get_algorithm(name)
    kw = dict(cls.test_params)
    kw.update(extra)
    return kw


def _sampled(name, S):
    """``clients_per_round=S`` unless the algorithm is defined for full participation only."""
    return {} if get_algorithm(name).full_participation_only else {"clients_per_round": S}


def _invalid_values(constraints):
    """Values that violate every constraint in the list."""
    vals = ["not-a-valid-value", object()]
    for c in constraints:
        if isinstance(c, Interval):
            if c.low is not None:
                vals.append(c.low - 1)
            if c.high is not None:
                vals.append(c.high + 1)
            vals.append(float("nan"))
    return [v for v in vals if not any(c.accepts(v) for c in constraints)]


def check_param_validation(name):
    """Every own hyperparameter rejects invalid values with a message naming it.

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    """
    cls = get_algorithm(name)
    assert set(cls.constraints) == set(cls.hyperparameters()), \
        f"{name}: constraints {sorted(cls.constraints)} != hyperparameters {sorted(cls.hyperparameters())}"
    for pname, cons in cls.constraints.items():
        for bad in _invalid_values(cons):
            try:
                cls.create(**{pname: bad})
            except InvalidParameterError as e:
                msg = str(e)
                assert re.search(rf"The '{pname}' parameter of \w+ must be .* Got .* instead\.", msg), msg
            else:
                raise AssertionError(f"{name}: {pname}={bad!r} was accepted")
    try:
        cls.create(no_such_parameter=1)
    except InvalidParameterError as e:
        assert "no_such_parameter" in str(e) and "hyperparameters" in str(e)
    else:
        raise AssertionError(f"{name}: an unknown hyperparameter was accepted")


def check_determinism(name, storages=STORAGES):
    """Same seed: bit-identical history (time excluded) with sampling and minibatches (on CSR rows
    when ``storages`` has them).

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    storages : tuple of str, default :data:`STORAGES`
        The row storages of the suite's problems to run on ("dense", "csr").
    """
    p = suite_problems()[_csr_or_dense(_storages(storages))]
    kw = _params(name, rounds=6, local_steps=3, batch_size=4, **_sampled(name, 3))
    r1, r2 = run(p, name, seed=7, **kw), run(p, name, seed=7, **kw)
    h1, h2 = r1.history.drop(columns="time"), r2.history.drop(columns="time")
    assert np.array_equal(r1.x, r2.x), f"{name}: same seed gave different x"
    assert h1.equals(h2), f"{name}: same seed gave different histories"
    r3 = run(p, name, seed=8, **kw)
    assert not np.array_equal(r1.x, r3.x), f"{name}: a different seed gave the same run"


def _round_kernels(name=None):
    """Every compiled local-round kernel (Numba dispatchers of the local-step modules), and the
    segment loop of algorithm ``name``'s driver (its compiled rules inlined) when it has compiled rules."""
    out = {}
    for mod in (_ls, _sps, _fbe):
        for k, f in vars(mod).items():
            if hasattr(f, "signatures") and hasattr(f, "py_func") and f.__module__ == mod.__name__:
                out[f"{mod.__name__}.{k}"] = f
    rules = get_algorithm(name).rules_module() if name is not None else None
    if rules is not None:
        drv = driver(rules)
        for k in ("segment",):
            out[f"driver.{k}"] = getattr(drv, k)
    return out


def check_no_recompilation(name, storages=STORAGES):
    """A second run (fused or with a callback, another minibatch size, one round) compiles no new
    specialisation: the kernels and an algorithm's compiled rules have one per datafit and storage
    (``oracles.kernel_form``: here dense least squares, CSR logistic and the quadratic), which every
    later run on such a problem reuses. The algorithm's first runs add at most one per form to
    what the process had compiled before (other algorithms, other data types). ``storages``: the
    row storages to run on (:data:`STORAGES`; without ``"csr"`` the CSR logistic problem is left out).

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    storages : tuple of str, default :data:`STORAGES`
        The row storages of the suite's problems to run on ("dense", "csr").
    """
    ps = suite_problems()
    kw = _params(name, rounds=2, local_steps=2)
    every = {"callback": lambda r, x: False}
    keys = ("least_squares", "logistic_csr", "quadratic") if "csr" in _storages(storages) else \
        ("least_squares", "quadratic")
    start = {k: len(f.signatures) for k, f in _round_kernels().items()}    # what other runs of the process compiled
    for key in keys:
        run(ps[key], name, **kw)
        run(ps[key], name, **kw, **every)
    kernels = _round_kernels(name)
    before = {k: len(f.signatures) for k, f in kernels.items()}
    for key in keys:
        run(ps[key], name, **kw)
        run(ps[key], name, **{**kw, "rounds": 1})
        if key != "quadratic":
            run(ps[key], name, batch_size=3, **kw)
            run(ps[key], name, batch_size=3, **kw, **every)
    after = {k: len(f.signatures) for k, f in kernels.items()}
    assert before == after, f"{name}: kernels recompiled on later calls {before} -> {after}"
    if get_algorithm(name).rules_module() is not None:
        assert after["driver.segment"] >= 1, f"{name}: the compiled rules did not run: {after}"
        return
    added = {k: n - start.get(k, 0) for k, n in after.items()}
    assert max(added.values()) <= len(keys), f"{name}: more than one specialisation per form compiled: {added}"
    assert max(after.values()) >= 1, f"{name}: no kernel ran (is the algorithm using the kernels?)"


def option_grid(name):
    """Every combination of the algorithm's discrete options (its ``Options`` and ``Bool``
    hyperparameters), each a dict of hyperparameters on top of its ``test_params``; combinations
    the algorithm rejects are left out. The first is ``{}`` (the test parameters as they are).

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).

    Returns
    -------
    list of dict
        The combinations, ``{}`` first.

    Examples
    --------
    >>> grid = option_grid("fedsps")
    >>> len(grid), {"smoothing": "sps_code", "reset_each_round": True} in grid
    (7, True)
    """
    import itertools
    cls = get_algorithm(name)
    choices = {}
    for pname, cons in cls.constraints.items():
        vals = []
        for c in cons:
            if isinstance(c, Options):
                vals += list(c.values)
            elif isinstance(c, Bool):
                vals += [False, True]
        if vals:
            choices[pname] = vals
    grid = [{}]
    for combo in itertools.product(*choices.values()):
        kw = dict(zip(choices, combo))
        try:
            own = {k: v for k, v in cls.test_params.items() if k in cls.constraints}
            cls.create(**{**own, **kw})
        except (InvalidParameterError, ValueError):
            continue
        grid.append(kw)
    return grid


def check_backends_agree(name, storages=STORAGES):
    """Numba kernels and the NumPy twin of the pseudo-code give the same iterates (1e-12), with
    the test parameters on every suite problem and with every combination of the algorithm's
    discrete options (:func:`option_grid`) on a sampled, minibatched problem. Where torch is
    installed, the torch backend (its ``local_round`` glue and the server it runs) agrees too
    (1e-10, float64) on the quadratic and on the sampled, minibatched logistic problem, with every
    combination of the discrete options. ``storages``: as in :func:`check_no_recompilation`.

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    storages : tuple of str, default :data:`STORAGES`
        The row storages of the suite's problems to run on ("dense", "csr").
    """
    def agree(key, p, kw, backend="python", tol=1e-12):
        args = _params(name, rounds=5, local_steps=4, seed=3, record_iterates=True, **kw)
        a = run(p, name, backend="numba", **args)
        b = run(p, name, backend=backend, **args)
        err = np.abs(a.iterates - np.asarray(b.iterates)).max()
        assert err <= tol * max(1.0, np.abs(a.iterates).max()), \
            f"{name} on {key} {kw}: numba vs {backend} differ by {err:.3e}"
    problems_ = suite_problems()
    if "csr" not in _storages(storages):
        del problems_["logistic_csr"]
    try:
        import torch  # noqa: F401
        with_torch = True
    except ImportError:
        with_torch = False
    if with_torch:
        agree("quadratic", problems_["quadratic"], {}, "torch", 1e-10)
        agree("logistic", problems_["logistic"], dict(**_sampled(name, 3), batch_size=5), "torch", 1e-10)
    for key, p in problems_.items():
        extra = {} if key == "quadratic" else {"batch_size": 5}
        for kw in ({}, dict(**_sampled(name, 3), **extra)):
            agree(key, p, kw)
    for opts in option_grid(name)[1:]:
        agree("logistic", problems_["logistic"], dict(**_sampled(name, 3), batch_size=5, **opts))
        if with_torch:                      # the torch glue branches on the options too
            agree("logistic", problems_["logistic"], dict(**_sampled(name, 3), batch_size=5, **opts), "torch", 1e-10)
    # a step-size schedule (a twin that reads lrs[0] for every step agrees under a constant lr), noise,
    # and non-uniform client weights
    agree("logistic", problems_["logistic"], dict(batch_size=5, lr=_schedule(name)))
    agree("noisy_quadratic", _noisy_quadratic(), _sampled(name, 4))
    agree("weighted least_squares", _weighted_least_squares(), {})


def _weighted_least_squares():
    """The suite's least squares with client weights proportional to (i + 1)^2."""
    A, b = _rng_data(0)
    return FederatedProblem.from_clients(A, b, LeastSquares(l2=0.01), name="least_squares",
                                         weights=np.arange(1.0, len(A) + 1.0) ** 2)


def _schedule(name):
    """A decreasing step-size schedule from the algorithm's test step size (0.05 without one)."""
    lr0 = float(get_algorithm(name).test_params.get("lr", 0.05))
    return lambda t: lr0 / (1.0 + 0.1 * t)


def _fused_cases(name, storages=STORAGES):
    """(problem key, run arguments) covering every sampling mode, minibatches with and without
    replacement, noise, a step-size schedule and the released-code options the algorithm supports
    (the sampled logistic problem on CSR rows when ``storages`` has them)."""
    cls = get_algorithm(name)
    full_only = cls.full_participation_only
    csr = _csr_or_dense(storages)
    cases = [("quadratic", {}), (csr, {"batch_size": 4}), ("least_squares", {"batch_size": 3})]
    if not full_only:
        cases += [("logistic", {"clients_per_round": 3, "batch_size": 4}),
                  (csr, {"clients_per_round": 3, "sampling": "with_replacement", "batch_size": 4,
                                    "batch_replacement": True}),
                  ("least_squares", {"sampling": "bernoulli", "participation": 0.5}),
                  ("noisy_quadratic", {"clients_per_round": 4})]
    cases.append(("logistic", {"lr": _schedule(name)}))
    if "weight_decay" in cls.released_options:
        cases.append(("logistic", {"weight_decay": 0.01}))
    if "clip_norm" in cls.released_options:
        cases.append(("logistic", {"clip_norm": 0.05}))
    return cases


def check_fused_matches_per_round(name, storages=STORAGES):
    """The fused path (the rounds between evaluations in one compiled call) and a run with a callback
    (one call of the same compiled segment per round, the callback between) give bit-identical runs: iterates, history (time excluded), counters,
    participants and state, in every sampling mode, with minibatches, noise, step-size schedules and
    the released-code options; a replayed ``client_schedule`` gives the same run again; a traced run
    (every declared sequence, of every round or of some) records the same trace on both paths. An
    algorithm without compiled rules runs per round only, and the check has nothing to compare.
    ``storages``: as in :func:`check_no_recompilation` (the sampled logistic cases on dense rows
    without ``"csr"``).

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    storages : tuple of str, default :data:`STORAGES`
        The row storages of the suite's problems to run on ("dense", "csr").
    """
    cls = get_algorithm(name)
    if cls.rules_module() is None:
        return
    ps = suite_problems()
    ps["noisy_quadratic"] = _noisy_quadratic()
    for key, extra in _fused_cases(name, _storages(storages)):
        args = _params(name, rounds=7, local_steps=3, seed=5, record_iterates=True, **extra)
        fused = run(ps[key], name, **args)
        per_round = run(ps[key], name, callback=lambda r, x: False, **args)
        replay = run(ps[key], name, client_schedule=list(fused.sampled), **args)
        for other, how in ((per_round, "per-round"), (replay, "replayed")):
            where = f"{name} on {key} {extra}: fused vs {how}"
            assert np.array_equal(fused.iterates, other.iterates, equal_nan=True), \
                f"{where}: iterates differ by {np.nanmax(np.abs(fused.iterates - other.iterates)):.3e}"
            h1, h2 = fused.history.drop(columns="time"), other.history.drop(columns="time")
            assert h1.equals(h2), f"{where}: histories differ\n{h1}\n{h2}"
            assert (fused.status, fused.rounds, fused.grad_evals, fused.sample_grads, fused.comm_up,
                    fused.comm_down) == (other.status, other.rounds, other.grad_evals, other.sample_grads,
                                         other.comm_up, other.comm_down), f"{where}: status or counters differ"
            assert [list(a) for a in fused.sampled] == [list(a) for a in other.sampled], f"{where}: participants"
            for k, v in fused.state.items():
                assert np.array_equal(np.asarray(v), np.asarray(other.state[k]), equal_nan=True), \
                    f"{where}: state {k!r} differs"
    if cls.traceables:                      # traced rounds are recorded from inside the fused call
        # on dense rows (margin datafits) only: a traced run is a specialisation of the compiled rounds
        # of its own (the trace code is compiled in only when asked for), and what a trace records does
        # not depend on how the rows are stored (check_trace: least squares and logistic)
        cases = [c for c in _fused_cases(name) if c[0] == "least_squares"]
        traced = cases[:1] + [c for c in cases if c[1].get("sampling") == "bernoulli"]
        for key, extra in traced:
            for trace_rounds in (None, (0, 3, 6)):
                args = _params(name, rounds=7, local_steps=3, seed=5, trace=True, trace_rounds=trace_rounds, **extra)
                fused = run(ps[key], name, **args)
                per_round = run(ps[key], name, callback=lambda r, x: False, **args)
                _same_traces(fused.trace, per_round.trace, f"{name} on {key} {extra}, trace_rounds={trace_rounds}")


def _same_traces(a, b, where):
    """Two traces record the same rounds with bit-identical arrays."""
    assert [rt.round for rt in a] == [rt.round for rt in b] and len(a) > 0, f"{where}: traced rounds differ"
    for ra, rb in zip(a, b):
        for f in ("x", "clients", "weights", "lrs", "idx", "noise"):
            assert np.array_equal(getattr(ra, f), getattr(rb, f), equal_nan=True), f"{where}: round {ra.round} {f}"
        assert ra.completed == rb.completed and ra.data.keys() == rb.data.keys(), f"{where}: round {ra.round}"
        for k in ra.data:
            assert np.array_equal(np.asarray(ra.data[k]), np.asarray(rb.data[k]), equal_nan=True), \
                f"{where}: round {ra.round}, traced {k!r} differs"


def _noisy_quadratic():
    """The suite's quadratic with additive gradient noise (sigma = 0.1)."""
    Q, C, w, info = synthetic_quadratic(6, 5, L=1.0, mu=0.2, heterogeneity=1.0, seed=0, hessian="distinct")
    return FederatedProblem.from_clients(list(Q), list(C), Quadratic(), weights=w, name="quadratic", info=info,
                                         noise=0.1)


def check_reductions(name):
    """Declared reductions hold iterate by iterate.

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    """
    cls = get_algorithm(name)
    p = suite_problems()["logistic"]
    for own, other, other_kw in cls.reductions:
        base = dict(rounds=5, local_steps=3, seed=1, record_iterates=True, batch_size=4, lr=0.1,
                    **_sampled(name, 3))
        a = run(p, name, **{**_params(name, **base), **own})
        b = run(p, other, **{**_params(other, **base), **other_kw})
        err = np.abs(a.iterates - b.iterates).max()
        assert err <= 1e-12, f"{name}{own} != {other}{other_kw}: {err:.3e}"


def check_fixed_point_or_drift(name):
    """Exact methods converge to x* under heterogeneity; inexact ones drift away from x*.

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    """
    cls = get_algorithm(name)
    p = suite_problems()["quadratic"]
    xs = p.info["x_star"]
    if cls.exact:
        res = run(p, name, rounds=400, local_steps=5, **_params(name))
        dist = np.linalg.norm(res.x - xs)
        assert dist < 1e-9, f"{name} is declared exact but ends {dist:.2e} from x*"
    else:
        res = run(p, name, rounds=1, local_steps=5, x0=xs, **_params(name))
        drift = np.linalg.norm(res.x - xs)
        assert drift > 1e-6, f"{name} is declared inexact but x* is (nearly) fixed: drift {drift:.2e}"


def check_client_weights_reach_the_iterates(name):
    """The problem's client weights w_i reach the iterates: under full participation the same data
    with non-uniform and with uniform weights (two objectives F = sum_i w_i f_i) give different
    models after a few rounds. An algorithm that averages without ``ctx.weights`` gives the same
    models on both (the other checks run mostly on uniform weights, where the two coincide).

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    """
    weighted = _weighted_least_squares()
    w = weighted.weights * (weighted.weights.size / weighted.weights.sum())
    runs = [run(p, name, rounds=3, local_steps=2, seed=1, **_params(name)).x
            for p in (weighted, suite_problems()["least_squares"])]
    diff = np.abs(runs[0] - runs[1]).max()
    assert diff > 1e-8 * max(1.0, np.abs(runs[1]).max()), \
        (f"{name}: the same data with client weights {np.round(w, 3).tolist()} (times 1/n) and with uniform weights "
         f"give the same model (difference {diff:.3e}): the server does not weigh the clients by ctx.weights")


def check_convergence_smoke(name):
    """F decreases from x0 = 0 on a logistic problem with exact gradients.

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    """
    p = suite_problems()["logistic"]
    res = run(p, name, rounds=30, local_steps=3, **_params(name))
    assert res.status == "max_rounds", res.message
    h = res.history
    assert h.value.iloc[-1] < h.value.iloc[0] - 1e-3, f"{name}: no decrease {h.value.iloc[[0, -1]].tolist()}"


def check_history_schema(name):
    """History columns, counters and their consistency with the result.

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    """
    p = suite_problems()["least_squares"]
    res = run(p, name, rounds=7, local_steps=2, eval_every=3, batch_size=3,
              **_params(name, **_sampled(name, 2)))
    h = res.history
    for col in HISTORY_COLUMNS:
        assert col in h.columns, f"{name}: history lacks {col!r}"
    assert h["round"].tolist() == [0, 3, 6, 7], h["round"].tolist()
    assert h.grad_evals.iloc[-1] == res.grad_evals
    assert res.comm_up == h.comm_up.iloc[-1] and res.comm_down == h.comm_down.iloc[-1]
    assert np.all(np.diff(h.comm_up) >= 0) and np.all(np.diff(h.grad_evals) > 0)
    alg = get_algorithm(name).create(**{k: v for k, v in _params(name).items()
                                        if k in get_algorithm(name).hyperparameters()})
    calls = alg.oracle_calls_per_step()
    ran = [res.sampled.slots(t) for t in range(len(res.sampled))]   # clients that ran (duplicates merged)
    slots = sum(len(c) for c in ran)                     # participating client slots, all rounds
    extra_calls = extra_rows = 0
    for c in ran:                                       # work outside the local steps (Mime's full gradients)
        ctx = RoundContext(p, 0, c, np.ones(len(c)), np.zeros((len(c), 2, 3), dtype=np.int64),
                           np.zeros((0, 0, 0)), np.ones(2))
        ec, er = alg.round_extra_grads(ctx)
        extra_calls, extra_rows = extra_calls + ec, extra_rows + er
    assert res.grad_evals == slots * 2 * calls + extra_calls, (res.grad_evals, slots, calls)
    assert res.sample_grads == (res.grad_evals - extra_calls) * 3 + extra_rows


def check_divergence_reported(name):
    """A huge step size ends with status 'diverged', naming the round and a client, the non-finite
    quantity, or F's growth past ``fedtheory.runs.log.DIVERGENCE_GROWTH`` times its start.

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    """
    p = suite_problems()["least_squares"]
    kw = dict(rounds=400, local_steps=5, **_params(name, lr=50.0))
    kw.update(get_algorithm(name).divergence_params)
    res = run(p, name, **kw)
    assert res.status == "diverged", f"{name}: status {res.status} with lr=50"
    assert re.search(r"round \d+: (client \d+|the global model|F\(x\) is not finite|\w+ is not finite|"
                     r"F\(x\) = \S+ has grown past)", res.message), res.message
    core = [c for c in ("value", "grad_mapping_sq", "suboptimality", "dist_sq") if c in res.history.columns]
    vals = res.history[core].to_numpy(dtype=float)
    assert np.all(np.isfinite(vals)), f"{name}: a diverged run kept non-finite history rows"
    assert np.all(np.isfinite(res.x)), f"{name}: the result is not the last finite model"


def check_trace(name):
    """``trace=True`` leaves the run bit-identical, records every declared sequence with its shape,
    and the numba kernels and the NumPy twin record the same values (1e-12), on least squares and
    logistic regression, with sampling and minibatches. (Dense rows: the trace code is the same for
    every storage, and each storage a traced run meets compiles the rounds once more.)

    Parameters
    ----------
    name : str
        A registered algorithm (:func:`fedtheory.algorithms`).
    """
    cls = get_algorithm(name)
    ps = suite_problems()
    if not cls.traceables:
        try:
            run(ps["least_squares"], name, rounds=1, trace=True, **_params(name))
        except InvalidParameterError as e:
            assert "declares no traceable" in str(e), str(e)
            return
        raise AssertionError(f"{name}: trace=True accepted although nothing is declared")
    for key in ("least_squares", "logistic"):
        kw = _params(name, rounds=4, local_steps=3, seed=2, batch_size=4, **_sampled(name, 3))
        plain = run(ps[key], name, **kw)
        a = run(ps[key], name, trace=True, **kw)
        b = run(ps[key], name, trace=True, backend="python", **kw)
        assert np.array_equal(plain.x, a.x), f"{name}: tracing changed the run"
        assert plain.history.drop(columns="time").equals(a.history.drop(columns="time"))
        assert len(a.trace) == 4 and tuple(a.trace.names) == tuple(sorted(cls.traceables))
        for t, (ra, rb) in enumerate(zip(a.trace, b.trace)):
            assert np.array_equal(ra.clients, plain.sampled.slots(t)), f"{name}: traced clients differ"
            assert ra.idx.shape == (ra.S, ra.K, 4)
            for nm in a.trace.names:
                src = cls.traceables[nm][0]
                va, vb = ra.data.get(nm), rb.data.get(nm)
                assert (va is None) == (vb is None), f"{name}: {nm!r} recorded by one backend only"
                if va is None:
                    continue
                va, vb = np.asarray(va, dtype=float), np.asarray(vb, dtype=float)
                if src == "path":
                    assert va.shape == (ra.S, ra.K + 1, ps[key].dim), (nm, va.shape)
                    assert np.all(np.isfinite(va[:, :ra.K])), f"{name}: {nm!r} has NaN entries"
                gaps = np.isnan(va) != np.isnan(vb)
                assert not gaps.any(), (
                    f"{name} on {key}: traced {nm!r} is recorded by one backend and left empty (NaN) by the other "
                    f"at {int(gaps.sum())} entries (round {t}; numba empty: {int(np.isnan(va).sum())}, python empty: "
                    f"{int(np.isnan(vb).sum())}): does local_round_reference call ctx.record({nm!r}, s, k, y) "
                    "at every step, as the kernels do?")
                err = np.nanmax(np.abs(va - vb)) if va.size and not np.isnan(va).all() else 0.0
                assert err <= 1e-12 * max(1.0, np.nanmax(np.abs(va)) if va.size else 1.0), \
                    f"{name} on {key}: traced {nm!r} differs between numba and python by {err:.3e} (round {t})"
        if "local" in a.trace.names and not cls.stateful_clients and name not in ("nfsgd", "fedpd"):
            r0 = a.trace[0]
            assert np.array_equal(r0["local"][:, 0], np.broadcast_to(r0.x, r0["local"][:, 0].shape)), \
                f"{name}: the local path does not start at the broadcast model"


def _failing_on_declarations(check):
    """``check`` with an invalid declaration of the algorithm (:class:`DeclarationError`, e.g. a
    hyperparameter without constraints) reported as the failed check it is: AssertionError."""
    import functools


    @functools.wraps(check)
    def wrapped(name, **kwargs):
        try:
            return check(name, **kwargs)
        except DeclarationError as e:
            raise AssertionError(f"{name}: {e}") from e
    return wrapped


ALL_CHECKS = tuple(_failing_on_declarations(c) for c in (
    check_param_validation, check_determinism, check_no_recompilation,
    check_backends_agree, check_fused_matches_per_round, check_reductions, check_fixed_point_or_drift,
    check_client_weights_reach_the_iterates, check_convergence_smoke, check_history_schema,
    check_divergence_reported, check_trace))


def yield_checks(name):
    """The checks that apply to algorithm ``name``.

    Parameters
    ----------
    name : str
        A registered algorithm (InvalidParameterError otherwise).

    Yields
    ------
    callable
        A check: ``check(name)`` raises AssertionError with a message on failure.
    """
    get_algorithm(name)
    yield from ALL_CHECKS

