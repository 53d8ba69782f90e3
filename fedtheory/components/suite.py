r"""The component suite: every datafit and regularizer agrees with itself across Numba, NumPy, torch and CVXPY.

Run on every registered component by ``tests/test_components.py`` (so a new component gets every
check by registering itself), and callable on a component of your own::

    from fedtheory.components.suite import check_datafit, check_regularizer, check_pair
    check_datafit(MyDatafit)                    # value, gradient, Hessian-vector product
    check_regularizer(MyRegularizer)            # value and prox
    check_pair(MyDatafit, "l1")                 # the problem F = sum_i w_i f_i + h they make

What is checked, on the data of the component's ``example`` (a few clients, dense and CSR rows):

* datafit, per client and globally (also the fused :meth:`Datafit.value_grad` of the evaluations):
  the NumPy oracles (:meth:`Datafit.client_value`, ...) equal the
  Numba kernels (``client_grad``, ``client_value_grad``, ``client_hvp`` through the problem's kernel
  pack), the torch oracles (autograd of :meth:`Datafit.torch_value`) and the CVXPY expression
  (:meth:`Datafit.cvxpy_value` and its ``.grad``) to 1e-10 relative; on minibatch rows too; the
  gradient equals central finite differences of the value, the Hessian-vector product central
  finite differences of the gradient and the dense Hessian times v;
* regularizer: h(x) equals its CVXPY expression; the prox of t h0 from NumPy, the Numba kernel
  (``prox_vec`` with the problem's ``reg_pack``) and torch agree to 1e-12 and solve the prox
  problem :math:`\min_z t h_0(z) + \frac12\|z - u\|^2`: their objective is within 1e-9 of CVXPY's
  optimal value and they are within 1e-5 of CVXPY's minimiser;
* pair: F(x) and the gradient mapping from the problem equal those assembled from the Numba kernels
  and from CVXPY.

Each check raises AssertionError naming the component, the quantity and the size of the mismatch.
"""
from __future__ import annotations

import numpy as np

from ..problem import FederatedProblem
from .catalog import get_datafit, get_regularizer
from .._kernels.oracles import client_grad, client_hvp, client_value_grad, prox_vec

RTOL = 1e-10         # Numba / NumPy / torch / CVXPY evaluations of the same formula (summation order)
FD_RTOL = 1e-6       # central finite differences, h = 1e-6 (error O(h^2) plus rounding O(eps / h))


def _cls(spec, get):
    return get(spec) if isinstance(spec, str) else spec


