r"""Certified ground truth: a first stage (QR, closed form or CVXPY), then a high-precision polish.

The stages are chosen from the components' capabilities (:mod:`fedtheory.components`), never from
which datafit or regularizer a problem has. The optimum of :math:`F = \sum_i w_i f_i + h` is first
computed by QR (a ``squared_residual`` datafit without h), one linear solve (a ``constant_hessian``
without h) or CVXPY on the components' own forms (:meth:`Datafit.cvxpy_objective`,
:meth:`Regularizer.cvxpy_objective`; a component without one skips this stage, ``info["cvxpy_status"]``
says so, and the polish starts from zeros), then polished:

* smooth problems: damped Newton with Armijo backtracking until the gradient stops
  decreasing (typically :math:`\|\nabla F\| \approx 10^{-14}`);
* a ``sign_support`` regularizer (the l1 norm): active-set Newton on the support with fixed signs,
  with the KKT conditions :math:`|\nabla_j F_{smooth}| \le \ell_1` checked off the support and
  violators added back;
* any other regularizer with a ``closed_form_prox`` (group lasso, nuclear norm, a user's): accelerated
  proximal gradient with adaptive restart from the first stage's point, until the gradient-mapping
  norm stops decreasing.

The *residual* is the norm of the gradient mapping
:math:`\|x - \mathrm{prox}_{h/L}(x - \nabla F(x)/L)\| L` (the gradient norm when h = 0).
Every client's own optimum :math:`f_i^* = \min_x f_i(x) + h(x)` is computed the same way
(FedSPS and the heterogeneity measures need it). Results are cached on disk under
``<cache>/ground_truth/<sha256 of the data>-<version>.npz``.

The cache never returns a wrong entry silently: an entry records the problem's hash and a
SHA-256 of its arrays, and on load it must match both, have the problem's shapes, a finite F*
equal to F(x*) and a gradient-mapping norm at x* that agrees with the stored residual. Anything
else (truncated, corrupt, foreign or edited entries) is recomputed with a warning. Entries are
written to a temporary file with a name unique to the writer and renamed atomically, so
concurrent solves of one problem all succeed.

This module runs the stages and certifies the result; the parts live beside it:
:mod:`~fedtheory.truth.record` (:class:`GroundTruth`), :mod:`~fedtheory.truth.solvers` (CVXPY, Newton,
active set, FISTA), :mod:`~fedtheory.truth.exact` (exact least squares and flat directions),
:mod:`~fedtheory.truth.certificate` (the brackets on F*), :mod:`~fedtheory.truth.store` (the cache)
and :mod:`~fedtheory.truth.numerics` (shared helpers).
"""
from __future__ import annotations

import os
import time
import warnings

import numpy as np

from . import certificate as _cert
from ..constants import smoothness, strong_convexity
from ..exceptions import DataError, InvalidParameterError, UncertifiedOptimumError, UncertifiedOptimumWarning
from ..problem import FederatedProblem
from .certificate import describe
from .exact import _QR_MAX_ENTRIES, _flat_descent, _ls_solve
from .numerics import _client_problem, _local_L, _norm, _residual
from .record import GroundTruth
from .solvers import _active_set_lasso, _cvxpy_solve, _fista_polish, _newton_smooth
from .store import _cache_path, _load, _save
from .._argcheck import check_param, Interval, Options
from .._progress import bar, bar as progress_bar, enabled
from ..components.base import MarginDatafit


