import os
from pathlib import Path

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
