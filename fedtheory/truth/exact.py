"""Least squares in exact arithmetic where it matters: the reduction to independent columns
(exact dependencies found with rationals), the solution by QR, and the descent along a flat
direction of a problem without a unique minimiser.

Part of the ground truth (:mod:`fedtheory.truth.optimum`)."""
from __future__ import annotations

import numpy as np

from . import certificate as _cert
from .numerics import _norm


#: Least squares up to this many entries of the stacked system are solved by QR (dense).
_QR_MAX_ENTRIES = 10_000_000


def _ls_reduce(problem, dependencies=False):
    """The weighted least-squares system of ``problem`` without its exact degeneracies:
    (A, b, C, keep) with F(x) = 1/2||A x[keep] - b||^2 + C whenever x is 0 off ``keep``, and
    min F = min of the reduced objective + C.

    Identical rows a_j are merged (weights summed, targets averaged; their spread is the
    constant C, summed in extended precision); all-zero rows go into C as well (they do not depend
    on x; kept, they widened the certificate's range basis beyond range(A)); all-zero columns are
    dropped (x_j = 0); with
    l2 = 0 duplicated columns, and columns that are an exact multiple of another, keep their first
    copy (x_j + c x_k only matters, :func:`_drop_exact_multiples`), and with ``dependencies`` a
    column that is exactly a rational combination of others (one-hot groups:
    :func:`_drop_exact_combinations`) is dropped. Then the sqrt(l2) I rows of the ridge."""
    M = _cert.dense_rows(problem)
    w, t = problem._row_w, np.asarray(problem.b, dtype=np.float64)
    U, inv = np.unique(M, axis=0, return_inverse=True)
    inv = inv.ravel()
    W = np.bincount(inv, weights=w, minlength=U.shape[0])
    tbar = np.bincount(inv, weights=w * t, minlength=U.shape[0]) / np.where(W > 0, W, 1.0)
    dev = t.astype(np.longdouble) - tbar[inv].astype(np.longdouble)
    C = np.sum(w.astype(np.longdouble) * dev * dev)
    zero = ~np.any(U != 0, axis=1)          # a_j = 0: its (merged) term W tbar^2 / 2 is a constant too
    if zero.any():
        C += np.sum(W[zero].astype(np.longdouble) * tbar[zero].astype(np.longdouble) ** 2)
        U, W, tbar = U[~zero], W[~zero], tbar[~zero]
    C = 0.5 * float(C)
    keep = np.flatnonzero(np.any(U != 0, axis=0))
    if problem.l2 == 0 and keep.size > 1:
        _, first = np.unique(U[:, keep].T, axis=0, return_index=True)
        keep = keep[np.sort(first)]
        keep = _drop_exact_multiples(U, keep)
        if dependencies:
            keep = _drop_exact_combinations(U[W > 0], keep)
    sw = np.sqrt(W)
    A, b = U[:, keep] * sw[:, None], tbar * sw
    if problem.l2:
        A = np.vstack([A, np.sqrt(problem.l2) * np.eye(keep.size)])
        b = np.concatenate([b, np.zeros(keep.size)])
    return A, b, C, keep


def _drop_exact_multiples(U, keep):
    """``keep`` without the columns that are an exact scalar multiple of an earlier kept column
    (a_k = c a_j in every entry, bit for bit, in floating point): then a_j x_j + a_k x_k = a_j (x_j +
    c x_k), so without a ridge x_k = 0 loses nothing and F* is unchanged, while QR would meet a
    rounding-level pivot along a direction the data do not have. Candidates are grouped by the column
    divided by its first nonzero entry; the multiple is then checked exactly."""
    groups, out = {}, []
    for j in keep:
        col = U[:, j]
        p = int(np.flatnonzero(col)[0])
        with np.errstate(all="ignore"):
            key = (p, (col / col[p]).tobytes())
        dup = False
        for i in groups.get(key, ()):
            with np.errstate(all="ignore"):
                c = col[p] / U[p, i]
                dup = bool(np.isfinite(c) and np.array_equal(c * U[:, i], col))
            if dup:
                break
        if not dup:
            groups.setdefault(key, []).append(j)
            out.append(j)
    return np.asarray(out, dtype=keep.dtype)


