"""The component suite: every registered datafit x regularizer, Numba == NumPy == torch == CVXPY.

Parametrised over the registries (fedtheory.components.DATAFITS, REGULARIZERS), so a component
added to the library is checked here without a new test. The checks themselves live in
fedtheory.components.suite (see there for what is compared and how tightly).
"""
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import scipy.sparse as sp

import fedtheory as ft
import fedtheory.constants  # noqa: F401  (ft.constants below, whichever tests run first)
from fedtheory import components
from fedtheory.components import DATAFITS, REGULARIZERS
from fedtheory.components.suite import check_datafit, check_pair, check_regularizer, example_problem
from fedtheory.exceptions import DataError, InvalidParameterError
from fedtheory.problem import ClientData, FederatedProblem

DOC = Path(__file__).resolve().parent.parent / "docs" / "how-a-problem-is-built.md"
DATAFIT_CASES = [(name, sparse) for name, cls in sorted(DATAFITS.items())
                 for sparse in ((False, True) if cls.has_samples else (False,))]
DATAFIT_IDS = [f"{name}-{'csr' if sparse else 'dense'}" for name, sparse in DATAFIT_CASES]


@pytest.mark.parametrize("name,sparse", DATAFIT_CASES, ids=DATAFIT_IDS)
def test_datafit(name, sparse):
    check_datafit(name, sparse=sparse)


@pytest.mark.parametrize("name", sorted(REGULARIZERS))
def test_regularizer(name):
    check_regularizer(name)


@pytest.mark.parametrize("reg", sorted(REGULARIZERS))
@pytest.mark.parametrize("name,sparse", DATAFIT_CASES, ids=DATAFIT_IDS)
def test_pair(name, sparse, reg):
    check_pair(name, reg, sparse=sparse)


def test_the_suite_catches_a_wrong_gradient(monkeypatch):
    """A datafit whose NumPy gradient is off by 1e-7 relative fails the suite (the checks are not vacuous)."""
    cls = DATAFITS["logistic"]
    monkeypatch.setattr(cls, "dloss", lambda self, z, t: -t / (1.0 + np.exp(t * z)) * (1 + 1e-7))
    with pytest.raises(AssertionError, match="gradient"):
        check_datafit("logistic")


def test_the_suite_catches_a_wrong_prox(monkeypatch):
    cls = REGULARIZERS["group"]
    orig = cls.prox_t
    monkeypatch.setattr(cls, "prox_t", lambda self, u, t: orig(self, u, 1.01 * t))
    with pytest.raises(AssertionError, match="prox"):
        check_regularizer("group")


# ---------------------------------------------------------------------- unknown components
def test_unknown_datafit_is_an_error_naming_the_known_ones():
    known = re.escape(", ".join(repr(n) for n in sorted(DATAFITS)))
    assert {"least_squares", "logistic", "quadratic"} <= set(DATAFITS)
    with pytest.raises(InvalidParameterError, match=rf"'datafit'.*{known}.*'hinge'"):
        FederatedProblem("hinge", np.eye(2), np.ones(2), [0, 2])
    # an unknown kernel id no longer becomes logistic
    with pytest.raises(InvalidParameterError, match=rf"{known}.*Got 7"):
        FederatedProblem(7, np.eye(2), np.ones(2), [0, 2])


def test_unknown_regularizer_is_an_error_naming_the_known_ones():
    known = re.escape(", ".join(repr(n) for n in sorted(REGULARIZERS)))
    with pytest.raises(InvalidParameterError, match=rf"'regularizer'.*{known}.*'tv'"):
        FederatedProblem("least_squares", np.eye(2), np.ones(2), [0, 2], reg="tv", l1=0.1)
    with pytest.raises(InvalidParameterError, match="'none' takes"):
        FederatedProblem("least_squares", np.eye(2), np.ones(2), [0, 2], reg="none", l1=0.1)


def test_unknown_kernel_id_is_an_error_in_the_kernels():
    from fedtheory._kernels.oracles import client_grad, prox_vec
    e, ei = np.zeros(0), np.zeros(0, np.int64)
    with pytest.raises(InvalidParameterError, match=r"Unknown datafit kernel id 77.*least_squares"):
        client_grad(False, np.eye(2), e, ei, ei, np.ones(2), 77, 0, 2, ei, np.ones(2), 0.0, np.zeros(2))
    with pytest.raises(InvalidParameterError, match=r"Unknown regularizer kernel id 77.*nuclear"):
        prox_vec(np.ones(2), 0.1, 77, ei, 0, 0, np.zeros(2))


def test_logistic_labels_are_checked_on_every_construction():
    with pytest.raises(DataError, match=r"client 1 has labels outside \{-1, \+1\}: found \[0\.0\]"):
        FederatedProblem("logistic", np.eye(2), np.array([1.0, 0.0]), [0, 1, 2])


# ---------------------------------------------------------------------- the problem is the sum of its parts
def test_names_and_instances_build_the_same_problem():
    p = example_problem("logistic", "group", seed=3)
    q = FederatedProblem("logistic", p.M, p.b, p.client_ptr, weights=p.weights, l2=p.l2, l1=p.l1, reg="group",
                         groups=p.groups, name=p.name)
    data = ClientData(p.M, p.b, p.client_ptr, p.weights)
    r = FederatedProblem.from_components(data, p.datafit, p.regularizer, name=p.name)
    assert p.data_hash() == q.data_hash() == r.data_hash()
    assert (p.datafit_id, p.reg, p.l2, p.reg_weight) == (q.datafit_id, q.reg, q.l2, q.reg_weight) == (
        components.Logistic.code, "group", 0.1, 0.3)
    assert (p.kind, p.l1) == (p.datafit_id, p.reg_weight)      # the former names, kept (a group weight here)
    runs = [ft.run(x, "fedmirror", rounds=3, local_steps=2, lr=0.1, record_iterates=True).iterates for x in (p, q, r)]
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])


