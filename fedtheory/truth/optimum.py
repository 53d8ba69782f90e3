r"""Certified ground truth: CVXPY (Clarabel), then a high-precision polish.

The optimum of :math:`F = \sum_i w_i f_i + h` is first computed with CVXPY, then polished:

* smooth problems: damped Newton with Armijo backtracking until the gradient stops
  decreasing (typically :math:`\|\nabla F\| \approx 10^{-14}`);
* lasso: active-set Newton on the support with fixed signs, with the KKT conditions
  :math:`|\nabla_j F_{smooth}| \le \ell_1` checked off the support and violators added back;
* group lasso and nuclear norm: accelerated proximal gradient with adaptive restart from the
  CVXPY point, until the gradient-mapping norm stops decreasing.

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
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from .._kernels.oracles import KIND_LEAST_SQUARES, KIND_LOGISTIC, KIND_QUADRATIC
from ..constants import smoothness
from ..problem import FederatedProblem

_VERSION = "gt-v3"   # v3: entries carry the problem hash and a checksum of their arrays
_ARRAYS = ("x", "f", "residual", "client_f", "client_x", "client_residual", "client_attained")


@dataclass
class GroundTruth:
    """Optimum of a federated problem.

    Attributes
    ----------
    x : ndarray (d,)
        The minimiser x*.
    f : float
        F* = F(x*).
    residual : float
        Norm of the gradient mapping at x* (about 1e-13 after the polish).
    client_f : ndarray (n,)
        Each client's own optimal value f_i* = inf_x f_i(x) + h(x).
    client_x : ndarray (n, d)
        Each client's minimiser (NaN rows where the infimum is not attained).
    client_residual : ndarray (n,)
        Gradient-mapping norm at each client minimiser.
    client_attained : ndarray of bool (n,)
        False where the client's infimum is not attained: separable logistic data without
        ridge (certified by an LP), where client_f is the exact infimum 0.
    info : dict
        Solver statistics: CVXPY status and value, polish iterations, timings.
    """

    x: np.ndarray
    f: float
    residual: float
    client_f: np.ndarray
    client_x: np.ndarray
    client_residual: np.ndarray
    client_attained: np.ndarray
    info: dict = field(default_factory=dict)

    def __repr__(self):
        """One line: F*, the residual, the dimension and what was certified."""
        n = np.shape(self.client_f)[0]
        clients = (f"{int(np.sum(self.client_attained))}/{n} client optima attained"
                   if self.info.get("clients_computed", True) else "client optima not computed")
        return (f"GroundTruth(f={self.f:.17g}, residual={self.residual:.2e}, d={np.shape(self.x)[0]}, "
                f"n_clients={n}, {clients}{', cached' if self.info.get('cached') else ''})")

    def summary(self):
        """Every detail as text: x*, F*, the client optima and the solver's statistics."""
        x = np.asarray(self.x)
        lines = [f"F* = {self.f:.17g}", f"residual (gradient-mapping norm at x*) = {self.residual:.3e}",
                 f"x*: d={x.shape[0]}, ||x*||={np.linalg.norm(x):.6g}, "
                 f"{np.array2string(x, precision=6, threshold=8, edgeitems=3)}"]
        cf = np.asarray(self.client_f)
        if cf.size and np.isfinite(cf).any():
            lines.append(f"client optima f_i*: n={cf.size}, min {np.nanmin(cf):.6g}, max {np.nanmax(cf):.6g}; "
                         f"attained by {int(np.sum(self.client_attained))}; max client residual "
                         f"{np.nanmax(self.client_residual):.3e}")
        else:
            lines.append(f"client optima f_i*: not computed (n={cf.size})")
        lines += [f"info: {k} = {v}" for k, v in self.info.items()]
        return "\n".join(lines)


def _cache_path(problem, cache_dir):
    from problems.datasets import cache_dir as default_dir
    base = Path(cache_dir) if cache_dir is not None else default_dir() / "ground_truth"
    return base / f"{problem.data_hash()}-{_VERSION}.npz"


