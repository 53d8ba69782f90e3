"""Runner options: callback, tol, sampling schemes and their weights, noise, iterates, progress bar."""
import numpy as np
import pytest
import pandas as pd
from hypothesis import given, settings, strategies as st

import fedtheory as ft
import problems
import validation


@pytest.fixture(scope="module")
def quad():
    return problems.quadratic(8, 4, L=1.0, mu=0.2, heterogeneity=0.5, seed=0, hessian="distinct")


def test_callback_stops_the_run(quad):
    seen = []

    def cb(r, x):
        seen.append(r)
        return r == 3

    res = ft.run(quad, "fedavg", rounds=10, callback=cb, eval_every=1)
    assert res.status == "callback_stop" and seen == [1, 2, 3] and res.rounds == 3
    assert res.history["round"].tolist() == [0, 1, 2, 3]


def test_tol_converged(quad):
    res = ft.run(quad, "scaffold", rounds=1000, local_steps=5, lr=0.2, tol=1e-20)
    assert res.status == "converged" and res.rounds < 1000
    assert res.history.grad_mapping_sq.iloc[-1] <= 1e-20


def test_reference_columns(quad):
    gt = validation.ground_truth(quad, cache=False)
    res = ft.run(quad, "fedavg", rounds=5, reference=gt)
    h = res.history
    assert np.allclose(h.suboptimality, h.value - gt.f)
    assert np.isclose(h.dist_sq.iloc[-1], np.sum((res.x - gt.x) ** 2))


def test_record_iterates(quad):
    res = ft.run(quad, "fedavg", rounds=4, record_iterates=True)
    assert res.iterates.shape == (5, 4) and np.array_equal(res.iterates[-1], res.x)
    assert np.array_equal(res.iterates[0], np.zeros(4))


def test_uniform_sampling_without_replacement(quad):
    res = ft.run(quad, "fedavg", rounds=200, clients_per_round=3, seed=1)
    counts = np.bincount(np.concatenate(res.sampled), minlength=8)
    assert all(len(np.unique(c)) == 3 for c in res.sampled)
    assert counts.sum() == 600 and counts.min() > 50     # every client is drawn about 75 times
    assert res.comm_up == 600 and res.grad_evals == 600


def test_bernoulli_participation(quad):
    res = ft.run(quad, "fedavg", rounds=300, sampling="bernoulli", participation=0.25, seed=2)
    sizes = np.array([len(c) for c in res.sampled])
    assert abs(sizes.mean() - 2.0) < 0.3 and sizes.min() == 0   # some rounds have no participant
    assert res.status == "max_rounds" and np.all(np.isfinite(res.x))


def test_with_replacement_weights_are_multiplicities(quad):
    """LFD: a client drawn twice runs once with weight 2/S (shared duplicates) or twice with 1/S each
    (replicas). With exact gradients the two must give the same model, for the same draws."""
    S = 6
    kw = dict(rounds=5, local_steps=3, lr=0.1, clients_per_round=S, seed=5)
    shared = ft.run(quad, "lfd", **kw)
    repl = ft.run(quad, "lfd", replicate_duplicates=True, **kw)
    # res.sampled holds the draws, duplicates kept, in both cases: the same draws
    assert all(len(c) == S for c in shared.sampled) and all(len(c) == S for c in repl.sampled)
    assert [c.tolist() for c in shared.sampled] == [c.tolist() for c in repl.sampled]
    ran = [shared.sampled.slots(t) for t in range(5)]      # the clients that ran: duplicates merged
    assert any(len(c) < S for c in ran)                    # duplicates were merged at least once
    assert all(np.array_equal(np.unique(a), b) for a, b in zip(repl.sampled, ran))
    assert all(np.array_equal(repl.sampled.slots(t), repl.sampled[t]) for t in range(5))   # replicas run apart
    assert np.allclose(shared.x, repl.x, rtol=1e-13, atol=1e-14)
    assert shared.comm_up == sum(len(c) for c in ran)


