r"""Certificates of the ground truth: a bracket on F*, the rounding of F, and the verdict.

:func:`fedtheory.truth.ground_truth` returns an optimum only with a statement of its accuracy:

* ``f_upper``: F at the returned point, :math:`F^* \le F(\hat x)` (evaluated with extended
  precision residuals where the datafit is a margin model);
* ``f_lower``: a lower bound on F*, where one is known:

  - least squares (h = 0): :math:`F(\hat x) - F^* = \frac12\|Q^\top r\|^2` exactly, with
    :math:`r = \tilde b - \tilde A\hat x` the weighted residual and Q an orthonormal basis of
    the range of :math:`\tilde A` (the QR factors of the solve);
  - lasso (least squares + l1): the dual value at the scaled residual (duality gap), and with
    l2 > 0 also the strong-convexity bound at the min-norm subgradient, whichever is higher;
  - strongly convex problems (mu > 0): :math:`F^* \ge F(x^+) - \|s\|^2/(2\mu)`, s the
    subgradient of F at the proximal-gradient point :math:`x^+` (the gradient when h = 0);
  - otherwise NaN (no bound known: then the relative KKT residual decides, see below);
* ``rel_residual``: the gradient-mapping norm at :math:`\hat x` divided by the one at the
  start point 0 (the fraction of the initial optimality residual left);
* ``f_eval_error``: a bound on the rounding error of F evaluated in double precision near
  :math:`\hat x` (the runner's evaluation), from the componentwise error of the margins
  :math:`|a_j^\top x - b_j|` and the datafit's derivative and curvature bound.

The verdict (``certified``) holds when, with :math:`\tau` the tolerance (default 1e-9) and
:math:`s = \max(1, |F^*|)`:

1. F* is finite and :math:`F^* \le F(0) + \text{f\_eval\_error}` (a larger value is impossible);
2. ``f_upper - f_lower <= tau s`` where a lower bound is known, else
   ``rel_residual <= KKT_RTOL`` (1e-10; no bound on F* then, only a small residual; for a loss of
   the margins, the residual may instead be at most KKT_RTOL times the size of the gradient's
   terms at 0, :func:`gradient_terms`: where they cancel, as when x* = 0 exactly, the residual at
   0 is their rounding and no scale) and no
   decrease of F by more than ``tau s`` along a weakly curved direction of the Hessian
   (``exact._flat_descent``: a small residual proves nothing where the Hessian is nearly
   singular);
3. ``f_eval_error <= tau s`` (otherwise runs, which evaluate F in double precision, could not
   measure suboptimality to the tolerance either).
"""
from __future__ import annotations

import numpy as np

#: Relative KKT residual accepted when no lower bound on F* is known.
KKT_RTOL = 1e-10
_EPS = np.finfo(np.float64).eps
_EPS_LD = float(np.finfo(np.longdouble).eps)


def describe(problem):
    """``'<name>' (<datafit> datafit, <regularizer> regularizer, l2=...)``: the problem class in messages.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    str
        The description.
    """
    reg = "no regularizer" if not problem.is_composite else f"{problem.reg} regularizer (weight {problem.l1:g})"
    return f"{problem.name!r} ({problem.kind_name} datafit, l2={problem.l2:g}, {reg})"


def is_margin_model(problem):
    """Whether the datafit is a loss of the margins a_j^T x (least squares, logistic and alike).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    bool
        Whether the datafit is a margin loss.
    """
    return hasattr(problem.datafit, "dloss") and hasattr(problem, "M")


def gradient_terms(problem, x):
    r"""The size of the gradient's terms at x for a loss of the margins:
    :math:`\|\,|M|^\top (w \circ |\ell'(M x, b)|) + \ell_2 |x|\,\|`, the norm the gradient would have if no
    term cancelled (the scale of its rounding).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    x : ndarray of shape (d,)
        The point.

    Returns
    -------
    float
        The norm.
    """
    z = np.asarray(problem.M @ x).ravel()
    t = problem._row_w * np.abs(problem.datafit.dloss(z, problem.b))
    g = np.asarray(abs(problem.M).T @ t).ravel() + problem.l2 * np.abs(x)
    return float(np.sqrt(np.sum(g * g)))


