"""How the Numba kernels receive CSR data, and how the local steps detect divergence.

Two storage choices make the CSR kernels faster (``benchmarks/RESULTS.md``): the column indices and
row offsets are unsigned 32-bit integers, and a binary matrix (every stored value 1.0) is passed
without its values. Neither may change a single number: these tests compare, bit for bit, the
kernels and whole registered runs on the stored pack against the same data passed the old way
(float values and int64 indices). The local steps count non-finite entries instead of summing the
iterate; the count is checked on the edge cases where the two differ.
"""
import numpy as np
import pytest
import scipy.sparse as sp

import fedtheory as ft
import problems
from fedtheory._kernels.vec import count_nonfinite, end_step, nonfinite
from fedtheory.components import L1, LeastSquares, Logistic, Quadratic
from fedtheory.components.suite import _kernel_oracles, example_problem
from fedtheory.problem import FederatedProblem, _index_dtype


def _binary_problem(datafit, seed=0, n_clients=4, rows=30, dim=9, regularizer=None):
    """Clients with 0/1 CSR rows (density ~0.35) and the datafit's targets; for the explicit
    quadratic, binary Q_i: ones on the blocks of a random partition of the coordinates (symmetric,
    positive semidefinite) and random c_i."""
    rng = np.random.default_rng(seed)
    A, b = [], []
    for _ in range(n_clients):
        if isinstance(datafit, Quadratic):
            group = rng.integers(0, 3, dim)
            A.append(sp.csr_matrix((group[:, None] == group[None, :]).astype(float)))
            b.append(rng.normal(size=dim))
            continue
        A.append(sp.csr_matrix((rng.random((rows, dim)) < 0.35).astype(float)))
        b.append(rng.choice([-1.0, 1.0], rows) if isinstance(datafit, Logistic) else rng.normal(size=rows))
    return FederatedProblem.from_clients(A, b, datafit, regularizer)


def _valued_pack(p, index=np.int64):
    """The same data as the kernels received it before: float values (all 1.0), int64 indices (or
    ``index``)."""
    sparse, A, _, _, _, b, kind, ptr = p.kernel_pack()
    return (sparse, A, np.ascontiguousarray(p.M.data, dtype=np.float64),
            np.ascontiguousarray(p.M.indices, dtype=index), np.ascontiguousarray(p.M.indptr, dtype=index),
            b, kind, ptr)


def test_csr_indices_are_unsigned_32_bit_and_dense_packs_unchanged():
    p = _binary_problem(Logistic(l2=0.1))
    pack = p.kernel_pack()
    assert pack[0] and pack[3].dtype == np.uint32 and pack[4].dtype == np.uint32
    assert np.array_equal(pack[3], p.M.indices) and np.array_equal(pack[4], p.M.indptr)
    q = example_problem("logistic", sparse=False)                           # dense rows
    dense = q.kernel_pack()
    assert not dense[0] and dense[1].shape == q.M.shape and dense[2].shape == (0,)
    # past what uint32 holds the kernels get int64 (never uint64: Numba would mix it into float64)
    limit = np.iinfo(np.uint32).max
    assert _index_dtype(limit, 10) == np.uint32 and _index_dtype(limit + 1, 10) == np.int64
    assert _index_dtype(10, limit + 2) == np.int64


def test_only_a_binary_matrix_is_passed_without_values():
    p = _binary_problem(LeastSquares(l2=0.1))
    assert p.kernel_pack()[2].shape == (0,)                     # binary: no values
    M = p.M.copy()
    M.data[3] = 2.0                                             # one value that is not 1.0
    q = FederatedProblem.from_clients([M[:30], M[30:60], M[60:90], M[90:]],
                                      [p.b[:30], p.b[30:60], p.b[60:90], p.b[90:]], LeastSquares(l2=0.1))
    assert np.array_equal(q.kernel_pack()[2], q.M.data)
    Z = p.M.copy()
    Z.data[0] = 0.0                                             # an explicitly stored zero is a value
    z = FederatedProblem.from_clients([Z[:30], Z[30:60], Z[60:90], Z[90:]],
                                      [p.b[:30], p.b[30:60], p.b[60:90], p.b[90:]], LeastSquares(l2=0.1))
    assert z.kernel_pack()[2].shape == (z.M.nnz,)


