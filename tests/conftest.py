import os
import sys
from pathlib import Path

# The suite starts about a hundred Python processes (xdist workers, command-line runs, sweep workers).
# Where bytecode caching is switched off (PYTHONDONTWRITEBYTECODE, set on some machines), each of them
# compiled the project's sources and pytest rewrote every test module again: about 5 s a worker. The
# caches go to the ``__pycache__`` folders Python and pytest always use (git ignores them).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import matplotlib
import pytest
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data" / "libsvm"
if "FEDTHEORY_DATA" not in os.environ and SHARED_DATA.is_dir():
    os.environ["FEDTHEORY_DATA"] = str(SHARED_DATA)

settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True, scope="session")
def _sigint_reaches_children():
    """A suite started with SIGINT ignored (``nohup``, a background job of a non-interactive shell,
    some CI runners) passes that on to every process it starts, and a child the Ctrl-C tests
    interrupt never sees the signal. This process takes Python's own handler back, so that the
    children it starts have SIGINT at its default (a handler, unlike SIG_IGN, is not inherited)."""
    import signal
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


@pytest.fixture(autouse=True, scope="session")
def _blas_share_per_worker():
    """Under pytest-xdist each worker keeps BLAS and OpenMP to its share of the CPUs, as the workers of
    ``fedtheory sweep`` and ``verify`` do (:mod:`fedtheory._threads`): with a full OpenBLAS pool in every
    worker, its threads spin after each threaded call on CPUs the other workers need."""
    n = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if n > 1:
        from fedtheory._threads import limit_worker_threads
        limit_worker_threads(n)
    yield


@pytest.fixture(scope="session")
def data_dir():
    d = os.environ.get("FEDTHEORY_DATA")
    if not d or not Path(d).is_dir():
        pytest.skip("LIBSVM data directory not available (set FEDTHEORY_DATA)")
    return d


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """Ground-truth and data caches go to a temporary directory, never the user's."""
    old = os.environ.get("FEDTHEORY_CACHE")
    os.environ["FEDTHEORY_CACHE"] = str(tmp_path_factory.mktemp("fedtheory-cache"))
    yield
    if old is None:
        os.environ.pop("FEDTHEORY_CACHE", None)
    else:
        os.environ["FEDTHEORY_CACHE"] = old


# ------------------------------------------------------------------ the user package of tests/userpkg
def _registries():
    """Every table a user's module registers into."""
    from fedtheory import registry
    from fedtheory.components import DATAFITS, REGULARIZERS
    from fedtheory.theory import CASES, SPECS, THEOREMS
    from fedtheory.theory.tightness import TIGHTNESS_CASES
    return (registry.ALGORITHMS, registry.PROBLEMS, DATAFITS, REGULARIZERS, THEOREMS, SPECS, CASES,
            TIGHTNESS_CASES)


@pytest.fixture
def forget_user_modules():
    """Whatever a test imports of the user package (in this process: ``main([..., "--import", ...])``)
    is forgotten afterwards: registries, imported modules, loky workers (other tests see only the
    built-in names)."""
    from fedtheory import registry
    before = list(registry._IMPORTED)
    saved = [(table, dict(table)) for table in _registries()]
    yield
    import sys

    from fedtheory.reporting.sweep import _POOL, _stop_pool
    for pool in list(_POOL.values()):            # its workers imported the package: later sweeps start afresh
        _stop_pool(pool)
    for table, content in saved:
        table.clear()
        table.update(content)
    for m in [m for m in sys.modules if m == "userpkg" or m.startswith("userpkg.")]:
        sys.modules.pop(m)
    registry._IMPORTED[:] = before


@pytest.fixture(autouse=True)
def _registered_problems_and_imports_do_not_leak():
    """A doctest or a docs page that registers a problem factory or imports a user module (the
    registry's own examples do) leaves no trace in later tests: messages that list the factories or
    the imported modules stay those of the built-ins."""
    from fedtheory import registry
    imported, problems_ = list(registry._IMPORTED), dict(registry.PROBLEMS)
    yield
    registry._IMPORTED[:] = imported
    registry.PROBLEMS.clear()
    registry.PROBLEMS.update(problems_)