def ground_truth(problem, cache=True, cache_dir=None, solver="CLARABEL", clients=True, progress=None,
                 n_jobs=None, certify="raise", tol=1e-9):
    """Compute (or load from the disk cache) the certified optimum of ``problem``.

    Parameters
    ----------
    problem : FederatedProblem
        The problem to solve.
    cache : bool, default True
        Read and write the on-disk cache (keyed by a hash of the problem data).
    cache_dir : str or Path, optional
        Cache directory (default ``<fedtheory cache>/ground_truth``).
    solver : str, default "CLARABEL"
        CVXPY solver of the first stage.
    clients : bool, default True
        Also compute every client's own optimum f_i*: warm-started at x*, one BLAS thread per
        solve, in parallel processes when there are many clients.
    progress : bool, optional
        Progress bars on stderr: the stages (global optimum, client optima) and the client
        solves. None: shown for large problems (100 clients or more, or 10^7 data entries) when
        stderr is a terminal; never with ``FEDTHEORY_QUIET=1`` or ``fedtheory --quiet``.
    n_jobs : int, optional
        Processes for the client solves (None: every core when n >= 64, else 1).
    certify : {"raise", "warn"}, default "raise"
        What to do when F* (or a client's f_i*) cannot be certified to ``tol`` (the rules are
        in :mod:`fedtheory.truth.certificate`): "raise" raises
        :class:`~fedtheory.exceptions.UncertifiedOptimumError`, naming the problem class, the
        residual and the reason; "warn" returns the result marked ``certified=False`` with an
        :class:`~fedtheory.exceptions.UncertifiedOptimumWarning` (runs measured against it show
        suboptimality as NaN). Uncertified results are never cached.
    tol : float, default 1e-9
        Relative accuracy to certify: the bracket ``f_upper - f_lower`` (where a lower bound is
        known) and the rounding error of F in double precision must be ``<= tol max(1, |F*|)``.

    Returns
    -------
    GroundTruth
        With ``certified``, the bracket ``f_lower <= F* <= f_upper``, ``rel_residual`` and
        ``f_eval_error`` stating its accuracy.

    Raises
    ------
    UncertifiedOptimumError
        With ``certify="raise"``, when the optimum is not certified to ``tol``.

    Examples
    --------
    >>> import problems, validation
    >>> p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
    >>> gt = validation.ground_truth(p, cache=False)
    >>> bool(abs(gt.f - p.info["f_star"]) < 1e-14), bool(gt.residual < 1e-12)
    (True, True)
    """
    if not isinstance(problem, FederatedProblem):
        raise TypeError(f"ground_truth expects a FederatedProblem, got {type(problem).__name__}.")
    check_param("certify", certify, [Options("raise", "warn")], "ground_truth")
    if not isinstance(solver, str):
        raise InvalidParameterError(f"The 'solver' parameter of ground_truth must be a str, the name of a CVXPY "
                                    f"solver (default 'CLARABEL'). Got {solver!r} instead.")
    check_param("tol", tol, [Interval(float, 0, 1, "neither")], "ground_truth")
    path = _cache_path(problem, cache_dir)
    if cache and path.is_file():
        gt = _load(path, problem)
        # an entry written with clients=False serves only calls that do not need the client optima;
        # only certified entries are written, to the tolerance they record
        if gt is not None and (not clients or gt.info.get("clients_computed", False)) and gt.tol <= tol:
            gt.info["cached"] = True
            gt.problem_hash = problem.data_hash()
            return gt
    big = problem.n_clients >= 100 or float(problem.client_sizes.sum()) * problem.dim >= 1e7
    show = enabled(progress) if progress is not None else (big and enabled())
    stages = bar(show, total=2 if clients else 1, desc=f"ground truth of {problem.name}", unit="stage")
    try:
        gt = _certify(problem, solver, clients, show, n_jobs, stages, tol)
    finally:
        stages.close()
    gt.info["cached"] = False
    gt.problem_hash = problem.data_hash()
    if not gt.certified:
        msg = (f"ground_truth: the optimum of {describe(problem)} is not certified to tol={tol:g}: "
               f"{gt.reason} (residual {gt.residual:.3g}, relative residual {gt.rel_residual:.3g}, "
               f"F(x_hat) = {gt.f:.17g}).")
        if certify == "raise":
            raise UncertifiedOptimumError(msg + " Pass certify='warn' to get the result marked "
                                          "certified=False.")
        warnings.warn(msg + " The result is marked certified=False; suboptimality measured against it "
                      "is NaN.", UncertifiedOptimumWarning, stacklevel=2)
        return gt
    if cache:
        _save(path, problem, gt)
    return gt


