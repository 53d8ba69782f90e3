r"""Client oracles and proxes for the loops: the one place that dispatches on component kernel ids.

A problem hands the kernels its datafit's id ``kind`` (in the data pack, in its static form
:func:`kernel_form`) and its regularizer's id ``reg`` (in ``problem.reg_pack()``).
:func:`datafit_rows` turns the form into the component's kernel (:mod:`.datafits`) when Numba
compiles the caller (a plain id: at every call), :func:`prox_vec` an id into the regularizer's
prox (:mod:`.regularizers`) once per call. The row loops of the margin datafits (least squares,
logistic) are written once here, for dense and for CSR rows (never a branch on the storage per
row: a per-row branch made the CSR gradient four times slower); per row they call the datafit's
scalar kernel through :func:`_row` (both inlined). The
operation is a constant of each entry point (``client_grad``, ``client_value_grad``,
``client_hvp``), so Numba compiles the loops once per operation with the other operations' branches
removed.

A component registered without a Numba kernel (see :mod:`fedtheory.components`) gets an id of
its own from the registry; the dispatch sends it to its NumPy code through ``objmode`` (correct
and slow: add a kernel for speed). An id that nothing registered raises an error naming the
known components.
"""
import numpy as np
from numba import njit, objmode, types
from numba.extending import overload

from .datafits import (KIND_LEAST_SQUARES, KIND_LOGISTIC, KIND_QUADRATIC, OP_GRAD, OP_HVP, OP_VALUE_GRAD,
                       least_squares_terms, logistic_terms, quadratic_rows)
from .regularizers import (REG_GROUP, REG_L1, REG_L2, REG_NONE, REG_NUCLEAR, prox_group, prox_l1, prox_l2,
                           prox_none, prox_nuclear, value_group, value_l1, value_l2, value_nuclear)
from ..components.catalog import kernel_fallback

#: The decorator of every loop that inlines an oracle (the local-step kernels, the runtime dispatch):
#: ``njit(cache=True, error_model="numpy")``. Under Numba's default ("python") error model each
#: float division carries a branch that raises ZeroDivisionError, and with those raise paths in
#: the row loops Numba's reference-count pruning left an atomic increment and decrement of every
#: array argument of the inlined oracle in each local step (9 pairs a step in local SGD, found with
#: a debugger's count of the calls): 3.3 us of the 27.5 us of an a9a round's local steps
#: (``benchmarks/RESULTS.md``). NumPy's model gives inf or nan for a division by zero, as NumPy's
#: float64 does in the python backend; the divisions of these loops are guarded (an empty client is
#: refused when the problem is built), and a non-finite iterate is reported as divergence.
loop_kernel = njit(cache=True, error_model="numpy")

__all__ = ["KIND_LEAST_SQUARES", "KIND_LOGISTIC", "KIND_QUADRATIC", "OP_GRAD", "OP_VALUE_GRAD", "OP_HVP",
           "REG_L1", "REG_GROUP", "REG_NUCLEAR", "REG_L2", "REG_NONE", "client_grad", "client_value_grad",
           "client_hvp", "client_oracle", "datafit_rows", "h0_value", "kernel_form", "loop_kernel", "prox_vec"]


# --------------------------------------------------------------------------- margin datafits
@njit(cache=True, inline="always")
def _row(kind, op, inv, z, zv, t, val):
    """(val, c) for one row of a margin datafit: its scalar kernel at the margin z and target t gives the
    coefficient c = inv l'(z) (OP_HVP: inv l''(z) a^T v, with zv = a^T v) and, for OP_VALUE_GRAD,
    val + inv l(z)."""
    if kind == KIND_LEAST_SQUARES:
        f, c = least_squares_terms(op, z, t)
    else:
        f, c = logistic_terms(op, z, t)
    if op == OP_HVP:
        return val, inv * c * zv
    if op == OP_VALUE_GRAD:
        val += inv * f
    return val, inv * c


