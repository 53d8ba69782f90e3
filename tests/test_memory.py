"""Memory of long runs: participants are stored compactly."""
import tracemalloc

import numpy as np
import pytest

import fedtheory as ft
import problems
from fedtheory.runs.participants import Participants


def test_participants_of_1e5_rounds_of_1000_clients_take_under_10_mb():
    rng = np.random.default_rng(0)
    full, part = Participants(1000), Participants(1000)
    everyone = np.arange(1000)
    for t in range(100_000):
        full.append(everyone)
        if t % 1000 == 0:
            draw = np.sort(rng.choice(1000, 10, replace=False))
        part.append(draw)
    assert full.nbytes < 2 * 2 ** 20 and part.nbytes < 10 * 2 ** 20
    assert np.array_equal(full[12345], everyone) and np.array_equal(part[-1], draw)
    assert full.counts().sum() == 1000 * 100_000 and part.counts().sum() == 10 * 100_000


def test_participants_sequence_protocol():
    P = Participants(5)
    P.append(np.array([3, 3, 1]))
    P.append(np.arange(5))
    assert len(P) == 2 and [c.tolist() for c in P] == [[3, 3, 1], [0, 1, 2, 3, 4]]
    assert [c.tolist() for c in P[:1]] == [[3, 3, 1]] and P[1].dtype == np.int64
    assert P.counts().tolist() == [1, 2, 1, 3, 1]
    with pytest.raises(IndexError):
        P[2]


@pytest.mark.slow
def test_long_run_with_1000_clients_stays_under_100_mb_beyond_history():
    p = problems.quadratic(1000, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=0)
    tracemalloc.start()
    res = ft.run(p, "fedavg", rounds=100_000, local_steps=1, lr=0.1, eval_every=100_000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert res.status == "max_rounds" and len(res.sampled) == 100_000
    assert peak < 100 * 2 ** 20, peak / 2 ** 20