def test_hash_depends_on_every_component_parameter():
    p = example_problem("least_squares", "l1")
    hashes = {p.data_hash()}
    for datafit, reg in ((components.LeastSquares(l2=0.2), p.regularizer), (p.datafit, components.L1(0.31)),
                         (p.datafit, components.L2(0.3)), (p.datafit, None),
                         (p.datafit, components.GroupL2(0.3, groups=np.arange(p.dim) // 3))):
        hashes.add(FederatedProblem.from_components(p.data, datafit, reg).data_hash())
    assert len(hashes) == 6
    # h = 0 written as "none" or as a weight-0 l1 is the same objective, hence the same key
    a = FederatedProblem.from_components(p.data, p.datafit, None)
    b = FederatedProblem.from_components(p.data, p.datafit, components.L1(0.0))
    assert a.data_hash() == b.data_hash() and not a.is_composite and not b.is_composite


def test_component_constants():
    p = example_problem("quadratic")
    H = p.hessian(np.zeros(p.dim))
    assert ft.constants.strong_convexity(p) == pytest.approx(np.linalg.eigvalsh(H)[0], rel=1e-12)
    q = example_problem("logistic")
    assert ft.constants.strong_convexity(q) == q.l2
    # the declared bounds of a margin datafit, checked on a grid: l'' <= curvature_bound (sample
    # smoothness), |l'| <= slope_bound (gradient heterogeneity); None declares nothing
    for name, cls in DATAFITS.items():
        if issubclass(cls, components.MarginDatafit):
            z = np.linspace(-30, 30, 2001)
            for t in (-1.0, 1.0):
                if cls.curvature_bound is not None:
                    assert np.all(cls().d2loss(z, np.full_like(z, t)) <= cls.curvature_bound + 1e-15), name
                if cls.slope_bound is not None:
                    assert np.all(np.abs(cls().dloss(z, np.full_like(z, t))) <= cls.slope_bound + 1e-15), name


def test_sparse_and_dense_rows_give_the_same_problem():
    p = example_problem("logistic", sparse=False, seed=5)
    q = FederatedProblem.from_components(ClientData(sp.csr_matrix(p.M), p.b, p.client_ptr, p.weights), p.datafit)
    x = np.linspace(-1, 1, p.dim)
    assert q.sparse and abs(p.value(x) - q.value(x)) <= 1e-13 and np.allclose(p.grad(x), q.grad(x), rtol=1e-13)
    a = ft.run(p, "fedavg", rounds=4, local_steps=3, lr=0.3, batch_size=2, seed=1, record_iterates=True)
    b = ft.run(q, "fedavg", rounds=4, local_steps=3, lr=0.3, batch_size=2, seed=1, record_iterates=True)
    assert np.allclose(a.iterates, b.iterates, rtol=0, atol=1e-13)


# ---------------------------------------------------------------------- a new component: docs/how-a-problem-is-built.md
@pytest.fixture
def restore_registries():
    before = (dict(DATAFITS), dict(REGULARIZERS))
    yield
    for table, saved in zip((DATAFITS, REGULARIZERS), before):
        table.clear()
        table.update(saved)


def test_adding_a_datafit_is_one_file(restore_registries):
    """The page's examples run: a Huber datafit and an l-infinity regularizer, each one class with no
    Numba kernel, are registered, run on the numba and python backends and pass the component suite."""
    ns = {"__name__": "docs_how-a-problem-is-built"}
    for code in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S):
        exec(compile(code, str(DOC), "exec"), ns)
    assert DATAFITS["huber"] is ns["Huber"] and REGULARIZERS["linf"] is ns["LInf"]
    assert ns["Huber"].code is None and ns["LInf"].code is None       # reached through the NumPy fallback
    p = ns["p"]
    assert p.kind >= 1000 and p.kind_name == "huber"
    assert "delta=1.0" in p.datafit.key()


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 4), seed=st.integers(0, 2**31 - 1), skew=st.floats(1e-9, 10.0))
def test_quadratic_refuses_a_non_symmetric_or_indefinite_q(d, seed, skew):
    """A client Q_i that is not symmetric (its gradient, its constants and its ground truth would
    all be silently wrong) or not positive semi-definite is a DataError naming the client; the
    symmetric positive semi-definite Q_i of the same draw is accepted."""
    from fedtheory.components import Quadratic
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((d, d))
    Q = B @ B.T + 0.1 * np.eye(d)                     # symmetric positive definite
    c = [rng.standard_normal(d), rng.standard_normal(d)]
    FederatedProblem.from_clients([Q, Q], c, Quadratic())
    if d > 1:
        S = np.zeros((d, d))
        S[0, d - 1], S[d - 1, 0] = skew, -skew        # Q + S has the same quadratic form, no symmetry
        with pytest.raises(DataError, match=r"Q_1 of client 1 must be symmetric"):
            FederatedProblem.from_clients([Q, Q + S * np.abs(Q).max()], c, Quadratic())
    v = rng.standard_normal(d)
    lo = float(np.linalg.eigvalsh(Q)[0])
    N = Q - (lo + skew * np.abs(Q).max()) * np.outer(v, v) / (v @ v)     # smallest eigenvalue < 0
    if np.linalg.eigvalsh(N)[0] < -1e-9 * np.abs(N).max():
        with pytest.raises(DataError, match=r"Q_0 of client 0 must be positive semi-definite"):
            FederatedProblem.from_clients([N, Q], c, Quadratic())
