"""run(..., trace=...): what a traced round records, on every backend, and its errors."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings, strategies as st

import fedtheory as ft
import problems
from fedtheory.exceptions import InvalidParameterError
from fedtheory.testing.checks import suite_problems


def _run(p, name, backend, **kw):
    return ft.run(p, name, rounds=3, local_steps=3, lr=0.05, seed=4, trace=True, backend=backend, **kw)


@pytest.mark.parametrize("name,kw", [("fedavg", dict(clients_per_round=3, batch_size=4)),
                                     ("feddeper", dict(clients_per_round=3, batch_size=4, rho=0.05)),
                                     ("fedsps", dict(clients_per_round=3, batch_size=4, c=0.5, gamma_b=0.5)),
                                     ("fedspeed", dict(batch_size=4, lam=1.0, alpha=0.5, rho=0.1)),
                                     ("pfedfbe", dict(clients_per_round=3, batch_size=4, lam=5.0)),
                                     ("lfd", dict(clients_per_round=3, batch_size=4)),
                                     ("scaffold", dict(clients_per_round=3, batch_size=4))])
def test_torch_trace_equals_numba_trace(name, kw):
    """Both backends record the same trace: FedAvg on CSR rows, the others on dense rows (a traced run
    on CSR rows is a compilation of an algorithm's rounds that no other test of the default run needs;
    the traced quantities do not depend on the storage: ``check_trace``)."""
    pytest.importorskip("torch")
    p = suite_problems()["logistic_csr" if name == "fedavg" else "logistic"]
    a, b = _run(p, name, "numba", **kw), _run(p, name, "torch", **kw)
    assert a.trace.names == b.trace.names
    for ra, rb in zip(a.trace, b.trace):
        assert np.array_equal(ra.clients, rb.clients) and np.array_equal(ra.idx, rb.idx)
        for nm in a.trace.names:
            va, vb = np.asarray(ra[nm], dtype=float), np.asarray(rb[nm], dtype=float)
            assert va.shape == vb.shape, nm
            if va.size:
                assert np.nanmax(np.abs(va - vb)) <= 1e-10, (name, nm)


def test_local_path_is_the_local_sgd_recursion():
    """FedAvg's traced path satisfies y_{k+1} = y_k - eta g_i(y_k; rows_k) with the traced rows,
    recomputed here from the problem's own gradient; its last point averages to the next model."""
    p = suite_problems()["least_squares"]
    res = ft.run(p, "fedavg", rounds=2, local_steps=4, lr=0.05, clients_per_round=3, batch_size=5, seed=1,
                 trace=True)
    for t, rt in enumerate(res.trace):
        Y = rt["local"]
        for s, i in enumerate(rt.clients):
            for k in range(rt.K):
                g = p.client_grad(int(i), Y[s, k], rt.idx[s, k])
                assert np.allclose(Y[s, k + 1], Y[s, k] - rt.lrs[k] * g, rtol=1e-13, atol=1e-14)
        nxt = res.trace[t + 1].x if t + 1 < len(res.trace) else res.x
        assert np.allclose(rt.weights @ (Y[:, -1] - rt.x) + rt.x, nxt, rtol=1e-13, atol=1e-14)


def test_virtual_average_and_stack():
    p = problems.quadratic(4, 3, seed=0, noise=0.1)
    res = ft.run(p, "fedavg", rounds=3, local_steps=2, lr=0.1, trace="local")
    rt = res.trace[1]
    assert np.allclose(rt.virtual_average()[0], rt.x)
    assert res.trace.stack("local").shape == (3, 4, 3, 3)
    assert rt.noise.shape == (4, 2, 3) and res.trace.nbytes > 0
    assert "3 rounds" in repr(res.trace)
    with pytest.raises(KeyError, match="not traced"):
        rt["gammas"]


