"""Solvers by problem family, before the certificate: CVXPY (any convex problem), Newton's
method with a line search (smooth problems), an active set (lasso) and FISTA (composite problems).

Part of the ground truth (:mod:`fedtheory.truth.optimum`)."""
from __future__ import annotations

import warnings

from scipy.linalg import cho_factor
from scipy.linalg import cho_solve
import numpy as np

from ..exceptions import InvalidParameterError
from .numerics import _norm, _residual, _scale_L


def _cvxpy_solve(problem, solver):
    import cvxpy as cp

    x = cp.Variable(problem.dim)
    # the components' own CVXPY forms (the datafit's includes its ridge; h is None when zero)
    objective = problem.datafit.cvxpy_objective(problem.data, x)
    h = problem.regularizer.cvxpy_objective(x)
    prob = cp.Problem(cp.Minimize(objective if h is None else objective + h))
    if solver.upper() not in cp.installed_solvers():
        raise InvalidParameterError(f"The 'solver' parameter of ground_truth must be a CVXPY solver installed "
                                    f"here, one of {cp.installed_solvers()}. Got {solver!r} instead.")
    with warnings.catch_warnings():
        # "optimal_inaccurate" is recorded in info["cvxpy_status"]; the polish certifies the point
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver=solver)
    return (np.asarray(x.value, dtype=np.float64) if x.value is not None else None), prob.status, prob.value


def _newton_smooth(problem, x, max_iter=200):
    """Damped Newton with Armijo backtracking on F, regularised where the Hessian fails it.

    The step solves H s = g (Cholesky; least squares when H is singular). Where that step is no
    Newton step for g (g has a part outside the range of a singular H, as at a Huber kink where
    a sample leaves the quadratic zone: the old polish stopped there, 0.48 of the initial residual
    left) or no step length decreases F along it, the step solves the regularised system
    (H + lambda I) s = g instead, lambda = c ||g|| and ten times larger until F decreases
    (Levenberg-Marquardt; lambda proportional to ||g|| keeps the fast local convergence of the
    regularised Newton method also where the minimisers are not unique, Li, Fukushima, Qi and
    Yamashita 2004). c starts at 1, shrinks tenfold after a regularised step that F accepts in
    full and grows tenfold after one it refuses, so that steps along a direction where F is
    linear (every sample in Huber's linear zone) grow to the distance F needs whatever the scale
    of the data.

    Where the predicted decrease g^T s is near F's rounding error (below 1e-10 max(1, |F|)),
    the full step is taken when it lowers the gradient norm: F cannot tell better from worse there.
    Stops when no step decreases F any more (machine precision) or, once the gradient is below
    1e-10 L (1 + ||x||), when 5 iterations in a row have not halved the smallest gradient norm
    seen (at the rounding floor the norm wanders, and a new low by a hair used to restart the
    count); returns the iterate with the smallest gradient norm seen.
    """
    f = problem.value(x)
    g = problem.grad(x)
    best_x, best = x, _norm(g)
    stall = 0
    it = 0
    c = 1.0
    for it in range(1, max_iter + 1):
        if best == 0:
            break
        H = problem.hessian(x)
        ng = _norm(g)
        lam = 0.0
        try:                            # H is symmetric positive semidefinite: Cholesky when definite
            step = cho_solve(cho_factor(H, check_finite=False), g, check_finite=False)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(H, g, rcond=None)[0]
            if not _norm(H @ step - g) <= 1e-3 * ng:     # g is not in range(H): no Newton step
                lam = c * ng
        xn = None
        while xn is None and lam <= 1e30 * max(1.0, ng):    # else no regularised step decreases F
            if lam > 0:
                try:
                    step = cho_solve(cho_factor(H + lam * np.eye(problem.dim), check_finite=False), g,
                                     check_finite=False)
                except np.linalg.LinAlgError:        # lam below H's rounding: more regularisation
                    lam *= 10
                    continue
            xn, fn, gn, t = _newton_step(problem, x, f, g, ng, step)
            if xn is None and lam > 0:
                lam, c = 10 * lam, 10 * c
            elif xn is None:
                lam = max(c * ng, np.finfo(np.float64).tiny)
        if xn is None:
            break
        if lam > 0:
            c = max(c / 10, 1e-30) if t == 1.0 else c
        x, f, g = xn, fn, gn
        ng = _norm(g)
        if ng < best:
            best_x = x
        stall = 0 if ng < 0.5 * best else stall + 1      # a new low at the rounding floor is no progress
        best = min(best, ng)
        if stall >= 5 and best < 1e-10 * max(1.0, _scale_L(problem, x) * (1 + _norm(x))):
            break
    return best_x, it