def test_noise_is_seeded_and_has_the_declared_variance():
    p = problems.quadratic(1, 50, L=1.0, mu=1.0, noise=0.3, seed=0)   # Q = I, single client
    a = ft.run(p, "fedavg", rounds=1, local_steps=1, lr=1.0, seed=3)
    b = ft.run(p, "fedavg", rounds=1, local_steps=1, lr=1.0, seed=3)
    assert np.array_equal(a.x, b.x)
    # one step from 0 with lr 1: x = -(grad f(0) + xi) = c - xi, so xi = c - x
    xi = p.client_data(0)[1] - a.x
    assert 0.15 < xi.std() < 0.45 and abs(xi.mean()) < 0.15


def test_batch_with_replacement_allows_large_batches():
    rng = np.random.default_rng(0)
    p = problems.least_squares([rng.normal(size=(4, 2))] * 2, [rng.normal(size=4)] * 2)
    res = ft.run(p, "fedavg", rounds=2, batch_size=10, batch_replacement=True)
    assert res.status == "max_rounds" and res.sample_grads == 2 * 2 * 10


def test_progress_bar_runs(quad, capsys):
    res = ft.run(quad, "fedavg", rounds=3, progress=True)
    assert res.status == "max_rounds"


def test_lr_schedule_is_called_with_global_steps(quad):
    calls = []

    def sched(t):
        calls.append(t)
        return 0.1

    ft.run(quad, "fedavg", rounds=3, local_steps=4, lr=sched)
    assert calls == list(range(12))
    with pytest.raises(ft.InvalidParameterError, match=r"'lr' schedule of run must return floats"):
        ft.run(quad, "fedavg", rounds=1, lr=lambda t: -1.0)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["fedavg", "lfd"]), literal=st.booleans(), K=st.integers(1, 4),
       r0=st.integers(1, 6), m=st.integers(1, 6), form=st.sampled_from(["constant", "decay", "fails"]),
       fail_at=st.integers(0, 30))
def test_a_table_of_step_sizes_is_each_rounds_steps(quad, name, literal, K, r0, m, form, fail_at):
    """The table of local steps and step sizes a compiled call reads (Plan.schedule_table) is, row by
    row, each round's own (Plan.round_steps): steps, first global step and step sizes, a schedule
    called once per global step in order; a schedule that fails at a later round ends the table
    before that round, and one that fails in the first round raises its error."""
    from fedtheory.runs.runner import _plan
    calls = []

    def lr(t):
        calls.append(t)
        return -1.0 if form == "fails" and t >= fail_at else 0.5 / (1.0 + t)

    kw = dict(literal_loop=literal) if name == "lfd" else {}
    plan, _ = _plan(quad, name, rounds=r0 + m, local_steps=K, lr=0.1 if form == "constant" else lr, **kw)
    try:
        r_first, Ks, t0s, tab = plan.schedule_table(r0, r0 + m - 1)
    except ft.InvalidParameterError:
        with pytest.raises(ft.InvalidParameterError):
            plan.round_steps(r0)                  # the first round fails on its own too
        return
    table_calls, calls[:] = list(calls), []
    assert r_first == r0 and 1 <= Ks.shape[0] <= m and tab.flags.c_contiguous and tab.dtype == np.float64
    for j in range(Ks.shape[0]):
        Kj, t0, lrs = plan.round_steps(r0 + j)
        assert (Ks[j], t0s[j]) == (Kj, t0) and np.array_equal(tab[j, :Kj], lrs) and not tab[j, Kj:].any()
    if form != "constant":
        assert table_calls[:len(calls)] == calls == sorted(calls)
    if Ks.shape[0] < m:                            # ended before the round whose step sizes fail
        with pytest.raises(ft.InvalidParameterError):
            plan.round_steps(r0 + Ks.shape[0])


