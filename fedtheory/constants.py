r"""Smoothness and strong-convexity constants computed from the data and the datafit's capabilities.

The datafit declares what bounds its curvature (:class:`fedtheory.components.Datafit`): a constant
Hessian gives the exact L; a margin datafit's ``curvature_bound`` c (sup of the loss's second
derivative, 1/4 for logistic) gives :math:`L = c\,\lambda_{\max}(\sum_r \omega_r a_r a_r^\top) + \ell_2`,
a certified upper bound on :math:`\sup_x \lambda_{\max}(\nabla^2 F(x))` that is exact when the samples
reach their bound at one common x (logistic at x = 0). A datafit that declares neither gets no L:
:func:`smoothness` raises a DataError naming the missing capability (never the Hessian at 0).
"""
import copy
import functools
import math

import numpy as np


def per_problem(fn):
    """Compute ``fn(problem, *args, **kwargs)`` once per problem and arguments: a constant of a problem that
    every theorem check on it reads (its assumptions' constants, the diversity of its clients) is
    kept on the problem, as :func:`smoothness` keeps L, and handed out as a copy (a caller may
    change what it gets).

    The value is keyed by the function, the other arguments (with their types), the problem's noise
    level (an attribute a problem's user may set) and which data, weights, datafit, regularizer and
    ``info`` the problem holds (another object replacing one is another key; an array changed in
    place is not seen, as the problem's ``data_hash`` and compiled pack do not see it). Arguments
    that cannot be keys (arrays) and raised errors are not kept.

    Parameters
    ----------
    fn : callable
        ``fn(problem, *args)``.

    Returns
    -------
    callable
        The same function, computed once per problem and arguments.

    Examples
    --------
    >>> import problems
    >>> calls = []
    >>> @per_problem
    ... def dim_times(problem, k):
    ...     calls.append(k)
    ...     return problem.dim * k
    >>> p = problems.quadratic(3, 4, seed=0)
    >>> dim_times(p, 2), dim_times(p, 2), dim_times(p, 3), calls
    (8, 8, 12, [2, 3])
    """
    @functools.wraps(fn)
    def once(problem, *args, **kwargs):
        named = tuple(sorted(kwargs.items()))
        key = (once, float(getattr(problem, "noise", 0.0)), args, named, tuple(type(a) for a in args),
               tuple(type(v) for _, v in named))
        try:
            hash(key)
        except TypeError:
            return fn(problem, *args, **kwargs)
        parts = tuple(getattr(problem, k, None) for k in ("data", "weights", "datafit", "regularizer", "info"))
        held = problem.__dict__.setdefault("_per_problem", {})
        kept = held.get(key)
        if kept is None or any(a is not b for a, b in zip(kept[0], parts)):
            kept = held[key] = (parts, fn(problem, *args, **kwargs))
        return copy.deepcopy(kept[1])
    return once


def smoothness(problem):
    """L of the smooth part of F: sup_x lambda_max(Hessian), from the datafit's capabilities
    (:meth:`fedtheory.components.Datafit.smoothness`; cached on the problem).

    Raises DataError when the datafit declares neither a constant Hessian nor a curvature bound.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    float
        L.
    """
    if "_L" not in problem.__dict__:
        problem._L = problem.datafit.smoothness(problem.data)
    return problem._L


def client_smoothness(problem):
    """L_i of every client objective f_i, array of shape (n,) (see :func:`smoothness`).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    ndarray of shape (n,)
        L_i.
    """
    if "_L_i" not in problem.__dict__:
        problem._L_i = np.array([problem.datafit.smoothness(problem.data, i) for i in range(problem.n_clients)])
    return problem._L_i


def strong_convexity(problem):
    """Global strong convexity mu = inf_x lambda_min(Hessian of the smooth part), from the datafit
    (:meth:`fedtheory.components.Datafit.strong_convexity`).

    Least squares / quadratic: lambda_min of the constant Hessian. Logistic: the logistic
    curvature vanishes at infinity, so mu = l2 (the ridge weight).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    float
        mu (0 when F is not strongly convex).
    """
    return problem.datafit.strong_convexity(problem)