#: Candidate dependencies: trailing pivots of a column-pivoted QR below this fraction of the first.
_DEP_PIVOT = np.sqrt(np.finfo(float).eps)


#: Denominators tried for the coefficients of an exact dependency.
_DEP_MAX_DENOMINATOR = 1 << 12


#: Most entries checked in Python integers (data that are neither small integers nor dyadic).
_DEP_MAX_EXACT = 2_000_000


def _exact_integers(block):
    """``block`` (finite floats) as exact integers ``(N, shift)`` with ``block = N * 2**shift``:
    int64 when they fit in 62 bits, else Python integers (an object array)."""
    mant, expo = np.frexp(block)
    M = (mant * 2.0 ** 53).astype(np.int64)            # exact: a double's 53-bit significand
    E = expo.astype(np.int64) - 53
    nz = M != 0
    low = np.where(nz, M & -M, 1)                      # its trailing zeros removed (1.0 is 1, not 2^52)
    tz = np.round(np.log2(low.astype(np.float64))).astype(np.int64)
    M, E = M >> tz, E + tz
    shift = int(E[nz].min()) if nz.any() else 0
    lift = np.where(nz, E - shift, 0)
    if int(lift.max(initial=0)) + 53 <= 62:
        return M << lift, shift
    return np.frompyfunc(lambda m, k: int(m) << int(k), 2, 1)(M, lift), shift


def _exact_combination(A, j, cols, coef):
    """Whether column ``j`` of ``A`` equals sum_i coef[i] A[:, cols[i]] exactly (``coef``
    Fractions), in integer arithmetic (no rounding: the answer is a proof, not an estimate)."""
    from math import lcm
    q = lcm(*[c.denominator for c in coef]) if coef else 1
    p = [int(c * q) for c in coef]
    sub = A[:, list(cols) + [j]]
    rows = np.any(sub != 0, axis=1)
    sub = sub[rows]
    if sub.size == 0:
        return True
    N, _ = _exact_integers(sub)              # one common scale: the identity is homogeneous in it
    if N.dtype == object or int(np.abs(N).max()) * (sum(map(abs, p)) + q) >= 2 ** 62:
        if sub.size > _DEP_MAX_EXACT:
            return False                        # too large to check in Python integers: kept (sound)
        N = N.astype(object)
        coef_v = np.array(p + [-q], dtype=object)
    else:
        coef_v = np.array(p + [-q], dtype=np.int64)
    return bool(np.all(N.dot(coef_v) == 0))


def _exact_dependencies(U, keep):
    """The columns of ``U[:, keep]`` that are exactly a rational combination of others, as
    ``[(j, cols, coefs)]`` with U[:, j] = sum_i coefs[i] U[:, cols[i]] (``coefs`` Fractions; ``j`` and
    ``cols`` index ``U``), each proven in integer arithmetic.

    Candidates are the trailing columns of a column-pivoted QR (pivots below sqrt(eps) of the
    first); each one's coefficients on the leading columns are rounded to fractions (denominators up
    to 4096) and the identity is then checked exactly. A column that fails the check is not listed."""
    from fractions import Fraction

    from scipy.linalg import qr, solve_triangular
    if keep.size < 2 or U.shape[0] == 0:
        return []
    A = U[:, keep]
    if not np.all(np.isfinite(A)):
        return []
    scale = np.abs(A).max(axis=0)
    # A = Q R0 (an unpivoted, blocked QR: fast on tall data), then the pivoted QR of the small R0:
    # its columns have the same dependencies as A's (A^T A = R0^T R0)
    R0 = qr(A / scale, mode="r", check_finite=False)[0][:keep.size]
    R, piv = qr(R0, mode="r", pivoting=True, check_finite=False)
    diag = np.abs(np.diag(R))
    k = int(np.sum(diag > diag[0] * _DEP_PIVOT)) if diag.size else 0
    if k == 0 or k >= keep.size:
        return []
    with np.errstate(all="ignore"):
        C = solve_triangular(R[:k, :k], R[:k, k:keep.size], check_finite=False)
    lead = piv[:k]
    found = []
    for t in range(keep.size - k):
        j = piv[k + t]
        gam = C[:, t] * scale[j] / scale[lead]        # a_j = sum_i gam_i a_{lead_i}, unscaled
        if not np.all(np.isfinite(gam)):
            continue
        coef = [Fraction(float(g)).limit_denominator(_DEP_MAX_DENOMINATOR) for g in gam]
        used = [(i, c) for i, c in zip(lead, coef) if c != 0]
        if _exact_combination(A, j, [i for i, _ in used], [c for _, c in used]):
            found.append((int(keep[j]), [int(keep[i]) for i, _ in used], [c for _, c in used]))
    return found