def test_zero_rounds(quad):
    res = ft.run(quad, "fedavg", rounds=0)
    assert res.status == "max_rounds" and len(res.history) == 1 and res.rounds == 0


def test_default_evaluation_schedule_costs_at_most_a_quarter_of_training(quad):
    """eval_every=None: each evaluation (4 per data row plus a fixed 3000, in per-sample gradients)
    is admitted only while the evaluations after round 0 cost at most 25% of the per-sample
    gradients spent training."""
    from fedtheory.runs.plan import EVAL_FIXED_COST, EVAL_ROW_COST
    p = problems.quadratic(10, 4, seed=1)
    for kw in (dict(local_steps=1), dict(local_steps=5), dict(local_steps=2, clients_per_round=3)):
        res = ft.run(p, "fedavg", rounds=2000, lr=0.05, **kw)
        h = res.history
        unit = EVAL_ROW_COST * p.client_sizes.sum() + EVAL_FIXED_COST
        inner = h[(h["round"] > 0) & (h["round"] < 2000)]
        spent = unit * np.arange(1, len(inner) + 1)
        assert np.all(spent <= 0.25 * inner.sample_grads.to_numpy()), kw
        assert h["round"].iloc[0] == 0 and h["round"].iloc[-1] == 2000 and len(inner) >= 3
        # and it is not sparser than needed: the next round after each evaluation was not yet affordable
        assert len(inner) >= int(0.25 * res.sample_grads / unit) - 1, (kw, len(inner))
    every = ft.run(p, "fedavg", rounds=30, lr=0.05, eval_every=1)
    assert every.history["round"].tolist() == list(range(31))
    tol = ft.run(p, "fedavg", rounds=30, lr=0.05, tol=1e-300)             # tol: every round is checked
    assert tol.history["round"].tolist() == list(range(31))


def test_fused_evaluation_equals_separate_passes():
    """The runner's evaluation (one pass over the data for F and its gradient) gives the values of
    problem.value and problem.gradient_mapping_sq exactly, smooth and composite, dense and CSR."""
    from fedtheory.testing.checks import suite_problems
    ps = dict(suite_problems())
    rng = np.random.default_rng(0)
    A = [rng.normal(size=(12, 5)) for _ in range(3)]
    ps["lasso"] = problems.lasso(A, [a @ np.ones(5) for a in A], l1=0.1)
    for key, p in ps.items():
        x = rng.normal(size=p.dim)
        F, gm = p.value_and_gradient_mapping_sq(x, 0.5)
        assert F == p.value(x) and gm == p.gradient_mapping_sq(x, 0.5), key


def test_history_frame_is_pandas_frame_of_the_rows():
    """The column-wise construction of the history gives the frame ``pd.DataFrame(rows)`` gives
    (columns, order, dtypes, values), and rows with differing keys fall back to it (NaN filled)."""
    from fedtheory.runs.log import history_frame
    same = [{"round": r, "value": 1.5 / (r + 1), "status": "ok", "flag": r % 2 == 0} for r in range(5)]
    mixed = same[:2] + [{"round": 9, "extra": 2.0, "value": 0.1}]
    for rows in (same, mixed, same[:1], []):
        a, b = history_frame(rows), pd.DataFrame(rows)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert list(a.dtypes) == list(b.dtypes)
    res = ft.run(problems.quadratic(4, 3, seed=0), "fedavg", rounds=300, lr=0.1)
    rows = res.history.to_dict("records")
    pd.testing.assert_frame_equal(history_frame(rows), pd.DataFrame(rows), check_exact=True)


@settings(max_examples=60, deadline=None)
@given(layout=st.lists(st.one_of(st.integers(1, 4), st.just("row"), st.just("odd row")), min_size=1, max_size=6),
       extras=st.sampled_from([(), ("z_grad_sq",), ("pm_loss", "gm_local_loss")]), seed=st.integers(0, 9))
