"""The common suite (fedtheory.testing.checks) over every registered algorithm.

The checks of one algorithm form one ``xdist_group``: with ``pytest -n N --dist loadgroup`` (the
default options, setup.cfg) they run in one worker process, which compiles that algorithm's
segments once per datafit form instead of once per worker."""
import pytest

import fedtheory as ft
from fedtheory.testing import ALL_CHECKS


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(n)) for n in ft.algorithms()])
def test_common(name, check):
    check(name)