@njit(cache=True, inline="always")      # inlined: a call costs a refcount per array argument
def _margin_dense(A, b, kind, op, start, end, rows, x, v, out, val):
    """out += mean over the selected dense rows r of c_r a_r (see :func:`_row`); returns val."""
    d = x.shape[0]
    n_sel = rows.shape[0] if rows.shape[0] > 0 else end - start
    inv = 1.0 / n_sel
    for t in range(n_sel):
        r = rows[t] if rows.shape[0] > 0 else start + t
        z = zv = 0.0
        if op == OP_HVP:                      # both margins in one pass over the row
            for j in range(d):
                z += A[r, j] * x[j]
                zv += A[r, j] * v[j]
        else:
            for j in range(d):
                z += A[r, j] * x[j]
        val, c = _row(kind, op, inv, z, zv, b[r], val)
        for j in range(d):
            out[j] += c * A[r, j]
    return val


@njit(cache=True, inline="always")
def _margin_csr(data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
    """As :func:`_margin_dense` for CSR rows. An empty ``data`` stands for a binary matrix (every
    stored value 1.0, see ``ClientData.kernel_arrays``): the products by 1.0 are left out, which
    changes no result (they are exact).

    Inlined into the three entry points (``client_grad``, ...), one copy each: the call per
    minibatch cost about 7% of a9a's local SGD. The entry points are not inlined into the loops
    that call them: that put a copy of these loops at every call site and made a cold compile of
    six algorithms take 13 s instead of 8 s (``benchmarks/RESULTS.md``)."""
    n_sel = rows.shape[0] if rows.shape[0] > 0 else end - start
    inv = 1.0 / n_sel
    binary = data.shape[0] == 0
    for t in range(n_sel):
        r = rows[t] if rows.shape[0] > 0 else start + t
        p0, p1 = indptr[r], indptr[r + 1]
        z = zv = 0.0
        if binary:
            if op == OP_HVP:
                for p in range(p0, p1):
                    z += x[indices[p]]
                    zv += v[indices[p]]
            else:
                for p in range(p0, p1):
                    z += x[indices[p]]
        elif op == OP_HVP:
            for p in range(p0, p1):
                z += data[p] * x[indices[p]]
                zv += data[p] * v[indices[p]]
        else:
            for p in range(p0, p1):
                z += data[p] * x[indices[p]]
        val, c = _row(kind, op, inv, z, zv, b[r], val)
        if binary:
            for p in range(p0, p1):
                out[indices[p]] += c
        else:
            for p in range(p0, p1):
                out[indices[p]] += c * data[p]
    return val


# --------------------------------------------------------------------------- dispatch
def _python_rows(kind, op, start, end, rows, x, v, out, val):
    """A registered datafit without a Numba kernel: its NumPy code (through ``objmode``)."""
    return float(kernel_fallback("datafit", kind).rows(op, start, end, rows, x, v, out, val))


@njit(cache=True)
def _fallback_rows(kind, op, start, end, rows, x, v, out, val):
    with objmode(res="float64"):
        res = _python_rows(kind, op, start, end, rows, x, v, out, val)
    return res


# static forms: ``kernel_form(kind, sparse)`` is a tuple whose *length* names the kernel, so that the
# compiled rules (``Pack.kind``) get one specialisation per datafit and storage, with no dispatch left
# (the margin datafits share their row loops: least squares and logistic differ in a scalar kernel, chosen
# per row at run time, which costs nothing measurable, and one form each storage halves the compilations)
FORM_FALLBACK, FORM_MARGIN_DENSE, FORM_MARGIN_CSR, FORM_QUADRATIC_DENSE, FORM_QUADRATIC_CSR = range(1, 6)


def kernel_form(kind, sparse):
    """The static form of a datafit kernel id: a tuple of ``kind`` repeated n times, n naming the kernel
    and the storage (``FORM_*``: the margin datafits' dense or CSR row loops, the quadratic's dense or
    CSR rows, or 1 for a registered datafit without a Numba kernel).

    It is the ``kind`` the kernels receive (``problem.kernel_pack()``, ``Pack.kind``; a plain id is
    accepted too and dispatched at run time). Its length is part of its Numba type, so each datafit
    and storage is compiled with its one kernel: the other datafits' code is neither typed nor
    compiled (a cold compile of ``corrected_local_sgd`` 1.9 s instead of 4.5 s), and nothing is
    dispatched per call (a runtime dispatch kept Numba from pruning the reference counts of the
    array arguments: about 80 ns a call, 3x a 10 x 10 quadratic gradient).

    Examples
    --------
    >>> from fedtheory._kernels.oracles import kernel_form, KIND_QUADRATIC
    >>> kernel_form(KIND_QUADRATIC, False)
    (2, 2, 2, 2)
    """
    kind = int(kind)
    if kind in (KIND_LEAST_SQUARES, KIND_LOGISTIC):
        n = FORM_MARGIN_CSR if sparse else FORM_MARGIN_DENSE
    elif kind == KIND_QUADRATIC:
        n = FORM_QUADRATIC_CSR if sparse else FORM_QUADRATIC_DENSE
    else:
        n = FORM_FALLBACK
    return (kind,) * n


@loop_kernel
def _runtime_rows(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
    return datafit_rows(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val)


def datafit_rows(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
    """The datafit kernel of id ``kind``: operation ``op`` (OP_GRAD, OP_VALUE_GRAD, OP_HVP) of the loss
    part on client rows ``start:end`` (or on the absolute minibatch ``rows`` when not empty),
    accumulated into ``out``; returns ``val`` plus the value for OP_VALUE_GRAD.

    ``kind`` is an id (dispatched at run time) or its static form (:func:`kernel_form`: the one
    kernel is compiled in). Inlined into compiled callers."""
    return _runtime_rows(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val)


# The body below is inlined (Numba IR) at each call site. Inlined twice into one function, Numba's SSA
# pass reports its variables as "not in scope" (NumbaIRAssumptionWarning): every kernel calls the
# datafit from one call site (``client_oracle`` for a loop that needs a gradient and a Hessian product).
# The test suite turns the warning into an error (setup.cfg), and tests/test_kernel_forms.py compiles
# the kernels that need several oracles a step afresh.
@overload(datafit_rows, inline="always")
def _datafit_rows_impl(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
    if isinstance(kind, types.BaseTuple):
        form = len(kind)
        if form == FORM_MARGIN_CSR:
            def csr(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
                return _margin_csr(data, indices, indptr, b, kind[0], op, start, end, rows, x, v, out, val)
            return csr
        if form == FORM_MARGIN_DENSE:
            def dense(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
                return _margin_dense(A, b, kind[0], op, start, end, rows, x, v, out, val)
            return dense
        if form in (FORM_QUADRATIC_DENSE, FORM_QUADRATIC_CSR):
            csr_q = form == FORM_QUADRATIC_CSR

            def quadratic(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
                return quadratic_rows(csr_q, A, data, indices, indptr, b, np.int64(op), start, end, x, v, out, val)
            return quadratic

        def fallback(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
            return _fallback_rows(kind[0], np.int64(op), start, end, rows, x, v, out, val)
        return fallback

    def runtime(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val):
        if kind == KIND_LEAST_SQUARES or kind == KIND_LOGISTIC:
            if sparse:
                return _margin_csr(data, indices, indptr, b, kind, op, start, end, rows, x, v, out, val)
            return _margin_dense(A, b, kind, op, start, end, rows, x, v, out, val)
        if kind == KIND_QUADRATIC:          # a plain int64 op: one compilation serves the three operations
            return quadratic_rows(sparse, A, data, indices, indptr, b, np.int64(op), start, end, x, v, out, val)
        return _fallback_rows(kind, np.int64(op), start, end, rows, x, v, out, val)
    return runtime


@njit(cache=True, inline="always")      # inlined: a call costs a refcount per array argument
def client_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2, g):
    """Write into ``g`` the (minibatch) gradient of a client's smooth objective.

    With ``rows`` empty the full client gradient over rows ``start:end``:
    grad f_i(x) = (1/m_i) sum_j l'(a_j^T x) a_j + l2 x; otherwise ``rows`` holds absolute row
    indices of a minibatch and the mean over those rows is used. For the explicit quadratic
    the gradient is Q_i x - c_i + l2 x and ``rows`` is ignored.
    """
    for j in range(x.shape[0]):
        g[j] = l2 * x[j]
    datafit_rows(sparse, A, data, indices, indptr, b, kind, OP_GRAD, start, end, rows, x, x, g, 0.0)


@njit(cache=True, inline="always")      # inlined: a call costs a refcount per array argument
def client_value_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, l2, g):
    """Write the (minibatch) gradient of f_i into ``g`` and return the (minibatch) value.

    Value and gradient use the same rows: F_i(x, B) = mean_{r in B} loss(a_r^T x) + l2/2 ||x||^2
    (all client rows when ``rows`` is empty); for the quadratic
    1/2 x^T Q_i x - c_i^T x + l2/2 ||x||^2 (``rows`` ignored).
    """
    val = 0.0
    for j in range(x.shape[0]):
        g[j] = l2 * x[j]
        val += 0.5 * l2 * x[j] * x[j]
    return datafit_rows(sparse, A, data, indices, indptr, b, kind, OP_VALUE_GRAD, start, end, rows, x, x,
                        g, val)


@njit(cache=True, inline="always")      # inlined: a call costs a refcount per array argument
def client_hvp(sparse, A, data, indices, indptr, b, kind, start, end, rows, x, v, l2, out):
    """Write the (minibatch) Hessian-vector product of f_i at x along v into ``out``.

    Least squares: mean_r a_r (a_r^T v); logistic: mean_r s_r (1 - s_r) a_r (a_r^T v) with
    s_r = sigmoid(a_r^T x); quadratic: Q_i v; plus l2 v.
    """
    for j in range(x.shape[0]):
        out[j] = l2 * v[j]
    datafit_rows(sparse, A, data, indices, indptr, b, kind, OP_HVP, start, end, rows, x, v, out, 0.0)


@njit(cache=True, inline="always")
def client_oracle(sparse, A, data, indices, indptr, b, kind, op, start, end, rows, x, v, l2, out):
    """``client_grad`` (op OP_GRAD) or ``client_hvp`` (OP_HVP) with the operation chosen at run time:
    the one call site of a loop that needs both. The datafit's code is inlined once per call site,
    and Numba's SSA pass flags the variables of a body inlined twice into one function, so a kernel
    calls the datafit from one place (FedDeper's two gradients, pFedFBE's gradient and Hessian
    product)."""
    u = v if op == OP_HVP else x
    for j in range(x.shape[0]):
        out[j] = l2 * u[j]
    datafit_rows(sparse, A, data, indices, indptr, b, kind, np.int64(op), start, end, rows, x, v, out, 0.0)


# --------------------------------------------------------------------------- regularizers
def _python_prox(reg, u, t, out):
    """A registered regularizer without a Numba kernel: its NumPy prox (through ``objmode``)."""
    out[:] = kernel_fallback("regularizer", reg).prox_t(u, t)


@njit(cache=True)
def _fallback_prox(reg, u, t, out):
    with objmode():
        _python_prox(reg, u, t, out)


@njit(cache=True)
def prox_vec(u, t, reg, groups, m1, m2, out):
    """out = prox of t * h0 at u for the regularizer of id ``reg``: ||.||_1 (REG_L1), sum_g ||u_g||_2
    over the group ids in ``groups`` (REG_GROUP; id -1 = unpenalized), the nuclear norm of
    u.reshape(m1, m2) (REG_NUCLEAR), ||.||^2 / 2 (REG_L2) or 0 (REG_NONE)."""
    if reg == REG_L1:
        prox_l1(u, t, out)
    elif reg == REG_GROUP:
        prox_group(u, t, groups, out)
    elif reg == REG_NUCLEAR:
        prox_nuclear(u, t, m1, m2, out)
    elif reg == REG_L2:
        prox_l2(u, t, out)
    elif reg == REG_NONE:
        prox_none(u, out)
    else:
        _fallback_prox(reg, u, t, out)


def _python_h0(reg, u):
    """A registered regularizer without a Numba kernel: its NumPy h0 (through ``objmode``)."""
    return float(kernel_fallback("regularizer", reg).h0(u))


@njit(cache=True)
def _fallback_h0(reg, u):
    with objmode(v="float64"):
        v = _python_h0(reg, u)
    return v


@njit(cache=True)
def h0_value(u, reg, groups, m1, m2):
    """h0(u), the regularizer of id ``reg`` without its weight: ||u||_1 (REG_L1), sum_g ||u_g||_2
    (REG_GROUP), the nuclear norm of u.reshape(m1, m2) (REG_NUCLEAR), ||u||^2 / 2 (REG_L2) or 0
    (REG_NONE); a registered regularizer without a kernel through its NumPy ``h0``."""
    if reg == REG_L1:
        return value_l1(u)
    if reg == REG_GROUP:
        return value_group(u, groups)
    if reg == REG_NUCLEAR:
        return value_nuclear(u, m1, m2)
    if reg == REG_L2:
        return value_l2(u)
    if reg == REG_NONE:
        return 0.0
    return _fallback_h0(reg, u)