def test_history_frame_of_compiled_row_blocks_is_that_of_their_rows(layout, extras, seed):
    """Rows a compiled call evaluated are kept as one block (RowBlock) among the dict rows; the history
    table built from them is ``pd.DataFrame`` of the rows as dicts: columns, order, dtypes and values
    (also where a dict row does not match the blocks: another type, a missing column)."""
    from fedtheory.runs.log import RowBlock, history_frame
    rng = np.random.default_rng(seed)
    rows, r = [], 0
    for item in layout:
        if item in ("row", "odd row"):
            row = {"round": r, "grad_evals": 3 * r, "sample_grads": 9 * r, "comm_up": r, "comm_down": r,
                   "time": 0.5, "value": float(rng.standard_normal()), "grad_mapping_sq": float(rng.random()),
                   **{k: float(rng.random()) for k in extras}}
            if item == "odd row":               # unlike the blocks: a float counter, or a column missing
                if seed % 2:
                    row["comm_up"] = float(r)
                else:
                    del row["grad_mapping_sq"]
            rows.append(row)
            r += 1
        else:
            v = np.column_stack([np.arange(r, r + item), 3 * np.arange(r, r + item), 9 * np.arange(r, r + item),
                                 np.arange(r, r + item), np.arange(r, r + item),
                                 rng.standard_normal((item, 2 + len(extras)))]).astype(float)
            rows.append(RowBlock(v, 0.25 * r, extras))
            r += item
    dicts = [d for x in rows for d in (x.dicts() if isinstance(x, RowBlock) else (x,))]
    a, b = history_frame(rows), pd.DataFrame(dicts)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert list(a.dtypes) == list(b.dtypes)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(["fedavg", "fedspeed", "feddeper", "fedsps", "scaffold"]),
       backend=st.sampled_from(["numba", "python"]), eval_every=st.sampled_from([None, 1, 3]),
       rounds=st.integers(0, 40), lr=st.sampled_from([0.05, 1e3]), reference=st.booleans())
def test_a_history_column_read_alone_is_the_tables(name, backend, eval_every, rounds, lr, reference):
    """``res.column(k)`` read before the table is ``res.history[k].to_numpy()``: values (NaN where the
    table has NaN) and dtype, for every column, whether the rows were evaluated in compiled code or in
    Python (another backend, a reference's columns), runs that diverge included."""
    p = problems.quadratic(4, 3, heterogeneity=1.0, seed=1)
    kw = dict(rounds=rounds, lr=lr, eval_every=eval_every, backend=backend, seed=2,
              reference=validation.ground_truth(p) if reference else None)
    a, b = ft.run(p, name, **kw), ft.run(p, name, **kw)
    from fedtheory.runs.log import LAZY_DICTS, RowBlock
    kept = getattr(a.__dict__["_history"], "rows", None) or ()        # an unread history keeps few dicts
    assert sum(not isinstance(r, RowBlock) for r in kept) <= LAZY_DICTS
    table = b.history
    for k in table.columns:
        col = a.column(k)
        assert col.dtype == table[k].to_numpy().dtype, k
        if k != "time":                              # (wall-clock seconds: another run's)
            assert np.array_equal(col, table[k].to_numpy(), equal_nan=True), k
    with pytest.raises(KeyError):
        a.column("no such column")


