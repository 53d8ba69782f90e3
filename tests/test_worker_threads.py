"""The worker processes of sweeps and of ``fedtheory verify`` keep BLAS to their share of the CPUs
(fedtheory._threads): N workers with a full BLAS pool each would spin N pools on the same CPUs."""
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest
from threadpoolctl import threadpool_info

from fedtheory.reporting import sweep, verification
from fedtheory._threads import cpus, limit_worker_threads


def _blas_threads(infos):
    return sorted({i["num_threads"] for i in infos if i["user_api"] == "blas"})


@pytest.mark.parametrize("n", [1, 2, 64])
def test_limit_worker_threads_gives_each_worker_its_share(n):
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=limit_worker_threads, initargs=(n,)) as pool:
        infos = pool.submit(threadpool_info).result()
    share = max(1, cpus() // n)
    assert _blas_threads(infos) and all(t <= share for t in _blas_threads(infos))
    if n == 64:
        assert _blas_threads(infos) == [1]


def test_sweep_workers_limit_blas():
    pool = sweep._local_pool(2)
    try:
        infos = pool.submit(threadpool_info).result(timeout=120)
    finally:
        sweep._stop_pool(pool)
    assert _blas_threads(infos) and all(t <= max(1, cpus() // 2) for t in _blas_threads(infos))


def test_verify_worker_initializer_limits_blas():
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=verification._worker_init, initargs=(64,)) as pool:
        assert _blas_threads(pool.submit(threadpool_info).result()) == [1]


_F_SCRIPT = """
import numpy as np, problems
rng = np.random.default_rng(0)
A = [rng.standard_normal((30000, 4)) for _ in range(2)]
y = [np.sign(rng.standard_normal(30000)) for _ in range(2)]
p = problems.logistic(A, y, l2=0.1)
x = rng.standard_normal(4)
print(repr(p.value(x)), repr(p.value_and_gradient_mapping_sq(x, 1.0)[0]))
"""


def test_F_does_not_depend_on_the_blas_thread_count():
    """A sweep's workers run BLAS on one thread each, the driver on all of them: F(x) of a long data
    set was a BLAS dot, which OpenBLAS splits between its threads, so -j 1 and -j 2 (and a direct
    run) stored F values 9e-15 apart for one model. The same process computed with 1 and 2 threads
    must give one value (the same machine: a property of the code, not of the CPU)."""
    import os
    import subprocess
    import sys
    out = {}
    for n in ("1", "2"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n)
        out[n] = subprocess.run([sys.executable, "-c", _F_SCRIPT], env=env, capture_output=True, text=True,
                                check=True).stdout
    assert out["1"] == out["2"]