def ground_truth(problem, cache=True, cache_dir=None, solver="CLARABEL", clients=True, progress=None,
                 n_jobs=None):
    """Compute (or load from the disk cache) the certified optimum of ``problem``.

    Parameters
    ----------
    problem : FederatedProblem
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

    Returns
    -------
    GroundTruth

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
    path = _cache_path(problem, cache_dir)
    if cache and path.is_file():
        gt = _load(path, problem)
        # an entry written with clients=False serves only calls that do not need the client optima
        if gt is not None and (not clients or gt.info.get("clients_computed", False)):
            gt.info["cached"] = True
            return gt
    from .._progress import bar, enabled
    big = problem.n_clients >= 100 or float(problem.client_sizes.sum()) * problem.dim >= 1e7
    show = enabled(progress) if progress is not None else (big and enabled())
    stages = bar(show, total=2 if clients else 1, desc=f"ground truth of {problem.name}", unit="stage")
    try:
        gt = _certify(problem, solver, clients, show, n_jobs, stages)
    finally:
        stages.close()
    if cache:
        _save(path, problem, gt)
    gt.info["cached"] = False
    return gt


def _certify(problem, solver, clients, progress, n_jobs, stages):
    """The global optimum (stage 1) and each client's (stage 2) of :func:`ground_truth`.

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
        x, info = _solve(problem, solver, use_cvxpy=True)
    finally:
        if warm is not None:
            warm.join()
    stages.update(1)
    if x is None:
        raise ValueError(f"ground_truth: problem {problem.name!r} has no minimiser: its data are linearly "
                         "separable and l2 = 0, so F approaches its infimum 0 only as ||x|| -> inf. "
                         "Use l2 > 0.")
    info["time_global"] = time.perf_counter() - t0
    n, d = problem.n_clients, problem.dim
    cf, cx = np.full(n, np.nan), np.full((n, d), np.nan)
    cres, catt = np.full(n, np.nan), np.zeros(n, dtype=bool)
    if clients:
        stages.set_postfix_str("client optima", refresh=True)
        t1 = time.perf_counter()
        for i, (fi, xi, ri, ai) in enumerate(_client_optima(problem, x, solver, progress, n_jobs)):
            cf[i], cres[i], catt[i] = fi, ri, ai
            if ai:
                cx[i] = xi
        info["time_clients"] = time.perf_counter() - t1
        if not catt.all():
            warnings.warn(f"ground_truth: the optimum of client(s) {np.flatnonzero(~catt)[:10].tolist()} "
                          "is not attained (linearly separable logistic data with l2=0); client_f holds "
                          "the infimum 0 and client_x NaN.", RuntimeWarning, stacklevel=3)
        stages.update(1)
    info["clients_computed"] = bool(clients)
    return GroundTruth(x=x, f=problem.value(x), residual=info["residual"], client_f=cf, client_x=cx,
                       client_residual=cres, client_attained=catt, info=info)


def _solve_clients(subs, solver, use_cvxpy, start):
    """(f_i*, x_i, residual, attained) of each client sub-problem, one BLAS thread (small dense
    solves: more threads only contend)."""
    from threadpoolctl import threadpool_limits
    out = []
    with threadpool_limits(1):
        for sub in subs:
            xi, inf_i = _solve(sub, solver, use_cvxpy=use_cvxpy, start=start)
            out.append((sub.value(xi) if xi is not None else 0.0, xi, inf_i["residual"], inf_i["attained"]))
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


def _client_optima(problem, x, solver, progress=None, n_jobs=None):
    """Every client's optimum (see :func:`_solve_clients`), in chunks over processes, with a bar."""
    from .._progress import bar as progress_bar, enabled
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
                                            solver, problem.is_composite, x) for a in starts)
            for res in par(jobs):
                results += res
                bar.update(len(res))
        else:
            for a in starts:
                res = _solve_clients([_client_problem(problem, i) for i in range(a, min(a + chunk, n))],
                                     solver, problem.is_composite, x)
                results += res
                bar.update(len(res))
    finally:
        bar.close()
    return results


def _checksum(arrays):
    h = hashlib.sha256()
    for k in _ARRAYS:
        a = np.ascontiguousarray(arrays[k])
        h.update(k.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(str(arrays["info"]).encode())
    return h.hexdigest()


def _save(path, problem, gt):
    """Write the entry atomically: a temporary file unique to this writer, then a rename."""
    arrays = dict(x=gt.x, f=np.float64(gt.f), residual=np.float64(gt.residual), client_f=gt.client_f,
                  client_x=gt.client_x, client_residual=gt.client_residual, client_attained=gt.client_attained,
                  info=json.dumps(gt.info, default=float))
    arrays["problem_hash"] = problem.data_hash()
    arrays["checksum"] = _checksum(arrays)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex}.tmp.npz")
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except OSError as e:               # a read-only or full cache directory: the result stands
        warnings.warn(f"ground_truth: could not write the cache entry {path} ({e}).", RuntimeWarning,
                      stacklevel=3)
        tmp.unlink(missing_ok=True)