def _same_run(a, b):
    """Whether two runs are the same run bit for bit (all but the wall-clock time)."""
    assert (a.status, a.message, a.rounds, a.seed, a.finished) == (b.status, b.message, b.rounds, b.seed, b.finished)
    assert (a.grad_evals, a.sample_grads, a.comm_up, a.comm_down) == (b.grad_evals, b.sample_grads, b.comm_up,
                                                                       b.comm_down)
    assert np.array_equal(a.x, b.x) and [list(c) for c in a.sampled] == [list(c) for c in b.sampled]
    assert (a.iterates is None) == (b.iterates is None) and (a.iterates is None or np.array_equal(a.iterates, b.iterates))
    pd.testing.assert_frame_equal(a.history.drop(columns="time"), b.history.drop(columns="time"), check_exact=True)
    assert a.state.keys() == b.state.keys()
    for k in a.state:
        assert np.array_equal(np.asarray(a.state[k]), np.asarray(b.state[k]), equal_nan=True), k
    assert (a.trace is None) == (b.trace is None)
    for x, y in zip(a.trace or (), b.trace or ()):
        assert (x.round, x.completed, sorted(x.data)) == (y.round, y.completed, sorted(y.data))
        for f in ("x", "clients", "weights", "lrs", "idx", "noise"):
            assert np.array_equal(getattr(x, f), getattr(y, f)), f
        assert all(np.array_equal(x.data[k], y.data[k], equal_nan=True) for k in x.data)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(["fedavg", "scaffold", "fedspeed", "feddeper", "fedsps", "lfd", "fedprox"]),
       seeds=st.lists(st.integers(0, 4), min_size=1, max_size=4), S=st.sampled_from([None, 2]),
       sampling=st.sampled_from([None, "with_replacement"]), noise=st.sampled_from([0.0, 0.2]),
       traced=st.booleans(), record=st.booleans(), x0=st.booleans(), backend=st.sampled_from(["numba", "python"]))
def test_the_runs_of_several_seeds_set_up_once_are_each_seeds_run(name, seeds, S, sampling, noise, traced, record,
                                                                   x0, backend):
    """A plan set up once and run for one seed after another (SeededRuns, as theorem checks run a
    case's seeds; seeds repeated and in any order) gives, for each seed, the run ``ft.run`` gives:
    nothing a run draws from or changes in place (streams, x^0, the state's arrays, the trace) leaks
    into the next."""
    from fedtheory.runs.runner import SeededRuns
    p = problems.quadratic(5, 3, heterogeneity=1.0, noise=noise, seed=4)
    cls = ft.get_algorithm(name)
    kw = dict({k: v for k, v in cls.test_params.items() if k in cls.hyperparameters()}, rounds=6, local_steps=2,
              lr=0.05, clients_per_round=S, sampling=sampling if S else None, record_iterates=record,
              x0=np.linspace(-1.0, 1.0, 3) if x0 else None, backend=backend, eval_every=2,
              trace="local" if traced and "local" in cls.traceables else None)
    runs = SeededRuns(p, name, **kw)
    for s in seeds:
        _same_run(runs.run(s), ft.run(p, name, seed=s, **kw))


def test_the_history_built_on_first_read_is_the_rows_table_wherever_it_is_read():
    """A run's history is built when first read: the same table read at once, after a pickle round
    trip (in another process's place), from a copy or ``dataclasses.replace``, and a RunResult made
    by hand with its own frame keeps that frame."""
    import copy
    import dataclasses
    import pickle
    from fedtheory.runs.log import history_frame
    from fedtheory.runs.result import RunResult
    res = ft.run(problems.quadratic(4, 3, seed=0), "fedavg", rounds=12, lr=0.1, eval_every=2)
    unread = [pickle.loads(pickle.dumps(res)), copy.deepcopy(res), dataclasses.replace(res, seed=7)]
    table = res.history
    assert table is res.history and list(table["round"]) == list(range(0, 13, 2))
    for other in unread + [pickle.loads(pickle.dumps(res))]:
        pd.testing.assert_frame_equal(other.history, table, check_exact=True)
    old = RunResult.__new__(RunResult)              # a result pickled before the table was built on read
    old.__dict__.update({k: v for k, v in vars(res).items() if k != "_history"}, history=table)
    assert old.history is table and pickle.loads(pickle.dumps(old)).history.equals(table)
    assert not hasattr(RunResult.__new__(RunResult), "history")
    own = pd.DataFrame({"round": [0], "value": [1.0]})
    made = RunResult(x=np.zeros(3), status="max_rounds", message="", rounds=0, grad_evals=0, sample_grads=0,
                     comm_up=0, comm_down=0, history=own, iterates=None, state={})
    assert made.history is own and [f.name for f in dataclasses.fields(made)][8] == "history"
    pd.testing.assert_frame_equal(history_frame(table.to_dict("records")), table, check_exact=True)