def _close(a, b, rtol, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert a.shape == b.shape and err <= rtol * scale, f"{what}: differ by {err:.3e} (scale {scale:.3g})"


def _torch():
    try:
        import torch
    except ImportError:          # the [torch] extra is optional
        return None
    return torch


def example_problem(datafit, regularizer=None, sparse=False, seed=0, n_clients=3, dim=6):
    """The problem of a datafit's ``example`` data with a regularizer's ``example`` (None: h = 0).

    Parameters
    ----------
    datafit : Datafit
        The datafit (its ``example`` data).
    regularizer : Regularizer, optional
        The regularizer (None: h = 0).
    sparse : bool, default False
        CSR rows.
    seed : int, default 0
        Seed of the data.
    n_clients : int, default 3
        Clients.
    dim : int, default 6
        Dimension.

    Returns
    -------
    FederatedProblem
        The problem.
    """
    rng = np.random.default_rng(seed)
    f, A, b = _cls(datafit, get_datafit).example(rng, n_clients, dim, sparse=sparse)
    reg = None
    if regularizer is not None:
        reg = _cls(regularizer, get_regularizer).example(rng, dim)
    w = rng.random(n_clients) + 0.5
    return FederatedProblem.from_clients(A, b, f, reg, weights=w, name=f"{f.name}+{getattr(reg, 'name', 'none')}")


def _kernel_oracles(p, i, x, v, rows):
    """(value, gradient, Hessian-vector product) of client i from the Numba kernels."""
    pack = p.kernel_pack()
    s, e = p.client_rows(i)
    r = np.zeros(0, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    g, g2, hv = np.empty(p.dim), np.empty(p.dim), np.empty(p.dim)
    val = client_value_grad(*pack[:7], s, e, r, x, p.l2, g)
    client_grad(*pack[:7], s, e, r, x, p.l2, g2)
    client_hvp(*pack[:7], s, e, r, x, v, p.l2, hv)
    return val, g, g2, hv


def check_datafit(datafit, sparse=False, seed=0):
    """Check a datafit's value, gradient and Hessian-vector product on every backend.

    NumPy == Numba == torch == CVXPY, and against finite differences.

    Raises AssertionError with a message naming the disagreeing forms; returns None when every
    check passes (torch is skipped when it is not installed).

    Parameters
    ----------
    datafit : Datafit subclass, instance or str
        The datafit (a registered name is accepted).
    sparse : bool, default False
        Use CSR rows (ignored by datafits without samples).
    seed : int, default 0
        Seed of the example data and test points.
    """
    import cvxpy as cp
    p = example_problem(datafit, sparse=sparse, seed=seed)
    f, d = p.datafit, p.dim
    rng = np.random.default_rng(seed + 1)
    x, v = 0.5 * rng.normal(size=d), rng.normal(size=d)
    torch = _torch()
    oracles = None
    if torch is not None:
        from ..backends.torch.oracles import ConvexOracles      # (torch: an optional dependency)
        oracles = ConvexOracles(p, torch.device("cpu"))
    name = f"{f.name}{' (CSR)' if p.sparse else ''}"
    total, total_g = 0.0, np.zeros(d)
    for i in range(p.n_clients):
        s, e = p.client_rows(i)
        batches = [None] + ([np.sort(rng.choice(np.arange(s, e), 3, replace=False))] if f.has_samples else [])
        for rows in batches:
            what = f"{name}, client {i}{'' if rows is None else ' minibatch'}"
            fv, g = p.client_value(i, x, rows), p.client_grad(i, x, rows)
            hv = p.client_hessian_vector(i, x, v, rows)
            kv, kg, kg2, khv = _kernel_oracles(p, i, x, v, rows)
            _close(kv, fv, RTOL, f"{what}: value, numba vs NumPy")
            _close(kg, g, RTOL, f"{what}: gradient (client_value_grad), numba vs NumPy")
            _close(kg2, g, RTOL, f"{what}: gradient (client_grad), numba vs NumPy")
            _close(khv, hv, RTOL, f"{what}: Hessian-vector product, numba vs NumPy")
            if oracles is not None:
                y, tv = oracles.tensor(x), oracles.tensor(v)
                tval, tg = oracles.value_grad(i, y, rows)
                _close(float(tval), fv, RTOL, f"{what}: value, torch vs NumPy")
                _close(tg.numpy(), g, RTOL, f"{what}: gradient, torch vs NumPy")
                _close(oracles.hvp(i, y, tv, rows).numpy(), hv, RTOL, f"{what}: Hessian-vector product, torch vs NumPy")
            h = 1e-6
            fd = np.array([(p.client_value(i, x + h * u, rows) - p.client_value(i, x - h * u, rows)) / (2 * h)
                           for u in np.eye(d)])
            _close(g, fd, FD_RTOL, f"{what}: gradient vs central finite differences of the value")
            fd_hv = (p.client_grad(i, x + h * v, rows) - p.client_grad(i, x - h * v, rows)) / (2 * h)
            _close(hv, fd_hv, FD_RTOL, f"{what}: Hessian-vector product vs finite differences of the gradient")
            if rows is None:
                _close(p.client_hessian(i, x) @ v, hv, RTOL, f"{what}: dense Hessian times v vs the HVP")
                total += p.weights[i] * kv
                total_g += p.weights[i] * kg
    _close(p.smooth_value(x), total, RTOL, f"{name}: sum_i w_i f_i, NumPy vs numba")
    _close(p.grad(x), total_g, RTOL, f"{name}: sum_i w_i grad f_i, NumPy vs numba")
    fv, fg = f.value_grad(p.data, x)
    _close(fv, p.smooth_value(x), RTOL, f"{name}: value of the fused value_grad vs value")
    _close(fg, p.grad(x), RTOL, f"{name}: gradient of the fused value_grad vs grad")
    _close(p.hessian(x) @ v, sum(p.weights[i] * p.client_hessian(i, x) @ v for i in range(p.n_clients)), RTOL,
           f"{name}: Hessian of the sum vs the sum of client Hessians")
    xv = cp.Variable(d)
    xv.value = x
    expr = f.cvxpy_value(p.data, xv)
    _close(expr.value, p.smooth_value(x), RTOL, f"{name}: sum_i w_i f_i, CVXPY vs NumPy")
    _close(np.asarray(expr.grad[xv].todense()).ravel(), p.grad(x), RTOL, f"{name}: gradient, CVXPY vs NumPy")


def check_regularizer(regularizer, dim=6, seed=0):
    """Value and prox of a regularizer: NumPy == Numba == torch, and CVXPY's value and prox solution.

    Raises AssertionError with a message naming the disagreeing forms; returns None when every
    check passes (or when the regularizer has no example for ``dim``).

    Parameters
    ----------
    regularizer : Regularizer subclass, instance or str
        The regularizer (a registered name is accepted).
    dim : int, default 6
        Dimension of the example.
    seed : int, default 0
        Seed of the example data and test points.
    """
    import cvxpy as cp
    rng = np.random.default_rng(seed)
    cls = _cls(regularizer, get_regularizer)
    reg = cls.example(rng, dim)
    if reg is None:
        return
    p = example_problem("least_squares", None, seed=seed, dim=dim)
    p = FederatedProblem.from_components(p.data, p.datafit, reg, name=f"least_squares+{reg.name}")
    torch = _torch()
    zv = cp.Variable(dim)
    for t in (0.05, 0.5, 3.0):
        u = 2.0 * rng.normal(size=dim)
        zv.value = u
        h_cvx = reg.cvxpy_h0(zv)
        _close(float(np.asarray(h_cvx.value if hasattr(h_cvx, "value") else h_cvx)), reg.h0(u), RTOL,
               f"{reg.name}: h0, CVXPY vs NumPy")
        z = reg.prox_t(u, t)
        out = np.empty(dim)
        prox_vec(u, t, *p.reg_pack(), out)
        _close(out, z, 1e-12, f"{reg.name}: prox of {t} h0, numba vs NumPy")
        if torch is not None:
            _close(reg.torch_prox_t(torch.as_tensor(u), t).numpy(), z, 1e-12, f"{reg.name}: prox, torch vs NumPy")
        prob = cp.Problem(cp.Minimize(t * reg.cvxpy_h0(zv) + 0.5 * cp.sum_squares(zv - u)))
        prob.solve()
        ours = t * reg.h0(z) + 0.5 * np.sum((z - u) ** 2)
        assert ours <= prob.value + 1e-9 * max(1.0, abs(prob.value)), \
            f"{reg.name}: prox of {t} h0 has objective {ours!r} > CVXPY's optimum {prob.value!r}"
        _close(z, zv.value, 1e-5, f"{reg.name}: prox of {t} h0 vs CVXPY's minimiser")
    x = rng.normal(size=dim)
    step = 0.7
    _close(p.prox(x, step), reg.prox_t(x, step * reg.weight) if not reg.is_zero else x, 0.0,
           f"{reg.name}: problem.prox(x, step) vs the prox of step * tau * h0")
    _close(p.h_value(x), reg.weight * reg.h0(x), RTOL, f"{reg.name}: h(x) = tau h0(x)")


def check_pair(datafit, regularizer, sparse=False, seed=0):
    """Check the problem of a datafit and a regularizer on every backend.

    F(x) and the gradient mapping from the problem, from the Numba kernels and from CVXPY.

    Raises AssertionError with a message naming the disagreeing forms; returns None when every
    check passes (or when the regularizer has no example in the datafit's dimension).

    Parameters
    ----------
    datafit : Datafit subclass, instance or str
        The datafit (a registered name is accepted).
    regularizer : Regularizer subclass, instance or str
        The regularizer (a registered name is accepted).
    sparse : bool, default False
        Use CSR rows (ignored by datafits without samples).
    seed : int, default 0
        Seed of the example data and test points.
    """
    import cvxpy as cp
    p = example_problem(datafit, regularizer, sparse=sparse, seed=seed)
    if p.regularizer.name != _cls(regularizer, get_regularizer).name:
        return                               # the regularizer has no example for this dimension
    rng = np.random.default_rng(seed + 2)
    x = rng.normal(size=p.dim)
    xv = cp.Variable(p.dim)
    xv.value = x
    expr = p.datafit.cvxpy_value(p.data, xv)
    hexpr = p.regularizer.cvxpy_value(xv)
    F_cvx = expr.value + (0.0 if hexpr is None else hexpr.value)
    _close(p.value(x), F_cvx, RTOL, f"{p.name}: F(x), NumPy vs CVXPY")
    pack = p.kernel_pack()
    g = np.zeros(p.dim)
    gi = np.empty(p.dim)
    for i in range(p.n_clients):
        s, e = p.client_rows(i)
        client_grad(*pack[:7], s, e, np.zeros(0, dtype=np.int64), x, p.l2, gi)
        g += p.weights[i] * gi
    step = 0.3
    u = x - step * g
    z = np.empty(p.dim)
    prox_vec(u, step * p.reg_weight, *p.reg_pack(), z)
    G = (x - z) / step
    _close(p.gradient_mapping_sq(x, step), G @ G if p.is_composite else g @ g, RTOL,
           f"{p.name}: squared gradient mapping, problem vs numba kernels")
