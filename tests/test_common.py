"""The common suite (fedtheory.testing.checks) over every registered algorithm.

The checks of one algorithm form one ``xdist_group``: with ``pytest -n N --dist loadgroup`` (the
default options, setup.cfg) they run in one worker process, which compiles that algorithm's
segments once per datafit form instead of once per worker."""
import inspect

import pytest

import fedtheory as ft
from fedtheory.testing import ALL_CHECKS

#: The algorithms of the five papers, whose rules call every local-step kernel (SGD, SAM, the
#: corrected and the two-gradient steps, SPS's value-and-gradient, FBE's Hessian products), and
#: the FedAvg and SCAFFOLD baselines: the default run checks them on dense and CSR rows. The other
#: algorithms are checked on dense rows in the default run (their rounds call the same kernels) and
#: on both storages under ``-m slow``: each storage is a compilation of an algorithm's rounds of
#: its own, about 5 s cold.
EVERY_STORAGE = ("fedavg", "scaffold", "fedspeed", "pfedfbe", "feddeper", "lfd", "fedsps")


def _takes_storages(check):
    return "storages" in inspect.signature(check).parameters


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(n)) for n in ft.algorithms()])
def test_common(name, check):
    if name in EVERY_STORAGE or not _takes_storages(check):
        check(name)
    else:
        check(name, storages=("dense",))


@pytest.mark.slow
@pytest.mark.parametrize("check", [c for c in ALL_CHECKS if _takes_storages(c)], ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(n)) for n in ft.algorithms()
                                  if n not in EVERY_STORAGE])
def test_common_on_csr_rows(name, check):
    """The checks that depend on the row storage, on dense and CSR rows, for the algorithms that the
    default run checks on dense rows only."""
    check(name)


def test_the_checks_refuse_storages_without_dense_rows():
    from fedtheory.exceptions import InvalidParameterError
    from fedtheory.testing.checks import check_determinism
    for bad in ((), ("csr",), ("dense", "coo")):
        with pytest.raises(InvalidParameterError, match=r"'storages' parameter .* Got .* instead"):
            check_determinism("fedavg", storages=bad)


def test_no_recompilation_check_counts_only_what_the_algorithm_compiles():
    """``check_no_recompilation`` on an algorithm of the round-by-round form, in a process where other
    code compiled more specialisations of the shared kernels (other layouts and types): it counts the
    ones the algorithm's own runs add, so it passes whatever ran before it."""
    from dataclasses import dataclass
    from typing import ClassVar

    from numba import types

    from fedtheory._kernels import local_steps as ls
    from fedtheory.algorithms.context import averaged_step
    from fedtheory.algorithms.fedavg import FedAvg
    from fedtheory.registry import ALGORITHMS, register
    from fedtheory.testing.checks import check_no_recompilation

    for dt in (types.float32, types.float64):
        for layout in ("A", "C"):
            a = types.Array(dt, 1, layout)
            ls.clip_coefficient.compile((a, types.float64, types.float64, a, types.boolean, a, types.boolean,
                                         types.float64, a))
    assert len(ls.clip_coefficient.signatures) >= 4

    @register
    @dataclass(frozen=True)
    class PerRoundAvg(FedAvg):
        name: ClassVar[str] = "per_round_avg_check"
        compiled_rules: ClassVar[bool] = False

        def server_update(self, state, ctx, messages):
            return {"x": averaged_step(state["x"], ctx.weights, messages["y"], self.server_lr)}

    try:
        assert PerRoundAvg.rules_module() is None
        check_no_recompilation("per_round_avg_check")
    finally:
        ALGORITHMS.pop("per_round_avg_check", None)


def test_check_trace_says_when_the_twin_records_nothing():
    """A NumPy twin that never calls ``ctx.record`` leaves its traced path empty (NaN): the check
    says so, instead of a difference of nan."""
    from dataclasses import dataclass
    from typing import ClassVar

    import numpy as np

    from fedtheory.algorithms.fedavg import FedAvg
    from fedtheory.registry import ALGORITHMS, register
    from fedtheory.testing.checks import check_trace

    @register
    @dataclass(frozen=True)
    class Unrecorded(FedAvg):
        name: ClassVar[str] = "unrecorded_twin"
        compiled_rules: ClassVar[str] = "fedtheory.algorithms.fedavg"

        def local_round_reference(self, state, ctx):
            Y = np.empty((ctx.S, state["x"].shape[0]))
            for s in range(ctx.S):
                y = state["x"].copy()
                for k in range(ctx.K):
                    y = y - ctx.lrs[k] * ctx.grad(s, k, y)
                Y[s] = y
            return {"y": Y}

    try:
        with pytest.raises(AssertionError, match="left empty .* does local_round_reference call ctx.record"):
            check_trace("unrecorded_twin")
    finally:
        ALGORITHMS.pop("unrecorded_twin", None)