def _full_only():
    from fedtheory.registry import ALGORITHMS
    return sorted(n for n, c in ALGORITHMS.items() if getattr(c, "full_participation_only", False))


@pytest.mark.parametrize("name", _full_only())
def test_a_full_participation_method_runs_a_permuted_schedule_as_full_participation(name):
    """A method defined for full participation only accepts a client_schedule whose entries list every
    client in any order; its rules keep per-client arrays in client order (FedPD's anchors, NFSGD's
    mixing matrix), and an entry in another order gave another model (1.39 for FedPD, 1.02 for
    NFSGD, non-uniform weights). Each entry is read in client order now: the same run, bit for bit."""
    import problems
    assert {"fedpd", "nfsgd"} <= set(_full_only())
    p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0, weights=[0.1, 0.2, 0.3, 0.4])
    kw = dict(rounds=5, local_steps=2, lr=0.1, record_iterates=True, seed=1)
    full = ft.run(p, name, **kw)
    perm = ft.run(p, name, client_schedule=[[3, 1, 0, 2], [2, 3, 1, 0], [0, 1, 2, 3], [1, 0, 3, 2], [3, 2, 1, 0]], **kw)
    assert np.array_equal(full.iterates, perm.iterates)
    assert all(np.array_equal(s, np.arange(4)) for s in perm.sampled)


def test_a_schedule_that_fails_past_where_a_run_stops_does_not_stop_the_fused_run():
    """The fused path reads the step sizes of a whole segment ahead (up to 4096 rounds). A schedule
    that underflows to 0 at step ~3075 raised there, although the run converges (tol) after 19
    rounds, as the per-round path and the python backend finish. The error now comes when the
    round that needs the bad step is about to run: here never; and at once for a schedule bad
    from the first round on, on both paths alike."""
    p = problems.quadratic(4, 3, L=1.0, mu=0.5, seed=0)

    def lr(t):
        return 0.5 if t < 2000 else 0.5 * 0.5 ** (t - 2000)
    kw = dict(rounds=2000, local_steps=2, lr=lr, tol=1e-12)
    fused = ft.run(p, "fedavg", **kw)
    per_round = ft.run(p, "fedavg", callback=lambda r, x: False, **kw)
    assert fused.status == per_round.status == "converged" and fused.rounds == per_round.rounds < 100
    assert np.array_equal(fused.x, per_round.x)
    # a run that reaches the bad steps fails at the same round on both paths
    msgs = []
    for extra in ({}, {"callback": lambda r, x: False}):
        with pytest.raises(ft.InvalidParameterError) as e:
            ft.run(p, "fedavg", rounds=2000, local_steps=2, lr=lr, eval_every=2000, **extra)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "global steps" in msgs[0]


def _partial_participation():
    from fedtheory.registry import ALGORITHMS
    return sorted(n for n, c in ALGORITHMS.items() if not getattr(c, "full_participation_only", False))


NORMALISING = {"mime", "fedsps_global"}      # average by w_i / sum_{j in S} w_j in their own rules