def _load(path, problem):
    """The cached GroundTruth of ``problem`` at ``path``, or None (with a warning) when the entry is
    unreadable, belongs to another problem, fails its checksum or is not the problem's optimum."""
    def reject(why):
        warnings.warn(f"ground_truth: ignoring the cache entry {path} ({why}); recomputing.", RuntimeWarning,
                      stacklevel=3)
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in (*_ARRAYS, "info", "problem_hash", "checksum")}
    except Exception as e:             # truncated, corrupt, not an npz, missing keys, ...
        return reject(f"unreadable: {type(e).__name__}: {e}")
    if str(arrays["problem_hash"]) != problem.data_hash():
        return reject("it was written for another problem")
    if str(arrays["checksum"]) != _checksum({**arrays, "info": str(arrays["info"])}):
        return reject("checksum mismatch")
    n, d = problem.n_clients, problem.dim
    shapes = dict(x=(d,), client_f=(n,), client_x=(n, d), client_residual=(n,), client_attained=(n,))
    bad = [k for k, shp in shapes.items() if arrays[k].shape != shp]
    if bad:
        return reject(f"wrong shapes of {bad}")
    try:
        info = json.loads(str(arrays["info"]))
    except ValueError as e:
        return reject(f"unreadable info: {e}")
    x, f, res = arrays["x"].astype(np.float64), float(arrays["f"]), float(arrays["residual"])
    if not (np.all(np.isfinite(x)) and np.isfinite(f) and np.isfinite(res)):
        return reject("non-finite optimum")
    fx = problem.value(x)
    if abs(fx - f) > 1e-12 * max(1.0, abs(fx)):
        return reject(f"F(x*) = {fx!r} differs from the stored F* = {f!r}")
    L = smoothness(problem)
    r = _residual(problem, x, L)
    if r > max(10.0 * res, 1e-10 * max(1.0, L * (1 + float(np.linalg.norm(x))))):
        return reject(f"the gradient-mapping norm at the stored x* is {r:.3g}, not the stored {res:.3g}")
    return GroundTruth(x=x, f=f, residual=res, client_f=arrays["client_f"], client_x=arrays["client_x"],
                       client_residual=arrays["client_residual"], client_attained=arrays["client_attained"],
                       info=info)


def _client_problem(problem, i):
    s, e = problem.client_rows(i)
    M = problem.M[s:e]
    if problem.sparse and (e - s) * problem.dim <= 500_000:
        M = M.toarray()                  # small clients: dense Newton steps are far cheaper
    return FederatedProblem(problem.kind, M, problem.b[s:e], np.array([0, e - s]),
                            l2=problem.l2, l1=problem.l1, name=f"{problem.name}[client {i}]",
                            reg=problem.reg, groups=problem.groups, mat_shape=problem.mat_shape)


def _residual(problem, x, L):
    g = problem.grad(x)
    if not problem.is_composite:
        return float(np.linalg.norm(g))
    return float(np.linalg.norm(x - problem.prox(x - g / L, 1.0 / L)) * L)


def _cvxpy_solve(problem, solver):
    import cvxpy as cp

    d = problem.dim
    x = cp.Variable(d)
    terms = []
    if problem.kind == KIND_QUADRATIC:
        H = problem.hessian(np.zeros(d)) - problem.l2 * np.eye(d)
        cbar = -problem.grad(np.zeros(d))
        H = 0.5 * (H + H.T)
        terms.append(0.5 * cp.quad_form(x, cp.psd_wrap(H)) - cbar @ x)
    else:
        z = problem.M @ x
        w = problem._row_w
        if problem.kind == KIND_LEAST_SQUARES:
            terms.append(0.5 * cp.sum_squares(cp.multiply(np.sqrt(w), z - problem.b)))
        else:
            terms.append(cp.sum(cp.multiply(w, cp.logistic(-cp.multiply(problem.b, z)))))
    if problem.l2:
        terms.append(0.5 * problem.l2 * cp.sum_squares(x))
    if problem.l1:
        if problem.reg == "l1":
            terms.append(problem.l1 * cp.norm1(x))
        elif problem.reg == "group":
            terms += [problem.l1 * cp.norm(x[np.flatnonzero(problem.groups == g)], 2)
                      for g in np.unique(problem.groups) if g >= 0]
        else:
            terms.append(problem.l1 * cp.normNuc(cp.reshape(x, problem.mat_shape, order="C")))
    prob = cp.Problem(cp.Minimize(cp.sum(terms) if len(terms) > 1 else terms[0]))
    with warnings.catch_warnings():
        # "optimal_inaccurate" is recorded in info["cvxpy_status"]; the polish certifies the point
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver=solver)
    return (np.asarray(x.value, dtype=np.float64) if x.value is not None else None), prob.status, prob.value