def _drop_exact_combinations(U, keep):
    """``keep`` without the columns that are exactly a rational combination of other kept columns
    (:func:`_exact_dependencies`).

    Without a ridge, F depends on x only through A x, so a column a_t = sum_i c_i a_i lets x_t = 0
    lose nothing (F* is unchanged), while the QR of the certificate would meet a rounding-level
    pivot along a direction the data do not have, and bound F - F* by the residual's component
    along it (one-hot encoded features, as in LIBSVM's a9a, were refused for this). A column that
    is a combination only up to rounding is kept: the certificate stays sound."""
    drop = {j for j, _, _ in _exact_dependencies(U, keep)}
    return keep[[i for i in range(keep.size) if int(keep[i]) not in drop]]


def _exact_null_space(problem):
    """An orthonormal basis (d, k) of directions along which F is constant in exact arithmetic: the
    exact column dependencies of the data (:func:`_exact_dependencies`) of a loss of the margins
    without ridge or regularizer, where F depends on x only through M x. (d, 0) otherwise."""
    d = problem.dim
    if problem.is_composite or problem.l2 != 0 or not _cert.is_margin_model(problem) \
            or problem.M.shape[0] * d > _QR_MAX_ENTRIES:
        return np.zeros((d, 0))
    M = _cert.dense_rows(problem)[problem._row_w > 0]
    deps = _exact_dependencies(M, np.flatnonzero(np.any(M != 0, axis=0)))
    zero = np.flatnonzero(~np.any(M != 0, axis=0))
    V = np.zeros((d, len(deps) + zero.size))
    for c, (j, cols, coefs) in enumerate(deps):
        V[j, c] = 1.0
        V[cols, c] = [-float(q) for q in coefs]
    V[zero, len(deps) + np.arange(zero.size)] = 1.0
    return np.linalg.qr(V)[0] if V.shape[1] else V


