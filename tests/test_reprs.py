"""One-line reprs (no arrays) for results, ground truth, constants and verifications; details in
``.summary()`` / ``.report()``."""
import numpy as np
import pytest

import fedtheory as ft
import problems
import validation


@pytest.fixture(scope="module")
def big():
    """A problem whose arrays would fill a screen: 40 clients, d = 60."""
    return problems.quadratic(40, 60, heterogeneity=1.0, seed=3)


def _one_line_without_arrays(text, x):
    """One short line, and none of the array's entries printed."""
    assert "\n" not in text and len(text) < 300, text
    assert "array(" not in text and "[" not in text, text
    assert not any(f"{v:.4g}" in text for v in np.asarray(x)[:5] if abs(v) > 1e-3), text


def test_run_result(big):
    gt = validation.ground_truth(big)
    res = ft.run(big, "scaffold", rounds=4, local_steps=2, lr=0.1, reference=gt, record_iterates=True)
    r = repr(res)
    _one_line_without_arrays(r, res.x)
    assert r.startswith("RunResult('scaffold', status='max_rounds', rounds=4, value=")
    assert f"grad_evals={res.grad_evals}" in r and "suboptimality=" in r and "d=60" in r
    s = res.summary()
    assert len(s.splitlines()) >= 8
    assert "SCAFFOLD" in s or "Scaffold" in s                      # the algorithm with its hyperparameters
    assert f"{res.sample_grads} per-sample gradients" in s and "iterates:  (5, 60)" in s
    assert f"||x||={np.linalg.norm(res.x):.6g}" in s and "state:" in s and "last row:" in s


def test_ground_truth(big):
    gt = validation.ground_truth(big)
    r = repr(gt)
    _one_line_without_arrays(r, gt.x)
    assert r.startswith(f"GroundTruth(f={gt.f:.17g}, residual=") and "d=60, n_clients=40" in r
    assert "40/40 client optima attained" in r
    s = gt.summary()
    assert f"F* = {gt.f:.17g}" in s and "client optima f_i*: n=40" in s and "info: solver" in s


def test_constants(big):
    c = validation.constants(big)
    r = repr(c)
    _one_line_without_arrays(r, [])                  # (L_i = L here: its entries are the scalar)
    assert r.startswith(f"Constants(L={c.L:.6g}, L_max=") and "n_clients=40" in r and "(exact)" in r
    s = c.summary()
    assert "L_i: n=40" in s and f"zeta_star_sq: {c.zeta_star_sq:.10g}" in s


def test_verification():
    p = problems.quadratic(4, 3, shared_minimizer=True, seed=0)
    v = validation.verify("localdescent.theorem_4_1", p, rounds=5, local_steps=2, lr=0.1, clients_per_round=2)
    r = repr(v)
    assert "\n" not in r and r.startswith("Verification('localdescent.theorem_4_1', variant=")
    assert f"verdict={v.verdict()!r}" in r and f"{sum(c.ok for c in v.conditions)}/{len(v.conditions)} ok" in r
    assert v.report().count("\n") >= len(v.conditions) and str(v) == v.report()
