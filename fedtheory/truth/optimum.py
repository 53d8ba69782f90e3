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

from ..constants import smoothness, strong_convexity
from ..exceptions import DataError, InvalidParameterError, UncertifiedOptimumError, UncertifiedOptimumWarning
from ..problem import FederatedProblem
from . import certificate as _cert
from .certificate import describe

_VERSION = "gt-v4"   # v4: certified entries only, with their bracket on F*; v3: hash and checksum
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
        False where the client's infimum is not attained: (quasi-)separable logistic data without
        ridge (decided by an LP), where client_f is the exact infimum 0 under complete separation
        and NaN, with the client not certified, under quasi-complete separation.
    info : dict
        Solver statistics: CVXPY status and value, polish iterations, timings.
    certified : bool
        True when F* is proven to the tolerance ``tol`` (see :mod:`fedtheory.truth.certificate`);
        False only with ``certify="warn"`` (``certify="raise"``, the default, raises instead).
    f_lower, f_upper : float
        A bracket f_lower <= F* <= f_upper: f_upper = F(x*) evaluated with extended-precision
        residuals where possible, f_lower from the QR residual (least squares), the duality gap
        (lasso) or strong convexity (mu > 0); NaN where no lower bound is known.
    rel_residual : float
        The gradient-mapping norm at x* divided by the one at 0 (what is left of the initial
        optimality residual).
    f_eval_error : float
        A bound on the rounding error of F evaluated in double precision near x* (what a run's
        ``value`` column can resolve).
    tol : float
        The relative tolerance of the certificate: ``|F* - f| <= tol max(1, |F*|)`` when certified.
    reason : str
        Why the result is not certified ('' when it is).
    client_certified : ndarray of bool (n,)
        The same verdict for every client optimum f_i* (all True when certified).
    problem_hash : str
        ``problem.data_hash()`` of the problem it is the optimum of: ``run(reference=...)`` and
        :func:`validation.constants` refuse it for another problem ('' for one built by hand).
    """

    x: np.ndarray
    f: float
    residual: float
    client_f: np.ndarray
    client_x: np.ndarray
    client_residual: np.ndarray
    client_attained: np.ndarray
    info: dict = field(default_factory=dict)
    certified: bool = True
    f_lower: float = np.nan
    f_upper: float = np.nan
    rel_residual: float = np.nan
    f_eval_error: float = np.nan
    tol: float = 1e-9
    reason: str = ""
    client_certified: np.ndarray = None
    problem_hash: str = ""

    @property
    def accuracy(self):
        """f_upper - f_lower: the proven width of the bracket on F* (NaN where no lower bound is known)."""
        return float(self.f_upper - self.f_lower)

    def __repr__(self):
        """One line: F*, the residual, the dimension and what was certified."""
        n = np.shape(self.client_f)[0]
        clients = (f"{int(np.sum(self.client_attained))}/{n} client optima attained"
                   if self.info.get("clients_computed", True) else "client optima not computed")
        cert = (f"certified to {self.tol:g}" + (f" (bracket width {self.accuracy:.1e})"
                                                 if np.isfinite(self.f_lower) else " (by the KKT residual)")
                if self.certified else "NOT CERTIFIED")
        return (f"GroundTruth(f={self.f:.17g}, residual={self.residual:.2e}, {cert}, d={np.shape(self.x)[0]}, "
                f"n_clients={n}, {clients}{', cached' if self.info.get('cached') else ''})")

    def summary(self):
        """Every detail as text: x*, F*, the client optima and the solver's statistics."""
        x = np.asarray(self.x)
        lines = [f"F* = {self.f:.17g}", f"residual (gradient-mapping norm at x*) = {self.residual:.3e}",
                 f"relative residual (vs at x = 0) = {self.rel_residual:.3e}",
                 f"bracket: {self.f_lower:.17g} <= F* <= {self.f_upper:.17g}; rounding of F in double "
                 f"precision near x*: {self.f_eval_error:.3e}",
                 ("certified" if self.certified else f"NOT CERTIFIED: {self.reason}") + f" (tolerance {self.tol:g})",
                 f"x*: d={x.shape[0]}, ||x*||={_norm(x):.6g}, "
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


def check_reference(problem, reference, caller, name="reference"):
    """Refuse a ground truth that is not ``problem``'s optimum: another dimension, or (a
    :class:`GroundTruth`) another problem's data hash. A reference built by hand (an object with
    ``f`` and ``x``, no hash) is checked by its value: F(x) must be its ``f``, else a warning.
    Suboptimality, distances and the heterogeneity constants measured against another problem's
    x* and F* are silently wrong numbers."""
    x = np.asarray(reference.x, dtype=np.float64) if getattr(reference, "x", None) is not None else None
    if x is None or x.shape != (problem.dim,):
        raise InvalidParameterError(f"The '{name}' parameter of {caller} must be the ground truth of this "
                                    f"problem (dimension {problem.dim}); got one whose x has shape "
                                    f"{None if x is None else x.shape}.")
    own = getattr(reference, "problem_hash", "")
    if not hasattr(problem, "data_hash"):
        return
    if own:
        if own != problem.data_hash():
            raise InvalidParameterError(
                f"The '{name}' parameter of {caller} is the ground truth of another problem (data hash "
                f"{own[:12]}..., this problem {problem.data_hash()[:12]}...): its x* and F* would make every "
                f"suboptimality and constant wrong. Compute validation.ground_truth(problem) for this one.")
        return
    with np.errstate(all="ignore"):
        fx = float(problem.value(x))
    f = float(reference.f)
    if not (np.isfinite(fx) and abs(fx - f) <= 1e-6 * max(1.0, abs(f))):
        warnings.warn(f"{caller}: the '{name}' given (F* = {f!r}) does not match this problem at its x* "
                      f"(F(x*) = {fx!r}); is it the optimum of another problem?", UserWarning, stacklevel=3)


def _cache_path(problem, cache_dir):
    from problems.datasets import cache_dir as default_dir
    base = Path(cache_dir) if cache_dir is not None else default_dir() / "ground_truth"
    return base / f"{problem.data_hash()}-{_VERSION}.npz"


def ground_truth(problem, cache=True, cache_dir=None, solver="CLARABEL", clients=True, progress=None,
                 n_jobs=None, certify="raise", tol=1e-9):
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
    from .._argcheck import Interval, Options, check_param
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
    from .._progress import bar, enabled
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
                  info=json.dumps({**gt.info, "tol": gt.tol}, default=float))
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
    if not info.get("certified"):
        return reject("it is not certified")
    fx = problem.value(x)
    # F* is F(x*) evaluated with extended-precision residuals: within the rounding of F in double
    if abs(fx - f) > max(1e-12 * max(1.0, abs(fx)), 2 * float(info.get("f_eval_error", 0.0))):
        return reject(f"F(x*) = {fx!r} differs from the stored F* = {f!r}")
    L = _scale_L(problem, x)
    r = _residual(problem, x, L)
    if r > max(10.0 * res, 1e-10 * max(1.0, L * (1 + _norm(x)))):
        return reject(f"the gradient-mapping norm at the stored x* is {r:.3g}, not the stored {res:.3g}")
    tol = float(info.pop("tol", 1e-9))
    return GroundTruth(x=x, f=f, residual=res, client_f=arrays["client_f"], client_x=arrays["client_x"],
                       client_residual=arrays["client_residual"], client_attained=arrays["client_attained"],
                       info=info, certified=True, f_lower=float(info["f_lower"]), f_upper=float(info["f_upper"]),
                       rel_residual=float(info["rel_residual"]), f_eval_error=float(info["f_eval_error"]),
                       tol=tol, reason="", client_certified=np.ones(n, dtype=bool))


