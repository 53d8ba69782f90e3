"""Every path of a run computes the same run, on configurations drawn from the whole space.

The common checks compare the paths on a fixed list of configurations (``_fused_cases``,
``option_grid``). Here hypothesis draws the configuration of one algorithm: the suite problem
(dense, CSR, noisy, weighted), the sampling mode and its size, minibatches with and without
replacement, the released-code options, a step-size schedule, the discrete options, the start
point, the number of rounds and local steps, and the evaluation schedule. On each draw:

* the fused path and the per-round path (a callback) give bit-identical runs;
* where the evaluations fall does not change the iterates (bit for bit);
* replaying the run's participants (``client_schedule``) gives the same run again;
* the NumPy twin of the pseudo-code (``backend="python"``) agrees to 1e-12, and the torch
  backend (where installed) to 1e-10, with the same counters and participants.

Five draws per algorithm under the ci profile; ``HYPOTHESIS_PROFILE=dev`` draws 40. The dev
profile found the torch backend's literal FedSPS smoothing one step ahead of the paper's recursion
(the cap of a client's first step was 2^{B/m} instead of 1); the common check
``check_backends_agree`` now compares torch over every option combination, which catches it on
every run.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fedtheory as ft
from fedtheory.components import capabilities
from fedtheory.registry import get_algorithm
from fedtheory.testing import checks
from test_common import EVERY_STORAGE

try:
    import torch  # noqa: F401
    BACKENDS = (("python", 1e-12), ("torch", 1e-10))
except ImportError:                                  # pragma: no cover - the test extra installs torch
    BACKENDS = (("python", 1e-12),)

PROBLEMS = {**checks.suite_problems(), "noisy_quadratic": checks._noisy_quadratic(),
            "weighted_least_squares": checks._weighted_least_squares()}


@st.composite
def configurations(draw, name, keys=tuple(sorted(PROBLEMS))):
    cls = get_algorithm(name)
    key = draw(st.sampled_from(keys))
    p = PROBLEMS[key]
    kw = checks._params(name, rounds=draw(st.integers(1, 6)), local_steps=draw(st.integers(1, 4)),
                        seed=draw(st.integers(0, 2 ** 32 - 1)), record_iterates=True)
    kw.update(draw(st.sampled_from(checks.option_grid(name))))
    if not cls.full_participation_only:
        mode = draw(st.sampled_from(["full", "uniform", "with_replacement", "bernoulli"]))
        if mode == "uniform":
            kw["clients_per_round"] = draw(st.integers(1, p.n_clients))
        elif mode == "with_replacement":
            kw.update(sampling="with_replacement", clients_per_round=draw(st.integers(1, p.n_clients)))
        elif mode == "bernoulli":
            kw.update(sampling="bernoulli", participation=draw(st.sampled_from([0.2, 0.5, 1.0])))
    if capabilities(p)["samples"] and draw(st.booleans()):
        kw.update(batch_size=draw(st.integers(1, 6)), batch_replacement=draw(st.booleans()))
    if "weight_decay" in cls.released_options and draw(st.booleans()):
        kw["weight_decay"] = draw(st.sampled_from([0.0, 0.01, 0.3]))
    if "clip_norm" in cls.released_options and draw(st.booleans()):
        kw["clip_norm"] = draw(st.sampled_from([0.01, 0.5, 10.0]))
    if "lr" in kw and draw(st.booleans()):
        lr0 = kw["lr"]
        kw["lr"] = lambda t: lr0 / (1.0 + 0.3 * t)
    if draw(st.booleans()):
        kw["x0"] = np.random.default_rng(draw(st.integers(0, 99))).normal(size=p.dim)
    return key, kw, draw(st.sampled_from([None, 1, 2, 3, 100]))


def _same_run(a, b, where, tol=None):
    A, B = np.asarray(a.iterates), np.asarray(b.iterates)
    assert A.shape == B.shape, f"{where}: iterates of shapes {A.shape} and {B.shape}"
    if tol is None:
        assert np.array_equal(A, B, equal_nan=True), f"{where}: iterates differ by {np.nanmax(np.abs(A - B)):.3e}"
    else:
        err = float(np.nanmax(np.abs(A - B)))
        assert err <= tol * max(1.0, float(np.nanmax(np.abs(A)))), f"{where}: iterates differ by {err:.3e}"
    ca, cb = [(r.status, r.rounds, r.grad_evals, r.sample_grads, r.comm_up, r.comm_down) for r in (a, b)]
    assert ca == cb, f"{where}: status and counters {ca} != {cb}"
    assert [list(c) for c in a.sampled] == [list(c) for c in b.sampled], f"{where}: participants differ"


def _paths_agree(name, keys):
    @settings(max_examples=max(5, settings().max_examples // 5))      # ci profile: 5; dev: 40
    @given(configurations(name, keys))
    def check(cfg):
        key, kw, every = cfg
        p = PROBLEMS[key]
        where = f"{name} on {key}, eval_every={every}, {kw}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # e.g. FedSpeed's server under sampling
            fused = ft.run(p, name, eval_every=every, **kw)
            _same_run(fused, ft.run(p, name, eval_every=every, callback=lambda r, x: False, **kw),
                      f"{where}: fused vs per-round")
            _same_run(fused, ft.run(p, name, eval_every=every, client_schedule=list(fused.sampled), **kw),
                      f"{where}: fused vs replayed participants")
            other = ft.run(p, name, eval_every=2 if every == 1 else 1, **kw)
            A, B = np.asarray(fused.iterates), np.asarray(other.iterates)
            n = min(len(A), len(B))                   # a run stopped by divergence has fewer rows
            assert n > 0 and np.array_equal(A[:n], B[:n], equal_nan=True), \
                f"{where}: evaluating at other rounds changed the iterates"
            for backend, tol in BACKENDS:
                _same_run(fused, ft.run(p, name, eval_every=every, backend=backend, **kw),
                          f"{where}: numba vs {backend}", tol)
    check()


#: The suite problems on dense rows: the default run draws CSR rows only for the algorithms that the
#: common suite checks on both storages (test_common.EVERY_STORAGE); each storage is a compilation of
#: an algorithm's rounds of its own.
DENSE = tuple(k for k in sorted(PROBLEMS) if not PROBLEMS[k].sparse)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(n)) for n in ft.algorithms()])
def test_every_path_computes_the_same_run(name):
    _paths_agree(name, tuple(sorted(PROBLEMS)) if name in EVERY_STORAGE else DENSE)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(n)) for n in ft.algorithms()
                                  if n not in EVERY_STORAGE])
def test_every_path_computes_the_same_run_on_every_storage(name):
    """The draws of the default run, CSR rows included, for the algorithms it draws on dense rows."""
    _paths_agree(name, tuple(sorted(PROBLEMS)))
