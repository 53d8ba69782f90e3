"""FedSpeed's server="alg1" under partial participation warns once per run (FedSpeedServerWarning)."""
import warnings

import numpy as np
import pytest

import fedtheory as ft
import problems
from fedtheory.exceptions import FedSpeedServerWarning


@pytest.fixture(scope="module")
def p():
    return problems.quadratic(10, 5, heterogeneity=1.0, seed=0)


def _warnings(p, **kw):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = ft.run(p, "fedspeed", rounds=30, local_steps=5, lr=0.1, **kw)
    return res, [w for w in rec if issubclass(w.category, FedSpeedServerWarning)]


@pytest.mark.parametrize("kw", [dict(clients_per_round=3), dict(sampling="bernoulli", participation=0.5),
                                dict(clients_per_round=10, sampling="with_replacement")])
def test_alg1_under_partial_participation_warns_once_per_run(p, kw):
    res, ws = _warnings(p, seed=1, **kw)
    assert len(ws) == 1, [str(w.message) for w in ws]
    msg = str(ws[0].message)
    assert "server='alg1'" in msg and "partial participation" in msg and "end worse than its start" in msg
    assert "server='dyn'" in msg and "converges" in msg
    assert ws[0].filename == __file__                    # points at the caller's ft.run
    assert issubclass(FedSpeedServerWarning, UserWarning) and not issubclass(FedSpeedServerWarning, RuntimeWarning)
    _, again = _warnings(p, seed=1, **kw)                # a second run warns again (once)
    assert len(again) == 1


@pytest.mark.parametrize("kw", [dict(), dict(clients_per_round=10), dict(server="dyn", clients_per_round=3),
                                dict(server="dyn", sampling="bernoulli", participation=0.5)])
def test_no_warning_under_full_participation_or_with_dyn(p, kw):
    _, ws = _warnings(p, **kw)
    assert ws == []


def test_the_warned_behaviour_is_real(p):
    """What the warning says, measured: alg1 ends worse than its start, dyn converges."""
    from fedtheory import truth
    gt = truth.ground_truth(p)
    start = p.value(np.zeros(p.dim)) - gt.f
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FedSpeedServerWarning)
        end = {s: ft.run(p, "fedspeed", rounds=200, local_steps=5, lr=0.1, clients_per_round=3, server=s,
                         reference=gt, seed=0).history.suboptimality.iloc[-1] for s in ("alg1", "dyn")}
    assert end["alg1"] > start > 1e3 * end["dyn"], (start, end)


@pytest.mark.parametrize("callback", [None, lambda r, x: False])
def test_a_run_that_diverges_before_any_evaluation_still_warns(p, callback):
    """The warning is emitted at the evaluations, and when the run ends (``Algorithm.run_ended``):
    a run that diverges before its first evaluation after the flagged round warns too, on the
    fused path and on the per-round one."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        res = ft.run(p, "fedspeed", rounds=50, local_steps=5, lr=50.0, clients_per_round=3, seed=1,
                     eval_every=50, callback=callback)
    ws = [w for w in rec if issubclass(w.category, FedSpeedServerWarning)]
    assert res.status == "diverged" and res.rounds < 50 and len(res.history) == 1
    assert len(ws) == 1 and ws[0].filename == __file__
