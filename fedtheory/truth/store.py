"""The on-disk cache of certified optima: one file per problem (a hash of its data), written
atomically with a checksum, read back only when the checksum and the certificate hold.

Part of the ground truth (:mod:`fedtheory.truth.optimum`)."""
from __future__ import annotations

from pathlib import Path
import hashlib
import json
import os
import uuid
import warnings

import numpy as np

from .numerics import _norm, _residual, _scale_L
from .record import GroundTruth


_VERSION = "gt-v4"   # v4: certified entries only, with their bracket on F*; v3: hash and checksum


_ARRAYS = ("x", "f", "residual", "client_f", "client_x", "client_residual", "client_attained")


def cache_dir():
    """The user's cache directory of fedtheory: ``$FEDTHEORY_CACHE``, else ``$XDG_CACHE_HOME/fedtheory``,
    else ``~/.cache/fedtheory`` (ground truth in ``ground_truth/``, data sets in ``libsvm/``).

    Returns
    -------
    pathlib.Path
        The directory (not created here).
    """
    if os.environ.get("FEDTHEORY_CACHE"):
        return Path(os.environ["FEDTHEORY_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fedtheory"


def _cache_path(problem, directory):
    base = Path(directory) if directory is not None else cache_dir() / "ground_truth"
    return base / f"{problem.data_hash()}-{_VERSION}.npz"


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