@pytest.mark.parametrize("name", _partial_participation())
def test_a_round_whose_participants_all_have_weight_zero(name):
    """A problem with zero-weight clients, a round whose participants all have w_i = 0: the
    normalised weights w_i / sum_S w_j were 0/0, every model nan, and the run reported "diverged"
    (Bernoulli sampling and schedules alike). Now every participant weighs 0 (the averaging
    methods keep x; the round is otherwise run), on every backend alike, and the two methods whose
    own rules normalise by the participants' total weight say why they cannot."""
    from fedtheory.registry import ALGORITHMS
    rng = np.random.default_rng(0)
    A, y = rng.standard_normal((6, 8, 4)), rng.choice([-1.0, 1.0], size=(6, 8))
    # logistic losses are >= 0: the Polyak steps of the FedSPS family (lower bound 0) move too
    p = problems.logistic(list(A), list(y), l2=0.1, weights=[0.5, 0.5, 0, 0, 0, 0])
    kw = dict(ALGORITHMS[name].test_params, rounds=3, record_iterates=True,
              client_schedule=[[2, 3], [0, 4], [5, 1]])
    backends = ["numba", "python"] + (["torch"] if _torch_installed() else [])
    if name in NORMALISING:
        for backend in backends:
            with pytest.raises(ValueError, match="weight w_i = 0"):
                ft.run(p, name, backend=backend, **kw)
        return
    runs = {b: ft.run(p, name, backend=b, **kw) for b in backends}
    for b, res in runs.items():
        assert res.status == "max_rounds", (b, res.status)
        assert np.all(np.isfinite(res.iterates))
        # round 1 (clients 2 and 3, weight 0) leaves the global model where it was
        assert np.array_equal(res.iterates[1], res.iterates[0]), b
        # later rounds, with a positive-weight participant, move it
        assert not np.array_equal(res.iterates[2], res.iterates[1]), b
        np.testing.assert_allclose(res.iterates, runs["numba"].iterates, rtol=1e-10, atol=1e-12)


def _torch_installed():
    import importlib.util
    return importlib.util.find_spec("torch") is not None


@pytest.mark.parametrize("backend", ["numba", "python"])
def test_a_finite_objective_grown_by_orders_of_magnitude_has_diverged(backend):
    """lr = 5 on the 4-client quadratic: F = 8e298 at round 50, finite, and the run said max_rounds.
    F beyond DIVERGENCE_GROWTH times its start is a divergence on every path; the row that shows it
    is kept (finite), and a run that stays below it is untouched."""
    from fedtheory.runs.log import DIVERGENCE_GROWTH
    p = problems.quadratic(4, 3)
    res = ft.run(p, "fedavg", rounds=50, local_steps=5, lr=5.0, backend=backend)
    F0, F = res.history.value.iloc[0], res.history.value.iloc[-1]
    assert res.status == "diverged" and np.isfinite(F) and F - F0 > DIVERGENCE_GROWTH * max(abs(F0), 1.0)
    assert f"round {int(res.history['round'].iloc[-1])}: F(x) = " in res.message and "has grown past" in res.message
    ok = ft.run(p, "fedavg", rounds=50, local_steps=5, lr=0.5, backend=backend)
    assert ok.status == "max_rounds"


@pytest.mark.parametrize("backend", ["numba", "python"])
def test_finished_means_every_round_ran_with_a_finite_model(backend):
    """``finished``: max_rounds, or F's growth found at the last round (the model is finite and was
    measured there); not a blow-up to inf found at the last round (the history's last row is an
    earlier round), nor a stop before the last round."""
    p = problems.quadratic(2, 2)
    cases = [(dict(lr=0.1, rounds=5), "max_rounds", True),
             (dict(lr=1000.0, rounds=30, eval_every=30), "diverged", True),       # grown, at round 30
             (dict(lr=1000.0, rounds=200, eval_every=200), "diverged", False),    # F = inf at round 200
             (dict(lr=5.0, rounds=50, eval_every=1), "diverged", False)]          # grown at round 17
    for kw, status, finished in cases:
        res = ft.run(p, "fedavg", backend=backend, **kw)
        assert (res.status, res.finished) == (status, finished), (kw, res.message)
    res = ft.run(p, "fedavg", rounds=np.uint8(255), backend=backend)       # 255 + 1 wrapped to 0 rounds
    assert res.rounds == 255 and res.history["round"].iloc[-1] == 255


_SEEDED = ("fedavg", "scaffold", "feddeper", "fedsps", "lfd")