def test_trace_errors_name_the_declared_sequences():
    p = problems.quadratic(4, 3, seed=0)
    with pytest.raises(InvalidParameterError, match=r"'trace' parameter of run must name sequences .*'local'"):
        ft.run(p, "fedavg", rounds=2, trace="nope")
    with pytest.raises(InvalidParameterError, match="declares no traceable"):
        ft.run(p, "fedmirror", rounds=2, trace=True)
    with pytest.raises(InvalidParameterError, match="trace_max_mb"):
        ft.run(p, "fedavg", rounds=2, trace=True, trace_max_mb=-1)


def test_trace_memory_bound_is_checked_before_the_run():
    p = problems.quadratic(50, 40, seed=0)
    with pytest.raises(InvalidParameterError, match=r"about [0-9.e+]+ MB, more than trace_max_mb=0.5"):
        ft.run(p, "fedavg", rounds=100, local_steps=10, trace=True, trace_max_mb=0.5)
    res = ft.run(p, "fedavg", rounds=2, local_steps=10, trace=True, trace_max_mb=0.5)
    assert res.trace.nbytes < 0.5 * 2 ** 20


def test_diverged_round_is_traced_with_nan_after_the_failure():
    p = suite_problems()["least_squares"]
    res = ft.run(p, "fedavg", rounds=50, local_steps=5, lr=50.0, trace=True)
    assert res.status == "diverged"
    last = res.trace[-1]
    if not last.completed:                     # divergence inside a local phase
        assert np.isnan(last["local"]).any() or not np.isfinite(last["local"]).all()
    assert len(res.trace) >= res.rounds


@pytest.mark.parametrize("alg, trace", [("fedsps", ("local", "gammas")), ("fedavg", True)])
def test_a_run_traced_at_no_round_is_the_untraced_run(alg, trace):
    """``trace_rounds=()`` records no round and runs what the untraced run runs, bit for bit (FedSPS
    Theorem 6(b)'s run at gamma_b/2 is declared so, to run the compiled rounds of its traced main run),
    sampled clients and gradient noise included."""
    p = problems.quadratic(6, 3, L=1.0, mu=0.1, heterogeneity=1.0, noise=0.1, seed=0)
    kw = dict(rounds=12, local_steps=3, lr=0.1, clients_per_round=4, seed=3)
    none = ft.run(p, alg, trace=trace, trace_rounds=(), **kw)
    plain = ft.run(p, alg, **kw)
    assert len(none.trace) == 0 and plain.trace is None
    assert np.array_equal(none.x, plain.x) and none.status == plain.status
    pd.testing.assert_frame_equal(none.history.drop(columns="time"), plain.history.drop(columns="time"))


def test_trace_rounds_records_only_those_rounds():
    p = problems.quadratic(4, 3, seed=0)
    full = ft.run(p, "fedavg", rounds=6, local_steps=2, lr=0.1, trace=True)
    some = ft.run(p, "fedavg", rounds=6, local_steps=2, lr=0.1, trace=True, trace_rounds=[0, 4])
    assert [rt.round for rt in some.trace] == [0, 4]
    assert np.array_equal(some.trace[1]["local"], full.trace[4]["local"])
    assert np.array_equal(some.x, full.x)
    for bad in ([6], [-1], "x", [0.5]):
        with pytest.raises(InvalidParameterError, match="trace_rounds"):
            ft.run(p, "fedavg", rounds=6, trace=True, trace_rounds=bad)
    with pytest.raises(InvalidParameterError, match="without 'trace'"):
        ft.run(p, "fedavg", rounds=6, trace_rounds=[0])


@settings(max_examples=60, deadline=None)
@example(name="lfd", n=3, S=2, K=3, sampling="full", rounds_=None, per_round=False, handed=False, literal=True,
         seed=0)                       # (one compiled call whose rounds have different K)
@example(name="fedavg", n=4, S=2, K=2, sampling="bernoulli", rounds_=None, per_round=False, handed=False,
         literal=False, seed=1)        # (one compiled call whose rounds have different S)
@given(name=st.sampled_from(["fedavg", "lfd", "nfsgd", "feddeper"]), n=st.integers(1, 4), S=st.integers(1, 4),
       K=st.integers(1, 3), sampling=st.sampled_from(["full", "uniform", "bernoulli"]),
       rounds_=st.sampled_from([None, (0,), (1, 2, 4)]), per_round=st.booleans(), handed=st.booleans(),
       literal=st.booleans(), seed=st.integers(0, 3))