def test_a9a_is_passed_as_a_binary_matrix(data_dir):
    p = problems.libsvm("a9a", n_clients=10, data_dir=data_dir)
    pack = p.kernel_pack()
    assert pack[2].shape == (0,) and p.M.nnz > 400_000 and np.all(p.M.data == 1.0)
    assert pack[3].dtype == np.uint32


@pytest.mark.parametrize("datafit", [Logistic(l2=0.05), LeastSquares(l2=0.05), Quadratic(l2=0.05)],
                         ids=["logistic", "least_squares", "quadratic"])
def test_oracles_are_bitwise_the_same_with_either_storage(datafit):
    p = _binary_problem(datafit, seed=3)
    new, old = p.kernel_pack(), _valued_pack(p)
    assert new[2].shape == (0,)
    rng = np.random.default_rng(1)
    x, v = rng.normal(size=p.dim), rng.normal(size=p.dim)
    for i in range(p.n_clients):
        s, e = p.client_rows(i)
        for rows in (np.zeros(0, dtype=np.int64), rng.integers(s, e, 7)):
            out = []
            for pack in (new, old):                 # the suite's kernel oracles, on either pack
                p._pack = pack
                out.append(_kernel_oracles(p, i, x, v, rows))
            assert out[0][0] == out[1][0]
            for a, b in zip(out[0][1:], out[1][1:]):
                assert np.array_equal(a, b)
            if rows.shape[0] == 0:          # and right: the problem's NumPy (scipy.sparse) gradient
                assert np.allclose(out[0][2], p.client_grad(i, x), rtol=1e-12, atol=1e-14)


# the registered runners, one per local-step kernel (every kernel that calls the oracles)
RUNS = [
    ("fedavg", dict(batch_size=5), "logistic"),       # corrected_local_sgd
    ("scaffold", dict(batch_size=5), "logistic"),
    ("fedspeed", dict(batch_size=5), "logistic"),     # the same kernel, two gradients a step
    ("feddeper", dict(batch_size=5), "logistic"),     # feddeper_local
    ("fedsps", dict(batch_size=5), "logistic"),       # sps_local_steps (value and gradient)
    ("pfedfbe", dict(batch_size=5), "logistic"),      # fbe_local_steps (Hessian-vector products)
    ("pfedme", dict(batch_size=5), "logistic"),       # pfedme_local
    ("fedmirror", dict(batch_size=5), "lasso"),       # prox_local_sgd
    ("fedprox", dict(), "logistic"),                  # exact client gradients (all rows of a client)
    ("fedavg", dict(), "quadratic"),                  # the explicit quadratic's rows kernel
]


def _ids(runs):
    return [f"{r[0]}-{r[2]}" for r in runs]


# int64 indices are another type, so every algorithm's compiled rounds are compiled once more for them
# (about 10 s each on a cold cache): one kernel in the default run, every kernel under -m slow
INT64_RUNS = [pytest.param(*r, marks=() if r[0] == "fedavg" and r[2] == "logistic" else pytest.mark.slow)
              for r in RUNS]


@pytest.mark.parametrize("algo,kw,kind", RUNS, ids=_ids(RUNS))
def test_registered_runs_are_bitwise_the_same_with_or_without_the_values(algo, kw, kind):
    """A binary matrix passed without its values runs bit for bit as with them (uint32 indices both)."""
    _same_run_with_pack(algo, kw, kind, np.uint32)


@pytest.mark.parametrize("algo,kw,kind", INT64_RUNS, ids=_ids(RUNS))
def test_registered_runs_are_bitwise_the_same_with_either_storage(algo, kw, kind):
    """The stored pack (no values, uint32 indices) and the old storage (values, int64 indices)."""
    _same_run_with_pack(algo, kw, kind, np.int64)