def diversity(G, q):
    r"""Gradient diversity :math:`\sum_j q_j\|g_j\|^2/\|\sum_j q_j g_j\|^2` of the rows of G.

    Single-point (Definition 1) when the rows are gradients at one x, multi-point (what the
    proofs use) when row j is client j's gradient at its own iterate. 1 when the numerator is
    0, +inf when only the denominator is.

    Parameters
    ----------
    G : ndarray of shape (n, d)
        The gradients, one per row.
    q : ndarray of shape (n,)
        The weights.

    Returns
    -------
    float
        The diversity (1 where the numerator is 0, inf where only the denominator is).
    """
    G = np.asarray(G, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    num = float(q @ np.sum(G * G, axis=1))
    gbar = q @ G
    den = float(gbar @ gbar)
    if num == 0:
        return 1.0
    return math.inf if den == 0 else num / den


def quadratic_diversity_sup(hessians, q):
    r""":math:`\sup_x \Lambda(x, q) = \lambda_{\max}(\bar A^{-1} M \bar A^{-1})` for clients
    :math:`\nabla f_j(x) = A_j (x - x^*)` sharing the minimiser :math:`x^*` (docs/papers/localdescent.md, §3.1),
    with :math:`\bar A = \sum_j q_j A_j` and :math:`M = \sum_j q_j A_j^2`.

    Parameters
    ----------
    hessians : ndarray of shape (n, d, d)
        A_j.
    q : ndarray of shape (n,)
        The weights.

    Returns
    -------
    float
        The supremum.

    Examples
    --------
    >>> import numpy as np
    >>> quadratic_diversity_sup(np.array([np.eye(2), np.eye(2)]), np.array([0.5, 0.5]))   # identical clients
    1.0
    """
    Hs = np.asarray(hessians, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    top = float(np.abs(Hs).max(initial=0.0))
    if top > 0:
        Hs = Hs / top                                # Lambda is scale-invariant; M would overflow at 1e154
    Ab = np.einsum("j,jab->ab", q, Hs)
    M = np.einsum("j,jab,jbc->ac", q, Hs, Hs)
    # A singular Abar (zero or duplicated features): on its null space every A_j vanishes too
    # (PSD clients), so Lambda(x) depends only on the part of x - x* in the range of Abar; the sup
    # is taken there. Abar = 0: every gradient is 0 everywhere, and Lambda = 1 by convention.
    lam, V = np.linalg.eigh(0.5 * (Ab + Ab.T))
    keep = lam > (lam.size + 1) * np.finfo(float).eps * max(float(np.abs(lam).max(initial=0.0)), np.finfo(float).tiny)
    if not keep.any():
        return 1.0
    Vr = V[:, keep] / lam[keep]                      # Abar^+ restricted to its range
    return float(np.linalg.eigvalsh(Vr.T @ M @ Vr)[-1])


# ----------------------------------------------- FedDeper's Assumptions 1-3 from the data --
def quadratic_BG(problem):
    r"""(:math:`B^2_{\min}`, :math:`G^2(B^2)`, equal Hessians) for quadratic clients (docs/papers/feddeper.md, §4.7).

    :math:`B^2_{\min} = \max(1, \lambda_{\max}(\bar A^{-1}M\bar A^{-1}))` and
    :math:`G^2(B) = \max_x [\frac1n\sum_i\|A_ix - b_i\|^2 - B^2\|\bar Ax - \bar b\|^2]`, finite only
    for :math:`B^2 > B^2_{\min}` when the Hessians differ (+inf at and below it); with equal Hessians
    B = 1 and :math:`G^2 = \frac1n\sum_i\|b_i - \bar b\|^2`.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    tuple
        ``(B^2_min, G^2 as a function of B^2, equal Hessians)``.

    Examples
    --------
    >>> import problems
    >>> B2, G2, equal = quadratic_BG(problems.quadratic(5, 3, heterogeneity=2.0, seed=1))
    >>> equal, B2, round(G2(1.0), 10)
    (True, 1.0, 2.0)
    """
    n, d = problem.n_clients, problem.dim
    As = np.array([problem.client_hessian(i, np.zeros(d)) for i in range(n)])
    bs = np.array([-problem.client_grad(i, np.zeros(d)) for i in range(n)])      # grad f_i(x) = A_i x - b_i
    Ab, bb = As.mean(0), bs.mean(0)
    M = np.einsum("iab,ibc->ac", As, As) / n
    Ai = np.linalg.inv(Ab)
    equal = all(np.array_equal(As[0], a) for a in As[1:])
    B2min = 1.0 if equal else max(1.0, float(np.linalg.eigvalsh(Ai @ M @ Ai)[-1]))

    c0 = float(np.mean(np.sum(bs * bs, axis=1)))
    Mb = np.einsum("iab,ib->a", As, bs) / n
    scale = float(np.linalg.norm(M, 2))

    def G2(B2):
        r"""sup_x of the concave quadratic x^T H x - 2 r^T x + c (H = M - B^2 Abar^2): c + r^T (-H)^{-1} r,
        by an eigendecomposition of -H; +inf when -H is singular to working precision (at
        B^2 = B^2_min the supremum is infinite unless r is orthogonal to the null space)."""
        if equal:           # equal Hessians: (1/n) sum ||grad f_i||^2 = ||grad f||^2 + mean ||b_i - bbar||^2
            return float(np.mean(np.sum((bs - bb) ** 2, axis=1)))
        negH = B2 * Ab @ Ab - M
        negH = 0.5 * (negH + negH.T)
        lam, V = np.linalg.eigh(negH)
        if lam[0] <= 1e-9 * scale:
            return math.inf
        r = Mb - B2 * Ab @ bb
        w = V.T @ r
        return float(c0 - B2 * float(bb @ bb) + np.sum(w * w / lam))
    return B2min, G2, equal


@per_problem
def feddeper_assumptions(problem, batch_size=None):
    r"""(:math:`\beta`, :math:`\sigma^2`, :math:`B^2_{\min}`, :math:`G^2(\cdot)`, notes) of
    FedDeper's Assumptions 1-3 (docs/papers/feddeper.md, §4.7), read off the data
    (:func:`fedtheory.theory.feddeper.problem_constants`, the theorems' name for it).

    Explicit quadratics (a constant Hessian without samples): exact B and G(B),
    :math:`\sigma^2 = d s^2` (the problem's noise s). Datafits with bounded slopes (logistic
    regression): B = 1 (the ridge cancels), :math:`G^2 \le \frac1n\sum_i R_i^2` and the minibatch
    variance are upper bounds. Anything else raises ValueError naming the missing capability.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    batch_size : int, optional
        The minibatch size (None: exact gradients).

    Returns
    -------
    tuple
        ``(beta, sigma^2, B^2_min, G^2(.), notes)``.

    Examples
    --------
    >>> import problems
    >>> beta, s2, B2, G2, notes = feddeper_assumptions(problems.quadratic(5, 3, noise=0.1, seed=1))
    >>> round(beta, 12), round(s2, 12), B2
    (1.0, 0.03, 1.0)
    """
    n, d = problem.n_clients, problem.dim
    beta = float(np.max(client_smoothness(problem)))
    fit = problem.datafit
    if fit.constant_hessian and not fit.has_samples:        # explicit quadratics
        if batch_size is not None:
            raise ValueError("quadratic problems have no samples; use their noise (batch_size=None).")
        B2min, G2, _ = quadratic_BG(problem)
        return beta, d * problem.noise ** 2, B2min, G2, ["quadratic: B and G(B) exact, sigma^2 = d noise^2"]
    if fit.slope_bound is None:
        raise ValueError(f"Assumption 3 with finite B, G is computed for explicit quadratics and datafits with "
                         f"bounded slopes (logistic regression); the datafit {fit.name!r} declares no 'slope_bound'.")
    s = float(fit.slope_bound)
    R, var = [], []
    for i in range(n):
        A = problem.client_data(i)[0]
        nrm = np.sqrt(np.asarray(A.multiply(A).sum(axis=1)).ravel() if problem.sparse else np.sum(A * A, axis=1))
        R.append(s * nrm.mean())                    # ||grad phi_i|| <= slope bound * mean row norm
        if batch_size is not None:
            m = A.shape[0]
            var.append(s * s * np.mean(nrm ** 2) / batch_size * ((m - batch_size) / (m - 1) if m > 1 else 1.0))
    G2u = float(np.mean(np.square(R)))
    return beta, (max(var) if var else 0.0) + d * problem.noise ** 2, 1.0, (lambda B2: G2u), \
        [f"{fit.name}: B = 1 (the ridge cancels), G^2 <= mean R_i^2 with R_i = {s:g} x the mean row norm "
         "(an upper bound), sigma^2 a bound"]
