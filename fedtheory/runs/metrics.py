"""Evaluation of models against known ground truth: suboptimality against a reference optimum,
and pFedFBE's metrics of personalized models.

Suboptimality (:func:`reference_metrics`): F(x) - F* against a certified reference, NaN against
an uncertified one. Support recovery at a threshold (docs/papers/pfedfbe.md, §8.1): P = {j : |w_j| >= threshold},
T = supp(w_true); precision |P & T|/|P|, recall |P & T|/|T|, F1 = 2PR/(P+R).
"""
from __future__ import annotations

import math

import numpy as np

from ..exceptions import UncertifiedOptimumError


def reference_metrics(reference, value, x, where="run"):
    """History columns of a model x with F(x) = ``value`` against a reference optimum.

    Parameters
    ----------
    reference : GroundTruth or object with ``f`` and ``x``
        The reference optimum (:func:`fedtheory.truth.ground_truth`).
    value : float
        F(x), as the run evaluated it.
    x : ndarray (d,)
        The model.
    where : str, default "run"
        Named in the error message.

    Returns
    -------
    dict
        ``suboptimality`` (F(x) - F*), ``dist_sq`` (||x - x*||^2) and ``reference_certified``.
        Against a reference marked ``certified=False`` both metrics are NaN. Against a certified
        one, F(x) below F* by less than the reference's accuracy (``tol`` max(1, |F*|) plus the
        rounding of F near x*, ``f_eval_error``) is reported as suboptimality 0: the two values
        agree to what is known. A reference without ``certified`` (a user's object) gives the
        plain difference.

    Raises
    ------
    UncertifiedOptimumError
        When F(x) is below a certified F* by more than its accuracy: F* is then not the optimum
        of the problem (e.g. the reference of another problem).

    Examples
    --------
    >>> import numpy as np, problems, validation
    >>> from fedtheory.runs.metrics import reference_metrics
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> gt = validation.ground_truth(p, cache=False)
    >>> m = reference_metrics(gt, p.value(gt.x), gt.x)
    >>> m["suboptimality"], m["dist_sq"], m["reference_certified"]
    (0.0, 0.0, True)
    """
    certified = bool(getattr(reference, "certified", True))
    if not certified:
        return {"suboptimality": math.nan, "dist_sq": math.nan, "reference_certified": False}
    f = float(reference.f)
    sub = float(value) - f
    tol = getattr(reference, "tol", None)
    if tol is not None and sub < 0:
        err = float(getattr(reference, "f_eval_error", 0.0))
        slack = tol * max(1.0, abs(f)) + (err if math.isfinite(err) else 0.0)
        if sub < -slack:
            raise UncertifiedOptimumError(
                f"{where}: F(x) = {float(value)!r} lies below the reference optimum F* = {f!r} by {-sub:.3g}, "
                f"more than its certified accuracy {slack:.3g}; F* above F at an evaluated point is "
                "impossible, so the reference is not the optimum of this problem.")
        sub = 0.0
    diff = np.asarray(x, dtype=np.float64) - np.asarray(reference.x, dtype=np.float64)
    return {"suboptimality": sub, "dist_sq": float(diff @ diff), "reference_certified": True}


def support_scores(w, w_true, threshold=0.01):
    """(precision, recall, F1) of the support of ``w`` against that of ``w_true``.

    Parameters
    ----------
    w : array_like, shape (d,)
        The estimate; its support is where ``|w| >= threshold``.
    w_true : array_like, shape (d,)
        The reference; its support is where it is non-zero.
    threshold : float, default 0.01
        Smallest magnitude counted as non-zero in ``w``.

    Returns
    -------
    tuple of float
        ``(precision, recall, F1)``: precision 0 when ``w`` has an empty support, recall 1 when
        ``w_true`` has one, F1 0 when both precision and recall are 0.

    Examples
    --------
    >>> from fedtheory.runs.metrics import support_scores
    >>> support_scores([1.0, 0.0, 0.5, 0.02], [1.0, 0.0, 0.0, 1.0])
    (0.6666666666666666, 1.0, 0.8)
    """
    P = np.abs(np.asarray(w)) >= threshold
    T = np.asarray(w_true) != 0
    tp = int(np.sum(P & T))
    prec = tp / P.sum() if P.sum() else 0.0
    rec = tp / T.sum() if T.sum() else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0
    return float(prec), float(rec), float(f1)


def client_support_scores(models, w_clients, threshold=0.01):
    """Mean (precision, recall, F1) of :func:`support_scores` over clients.

    Parameters
    ----------
    models : array_like, shape (n, d) or (d,)
        One model per client, or one model for all.
    w_clients : sequence of array_like, shape (d,)
        Each client's true parameter vector.
    threshold : float, default 0.01
        Smallest magnitude counted as non-zero in a model.

    Returns
    -------
    tuple of float
        The clients' mean ``(precision, recall, F1)``.
    """
    models = np.asarray(models)
    if models.ndim == 1:
        models = np.repeat(models[None], len(w_clients), axis=0)
    s = np.array([support_scores(m, w, threshold) for m, w in zip(models, w_clients)])
    return tuple(float(v) for v in s.mean(axis=0))


def personalized_extras(problem, models, x):
    """History columns of personalized models and of the global model.

    Parameters
    ----------
    problem : FederatedProblem
        The problem; ``problem.info`` may hold the clients' true parameters (``"w_clients"``,
        sparse vectors; ``"W_clients"``, low-rank matrices flattened, with ``problem.mat_shape``).
    models : ndarray, shape (n, d)
        One personalized model per client.
    x : ndarray, shape (d,)
        The global model.

    Returns
    -------
    dict of str to float
        ``pm_value`` (the clients' mean of f_i + h at their personalized models); with
        ``"w_clients"`` the support ``pm_/gm_precision``, ``_recall`` and ``_f1`` of the personalized
        and the global models; with ``"W_clients"`` their mean rank (singular values above 0.01,
        ``pm_rank``, ``gm_rank``) and recovery error (``pm_recovery``, ``gm_recovery``).
    """
    n = problem.n_clients
    out = {"pm_value": float(np.mean([problem.client_value(i, models[i]) + problem.h_value(models[i])
                                      for i in range(n)]))}
    info = problem.info or {}
    if info.get("w_clients") is not None:
        for tag, m in (("pm", models), ("gm", x)):
            pr, rc, f1 = client_support_scores(m, info["w_clients"])
            out.update({f"{tag}_precision": pr, f"{tag}_recall": rc, f"{tag}_f1": f1})
    if info.get("W_clients") is not None and problem.mat_shape is not None:
        W = info["W_clients"]
        out["pm_rank"] = float(np.mean([(np.linalg.svd(m.reshape(problem.mat_shape), compute_uv=False) > 0.01).sum()
                                        for m in models]))
        out["gm_rank"] = float((np.linalg.svd(x.reshape(problem.mat_shape), compute_uv=False) > 0.01).sum())
        out["pm_recovery"] = float(np.mean(np.linalg.norm(models - W, axis=1)))
        out["gm_recovery"] = float(np.mean(np.linalg.norm(x - W, axis=1)))
    return out
