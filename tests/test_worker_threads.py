"""The worker processes of sweeps and of ``fedtheory verify`` keep BLAS to their share of the CPUs
(fedtheory._threads): N workers with a full BLAS pool each would spin N pools on the same CPUs."""
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest
from threadpoolctl import threadpool_info

from fedtheory import sweep, verification
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