def _client_problem(problem, i):
    s, e = problem.client_rows(i)
    M = problem.M[s:e]
    if problem.sparse and (e - s) * problem.dim <= 500_000:
        M = M.toarray()                  # small clients: dense Newton steps are far cheaper
    from ..problem import ClientData
    data = ClientData(M, problem.b[s:e], np.array([0, e - s]), name=f"{problem.name}[client {i}]")
    # the problem's own components (a user's datafit included): client i alone, weight 1
    return FederatedProblem.from_components(data, problem.datafit, problem.regularizer,
                                            name=f"{problem.name}[client {i}]")


def _norm(v):
    """Euclidean norm without overflow or underflow of the squares (entries of size 1e200)."""
    top = float(np.max(np.abs(v), initial=0.0))
    return top * float(np.linalg.norm(v / top)) if 0 < top < np.inf else top


def _residual(problem, x, L):
    g = problem.grad(x)
    if not problem.is_composite:
        return _norm(g)
    return _norm(x - problem.prox(x - g / L, 1.0 / L)) * L


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


def _scale_L(problem, x):
    """The certified L where the datafit declares a curvature capability, else :func:`_local_L`."""
    try:
        return smoothness(problem)
    except DataError:
        return _local_L(problem, x)


def _local_L(problem, x):
    """lambda_max of the Hessian at x: the polish's scale for a datafit without a certified L."""
    with np.errstate(all="ignore"):
        return max(float(np.linalg.eigvalsh(problem.hessian(x))[-1]), np.finfo(float).tiny)


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
        from ..components.base import MarginDatafit
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