def _newton_step(problem, x, f, g, ng, step):
    """(x+, F(x+), grad F(x+), step length) along ``-step`` (see :func:`_newton_smooth`), or Nones
    when no step length down to 1e-14 decreases F."""
    dec = float(g @ step)
    if dec <= 1e-10 * max(1.0, abs(f)):
        # F can barely resolve the predicted decrease (F's rounding error, a sum over all
        # samples, is of that order): an Armijo test on F accepts or refuses by rounding noise,
        # which made the iterates crawl at tiny steps on some CPUs. The full step is taken when
        # it lowers the gradient norm; otherwise the line search below decides.
        xt = x - step
        gt = problem.grad(xt)
        if _norm(gt) < ng:
            return xt, problem.value(xt), gt, 1.0
    t = 1.0
    while t >= 1e-14:
        xn = x - t * step
        fn = problem.value(xn)
        if fn <= f - 1e-4 * t * dec or (t == 1.0 and fn <= f):
            return xn, fn, problem.grad(xn), t
        t *= 0.5
    return None, None, None, None


def _active_set_lasso(problem, x, L, max_outer=50):
    """Active-set Newton for smooth + l1: fixed signs on the support, KKT checked off it."""
    d = problem.dim
    l1 = problem.l1
    scale = max(1.0, np.abs(x).max()) if x.size else 1.0
    support = np.abs(x) > 1e-8 * scale
    signs = np.sign(x)
    it = 0
    for it in range(1, max_outer + 1):
        idx = np.flatnonzero(support)
        xs = np.zeros(d)
        if idx.size:
            xs[idx] = x[idx]
            for _ in range(60):
                g = problem.grad(xs)[idx] + l1 * signs[idx]
                H = problem.hessian(xs)[np.ix_(idx, idx)]
                try:
                    step = np.linalg.solve(H, g)
                except np.linalg.LinAlgError:
                    step = np.linalg.lstsq(H, g, rcond=None)[0]
                xs[idx] -= step
                if np.linalg.norm(step) <= 1e-15 * max(1.0, np.linalg.norm(xs)):
                    break
        flipped = idx[np.sign(xs[idx]) != signs[idx]]
        g = problem.grad(xs)
        off = np.flatnonzero(~support)
        viol = off[np.abs(g[off]) > l1 * (1 + 1e-12)]
        if flipped.size == 0 and viol.size == 0:
            return xs, it, True
        # repair: prox-gradient steps from the better point, then re-identify the support
        base = xs if flipped.size == 0 else x
        for _ in range(200):
            base = problem.prox(base - problem.grad(base) / L, 1.0 / L)
        x = base
        support = np.abs(x) > 0
        if viol.size:
            support[viol] = True
            signs[viol] = -np.sign(g[viol])
        signs[support & (x != 0)] = np.sign(x[support & (x != 0)])
    return x, it, False


def _fista_polish(problem, x, L, max_iter=200000):
    """Accelerated proximal gradient with adaptive restart from the CVXPY point, run until the
    gradient-mapping norm stops decreasing (group lasso, nuclear norm)."""
    y, x_prev, tk = x.copy(), x.copy(), 1.0
    best, best_x, stall, it = _residual(problem, x, L), x.copy(), 0, 0
    for it in range(1, max_iter + 1):
        x_new = problem.prox(y - problem.grad(y) / L, 1.0 / L)
        if (y - x_new) @ (x_new - x_prev) > 0:          # restart the momentum
            tk = 1.0
        t_new = 0.5 * (1 + np.sqrt(1 + 4 * tk * tk))
        y = x_new + (tk - 1) / t_new * (x_new - x_prev)
        x_prev, tk = x_new, t_new
        if it % 50 == 0:
            r = _residual(problem, x_new, L)
            if r < best * (1 - 1e-3):
                best, best_x, stall = r, x_new.copy(), 0
            else:
                stall += 1
            if best < 1e-13 * max(1.0, L) or stall >= 40:
                break
    return best_x, it
