"""The compiled rules of the composite methods (FedMiD, FedDualAvg): their server steps keep the
arithmetic of the NumPy server (NumPy's summation order of the step sizes, the problem's prox)."""
import functools

import numpy as np
import pytest
from numba import njit

import fedtheory as ft
from fedtheory._kernels import rounds as ops
from fedtheory.components import REGULARIZERS
from fedtheory.components.suite import example_problem

_compiled_sum = njit(ops.numpy_sum)

# lengths on every branch of NumPy's pairwise sum: in sequence (< 8), 8 accumulators (<= 128), split
# once or several times (> 128, split points rounded to multiples of 8)
LENGTHS = [*range(1, 140), 255, 256, 257, 1000, 1031, 4099]


def test_numpy_sum_adds_in_numpys_order():
    """numpy_sum gives NumPy's sum exactly, in Python and compiled, where a sum in sequence does not."""
    rng = np.random.default_rng(0)
    seq_differs = 0
    for n in LENGTHS:
        for _ in range(5):
            a = (rng.random(n) - 0.3) * 10.0 ** rng.uniform(-3, 3, n)
            assert ops.numpy_sum(a) == a.sum(), f"python, n={n}"
            assert _compiled_sum(a) == a.sum(), f"compiled, n={n}"
            assert np.mean(a) == ops.numpy_sum(a) / n
            seq_differs += sum(a.tolist()) != a.sum()
    assert seq_differs > 0          # the order matters on these arrays: the check is not vacuous


def test_rules_prox_is_the_problems_prox():
    """ops.prox(pk, z, t) (the server prox of the rules) is problem.prox(z, t): exactly for the
    element-wise proxes (one rounding per entry in either), to a few ulps for the group and nuclear
    norms (NumPy's norm and SVD sum in another order than the kernels)."""
    rng = np.random.default_rng(1)
    for reg in sorted(REGULARIZERS):
        p = example_problem("least_squares", None if reg == "none" else reg, dim=12)
        pk = p.compiled_pack()
        for _ in range(50):
            z = rng.normal(size=p.dim) * 10.0 ** rng.uniform(-2, 2)
            t = 10.0 ** rng.uniform(-3, 1)
            got, want = ops.prox(pk, z, t), p.prox(z, t)
            if reg in ("l1", "l2", "none"):
                assert np.array_equal(got, want), f"{reg}: t={t}"
            else:
                assert np.abs(got - want).max() <= 1e-14 * max(1.0, np.abs(want).max()), f"{reg}: t={t}"


@functools.lru_cache(maxsize=None)
def _compiled(rule):
    """The rule compiled as the driver's segment compiles it (inlined into a compiled caller); one
    compiled caller per rule, for every call of the tests (it compiles once per argument types)."""
    inner = njit(inline="always")(rule)

    @njit(cache=False)
    def call(pk, rd, hp, st, m):
        return inner(pk, rd, hp, st, m)
    return call


def _round(p, K, lrs):
    """A round of every client of ``p`` with the step sizes ``lrs`` (exact gradients, no noise)."""
    pk = p.compiled_pack()
    n = p.n_clients
    e3 = np.zeros((0, 0, 0))
    return pk, ops.make_round(pk, 0, np.arange(n), p.weights.copy(), np.zeros((n, K, 0), dtype=np.int64), e3, lrs,
                              0.5, 0.0, 0.0, 0, e3, e3, e3, False)


@pytest.mark.parametrize("server_prox", ["eta_g*eta_l", "eta_g*eta_l*K"])
def test_fedmirror_server_prox_keeps_numpys_mean_step(server_prox):
    """FedMiD's server prox threshold eta_g mean_k eta_k (K) is NumPy's mean, compiled and in Python,
    with K >= 8 decaying step sizes (where Numba's own mean adds in another order)."""
    import fedtheory.algorithms.fedmirror as mod
    p = example_problem("least_squares", "l1", dim=6)
    alg = ft.get_algorithm("fedmirror")(server_lr=0.7, server_prox=server_prox)
    rng = np.random.default_rng(2)
    for K in (8, 11, 17):
        lrs = 0.1 / (1.0 + 0.37 * np.arange(K))
        pk, rd = _round(p, K, lrs)
        x = rng.normal(size=p.dim)
        Y = x + 0.3 * rng.normal(size=(p.n_clients, p.dim))
        args = (pk, rd, alg.compiled_params(), alg.state_tuple({"x": x}), mod.Messages(Y))
        compiled, python = _compiled(mod.server)(*args).x, mod.server(*args).x
        c = 0.7 * float(np.mean(lrs)) * (K if server_prox.endswith("*K") else 1)
        want = p.prox(ops.averaged_step(x, rd.weights, Y, 0.7), c)
        assert np.array_equal(compiled, python) and np.array_equal(python, want), f"K={K}"


def test_feddual_server_keeps_numpys_accumulated_threshold():
    """FedDualAvg's threshold acc + eta_g sum_k eta_k is NumPy's sum, compiled and in Python (K >= 8),
    and its x^{t+1} is problem.prox(z^{t+1}, acc) exactly (l1)."""
    import fedtheory.algorithms.feddual as mod
    p = example_problem("least_squares", "l1", dim=6)
    alg = ft.get_algorithm("feddual")(server_lr=0.9)
    rng = np.random.default_rng(3)
    for K in (8, 13, 21):
        lrs = 0.1 / np.sqrt(1.0 + np.arange(K))
        pk, rd = _round(p, K, lrs)
        z = rng.normal(size=p.dim)
        st = {"x": z.copy(), "z": z, "acc": 0.37}
        Z = z + 0.3 * rng.normal(size=(p.n_clients, p.dim))
        args = (pk, rd, alg.compiled_params(), alg.state_tuple(st), mod.Messages(Z))
        compiled, python = _compiled(mod.server)(*args), mod.server(*args)
        acc = 0.37 + 0.9 * float(lrs.sum())
        assert compiled.acc == python.acc == acc, f"K={K}"
        z1 = ops.averaged_step(z, rd.weights, Z, 0.9)
        for out in (compiled, python):
            assert np.array_equal(out.z, z1) and np.array_equal(out.x, p.prox(z1, acc)), f"K={K}"