def _ls_solve(problem):
    """Least squares with h = 0: Householder QR of the reduced weighted system (:func:`_ls_reduce`)
    with the rows sorted by decreasing size and column pivoting (row-wise backward stable, so one
    huge row does not swamp the others, as the normal equations or CVXPY's interior point do),
    then iterative refinement with extended-precision residuals. Two numerical ranks are tried
    (a relative threshold on R's diagonal, and every nonzero pivot) and the lower F kept.

    Returns (x, (A, b, Q, C, keep)): the reduced sorted system, an orthonormal basis of its range,
    the constant and the kept columns (for the certificate, see :func:`certificate.ls_gap`)."""
    from scipy.linalg import qr, solve_triangular

    def factor(dependencies):
        A, b, C, keep = _ls_reduce(problem, dependencies)
        order = np.argsort(-np.abs(A).max(axis=1, initial=0.0), kind="stable")
        A, b = A[order], b[order]
        if A.size == 0:
            return A, b, C, keep, None
        return A, b, C, keep, qr(A, mode="economic", pivoting=True, check_finite=False)

    A, b, C, keep, qrs = factor(False)
    pivots = np.abs(np.diag(qrs[1])) if qrs is not None else None
    if pivots is not None and problem.l2 == 0 and (pivots.size < A.shape[1] or pivots[-1] <= pivots[0] * _DEP_PIVOT):
        # a rounding-level pivot: the data may have exact column dependencies (one-hot groups); found
        # and removed, the system is factored again (a full-rank one pays for neither)
        again = factor(True)
        if again[3].size < keep.size:
            A, b, C, keep, qrs = again
    m, d = A.shape
    x_full = np.zeros(problem.dim)
    if d == 0 or m == 0:
        return x_full, (A, b, np.zeros((m, 0)), C, keep)
    Q, R, piv = qrs
    diag = np.abs(np.diag(R))
    ranks = {int(np.sum(diag > 0))}
    if diag.size and diag[0] > 0:
        ranks.add(int(np.sum(diag > diag[0] * max(m, d) * np.finfo(float).eps)))

    def solve(rhs, k):
        z = np.zeros(d)
        if k:
            z[:k] = solve_triangular(R[:k, :k], (Q.T @ rhs)[:k], check_finite=False)
        x = np.empty(d)
        x[piv] = z
        return x

    best, best_f = np.zeros(d), _cert.ls_gap(A, b, Q, np.zeros(d))[0]
    full_rank = None
    for k in sorted(ranks):
        with np.errstate(all="ignore"):
            x = solve(b, k)
            for _ in range(4):                       # refinement: residuals in extended precision
                if not np.all(np.isfinite(x)):
                    break
                x = x + solve(np.asarray(_cert.residual_ld(A, b, x), dtype=np.float64), k)
        if np.all(np.isfinite(x)):
            full_rank = x
            f = _cert.ls_gap(A, b, Q, x)[0]
            if f < best_f:
                best, best_f = x, f
    x_full[keep] = best
    x_rank = None
    if full_rank is not None:
        x_rank = np.zeros(problem.dim)
        x_rank[keep] = full_rank
    return x_full, (A, b, Q, C, keep, x_rank)


def _flat_descent(problem, x, f):
    """The largest decrease of F found along the weakly curved directions at ``x`` (eigenvectors of
    the smooth part's Hessian with eigenvalue <= sqrt(eps) lambda_max), each way, at steps
    10^-8 .. 10^12 times 1 + ||x||; with ``(lambda, lambda_max, step)`` of the best. ``(0.0, None)``
    when no direction is weakly curved (the residual then bounds the error up to kappa < 1e8).
    Directions along which F is exactly constant (:func:`_exact_null_space`) are not searched."""
    try:
        with np.errstate(all="ignore"):
            lam, U = np.linalg.eigh(problem.hessian(x))
    except (np.linalg.LinAlgError, ValueError, NotImplementedError):
        return 0.0, None
    top = max(float(lam[-1]), 0.0) if lam.size else 0.0
    flat = np.flatnonzero(lam <= np.sqrt(np.finfo(np.float64).eps) * top)
    best, where = 0.0, None
    steps = (1.0 + _norm(x)) * 10.0 ** np.arange(-8, 13)
    null = _exact_null_space(problem) if flat.size else None
    with np.errstate(all="ignore"):
        for k in flat:
            u = U[:, k]
            if null is not None and null.shape[1]:
                # F is constant along the data's exact dependencies: a decrease measured there (at
                # steps of 1e12) is rounding; only the rest of the direction is searched
                u = u - null @ (null.T @ u)
                nu = _norm(u)
                if nu <= 1e-6:
                    continue
                u = u / nu
            for t in np.concatenate([steps, -steps]):
                drop = f - float(problem.value(x + t * u))
                if drop > best:
                    best, where = drop, (float(lam[k]), top, abs(float(t)))
    return best, where
