"""Native thread pools of the worker processes that ``fedtheory sweep`` and ``fedtheory verify`` start.

With N worker processes on N CPUs every worker already has a CPU; the BLAS pool of each would add
threads that compete for the same CPUs. OpenBLAS does more than compete: after a threaded call (a dot
product of one evaluation's 32561 row losses of a9a is one) its threads spin for a while, waiting
for the next call, and keep a CPU busy. Measured on 2 CPUs, two processes each running 20 a9a runs
(FedAvg, 500 rounds, evaluated every 25): 2.75 s each with OpenBLAS's default threads, 1.11 s each
with one thread per process; one process alone took 1.17 s but used 2.33 s of CPU. The workers
therefore limit BLAS and OpenMP to their share of the CPUs, as joblib does for its own workers.
"""
import os


def cpus():
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def limit_worker_threads(n_workers):
    """Limit this process's BLAS and OpenMP pools to ``max(1, cpus() // n_workers)`` threads.

    Called once in each worker process (its pool's initializer); the limit stays for the process's
    lifetime.

    Parameters
    ----------
    n_workers : int
        The worker processes sharing this machine's CPUs (>= 1).

    Returns
    -------
    int
        The thread limit set.

    Examples
    --------
    >>> from threadpoolctl import threadpool_limits
    >>> with threadpool_limits(limits=None):     # restores this process's limits on exit
    ...     limit_worker_threads(10 ** 6)
    1
    """
    import numpy  # noqa: F401  (threadpoolctl limits the pools loaded: NumPy's and SciPy's BLAS are loaded
    import scipy.linalg  # noqa: F401  first, as ``import fedtheory`` no longer loads them)
    from threadpoolctl import threadpool_limits
    n = max(1, cpus() // max(1, int(n_workers)))
    threadpool_limits(limits=n)
    return n