def _certify(problem, solver, clients, progress, n_jobs, stages, tol=1e-9):
    """The global optimum (stage 1) and each client's (stage 2) of :func:`ground_truth`, with
    their certificates (:mod:`fedtheory.truth.certificate`).

    When the client optima will be solved in worker processes, the workers are started (and
    import fedtheory, about half a second each) in a background thread while this process solves
    the global optimum, so that stage 2 finds them ready."""
    t0 = time.perf_counter()
    stages.set_postfix_str("global optimum", refresh=True)
    jobs = _n_jobs(problem.n_clients, n_jobs) if clients else 1
    warm = None
    if jobs > 1:
        import threading
        warm = threading.Thread(target=_start_workers, args=(jobs,), daemon=True)
        warm.start()
    try:
        x, info = _solve(problem, solver, use_cvxpy=True, tol=tol)
    finally:
        if warm is not None:
            warm.join()
    stages.update(1)
    if x is None:
        if problem.is_composite:
            raise ValueError(f"ground_truth: problem {problem.name!r} may have no minimiser: its datafit alone "
                             "decreases for ever along a direction (separable data, l2 = 0) and its regularizer "
                             f"{problem.regularizer.name!r} is not coercive (it can leave that direction "
                             "unpenalised); whether F attains its infimum is not decided. Use l2 > 0.")
        why = ("its data are linearly separable and l2 = 0, so F approaches its infimum 0 only as ||x|| -> inf"
               if info.get("infimum") == 0.0 else "its data are quasi-separable (along a direction every margin "
               "t_r a_r^T x grows or stays, some grow) and l2 = 0, so F decreases for ever along it and never "
               "attains its infimum")
        raise ValueError(f"ground_truth: problem {problem.name!r} has no minimiser: {why}. Use l2 > 0, or "
                         "validation.infimum(problem) for its certified infimum (docs/ground-truth.md).")
    info["time_global"] = time.perf_counter() - t0
    n, d = problem.n_clients, problem.dim
    cf, cx = np.full(n, np.nan), np.full((n, d), np.nan)
    cres, catt = np.full(n, np.nan), np.zeros(n, dtype=bool)
    ccert = np.ones(n, dtype=bool)
    reason = info["reason"]
    if clients:
        stages.set_postfix_str("client optima", refresh=True)
        t1 = time.perf_counter()
        bad = []
        for i, (fi, xi, ri, ai, ok, why) in enumerate(_client_optima(problem, x, solver, progress, n_jobs, tol)):
            cf[i], cres[i], catt[i], ccert[i] = fi, ri, ai, ok
            if ai:
                cx[i] = xi
            if not ok:
                bad.append((i, why))
        info["time_clients"] = time.perf_counter() - t1
        if not catt.all():
            warnings.warn(f"ground_truth: the optimum of client(s) {np.flatnonzero(~catt)[:10].tolist()} "
                          "is not attained ((quasi-)separable logistic data with l2=0); client_f holds the "
                          "infimum where it is known exactly (0 under complete separation; NaN, not certified, "
                          "otherwise) and client_x NaN.", RuntimeWarning, stacklevel=3)
        if bad:
            i, why = bad[0]
            more = f" (and {len(bad) - 1} more client(s))" if len(bad) > 1 else ""
            reason = "; ".join(r for r in (reason, f"client {i}'s optimum f_i*: {why}{more}") if r)
        stages.update(1)
    info["clients_computed"] = bool(clients)
    return GroundTruth(x=x, f=info.pop("f"), residual=info["residual"], client_f=cf, client_x=cx,
                       client_residual=cres, client_attained=catt, info=info,
                       certified=bool(info["certified"] and ccert.all()), f_lower=info["f_lower"],
                       f_upper=info["f_upper"], rel_residual=info["rel_residual"],
                       f_eval_error=info["f_eval_error"], tol=tol, reason=reason, client_certified=ccert)


