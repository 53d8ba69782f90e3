"""Diverged runs: status "diverged" with the round (and the client when a local iterate blew up),
no inf/nan row in the history, the last finite metrics and model kept."""
import numpy as np
import pytest

import fedtheory as ft
import problems
from fedtheory.testing.checks import suite_problems

CORE = ("value", "grad_mapping_sq", "suboptimality", "dist_sq")


def _finite_history(res):
    cols = [c for c in CORE if c in res.history.columns]
    return np.all(np.isfinite(res.history[cols].to_numpy(dtype=float)))


@pytest.mark.parametrize("name", ft.algorithms())
@pytest.mark.parametrize("lr", [3.0, 50.0, 1e6])
def test_diverged_run_keeps_only_finite_rows(name, lr):
    p = suite_problems()["least_squares"]
    kw = dict(rounds=60, local_steps=5, lr=lr, eval_every=1)
    kw.update(ft.get_algorithm(name).divergence_params)
    kw["lr"] = max(kw["lr"], lr)
    res = ft.run(p, name, **kw)
    if res.status != "diverged":
        pytest.skip(f"{name} does not diverge at lr={lr}")
    assert res.message.startswith(f"round {res.rounds + (0 if 'aggregation' in res.message else 1)}") or \
        "is not finite" in res.message, res.message
    assert _finite_history(res), res.history.tail()
    assert np.all(np.isfinite(res.x))
    assert res.history["round"].iloc[-1] <= res.rounds


def test_divergence_in_the_local_phase_names_round_and_client():
    p = suite_problems()["least_squares"]
    res = ft.run(p, "fedavg", rounds=20, local_steps=200, lr=1e8)
    assert res.status == "diverged"
    assert "client" in res.message and "local step" in res.message and res.message.startswith("round ")
    assert _finite_history(res) and np.all(np.isfinite(res.x))


def test_divergence_with_a_reference_keeps_finite_suboptimality():
    p = problems.quadratic(4, 3, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)
    from fedtheory.truth import ground_truth
    res = ft.run(p, "fedavg", rounds=400, local_steps=1, lr=10.0, reference=ground_truth(p, cache=False))
    assert res.status == "diverged" and _finite_history(res)
    assert res.history["suboptimality"].iloc[-1] > res.history["suboptimality"].iloc[0]