def _same_run_with_pack(algo, kw, kind, index):
    if kind == "quadratic":
        p = _binary_problem(Quadratic(l2=0.05), seed=7)
    elif kind == "lasso":
        p = _binary_problem(LeastSquares(l2=0.05), seed=7, regularizer=L1(0.01))
    else:
        p = _binary_problem(Logistic(l2=0.05), seed=7)
    assert p.kernel_pack()[2].shape == (0,)
    lr = 0.2
    a = ft.run(p, algo, rounds=6, local_steps=3, lr=lr, clients_per_round=3, seed=2, record_iterates=True, **kw)
    p._pack = _valued_pack(p, index)                      # the old storage, same data
    p._cpack = None                                             # the compiled rules' pack is rebuilt from it
    assert p.compiled_pack().indices.dtype == index and p.compiled_pack().data.shape == p.M.data.shape
    b = ft.run(p, algo, rounds=6, local_steps=3, lr=lr, clients_per_round=3, seed=2, record_iterates=True, **kw)
    assert a.status == b.status == "max_rounds"
    assert np.array_equal(a.iterates, b.iterates) and np.array_equal(a.x, b.x)
    assert np.array_equal(a.history["value"], b.history["value"])
    assert np.array_equal(a.history["grad_mapping_sq"], b.history["grad_mapping_sq"])


# ----------------------------------------------------------------------------- divergence check
def test_nonfinite_flags_nan_and_inf_only():
    for v in (np.inf, -np.inf, np.nan):
        assert nonfinite(v) == 1
    for v in (0.0, -0.0, 5e-324, -1.7976931348623157e308, 1.7976931348623157e308, 3.5):
        assert nonfinite(v) == 0
    y = np.array([1e308, 1e308, -2.0])                          # finite, though its sum overflows
    with np.errstate(over="ignore"):
        assert count_nonfinite(y) == 0 and not np.isfinite(y.sum())
    assert count_nonfinite(np.array([1.0, np.nan, np.inf, -np.inf])) == 3


def test_end_step_stops_exactly_when_an_entry_is_not_finite():
    no_path = np.zeros((0, 0, 0))
    y = np.ones(3)
    assert end_step(no_path, 1, 2, 4, y, np.int64(0), np.int64(-1)) == (-1, False)
    assert end_step(no_path, 1, 2, 4, y, np.int64(2), np.int64(-1)) == (1 * 4 + 2, True)
    assert end_step(no_path, 1, 2, 4, y, np.int64(1), np.int64(3)) == (3, True)   # the first failure is kept


def test_finite_iterates_whose_sum_overflows_are_not_divergence_on_any_backend():
    """Every backend checks entries, not their sum: x0 = (1e308, 1e308, 1e308) is finite, and so
    are all iterates (steps of 1e-30). With rows of size 1e-156, F stays finite there (1.3e304) and
    every backend completes its rounds. With rows of size 1e-10, F(x0) itself overflows: every
    backend refuses the start alike (it used to run the rounds and report 'round 3: F(x) is not
    finite' at their end)."""
    pytest.importorskip("torch")
    x0 = np.full(3, 1e308)
    for scale in (1e-156, 1e-10):
        rng = np.random.default_rng(0)
        p = FederatedProblem.from_clients([scale * rng.random((6, 3)) for _ in range(2)],
                                          [rng.normal(size=6) for _ in range(2)], "least_squares")
        for backend in ("numba", "python", "torch"):
            with np.errstate(over="ignore"):
                if scale == 1e-10:
                    with pytest.raises(ft.InvalidParameterError, match=r"at the starting point x0 F\(x\) is not "
                                                                       r"finite \(inf\)"):
                        ft.run(p, "fedavg", rounds=3, local_steps=2, lr=1e-30, x0=x0, backend=backend)
                    continue
                r = ft.run(p, "fedavg", rounds=3, local_steps=2, lr=1e-30, x0=x0, backend=backend)
            assert np.all(np.isfinite(r.x)) and np.isfinite(r.history.value).all()
            assert (r.status, r.rounds) == ("max_rounds", 3), (backend, r.message)


def test_a_diverging_run_still_names_its_first_non_finite_step():
    p = _binary_problem(LeastSquares(l2=0.0), seed=1)
    res = ft.run(p, "fedavg", rounds=5, local_steps=4, lr=1e150, batch_size=5)
    assert res.status == "diverged" and res.rounds == 0
    assert res.message.startswith("round 1: client ")
    assert "produced a non-finite local iterate at local step 3 of 4" in res.message