def dense_rows(problem):
    """The stacked rows as a dense array (copy-free when already dense).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    ndarray of shape (m, d)
        The rows.
    """
    M = problem.M
    return M.toarray() if problem.sparse else np.asarray(M, dtype=np.float64)


def weighted_system(problem):
    r"""(A~, b~) with :math:`F_{smooth}(x) = \frac12\|\tilde A x - \tilde b\|^2` for least squares:
    the rows scaled by the square roots of their weights, then :math:`\sqrt{\ell_2} I` rows.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    tuple of ndarray
        ``(A~, b~)``.
    """
    sw = np.sqrt(problem._row_w)
    A = dense_rows(problem) * sw[:, None]
    b = np.asarray(problem.b, dtype=np.float64) * sw
    if problem.l2:
        A = np.vstack([A, np.sqrt(problem.l2) * np.eye(problem.dim)])
        b = np.concatenate([b, np.zeros(problem.dim)])
    return A, b


def residual_ld(A, b, x):
    """b - A x with extended-precision (np.longdouble) products and sums.

    Parameters
    ----------
    A : ndarray of shape (m, d)
        The matrix.
    b : ndarray of shape (m,)
        The right-hand side.
    x : ndarray of shape (d,)
        The point.

    Returns
    -------
    ndarray of shape (m,)
        The residual, in np.longdouble.
    """
    return b.astype(np.longdouble) - A.astype(np.longdouble) @ np.asarray(x, dtype=np.longdouble)


def margin_error(problem, x, eps=_EPS):
    r"""Componentwise bound on the rounding error of every margin a_j^T x - b_j computed with
    unit roundoff ``eps`` (the classical dot-product bound, FMA or not).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    x : ndarray of shape (d,)
        The point.
    eps : float, default: the unit roundoff of float64
        The unit roundoff of the evaluation.

    Returns
    -------
    ndarray of shape (m,)
        The bound of every margin's error.
    """
    M = problem.M
    absx = np.abs(np.asarray(x, dtype=np.float64))
    ax = np.asarray(abs(M) @ absx).ravel()
    k = problem.dim + 2
    gamma = k * eps / (1 - k * eps)
    return gamma * (ax + np.abs(problem.b))


