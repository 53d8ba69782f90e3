"""Fault: a damaged Numba cache never stops a run (the kernel is recompiled and cached again)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ("import warnings, fedtheory as ft, problems\n"
       "with warnings.catch_warnings(record=True) as w:\n"
       "    warnings.simplefilter('always')\n"
       "    r = ft.run(problems.quadratic(3, 2, seed=0), 'fedavg', rounds=2, local_steps=2)\n"
       "print(r.status, sum('Numba cache' in str(x.message) for x in w))\n")


def _run(cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    r = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    status, warned = r.stdout.split()
    return status, int(warned)


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    d = tmp_path_factory.mktemp("numba-cache")
    assert _run(d) == ("max_rounds", 0)
    return d


@pytest.mark.parametrize("damage", ["garbage", pytest.param("truncate", marks=pytest.mark.slow),
                                    pytest.param("empty", marks=pytest.mark.slow)])
def test_damaged_numba_cache_is_recompiled(populated, tmp_path, damage):
    shutil.copytree(populated, tmp_path, dirs_exist_ok=True)
    files = [f for f in tmp_path.rglob("*") if f.suffix in (".nbi", ".nbc") and "local_steps" in f.name]
    assert files, "the kernel cache was not written where expected"
    for f in files:
        raw = f.read_bytes()
        f.write_bytes({"garbage": os.urandom(len(raw)), "truncate": raw[: len(raw) // 3], "empty": b""}[damage])
    status, warned = _run(tmp_path)
    assert status == "max_rounds" and warned >= 1
    assert _run(tmp_path) == ("max_rounds", 0)          # repaired: read back silently
