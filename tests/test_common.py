"""The common suite (fedtheory.testing.checks) over every registered algorithm."""
import pytest

import fedtheory as ft
from fedtheory.testing import ALL_CHECKS


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", ft.algorithms())
def test_common(name, check):
    check(name)
