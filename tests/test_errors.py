"""Bad input: scikit-learn style messages naming the parameter, the range and the value."""
import math
import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings, strategies as st

import fedtheory as ft
import problems
from fedtheory.exceptions import DataError, IncompatibleProblemError, InvalidParameterError


@pytest.fixture(scope="module")
def p():
    rng = np.random.default_rng(0)
    A = [rng.normal(size=(10 + i, 3)) for i in range(4)]
    return problems.logistic(A, [np.where(a[:, 0] > 0, 1.0, -1.0) for a in A])


@pytest.mark.parametrize("kw,pattern", [
    (dict(lr=-1.0), r"The 'lr' parameter of run must be a float in the range \(0, inf\)\. Got -1\.0 instead\."),
    (dict(lr=float("nan")), r"The 'lr' parameter of run must be .* Got nan instead\."),
    (dict(local_steps=0), r"The 'local_steps' parameter of run must be an int in the range \[1, 2\*\*63 - 1\]\. Got 0 instead\."),
    (dict(local_steps=2.5), r"The 'local_steps' parameter of run must be an int"),
    (dict(clients_per_round=5), r"The 'clients_per_round' parameter of run must be None or an int in the range \[1, 4\]\. Got 5 instead\."),
    (dict(rounds=-3), r"The 'rounds' parameter of run must be an int in the range \[0, 2\*\*63 - 1\]\. Got -3 instead\."),
    (dict(batch_size=11), r"The 'batch_size' parameter of run must be an int in the range \[1, 10\]\. Got 11 instead\."),
    (dict(batch_size=0), r"The 'batch_size' parameter of run must be an int in the range \[1, 10\]\. Got 0 instead\."),
    (dict(x0=np.zeros(4)), r"The 'x0' parameter of run must be an array of shape \(3,\)\. Got an array of shape \(4,\) instead\."),
    (dict(backend="gpu"), r"The 'backend' parameter of run must be a str among \{'numba', 'python', 'torch'\}\. Got 'gpu' instead\."),
    (dict(sampling="poisson", clients_per_round=2), r"The 'sampling' parameter of run must be None or a str among"),
    (dict(mu=0.1), r"Unknown hyperparameter\(s\) \['mu'\] for algorithm 'fedavg'; its own hyperparameters are \['server_lr'\]"),
    (dict(server_lr=0.0), r"The 'server_lr' parameter of FedAvg must be a float in the range \(0, inf\)\. Got 0\.0 instead\."),
])
def test_run_rejects_bad_arguments(p, kw, pattern):
    with pytest.raises(InvalidParameterError, match=pattern):
        ft.run(p, "fedavg", **{"rounds": 2, **kw})


def test_unknown_algorithm_lists_known(p):
    with pytest.raises(InvalidParameterError) as e:
        ft.run(p, "fedsgd", rounds=1)
    msg = str(e.value)
    assert "'fedsgd'" in msg and all(name in msg for name in ft.algorithms())


def test_fedprox_negative_mu(p):
    with pytest.raises(InvalidParameterError, match=r"The 'mu' parameter of FedProx must be a float in the range \[0, inf\)\. Got -0\.5 instead\."):
        ft.run(p, "fedprox", rounds=1, mu=-0.5)


def test_lfd_q_must_equal_weights(p):
    with pytest.raises(InvalidParameterError, match=r"The 'q' parameter of run must equal the problem's client weights"):
        ft.run(p, "lfd", rounds=1, clients_per_round=2, q=[0.7, 0.1, 0.1, 0.1])


def test_scaffold_with_replacement_merges_duplicates(p):
    """A stateful method under with-replacement sampling runs each drawn client once (weight mult/S)."""
    res = ft.run(p, "scaffold", rounds=20, clients_per_round=4, sampling="with_replacement", seed=1)
    assert res.status == "max_rounds"
    assert all(len(c) == 4 for c in res.sampled)         # the draws, duplicates kept
    ran = [res.sampled.slots(t) for t in range(len(res.sampled))]
    assert any(len(c) < 4 for c in ran)                  # some rounds drew a client twice: merged
    assert all(np.array_equal(c, np.unique(d)) for c, d in zip(ran, res.sampled))


def test_lfd_replicate_duplicates_type(p):
    with pytest.raises(InvalidParameterError, match=r"The 'replicate_duplicates' parameter of LFD must be a bool\. Got 'yes' instead\."):
        ft.run(p, "lfd", rounds=1, replicate_duplicates="yes")