@settings(max_examples=12, deadline=None, derandomize=True)
@given(name=st.sampled_from(_SEEDED), sampled=st.booleans(), minibatch=st.booleans(), noise=st.booleans(),
       seed=st.integers(1, 50))
def test_a_run_that_draws_nothing_is_the_run_of_every_seed(name, sampled, minibatch, noise, seed):
    """``_seed_free`` (no draw from the seed's streams, which verify uses to run a case's seeds once)
    is True exactly when the run is that of another seed, bit for bit; any drawn participant,
    minibatch or noise makes it False."""
    p = problems.quadratic(5, 3, L=1.0, mu=0.2, heterogeneity=0.5, noise=0.1 if noise else 0.0, seed=1)
    if minibatch:
        A, b = [np.random.default_rng(i).normal(size=(6, 3)) for i in range(4)], \
            [np.random.default_rng(10 + i).normal(size=6) for i in range(4)]
        p = problems.least_squares(A, b, l2=0.1)
    kw = dict(rounds=4, local_steps=2, lr=0.05, clients_per_round=2 if sampled else None,
              batch_size=3 if minibatch else None, record_iterates=True)
    a, b = ft.run(p, name, seed=0, **kw), ft.run(p, name, seed=seed, **kw)
    same = np.array_equal(a.iterates, b.iterates) and a.history.drop(columns="time").equals(
        b.history.drop(columns="time"))
    if a._seed_free:
        assert same and b._seed_free, f"{name}: a run that drew nothing differs from the run of seed {seed}"
    if sampled or minibatch or noise:
        assert not a._seed_free, f"{name}: drawn participants, minibatches or noise, yet marked seed-free"
    else:
        assert a._seed_free, f"{name}: full participation with exact gradients drew from the seed's streams"


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_runs_arguments_by_keyword_are_those_run_binds(data):
    """The arguments a plan is set up with (``runner._arguments``) are what binding the call to
    ``run`` gives, defaults applied: run's own parameters, given or default, and the other keywords
    as hyperparameters; naming ``problem`` or ``algorithm`` again is run's TypeError."""
    import inspect
    from fedtheory.runs import runner
    sig = inspect.signature(ft.run)
    own = [k for k, v in sig.parameters.items() if v.kind is not inspect.Parameter.VAR_KEYWORD]
    names = data.draw(st.lists(st.sampled_from(own + ["lam", "mu", "gamma_b", "server_lr", "x"]), unique=True))
    kwargs = {k: data.draw(st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=2))) for k in names}
    p, a = object(), "fedavg"
    if {"problem", "algorithm"} & set(kwargs):
        with pytest.raises(TypeError):
            sig.bind(p, a, **kwargs)
        with pytest.raises(TypeError):
            runner._arguments(p, a, kwargs)
        return
    bound = sig.bind(p, a, **kwargs)
    bound.apply_defaults()
    want = dict(bound.arguments)
    hyper = want.pop("hyperparameters")
    got, got_hyper = runner._arguments(p, a, kwargs)
    assert got == want and got_hyper == hyper and got["problem"] is p


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2 ** 40), spawns=st.integers(0, 3))
def test_a_runs_random_streams_are_its_own_and_its_seeds(seed, spawns):
    """A run's three streams are the generators of the children of ``SeedSequence(seed)`` (made once
    per seed), and each run gets its own: a rule spawning from its generator (numpy's ``spawn``
    advances the seed sequence's count of children) leaves the next run of that seed as it was."""
    from fedtheory.runs.plan import _streams
    want = [np.random.default_rng(c) for c in np.random.SeedSequence(seed).spawn(3)]
    for _ in range(2):
        clients, data, aux_seq, aux, start = _streams(seed)
        for got, ref in zip((clients, data, aux), want):
            assert got.bit_generator.state == ref.bit_generator.state
        assert start == [clients.bit_generator.state, data.bit_generator.state] and aux_seq.n_children_spawned == 0
        for _ in range(spawns):
            aux.spawn(1)
            clients.spawn(1)
