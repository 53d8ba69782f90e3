"""Faults in the ground-truth cache: corrupt, foreign or edited entries are recomputed with a
warning (never returned, never a crash), and concurrent solves of one problem all succeed."""
import json
import multiprocessing as mp
import shutil
import warnings

import numpy as np
import pytest

import problems
from fedtheory.truth import ground_truth
from fedtheory.truth.optimum import _cache_path


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    A = [rng.normal(size=(20, 4)) for _ in range(3)]
    return problems.least_squares(A, [a @ np.ones(4) + 0.1 * rng.normal(size=20) for a in A], l2=0.01)


def _fresh(p, tmp_path):
    ref = ground_truth(p, cache=False)
    ground_truth(p, cache_dir=tmp_path)
    path = _cache_path(p, tmp_path)
    assert path.is_file()
    return ref, path


def _rewrite(path, **changes):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    np.savez(path, **arrays)


def _corruptions(path, p, tmp_path):
    raw = path.read_bytes()
    other = _problem(1)
    ground_truth(other, cache_dir=tmp_path / "other")
    other_path = _cache_path(other, tmp_path / "other")
    return {
        "truncated": lambda: path.write_bytes(raw[: len(raw) // 2]),
        "empty": lambda: path.write_bytes(b""),
        "garbage": lambda: path.write_bytes(np.random.default_rng(0).bytes(len(raw))),
        "flipped byte": lambda: path.write_bytes(raw[:200] + bytes([raw[200] ^ 0xFF]) + raw[201:]),
        "not an npz": lambda: path.write_text("hello"),
        "a directory": lambda: (path.unlink(), path.mkdir()),
        "missing keys": lambda: np.savez(path, x=np.zeros(4)),
        "another problem's entry": lambda: shutil.copyfile(other_path, path),
        "edited x (checksum stale)": lambda: _rewrite(path, x=np.ones(4)),
        "edited f (checksum stale)": lambda: _rewrite(path, f=np.float64(-1.0)),
        "bad info json": lambda: _rewrite(path, info="{not json"),
        "old version layout": lambda: np.savez(path, x=np.zeros(4), f=0.0, residual=0.0,
                                               client_f=np.zeros(3), client_x=np.zeros((3, 4)),
                                               client_residual=np.zeros(3),
                                               client_attained=np.ones(3, dtype=bool), info=json.dumps({})),
    }


@pytest.mark.parametrize("kind", ["truncated", "empty", "garbage", "flipped byte", "not an npz", "a directory",
                                  "missing keys", "another problem's entry", "edited x (checksum stale)",
                                  "edited f (checksum stale)", "bad info json", "old version layout"])
def test_corrupt_entry_is_recomputed_with_a_warning(kind, tmp_path):
    p = _problem()
    ref, path = _fresh(p, tmp_path)
    _corruptions(path, p, tmp_path)[kind]()
    with pytest.warns(RuntimeWarning, match="ground_truth: (ignoring the cache entry|could not write)"):
        gt = ground_truth(p, cache_dir=tmp_path)
    assert not gt.info["cached"]
    assert np.allclose(gt.x, ref.x, rtol=0, atol=1e-12) and abs(gt.f - ref.f) <= 1e-14
    if kind != "a directory":                       # repaired: the next call reads the cache silently
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            again = ground_truth(p, cache_dir=tmp_path)
        assert again.info["cached"] and np.array_equal(again.x, gt.x)


def test_wrong_but_well_formed_entry_with_a_fresh_checksum_is_rejected(tmp_path):
    """An entry whose arrays were replaced consistently (checksum recomputed) but whose x* is not the
    optimum of the problem is caught by the optimality check."""
    from fedtheory.truth import optimum
    p = _problem()
    ref, path = _fresh(p, tmp_path)
    wrong = optimum.GroundTruth(x=ref.x + 0.1, f=p.value(ref.x + 0.1), residual=ref.residual,
                                client_f=ref.client_f, client_x=ref.client_x, client_residual=ref.client_residual,
                                client_attained=ref.client_attained, info=dict(ref.info))
    optimum._save(path, p, wrong)
    with pytest.warns(RuntimeWarning, match="gradient-mapping norm at the stored x"):
        gt = ground_truth(p, cache_dir=tmp_path)
    assert np.allclose(gt.x, ref.x, atol=1e-12)


def _solve_in_process(args):
    cache_dir, seed = args
    gt = ground_truth(_problem(seed), cache_dir=cache_dir)
    return float(gt.f)


def test_concurrent_solves_of_one_problem_all_succeed(tmp_path):
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        fs = pool.map(_solve_in_process, [(str(tmp_path), 0)] * 8)
    ref = ground_truth(_problem(0), cache=False).f
    assert all(abs(f - ref) <= 1e-14 for f in fs)
    assert not list(tmp_path.glob("*.tmp*")) and not list(tmp_path.glob(".*tmp*"))
    assert len(list(tmp_path.glob("*.npz"))) == 1