def test_minibatch_on_quadratic_rejected():
    q = problems.quadratic(3, 2, seed=0)
    with pytest.raises(InvalidParameterError, match="'batch_size' parameter of run must be None for a quadratic"):
        ft.run(q, "fedavg", rounds=1, batch_size=2)


def test_composite_problem_rejected_by_smooth_methods():
    rng = np.random.default_rng(0)
    lasso = problems.lasso([rng.normal(size=(5, 3))], [rng.normal(size=5)], l1=0.1)
    with pytest.raises(IncompatibleProblemError,
                       match=r"'fedavg' handles smooth objectives only.*0\.1 h_0\(x\), h_0 the regularizer 'l1'"):
        ft.run(lasso, "fedavg", rounds=1)
    # a nuclear norm was described as "||x||_1"
    mc = problems.matrix_completion(n_clients=2, shape=(4, 4), samples=10, shared_rank=1)
    with pytest.raises(IncompatibleProblemError, match=r"h_0 the regularizer 'nuclear'"):
        ft.run(mc, "scaffold", rounds=1)


def test_torch_backend_without_torch_names_the_extra(p, monkeypatch):
    import sys
    for mod in [m for m in sys.modules if m == "torch" or m.startswith(("torch.", "fedtheory.backends.torch"))]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "torch", None)          # import torch -> ImportError
    with pytest.raises(ImportError, match=r"fedtheory\[torch\]"):
        ft.run(p, "fedavg", rounds=1, backend="torch")


def test_device_only_with_torch_backend(p):
    with pytest.raises(InvalidParameterError, match="'device' parameter of run applies to backend='torch' only"):
        ft.run(p, "fedavg", rounds=1, device="cpu")


def test_divergence_names_round_and_client():
    rng = np.random.default_rng(0)
    p = problems.least_squares([rng.normal(size=(6, 3)) for _ in range(3)], [rng.normal(size=6)] * 3)
    res = ft.run(p, "fedavg", rounds=50, local_steps=5, lr=1e200)
    assert res.status == "diverged"
    assert re.match(r"round 1: client \d+ produced a non-finite local iterate at local step \d+ of 5", res.message)
    assert not np.isnan(res.history.value.iloc[0])


# ------------------------------------------------------------------ data errors
def test_nan_in_design_names_client():
    A = [np.ones((3, 2)), np.array([[1.0, np.nan], [0, 1]])]
    with pytest.raises(DataError, match=r"problems\.least_squares: client 1: design matrix contains NaN or inf"):
        problems.least_squares(A, [np.ones(3), np.ones(2)])


def test_inf_in_targets_names_client():
    with pytest.raises(DataError, match=r"client 0: targets contain NaN or inf"):
        problems.least_squares([np.ones((2, 2))], [np.array([1.0, np.inf])])


def test_mismatched_rows_names_client():
    with pytest.raises(DataError, match=r"client 1: design matrix has 3 rows but the target vector has shape \(2,\)"):
        problems.least_squares([np.ones((2, 2)), np.ones((3, 2))], [np.ones(2), np.ones(2)])


def test_mismatched_features():
    with pytest.raises(DataError, match=r"different numbers of features \[2, 3\]"):
        problems.least_squares([np.ones((2, 2)), np.ones((2, 3))], [np.ones(2), np.ones(2)])


def test_empty_client_named():
    with pytest.raises(DataError, match=r"problems\.logistic: client 2 is empty \(0 samples\)"):
        problems.logistic([np.ones((2, 2))] * 2 + [np.ones((0, 2))], [np.ones(2)] * 2 + [np.ones(0)])


def test_bad_labels_named():
    with pytest.raises(DataError, match=r"problems\.logistic: client 1 has labels outside \{-1, \+1\}: found \[0\.0\]"):
        problems.logistic([np.ones((2, 2)), sp.csr_matrix(np.ones((2, 2)))],
                          [np.array([1.0, -1.0]), np.array([0.0, 1.0])])


def test_count_mismatch():
    with pytest.raises(DataError, match=r"got 2 design matrices but 1 target vectors"):
        problems.least_squares([np.ones((2, 2))] * 2, [np.ones(2)])


def test_single_matrix_instead_of_list():
    with pytest.raises(DataError, match=r"'A' must be a list with one design matrix per client"):
        problems.least_squares(np.ones((4, 2)), [np.ones(4)])


