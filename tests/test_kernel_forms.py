"""The static datafit forms (``oracles.kernel_form``): the kernels compiled for a form compute what the
runtime dispatch on the plain id computes, for every built-in datafit and storage and for a
registered datafit without a Numba kernel."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

import warnings

from numba.core.errors import NumbaIRAssumptionWarning

from fedtheory._kernels import fbe, local_steps
from fedtheory._kernels.oracles import (FORM_FALLBACK, KIND_LEAST_SQUARES, KIND_LOGISTIC, KIND_QUADRATIC, OP_GRAD,
                                        OP_HVP, client_grad, client_hvp, client_oracle, client_value_grad,
                                        kernel_form)
from fedtheory.components.suite import example_problem


def _drop_stale_cache():
    """Numba checks only this file's timestamp before loading the functions below from its cache, and
    they inline the kernels of fedtheory/_kernels: after an edit there, the cached ones are stale. As
    the library does for its own (``fedtheory._kernels.sync_cache``), the cache of this file is
    dropped when this file or a kernel source changed."""
    import hashlib
    from pathlib import Path

    import fedtheory._kernels as kernels
    from fedtheory._kernels import numba_cache_dir
    here = Path(__file__).resolve()
    h = hashlib.sha256(here.read_bytes())
    for f in sorted(Path(kernels.__file__).parent.glob("*.py")):
        h.update(f.name.encode() + f.read_bytes())
    cache = numba_cache_dir(here.parent)
    stamp = cache / f"{here.stem}.sha256"
    try:
        if stamp.is_file() and stamp.read_text() == h.hexdigest():
            return
        cache.mkdir(parents=True, exist_ok=True)
        for f in [*cache.glob(f"{here.stem}.*.nbi"), *cache.glob(f"{here.stem}.*.nbc")]:
            f.unlink(missing_ok=True)
        stamp.write_text(h.hexdigest())
    except OSError:             # a cache that cannot be written: Numba compiles in memory
        pass


_drop_stale_cache()


# cached on disk like the library's kernels (a warm run loads them: they took 70 s to compile on every run)
@njit(cache=True)
def _value_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2):
    g = np.empty(x.shape[0])
    return client_value_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2, g), g


@njit(cache=True)
def _grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2):
    g = np.empty(x.shape[0])
    client_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2, g)
    return g


@njit(cache=True)
def _hvp(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, v, l2):
    hv = np.empty(x.shape[0])
    client_hvp(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, v, l2, hv)
    return hv


@njit(cache=True)
def _oracle(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, l2):
    out = np.empty(x.shape[0])
    client_oracle(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, l2, out)
    return out


def _oracles(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, v, l2):
    args = (sparse, A, data, indices, indptr, b, kind, start, end, rows, x)
    return (*_value_grad(*args, l2), _grad(*args, l2), _hvp(*args, v, l2),
            _oracle(*args[:7], OP_GRAD, *args[7:], v, l2), _oracle(*args[:7], OP_HVP, *args[7:], v, l2))


def test_form_lengths_name_each_kernel_and_storage():
    forms = {(k, s): len(kernel_form(k, s)) for k in (KIND_LEAST_SQUARES, KIND_LOGISTIC, KIND_QUADRATIC)
             for s in (False, True)}
    assert len(set(forms.values())) == 4 and FORM_FALLBACK not in forms.values()      # margin datafits share
    assert forms[KIND_LEAST_SQUARES, True] == forms[KIND_LOGISTIC, True] != forms[KIND_LOGISTIC, False]
    assert kernel_form(57, True) == (57,) and kernel_form(KIND_LOGISTIC, True) == (KIND_LOGISTIC,) * len(
        kernel_form(KIND_LOGISTIC, True))


# a margin datafit on CSR rows and the explicit quadratic run by default; the other forms with -m slow
# (each case compiles the four oracles twice, static and dispatched: 15-60 s with an empty cache)
CASES = [pytest.param("least_squares", False, marks=pytest.mark.slow),
         pytest.param("least_squares", True, marks=pytest.mark.slow),
         pytest.param("logistic", False, marks=pytest.mark.slow), ("logistic", True), ("quadratic", False),
         pytest.param("quadratic", True, marks=pytest.mark.slow)]


@pytest.mark.parametrize("name,sparse", CASES)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1), client=st.integers(0, 2), batch=st.booleans())
def test_static_form_agrees_with_runtime_dispatch(name, sparse, seed, client, batch):
    p = example_problem(name, sparse=sparse)
    sp_, A, data, indices, indptr, b, form, ptr = p.kernel_pack()
    assert form == kernel_form(p.datafit_id, sp_)
    rng = np.random.default_rng(seed)
    i = client % p.n_clients
    start, end = int(ptr[i]), int(ptr[i + 1])
    rows = (start + rng.choice(end - start, size=min(3, end - start), replace=False)).astype(np.int64) if batch \
        else np.zeros(0, dtype=np.int64)
    x, v = rng.normal(size=p.dim), rng.normal(size=p.dim)
    static = _oracles(sp_, A, data, indices, indptr, b, form, start, end, rows, x, v, p.l2)
    runtime = _oracles(sp_, A, data, indices, indptr, b, int(form[0]), start, end, rows, x, v, p.l2)
    for a, r in zip(static, runtime):            # the same kernel, the same operations: the same numbers
        np.testing.assert_array_equal(a, r)
    val, g, g2, hv, o_g, o_hv = static
    np.testing.assert_array_equal(g, g2)
    np.testing.assert_array_equal(o_g, g2)                  # client_oracle is client_grad ...
    np.testing.assert_array_equal(o_hv, hv)                 # ... and client_hvp
    # and both are the datafit's NumPy code (its own tests bound this; here a sanity check of the form)
    np.testing.assert_allclose(static[1], p.client_grad(i, x, rows if batch else None), rtol=1e-10, atol=1e-12)


def _feddeper_args(p):
    S, K, d = p.n_clients, 2, p.dim
    e3, lrs = np.zeros((0, 0, 0)), np.full(K, 0.01)
    idx = np.zeros((S, K, 0), dtype=np.int64)
    return (*p.kernel_pack(), np.arange(S), idx, idx, e3, e3, lrs, p.l2, np.ones(d), np.zeros((S, d)), 0.1, 0,
            np.empty((S, d)), np.empty((S, d)), e3, e3)


def _fbe_args(p, hvp_mode):
    S, K, d = p.n_clients, 2, p.dim
    e3, lrs = np.zeros((0, 0, 0)), np.full(K, 0.01)
    idx = np.zeros((S, K, 0), dtype=np.int64)
    reg, groups, m1, m2 = p.reg_pack()
    return (*p.kernel_pack(), np.arange(S), idx, idx, e3, lrs, p.l2, np.ones(d), 2.0, p.reg_weight, hvp_mode, 1e-6,
            reg, groups, m1, m2, np.empty((S, d)), e3, e3)


# one kernel in the default run; the others compile afresh with -m slow (a run with an empty cache, as
# CI's, meets the same warning as an error wherever it compiles them: setup.cfg)
@pytest.mark.parametrize("case", ["feddeper", *(pytest.param(c, marks=pytest.mark.slow)
                                                for c in ("fbe_none", "fbe_exact", "fbe_fd"))])
def test_kernels_compile_without_ir_warnings(case):
    """The datafit's code is inlined at each call site; inlined twice into one function, Numba's SSA pass
    flags its variables (NumbaIRAssumptionWarning), so every kernel calls it from one site. The kernels
    that need several oracles a step, compiled afresh (no cache), must raise no warning and compute what
    the cached kernel computes. (setup.cfg turns the warning into an error in the whole suite as well,
    which catches it wherever a test compiles a kernel with an empty cache, as on CI.)"""
    p = example_problem("quadratic")
    if case == "feddeper":
        kernel, args, out = local_steps.feddeper_local, _feddeper_args(p), (-4, -3)
    else:
        mode = {"fbe_none": fbe.HVP_NONE, "fbe_exact": fbe.HVP_EXACT, "fbe_fd": fbe.HVP_FD}[case]
        kernel, args, out = fbe.fbe_local_steps, _fbe_args(p, mode), (-3,)
    fresh = njit(cache=False)(kernel.py_func)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumbaIRAssumptionWarning)
        bad = fresh(*args)
    got = [args[j].copy() for j in out]
    assert kernel(*args) == bad == -1
    for j, g in zip(out, got):
        np.testing.assert_array_equal(args[j], g)
        assert np.all(np.isfinite(g))