def test_a_path_of_every_round_stacked_is_the_rounds_stacked(name, n, S, K, sampling, rounds_, per_round, handed,
                                                              literal, seed):
    """``Trace.stacked(name)`` is the rounds' clients, weights and path stacked (``np.stack`` over
    ``trace[r]``), bit for bit, when every recorded round has the same S and K, and None otherwise;
    the local descent quantities read through it are those of the rounds one by one. Drawn over
    the ways a trace is recorded: one compiled call, a call per round (a callback), rounds handed
    over (a trace with a message), a subset of rounds, participation that changes S (Bernoulli,
    empty rounds), a literal loop whose K changes, and after the rounds were read."""
    from fedtheory.runs import trace as trace_mod
    from fedtheory.runs.trace import Trace
    from fedtheory.theory.localdescent_quantities import traced_diversity, virtual_averages
    p = problems.quadratic(n, 3, heterogeneity=1.0 if n > 1 else 0.0, seed=seed)
    kw = dict(rounds=6, local_steps=K, lr=0.05, seed=seed, trace="local", trace_rounds=rounds_)
    sampling = "full" if name == "nfsgd" else sampling              # (full participation only)
    if sampling == "uniform":
        kw["clients_per_round"] = min(S, n)
    elif sampling == "bernoulli":
        kw.update(sampling="bernoulli", participation=0.5)
    if per_round:
        kw["callback"] = lambda r, x: False
    if literal and name == "lfd":      # round 0 runs one local step, the others K
        kw["literal_loop"] = True
    with pytest.MonkeyPatch.context() as m:
        if handed:
            m.setattr(trace_mod._TraceRecorder, "paths_only", property(lambda self: False))
        tr = ft.run(p, name, **kw).trace
    got, recorded = tr.stacked("local"), len(tr)                   # (before the rounds are made)
    rounds = list(Trace(tr.names, tr.declared, list(tr)))           # the rounds one by one, made by hand
    assert len(rounds) == recorded == len(tr)
    uniform = len({(rt.S, rt.K) for rt in rounds}) == 1
    if not uniform:
        assert got is None
    else:
        for field, want in (("clients", [rt.clients for rt in rounds]), ("weights", [rt.weights for rt in rounds]),
                            ("values", [rt["local"] for rt in rounds])):
            have, want = getattr(got, field), np.stack(want)
            assert have.dtype == want.dtype and have.shape == want.shape and np.array_equal(have, want), field
    by_hand = Trace(tr.names, tr.declared, rounds)
    by_hand.stacked = lambda name: None              # (the quantities from the rounds one by one)
    for f in (virtual_averages, lambda t: traced_diversity(p, t)):
        a, b = f(tr), f(by_hand)
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    again = tr.stacked("local")                                  # read after the rounds were made
    assert (again is None) == (got is None) and (got is None or np.array_equal(again.values, got.values))
    if got is not None:                                          # views the caller cannot write through
        with pytest.raises(ValueError):
            got.values[...] = 0.0


def test_an_unread_trace_holds_and_pickles_what_it_recorded_only():
    """A trace kept as the compiled calls' arrays until its rounds are read holds the drawn entries
    only (not the room the calls' arrays had for more), so its pickle is about its ``nbytes``, as
    after its rounds are made (Bernoulli participation draws few of the room's clients)."""
    import pickle
    p = problems.quadratic(50, 3, heterogeneity=1.0, noise=0.05, seed=0)
    for kw in (dict(sampling="bernoulli", participation=0.1), dict(clients_per_round=5)):
        tr = ft.run(p, "fedavg", rounds=50, local_steps=3, lr=0.05, trace="local", **kw).trace
        unread = len(pickle.dumps(tr))
        assert unread <= 1.25 * tr.nbytes + 20_000, (kw, unread, tr.nbytes)