def _solve_clients(subs, solver, use_cvxpy, start, tol=1e-9):
    """(f_i*, x_i, residual, attained, certified, reason) of each client sub-problem, one BLAS
    thread (small dense solves: more threads only contend)."""
    from threadpoolctl import threadpool_limits
    out = []
    with threadpool_limits(1):
        for sub in subs:
            xi, inf_i = _solve(sub, solver, use_cvxpy=use_cvxpy, start=start, tol=tol)
            if xi is None:          # infimum not attained ((quasi-)separable logistic data)
                inf = inf_i.get("infimum")
                out.append((np.nan, None, inf_i["residual"], False, False, inf_i["note"] + " (nor "
                            "computed)") if inf is None else (inf, None, inf_i["residual"], False, True, ""))
            else:
                out.append((inf_i["f"], xi, inf_i["residual"], inf_i["attained"], inf_i["certified"],
                            inf_i["reason"]))
    return out


def _n_jobs(n_clients, n_jobs=None):
    """Worker processes for the client optima: ``n_jobs``, else every core from 64 clients on."""
    if n_jobs is not None:
        return n_jobs
    return (os.cpu_count() or 1) if n_clients >= 64 else 1


def _ready():
    """Nothing: a worker that runs it has imported this module (and fedtheory)."""


def _start_workers(n_jobs):
    """Start the loky workers that :func:`_client_optima` will use (joblib reuses them)."""
    try:
        from joblib import Parallel, delayed
        Parallel(n_jobs=n_jobs, backend="loky")(delayed(_ready)() for _ in range(n_jobs))
    except Exception:               # only a warm-up: stage 2 starts the workers itself
        pass