def _newton_smooth(problem, x, max_iter=200):
    """Damped Newton with Armijo backtracking on F.

    Where the predicted decrease g^T H^{-1} g is near F's rounding error (below 1e-10 max(1, |F|)),
    the full step is taken when it lowers the gradient norm: F cannot tell better from worse there.
    Stops when no step decreases F any more (machine precision) or, once the gradient is below
    1e-10 L (1 + ||x||), when 5 iterations in a row have not halved the smallest gradient norm
    seen (at the rounding floor the norm wanders, and a new low by a hair used to restart the
    count); returns the iterate with the smallest gradient norm seen.
    """
    f = problem.value(x)
    g = problem.grad(x)
    best_x, best = x, np.linalg.norm(g)
    stall = 0
    it = 0
    for it in range(1, max_iter + 1):
        if best == 0:
            break
        H = problem.hessian(x)
        try:                            # H is symmetric positive semidefinite: Cholesky when definite
            step = cho_solve(cho_factor(H, check_finite=False), g, check_finite=False)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(H, g, rcond=None)[0]
        dec = float(g @ step)
        xn = None
        if dec <= 1e-10 * max(1.0, abs(f)):
            # F can barely resolve the predicted decrease (F's rounding error, a sum over all
            # samples, is of that order): an Armijo test on F accepts or refuses by rounding noise,
            # which made the iterates crawl at tiny steps on some CPUs. The full Newton step is
            # taken when it lowers the gradient norm; otherwise the line search below decides.
            xt = x - step
            gt = problem.grad(xt)
            if np.linalg.norm(gt) < np.linalg.norm(g):
                xn, fn, gn = xt, problem.value(xt), gt
        if xn is None:
            t = 1.0
            while True:
                xn = x - t * step
                fn = problem.value(xn)
                if fn <= f - 1e-4 * t * dec or (t == 1.0 and fn <= f):
                    break
                t *= 0.5
                if t < 1e-14:
                    break
            if t < 1e-14:
                break
            gn = problem.grad(xn)
        x, f, g = xn, fn, gn
        ng = np.linalg.norm(g)
        if ng < best:
            best_x = x
        stall = 0 if ng < 0.5 * best else stall + 1      # a new low at the rounding floor is no progress
        best = min(best, ng)
        if stall >= 5 and best < 1e-10 * max(1.0, smoothness(problem) * (1 + np.linalg.norm(x))):
            break
    return best_x, it


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


def _separable(problem):
    """True when some x has y_j a_j^T x >= 1 for every row (LP feasibility, HiGHS)."""
    from scipy.optimize import linprog
    YA = problem.M.multiply(problem.b[:, None]).tocsr() if problem.sparse else problem.M * problem.b[:, None]
    res = linprog(np.zeros(problem.dim), A_ub=-YA, b_ub=-np.ones(problem.M.shape[0]),
                  bounds=[(None, None)] * problem.dim, method="highs")
    return res.status == 0


def _solve(problem, solver, use_cvxpy=True, start=None):
    L = smoothness(problem)
    info = {"solver": solver}
    if problem.kind == KIND_LOGISTIC and problem.l2 == 0 and not problem.is_composite and _separable(problem):
        # the infimum 0 is approached along a separating direction and never attained
        info.update(stage1="separability LP", residual=0.0, attained=False,
                    note="linearly separable data and l2 = 0: inf F = 0 is not attained")
        return None, info
    x = None
    if problem.kind == KIND_QUADRATIC and not problem.is_composite:
        x = np.linalg.solve(problem.hessian(np.zeros(problem.dim)), -problem.grad(np.zeros(problem.dim)))
        info["stage1"] = "closed form"
    elif use_cvxpy:
        t0 = time.perf_counter()
        try:
            x, status, val = _cvxpy_solve(problem, solver)
            info.update(cvxpy_status=status, cvxpy_value=float(val) if val is not None else None)
        except Exception as e:  # solver failure: fall back to the polish from a start point
            info["cvxpy_status"] = f"failed: {type(e).__name__}: {e}"
        info["time_cvxpy"] = time.perf_counter() - t0
        info["stage1"] = "cvxpy"
    if x is None or not np.all(np.isfinite(x)):
        x = np.zeros(problem.dim) if start is None else np.array(start, dtype=np.float64)
        info.setdefault("stage1", "start point")
    if problem.is_composite and problem.reg == "l1":
        x, iters, ok = _active_set_lasso(problem, x, L)
        info.update(polish="active-set Newton", polish_iterations=iters, kkt_verified=bool(ok))
    elif problem.is_composite:
        x, iters = _fista_polish(problem, x, L)
        info.update(polish="FISTA (adaptive restart)", polish_iterations=iters)
    else:
        x, iters = _newton_smooth(problem, x)
        info.update(polish="Newton", polish_iterations=iters)
    info["residual"] = _residual(problem, x, L)
    info["attained"] = bool(info["residual"] <= 1e-8 * max(1.0, L * (1 + np.linalg.norm(x))))
    return x, info


__all__ = ["GroundTruth", "ground_truth"]