def test_quadratic_parameter_errors():
    with pytest.raises(InvalidParameterError, match=r"The 'mu' parameter of problems.quadratic must be a float in the range \(0, 1\.0\]\. Got 2\.0 instead\."):
        problems.quadratic(3, 2, L=1.0, mu=2.0)
    with pytest.raises(ValueError, match="shared_minimizer=True means"):
        problems.quadratic(3, 2, heterogeneity=1.0, shared_minimizer=True)


def test_libsvm_missing_file_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDTHEORY_DATA", str(tmp_path))
    monkeypatch.setenv("FEDTHEORY_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError) as e:
        problems.libsvm("a9a", data_dir=tmp_path, download=False)
    msg = str(e.value)
    assert "a9a.bz2" in msg and str(tmp_path) in msg and "data_dir" in msg and "libsvmtools" in msg


def test_libsvm_checksum_mismatch(tmp_path, data_dir):
    import shutil
    shutil.copy(f"{data_dir}/mushrooms.bz2", tmp_path / "mushrooms.bz2")
    with open(tmp_path / "mushrooms.bz2", "ab") as f:
        f.write(b"corrupt")
    with pytest.raises(OSError, match="sha256"):
        problems.load_libsvm("mushrooms", data_dir=tmp_path)


def test_partition_errors():
    with pytest.raises(ValueError, match=r"The 'partition' parameter of partition_indices must be a str among"):
        problems.partition_indices(np.zeros(10), 2, "random")
    with pytest.raises(InvalidParameterError, match=r"The 'n_clients' parameter of partition_indices must be an int in the range \[1, 10\]\. Got 11 instead\."):
        problems.partition_indices(np.zeros(10), 11)


def test_divergence_keeps_last_finite_model_and_honest_history():
    rng = np.random.default_rng(0)
    p = problems.least_squares([rng.normal(size=(6, 3)) for _ in range(3)], [rng.normal(size=6)] * 3)
    res = ft.run(p, "fedavg", rounds=50, local_steps=5, lr=1e200, record_iterates=True)
    assert res.status == "diverged" and res.rounds == 0
    assert np.all(np.isfinite(res.x)) and res.history["round"].tolist() == [0]


def test_sampling_without_clients_per_round_is_rejected(p):
    with pytest.raises(InvalidParameterError, match=r"sampling='with_replacement' draws clients_per_round .* Got None instead"):
        ft.run(p, "fedavg", rounds=1, sampling="with_replacement")


def test_participation_without_bernoulli_is_rejected(p):
    with pytest.raises(InvalidParameterError, match=r"'participation' parameter of run is the probability of sampling='bernoulli'"):
        ft.run(p, "fedavg", rounds=1, clients_per_round=2, participation=0.5)


@pytest.mark.parametrize("field", ["lr", "seed", "reference", "batch_size"])
def test_a_hyperparameter_named_like_a_run_parameter_is_refused_at_registration(field):
    """run(..., lr=0.3) sets the run's step size: a hyperparameter lr was registered, listed by
    describe, and could never be set (its default ran, silently); reference raised an
    AttributeError. Registration refuses the name now, naming it."""
    import dataclasses
    from typing import ClassVar

    from fedtheory.algorithms.base import Algorithm, Interval
    from fedtheory.exceptions import DeclarationError
    from fedtheory.registry import ALGORITHMS, register
    cls = dataclasses.make_dataclass("Clash", [(field, float, dataclasses.field(default=1.0))], bases=(Algorithm,),
                                     frozen=True, namespace={"name": "test_clash",
                                                             "constraints": {field: [Interval(float, 0, None, "left")]}})
    cls.__annotations__["name"] = ClassVar[str]
    with pytest.raises(DeclarationError, match=rf"hyperparameter\(s\) \['{field}'\], which are parameters of fedtheory.run"):
        register(cls)
    assert "test_clash" not in ALGORITHMS


def test_an_algorithm_without_a_name_is_refused_at_registration():
    """A class that sets no name was registered as 'algorithm', the base class's."""
    import dataclasses

    from fedtheory.algorithms.base import Algorithm
    from fedtheory.exceptions import DeclarationError
    from fedtheory.registry import ALGORITHMS, register
    cls = dataclasses.make_dataclass("Nameless", [], bases=(Algorithm,), frozen=True)
    with pytest.raises(DeclarationError, match="sets no name"):
        register(cls)
    assert "algorithm" not in ALGORITHMS


def test_options_given_a_type_or_a_set_says_how_it_is_used():
    """Options(str, {"last", "plain"}) was accepted and then rejected every value, its default too,
    with "must be a str among {<class 'str'>, {...}}"."""
    from fedtheory.algorithms.base import Options
    with pytest.raises(TypeError, match=r"Options takes the accepted values themselves, e.g. Options\('last', 'plain'\)"):
        Options(str, {"last", "plain"})
    assert Options("last", "plain").accepts("plain")


@pytest.mark.parametrize("rounds", [0, 30])
def test_a_start_where_f_is_not_finite_is_refused_before_any_round(rounds):
    """x0 = 1e160: F(x0) overflows. rounds=0 returned an empty (0, 0) history (res.history["round"]
    raised KeyError), and 30 rounds ran before 'round 30: F(x) is not finite'."""
    p = problems.quadratic(4, 3, seed=0)
    with np.errstate(all="ignore"), pytest.raises(InvalidParameterError, match=r"at the starting point x0 F\(x\) is "
                                                                               r"not finite \(inf\).*'x0' parameter"):
        ft.run(p, "fedavg", rounds=rounds, x0=np.full(3, 1e160))


@pytest.mark.parametrize("kw, match", [
    (dict(reference=True), r"'reference' parameter of run must be None or a ground truth.*reference = true in a "
                           r"configuration file"),
    (dict(reference=0.5), r"'reference' parameter of run must be None or a ground truth with 'f' and 'x'"),
    (dict(callback=5), r"'callback' parameter of run must be None or a function callback\(round, x\)\. Got int 5"),
    (dict(x0=["1", "2", "3"]), r"'x0' parameter of run must be an array of real numbers\. Got an array of dtype <U1"),
    (dict(x0=[True, False, True]), r"'x0' parameter of run must be an array of real numbers\. Got an array of "
                                   r"dtype bool"),
    (dict(x0=np.array([1j, 2, 3])), r"'x0' parameter of run must be an array of real numbers\. Got an array of "
                                    r"dtype complex128"),
])
def test_run_arguments_of_the_wrong_kind_are_named_before_any_round(kw, match):
    """reference=True (the TOML key's meaning) raised AttributeError: 'bool' object has no attribute
    'f'; callback=5 a bare TypeError after round 1 had run; string and boolean x0 were converted, and
    a complex one lost its imaginary part with a warning only."""
    p = problems.quadratic(4, 3, seed=0)
    with pytest.raises(InvalidParameterError, match=match):
        ft.run(p, "fedavg", rounds=2, **kw)


def test_the_registrys_run_parameter_names_are_runs_signature():
    """registry.RUN_PARAMETERS (the names a hyperparameter may not take) lists exactly run's own."""
    from fedtheory.registry import RUN_PARAMETERS
    from fedtheory.runs.runner import _run_parameters
    assert set(RUN_PARAMETERS) == set(_run_parameters()) - {"problem", "algorithm", "hyperparameters"}
    assert len(RUN_PARAMETERS) == len(set(RUN_PARAMETERS))


# ------------------------------------------------- a user's walk one step off the documented path --
def test_a_ground_truth_of_another_problem_is_refused():
    """validation.constants(p2, gt_of_p1) gave zeta_*^2 = 2.03 (true 1.0) and run(p2, reference=gt_of_p1)
    a final suboptimality of 0.013 (true 0), without a word; another dimension was a raw broadcasting
    error."""
    import validation
    p1 = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
    p2 = problems.quadratic(4, 3, heterogeneity=1.0, seed=1)
    gt1, gt2 = validation.ground_truth(p1, cache=False), validation.ground_truth(p2, cache=False)
    with pytest.raises(ft.InvalidParameterError, match="'reference' parameter of run is the ground truth of another"):
        ft.run(p2, "fedavg", rounds=2, reference=gt1)
    with pytest.raises(ft.InvalidParameterError, match="'gt' parameter of constants is the ground truth of another"):
        validation.constants(p2, gt1)
    with pytest.raises(ft.InvalidParameterError, match="dimension 5"):
        ft.run(problems.quadratic(4, 5, seed=0), "fedavg", rounds=2, reference=gt1)
    # the same problem built again (same data hash), and a reference built by hand, are accepted
    again = problems.quadratic(4, 3, heterogeneity=1.0, seed=1)
    res = ft.run(again, "fedavg", rounds=2, reference=gt2)
    assert np.isfinite(res.history["suboptimality"]).all()
    assert validation.constants(again, gt2).zeta_star_sq == pytest.approx(1.0, rel=1e-12)

    class Mine:
        x, f = p2.info["x_star"], p2.info["f_star"]
    ft.run(p2, "fedavg", rounds=2, reference=Mine())
    Mine.x = p1.info["x_star"]                    # F(x) no longer its f: most likely another problem's
    with pytest.warns(UserWarning, match="does not match this problem"):
        ft.run(p2, "fedavg", rounds=2, reference=Mine())


@pytest.mark.parametrize("name", ["fedsps", "fedsps_dec", "fedsps_normalized", "fedsps_global"])
def test_fedsps_lower_bound_must_be_finite(name):
    """A NaN lower bound ran on numba (max_rounds, some model) and diverged on python; inf froze the model."""
    p = problems.quadratic(3, 3, seed=0)
    for bad in (float("nan"), float("inf"), -float("inf"), [0.0, float("nan"), 0.0]):
        with pytest.raises(ft.InvalidParameterError, match="'lower_bound' parameter of .* must be a finite float"):
            ft.run(p, name, rounds=2, lower_bound=bad)
    with pytest.raises(ft.InvalidParameterError, match="Got shape \\(2,\\)"):
        ft.run(p, name, rounds=2, lower_bound=[0.0, 0.0])


def test_describe_every_algorithm():
    """describe('mime') raised "'property' object is not subscriptable" (its comm depends on its variant)."""
    from fedtheory.registry import ALGORITHMS
    for name in ALGORITHMS:
        d = ft.describe(name)
        assert set(d["communication_per_client"]) == {"down", "up"}, name
    assert ft.describe("mime")["communication_per_client"] == {"down": 2, "up": 2}      # mimelite, the default


def test_nfsgd_refuses_a_graph_given_with_a_mixing_matrix():
    from fedtheory.runs.topology import mixing_matrix
    p = problems.quadratic(4, 3, seed=0)
    W = mixing_matrix("complete", 4, p.weights, 0.5, 0)
    for graph in (dict(topology="torus"), dict(topology="ring"), dict(graph_seed=0)):     # ring: the default
        with pytest.raises(ft.InvalidParameterError, match="graph parameters must be left"):
            ft.run(p, "nfsgd", rounds=2, W=W, **graph)
    ft.run(p, "nfsgd", rounds=2, W=W)


def test_more_parameters_a_user_can_get_wrong():
    import validation
    p = problems.quadratic(4, 3, seed=0)
    with pytest.raises(ft.InvalidParameterError, match="'lr' schedule of run must return floats.*'fast'"):
        ft.run(p, "fedavg", rounds=2, lr=lambda t: "fast")
    lasso = problems.lasso([np.random.default_rng(0).normal(size=(6, 3))], [np.ones(6)], l1=0.1)
    with pytest.raises(ft.InvalidParameterError, match="'solver' parameter of ground_truth must be a CVXPY solver"):
        validation.ground_truth(lasso, cache=False, solver="NOPE")
    with pytest.raises(ft.InvalidParameterError, match="'solver' parameter of ground_truth must be a str"):
        validation.ground_truth(lasso, cache=False, solver=3)
    with pytest.raises(ft.DataError, match="one integer group id per coordinate"):
        problems.group_lasso([np.ones((5, 4))], [np.ones(5)], l1=0.1, groups=[[0], [1, 2, 3]])


class _Float(float):
    """A float of another type: Interval takes the general path for it."""


class _Int(int):
    """An int of another type."""


@settings(max_examples=300, deadline=None)
@example(kind=float, low=None, high=None, closed="both", v=math.nan)
@example(kind=float, low=None, high=None, closed="both", v=-math.inf)
@example(kind=int, low=None, high=math.inf, closed="both", v=2 ** 70)
@example(kind=int, low=0, high=None, closed="neither", v=2.0)
@given(kind=st.sampled_from([float, int]),
       low=st.one_of(st.none(), st.integers(-3, 3), st.floats(-3, 3)),
       high=st.one_of(st.none(), st.integers(-3, 3), st.floats(-3, 3), st.just(math.inf)),
       closed=st.sampled_from(["both", "left", "right", "neither"]),
       v=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2 ** 70, 2 ** 70),
                   st.integers(-4, 4)))
def test_an_interval_takes_a_plain_int_or_float_as_it_takes_the_same_number_of_another_type(kind, low, high,
                                                                                           closed, v):
    """``Interval.accepts`` reads a Python int or float without the number-ABC checks; the verdict is
    the general path's for the same value held by a subclass (which takes that path)."""
    from fedtheory._argcheck import Interval
    if kind is int and high is not None and high != math.inf:
        high = int(high)
    c = Interval(kind, low, high, closed)
    assert c.accepts(v) == c.accepts(_Float(v) if isinstance(v, float) else _Int(v))