def _client_optima(problem, x, solver, progress=None, n_jobs=None, tol=1e-9):
    """Every client's optimum (see :func:`_solve_clients`), in chunks over processes, with a bar."""
    n = problem.n_clients
    n_jobs = _n_jobs(n, n_jobs)
    show = bool(progress) if progress is not None else (n >= 100 and enabled())
    chunk = max(1, min(64, -(-n // (4 * n_jobs))))
    starts = list(range(0, n, chunk))
    bar = progress_bar(show, total=n, desc="ground truth: client optima", leave=False)
    results = []
    try:
        if n_jobs > 1 and len(starts) > 1:
            from joblib import Parallel, delayed
            par = Parallel(n_jobs=n_jobs, backend="loky", return_as="generator")
            jobs = (delayed(_solve_clients)([_client_problem(problem, i) for i in range(a, min(a + chunk, n))],
                                            solver, problem.is_composite, x, tol) for a in starts)
            for res in par(jobs):
                results += res
                bar.update(len(res))
        else:
            for a in starts:
                res = _solve_clients([_client_problem(problem, i) for i in range(a, min(a + chunk, n))],
                                     solver, problem.is_composite, x, tol)
                results += res
                bar.update(len(res))
    finally:
        bar.close()
    return results


def _bracket(problem, x, L, ls=None):
    """(f, f_lower, f_upper) at x: f = F(x) (extended-precision residuals for least squares and
    lasso, where f = f_upper; otherwise in double precision, and the bracket is widened by the
    bound on its rounding error), f_lower a lower bound on F* (NaN when none is known)."""
    eps = np.finfo(float).eps
    with np.errstate(all="ignore"):
        if ls is not None:                                      # least squares: exact gap from QR
            A, b, Q, C, keep = ls[:5]
            f, gap = _cert.ls_gap(A, b, Q, x[keep])
            return f + C, f + C - gap, f + C
        if problem.datafit.squared_residual and problem.is_composite and problem.regularizer.sign_support \
                and problem.M.shape[0] * problem.dim <= _QR_MAX_ENTRIES:
            A, b = _cert.weighted_system(problem)               # lasso: duality gap
            primal, dual = _cert.lasso_dual(A, b, x, problem.l1)
            if problem.l2 > 0:       # and strong convexity (mu >= l2) at the min-norm subgradient: the better
                r = _cert.residual_ld(A, b, x)                  # residual and gradient in extended precision
                g = -np.asarray(A.T.astype(np.longdouble) @ r, dtype=np.float64)
                sub = np.where(x != 0, g + problem.l1 * np.sign(x), g - np.clip(g, -problem.l1, problem.l1))
                k = A.shape[1] + 2
                e = k * _cert._EPS_LD * (np.abs(A) @ np.abs(x) + np.abs(b))     # margin rounding (longdouble)
                err = _norm(np.abs(A).T @ e) + k * _cert._EPS_LD * _norm(np.abs(A).T @ np.abs(np.asarray(r, float)))
                dual = max(dual, primal - np.float64(_norm(sub) + err) ** 2 / (2 * problem.l2))
            return primal, min(dual, primal), primal
        f = float(problem.value(x))
        fe = _cert.eval_error(problem, x)                       # F(x) in double: the bracket widens by it
        mu = strong_convexity(problem)
        if problem.is_composite:                                # a strongly convex h adds its modulus
            mu += problem.regularizer.weight * float(getattr(problem.regularizer, "convexity_modulus", 0.0) or 0.0)
        if problem.datafit.constant_hessian:                    # eigvalsh's error: d eps ||H||
            mu -= (problem.dim + 2) * eps * L
        if not (mu > 0 and np.isfinite(mu)):
            return f, np.nan, f + fe
        g = problem.grad(x)
        if problem.is_composite:                                # s in dF(x+), x+ the prox-gradient point
            xp = problem.prox(x - g / L, 1.0 / L)
            s = L * (x - xp) + problem.grad(xp) - g
            fp = float(problem.value(xp))
        else:
            s, fp = g, f
        err = 0.0
        if _cert.is_margin_model(problem):                      # rounding of the gradient's margins
            e = _cert.margin_error(problem, x)
            z = np.asarray(problem.M @ x).ravel()
            c = _cert.curvature_near(problem, z, e)
            wt = problem._row_w * (c * e + (problem.M.shape[0] + 2) * eps * np.abs(problem.datafit.dloss(z, problem.b)))
            err = float(_norm(np.asarray(abs(problem.M).T @ wt).ravel()))
            err *= 2 if problem.is_composite else 1
        lower = min(fp, f) - fe - np.float64(_norm(s) + err) ** 2 / (2 * mu)
    return f, (lower if np.isfinite(lower) else np.nan), f + fe


def _solve(problem, solver, use_cvxpy=True, start=None, tol=1e-9):
    """The optimum of ``problem`` and its certificate: ``info`` holds f, f_lower, f_upper,
    residual, rel_residual, f_eval_error, certified and reason (see :mod:`.certificate`)."""
    fit, reg = problem.datafit, problem.regularizer
    info = {"solver": solver}
    with np.errstate(over="ignore", invalid="ignore"):      # data of size 1e160: H overflows (checked below)
        try:
            L = smoothness(problem)
        except DataError as e:       # no curvature capability: no certified L (see _local_L)
            L = None
            info["L"] = str(e)
        except (ValueError, np.linalg.LinAlgError):          # eigvalsh of a matrix with inf entries
            L = np.inf
    if L == 0 and problem.is_composite:
        # no curvature (all-zero rows, no ridge): the smooth part is constant, and any step is valid
        # for the proximal polish and its gradient-mapping residual (1/L divided by zero)
        L = 1.0
        info["L"] = "the smooth part has no curvature (L = 0): the proximal polish uses L = 1"
    if L is None and problem.is_composite:
        return np.zeros(problem.dim), dict(info, f=np.nan, f_lower=np.nan, f_upper=np.nan, residual=np.nan,
                                           rel_residual=np.nan, f_eval_error=np.inf, attained=True,
                                           certified=False,
                                           reason=f"{info['L']} (the proximal polish and its residual need L)")
    # the stages, from the components' capabilities (never from which datafit it is)
    ls_direct = (fit.squared_residual and not problem.is_composite
                 and problem.M.shape[0] * problem.dim <= _QR_MAX_ENTRIES)
    closed_form = fit.constant_hessian and not problem.is_composite and not ls_direct
    if L is not None and not np.isfinite(L) and not ls_direct:
        # the Hessian overflows in double precision: nothing below can be trusted (the QR solve of
        # least squares does not form it)
        return np.zeros(problem.dim), dict(info, f=np.nan, f_lower=np.nan, f_upper=np.nan, residual=np.nan,
                                           rel_residual=np.nan, f_eval_error=np.inf, attained=True,
                                           certified=False,
                                           reason=f"the smoothness constant L = {L} overflows in double "
                                                  "precision; rescale the data")
    if problem.is_composite and not problem.regularizer.coercive() and not fit.infimum_attained(problem):
        # f alone decreases for ever along a direction of recession, which h may leave unpenalised
        # (a group without penalty): whether F attains its infimum is not decided here
        info.update(stage1="separability LP", residual=np.nan, attained=False, infimum=None,
                    note="the datafit has no minimiser and the regularizer is not coercive")
        return None, info
    if not problem.is_composite and not fit.infimum_attained(problem):
        # e.g. separable logistic data without ridge: the infimum 0 is approached along a separating
        # direction and never attained
        inf = fit.infimum(problem)
        info.update(stage1="separability LP", residual=0.0, attained=False, infimum=inf,
                    note="linearly separable data and l2 = 0: inf F = 0 is not attained" if inf == 0.0 else
                    "quasi-separable data (every margin >= 0 along a direction, some > 0) and l2 = 0: the "
                    "infimum is not attained")
        return None, info
    x, ls = None, None
    if ls_direct:
        x, ls = _ls_solve(problem)
        info["stage1"] = "QR (rows sorted, columns pivoted) + refinement"
    elif closed_form:                       # constant Hessian: one linear solve
        try:
            x = np.linalg.solve(problem.hessian(np.zeros(problem.dim)), -problem.grad(np.zeros(problem.dim)))
        except np.linalg.LinAlgError:       # singular Hessian: the Newton polish from 0 (lstsq steps)
            x = None
        info["stage1"] = "closed form"
    elif use_cvxpy and not (fit.has_cvxpy() and reg.has_cvxpy()):
        missing = [c.name for c in (fit, reg) if not c.has_cvxpy()]
        info["cvxpy_status"] = (f"skipped: no CVXPY form for {', '.join(map(repr, missing))}; the polish "
                                f"starts from {'zeros' if start is None else 'the given start point'}")
    elif use_cvxpy:
        t0 = time.perf_counter()
        try:
            x, status, val = _cvxpy_solve(problem, solver)
            info.update(cvxpy_status=status, cvxpy_value=float(val) if val is not None else None)
        except InvalidParameterError:
            raise
        except Exception as e:  # solver failure: fall back to the polish from a start point
            info["cvxpy_status"] = f"failed: {type(e).__name__}: {e}"
        info["time_cvxpy"] = time.perf_counter() - t0
        info["stage1"] = "cvxpy"
    if x is None or not np.all(np.isfinite(x)):
        x = np.zeros(problem.dim) if start is None else np.array(start, dtype=np.float64)
        info.setdefault("stage1", "start point")
    if ls is not None:
        info.update(polish="iterative refinement (extended-precision residuals)")
    elif problem.is_composite and reg.sign_support:
        x, iters, ok = _active_set_lasso(problem, x, L)
        info.update(polish="active-set Newton", polish_iterations=iters, kkt_verified=bool(ok))
    elif problem.is_composite and not reg.closed_form_prox:
        return x, dict(info, f=np.nan, f_lower=np.nan, f_upper=np.nan, residual=np.nan, rel_residual=np.nan,
                       f_eval_error=np.inf, attained=True, certified=False,
                       reason=f"the regularizer {reg.name!r} declares no exact prox (closed_form_prox=False): "
                              "the proximal polish cannot certify its optimum")
    elif problem.is_composite:
        x, iters = _fista_polish(problem, x, L)
        info.update(polish="FISTA (adaptive restart)", polish_iterations=iters)
    else:
        x, iters = _newton_smooth(problem, x)
        info.update(polish="Newton", polish_iterations=iters)
    zero = np.zeros(problem.dim)
    if L is None:                   # smooth: the residual is the gradient norm, L only scales the polish
        L = _local_L(problem, x)
        info["L"] += f"; the polish used lambda_max of the Hessian at x* ({L:.6g}) as its scale"
    with np.errstate(all="ignore"):
        info["residual"] = _residual(problem, x, L)
        r0 = _residual(problem, zero, L)
        f0 = float(problem.value(zero))
    info["rel_residual"] = info["residual"] / r0 if r0 > 0 else (0.0 if info["residual"] == 0 else np.inf)
    info["attained"] = True            # a minimiser exists (the separable case returned above)
    f, f_lower, f_upper = _bracket(problem, x, L, ls)
    f_err = _cert.eval_error(problem, x)
    kkt = info["rel_residual"]
    if _cert.is_margin_model(problem) and kkt > _cert.KKT_RTOL:
        # where the gradient's terms cancel at 0 (x* = 0 exactly: r0 is their rounding), the residual
        # is measured against the size of those terms instead
        with np.errstate(all="ignore"):
            terms = _cert.gradient_terms(problem, zero)
        if terms > 0:
            kkt = min(kkt, info["residual"] / terms)
    ok, why = _cert.verdict(f, f0, f_lower, f_upper, kkt, f_err, tol)
    if ok and not np.isfinite(f_lower):
        # a small residual is no bound on F - F* where the Hessian is nearly singular: search the
        # weakly curved directions for a point with a lower F
        drop, where = _flat_descent(problem, x, f)
        if drop > tol * max(1.0, abs(f)) + 2 * f_err:
            ok, why = False, (f"the relative KKT residual is {info['rel_residual']:.3g}, but F decreases by "
                              f"{drop:.3g} along a direction where the Hessian at x_hat is nearly singular "
                              f"(lambda = {where[0]:.3g}, lambda_max = {where[1]:.3g}; at a step of "
                              f"{where[2]:.3g}): the minimiser lies far along it or is not attained "
                              "(nearly collinear columns, nearly separable data?), and no lower bound on F* "
                              "is known")
    if not ok and ls is not None and ls[5] is not None and np.isfinite(f):
        # the solution of the largest numerical rank: is F even computable near it?
        e_rank = _cert.eval_error(problem, ls[5])
        if e_rank > tol * max(1.0, abs(f)):
            why = (f"F cannot be evaluated in double precision to the tolerance near the least-squares "
                   f"solution (its rounding error there is up to {e_rank:.3g}); {why}"
                   + ("" if why.endswith("rescale the data") else "; rescale the data"))
    if not ok and "L" in info and not np.isfinite(f_err):
        why = (f"the datafit {fit.name!r} declares no 'curvature_bound', so the rounding error of F near x* "
               "cannot be bounded (nor L certified); set 'curvature_bound' on its class"
               if isinstance(fit, MarginDatafit) else
               f"the datafit {fit.name!r} is neither a margin datafit (MarginDatafit, with a 'curvature_bound') "
               "nor one with a constant Hessian, so nothing bounds the rounding error of F near x*")
    info.update(f=f, f_lower=f_lower, f_upper=f_upper, f_eval_error=f_err, certified=ok, reason=why,
                certificate=("QR residual" if ls is not None else "duality gap" if fit.squared_residual
                             and reg.sign_support and problem.is_composite and np.isfinite(f_lower)
                             else "strong convexity" if np.isfinite(f_lower) else "KKT residual"))
    return x, info


__all__ = ["GroundTruth", "ground_truth"]
