"""Evaluation of (personalized) models against known ground-truth signals (pFedFBE's metrics).

Support recovery at a threshold (spec/pfedfbe.md §8.1): P = {j : |w_j| >= threshold},
T = supp(w_true); precision |P & T|/|P|, recall |P & T|/|T|, F1 = 2PR/(P+R).
"""
from __future__ import annotations

import numpy as np


def support_scores(w, w_true, threshold=0.01):
    """(precision, recall, F1) of the support of ``w`` against that of ``w_true``.

    Examples
    --------
    >>> from fedtheory.metrics import support_scores
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
    """Mean (precision, recall, F1) over clients; ``models`` is (n, d) or one (d,) model for all."""
    models = np.asarray(models)
    if models.ndim == 1:
        models = np.repeat(models[None], len(w_clients), axis=0)
    s = np.array([support_scores(m, w, threshold) for m, w in zip(models, w_clients)])
    return tuple(float(v) for v in s.mean(axis=0))