def eval_error(problem, x, eps=_EPS):
    r"""Bound on the rounding error of F(x) evaluated with unit roundoff ``eps`` (inf when it overflows).

    Margin datafits: :math:`\sum_j \omega_j (|\ell'(z_j)| e_j + c_j e_j^2/2)` with e_j the
    margin errors (:func:`margin_error`) and c_j a bound on the curvature within e_j of z_j
    (:func:`curvature_near`), plus the
    summation error of the total. A datafit with a constant Hessian (a quadratic): the summation
    error only. Any other datafit: inf (nothing bounds the error of its value; not certified).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    x : ndarray of shape (d,)
        The point.
    eps : float, default: the unit roundoff of float64
        The unit roundoff of the evaluation.

    Returns
    -------
    float
        The bound (inf when it overflows).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        F = abs(float(problem.value(x)))
        m = problem.M.shape[0] if hasattr(problem, "M") else problem.dim
        total = (m + problem.dim + 2) * eps * F
        if is_margin_model(problem):
            e = margin_error(problem, x, eps)
            z = np.asarray(problem.M @ np.asarray(x, dtype=np.float64)).ravel()
            d1 = np.abs(problem.datafit.dloss(z, problem.b))
            c = curvature_near(problem, z, e)
            total += float(problem._row_w @ (d1 * e + 0.5 * c * e * e))
        elif not getattr(problem.datafit, "constant_hessian", False):
            return np.inf
    return total if np.isfinite(total) else np.inf


def curvature_near(problem, z, e):
    """Bound on l'' within e of the margins z (the datafit's :meth:`max_curvature`, else its
    global curvature bound).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    z : ndarray of shape (m,)
        The margins.
    e : ndarray of shape (m,)
        How far from them.

    Returns
    -------
    ndarray of shape (m,)
        The bound at every margin.
    """
    f = getattr(problem.datafit, "max_curvature", None)
    if f is not None:
        return np.asarray(f(z, problem.b, e), dtype=np.float64)
    return np.full(np.shape(z), float(getattr(problem.datafit, "curvature_bound", 1.0) or 1.0))


def ls_gap(A, b, Q, x):
    """(F(x) in extended precision, F(x) - F*) of 1/2||A x - b||^2, Q an orthonormal basis of range(A).

    Parameters
    ----------
    A : ndarray of shape (m, d)
        The matrix.
    b : ndarray of shape (m,)
        The right-hand side.
    Q : ndarray
        An orthonormal basis of range(A).
    x : ndarray of shape (d,)
        The point.

    Returns
    -------
    tuple of float
        ``(F(x), F(x) - F*)``.
    """
    r = residual_ld(A, b, x)
    f = 0.5 * float(r @ r)
    qr = Q.T.astype(np.longdouble) @ r
    return f, 0.5 * float(qr @ qr)


def lasso_dual(A, b, x, lam):
    r"""(primal, dual) of :math:`\frac12\|Ax - b\|^2 + \lambda\|x\|_1` at x and at the dual point
    :math:`\theta = r / \max(1, \|A^\top r\|_\infty/\lambda)`, r = b - A x (duality gap = primal - dual).

    Parameters
    ----------
    A : ndarray of shape (m, d)
        The matrix.
    b : ndarray of shape (m,)
        The right-hand side.
    x : ndarray of shape (d,)
        The point.
    lam : float
        The weight of the l1 norm.

    Returns
    -------
    tuple of float
        ``(primal, dual)``.
    """
    r = residual_ld(A, b, x)
    primal = 0.5 * float(r @ r) + lam * float(np.abs(x).sum())
    g = np.abs(A.T.astype(np.longdouble) @ r).max() if A.shape[1] else 0.0
    theta = r / max(1.0, float(g) / lam * (1 + 4 * A.shape[0] * _EPS_LD)) if lam > 0 else r
    bl = b.astype(np.longdouble)
    dual = float(bl @ theta - 0.5 * (theta @ theta))
    return primal, dual


def verdict(f, f0, f_lower, f_upper, rel_residual, f_err, tol):
    """(certified, reason): the rules of the module docstring; reason is '' when certified.

    Parameters
    ----------
    f : float
        F at the solution.
    f0 : float
        F at the starting point of the polish.
    f_lower, f_upper : float
        The bracket on F*.
    rel_residual : float
        The relative optimality residual.
    f_err : float
        The rounding error of F.
    tol : float
        The accuracy asked for.

    Returns
    -------
    tuple
        ``(certified, reason)``.
    """
    s = max(1.0, abs(f)) if np.isfinite(f) else np.inf
    if not np.isfinite(f):
        return False, f"F* = {f!r} is not finite"
    if f > f0 + max(f_err, 0.0) + 4 * _EPS * s:
        return False, (f"F* = {f:.6g} lies above F(0) = {f0:.6g}, which is impossible: the solver or "
                       "the evaluation of F failed")
    if f_err > tol * s:
        return False, (f"F cannot be evaluated in double precision to the tolerance near x*: its rounding "
                       f"error is up to {f_err:.3g} (tolerance {tol:g} x max(1, |F*|)); rescale the data")
    if np.isfinite(f_lower):
        gap = f_upper - f_lower
        if not gap <= tol * s:
            return False, (f"the proven bracket F* in [{f_lower:.12g}, {f_upper:.12g}] is {gap:.3g} wide "
                           f"(tolerance {tol:g} x max(1, |F*|))")
        return True, ""
    if not rel_residual <= KKT_RTOL:
        return False, (f"no lower bound on F* is known for this problem and the relative KKT residual "
                       f"{rel_residual:.3g} exceeds {KKT_RTOL:g}")
    return True, ""


__all__ = ["KKT_RTOL", "describe", "eval_error", "gradient_terms", "ls_gap", "lasso_dual", "verdict", "weighted_system"]
