"""The torch backend: the same iterates as numba on convex problems (float64), every rule on a
small network, the deep problem's oracles, models, image loaders and errors."""
import copy
import gzip
import io
import os
import pickle
import tarfile

import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import fedtheory as ft
import problems
from fedtheory.exceptions import InvalidParameterError
from fedtheory.registry import get_algorithm

torch = pytest.importorskip("torch")   # the [torch] extra is installed in CI: these tests run there
from fedtheory.backends.torch import DeepProblem, models  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread_beside_other_workers():
    """Under pytest-xdist every worker would start as many torch threads as the machine has cores, and
    the deep runs of one worker then compete with the other workers' tests for them (a digits run took
    13-19 s in the suite and 2 s alone). One thread each while the suite runs in several workers."""
    if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") == "1":
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

COMPOSITE = ("fedmirror", "feddual", "ditto", "pfedme", "pfedprox", "pfedfbe")


def _logistic(sparse=False, seed=0):
    rng = np.random.default_rng(seed)
    A = [rng.standard_normal((24, 7)) * (rng.random((24, 7)) < (0.4 if sparse else 1.0)) for _ in range(6)]
    y = [np.where(rng.random(24) < 0.5, -1.0, 1.0) for _ in range(6)]
    return problems.logistic([sp.csr_matrix(a) for a in A] if sparse else A, y, l2=0.01)


def _least_squares(l1=0.0, seed=1):
    rng = np.random.default_rng(seed)
    A = [rng.standard_normal((20, 6)) for _ in range(5)]
    b = [rng.standard_normal(20) + i for i in range(5)]
    return problems.lasso(A, b, l1=l1) if l1 else problems.least_squares(A, b, l2=0.01)


def _both(p, name, **kw):
    kw = dict(dict(rounds=8, local_steps=3, lr=0.1, seed=4, record_iterates=True), **kw)
    a = ft.run(p, name, **kw)
    b = ft.run(p, name, backend="torch", device="cpu", **kw)
    assert a.status == b.status == "max_rounds"
    return a, b


# ------------------------------------------------------------------ same iterates as numba (done-when)
DONE_WHEN = [("fedavg", {}), ("scaffold", {}), ("fedspeed", dict(lam=10.0, alpha=0.5, rho=0.1)),
             ("fedspeed", dict(lam=10.0, alpha=0.5, rho=0.1, perturbation="sam", server="dyn")),
             ("fedsps", dict(c=0.5, gamma_b=1.0)), ("fedsps", dict(c=0.5, gamma_b=1.0, smoothing="sps_code"))]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("name,hp", DONE_WHEN)
def test_torch_equals_numba_with_sampling_and_minibatches(name, hp, sparse):
    a, b = _both(_logistic(sparse), name, clients_per_round=3, batch_size=5, **hp)
    assert np.abs(a.iterates - b.iterates).max() <= 1e-10
    assert [c.tolist() for c in a.sampled] == [c.tolist() for c in b.sampled]
    assert a.grad_evals == b.grad_evals and a.comm_up == b.comm_up


def test_fedsps_step_sizes_and_history_identical():
    a, b = _both(_logistic(), "fedsps", clients_per_round=3, batch_size=5, c=0.5, gamma_b=5.0)
    num = [c for c in a.history.columns if c != "time"]
    np.testing.assert_allclose(b.history[num].to_numpy(float), a.history[num].to_numpy(float), rtol=1e-9, atol=1e-12)
    assert 0 < a.history.step_capped_frac_total.iloc[-1] < 1          # the Polyak branch is exercised


@pytest.mark.parametrize("name", sorted(ft.algorithms()))
def test_every_algorithm_torch_equals_numba(name):
    cls = get_algorithm(name)
    kw = dict(cls.test_params)
    if not cls.full_participation_only and name != "nfsgd":
        kw.setdefault("clients_per_round", 3)
    kw.setdefault("batch_size", 5)
    p = _least_squares(l1=0.05) if name in COMPOSITE else _least_squares()
    a, b = _both(p, name, **kw)
    assert np.abs(a.iterates - b.iterates).max() <= 1e-10


@pytest.mark.parametrize("name,hp", [("fedsps_global", dict(aggregation="c", gamma_b=1.0)),
                                     ("pfedfbe", dict(lam=20.0, variant="full", fd_eps=1e-4)),
                                     ("feddeper", dict(rho=0.05, minibatch="independent", stale_v="refresh")),
                                     ("fedsps_dec", dict(c_index="round"))])
def test_variant_paths_torch_equals_numba(name, hp):
    p = _least_squares(l1=0.05) if name == "pfedfbe" else _logistic()
    a, b = _both(p, name, clients_per_round=3, batch_size=5, **hp)
    tol = 1e-8 if name == "pfedfbe" else 1e-10       # forward-difference HVP divides rounding by fd_eps
    assert np.abs(a.iterates - b.iterates).max() <= tol


def test_group_and_nuclear_prox_in_torch():
    rng = np.random.default_rng(0)
    A = [rng.standard_normal((15, 6)) for _ in range(3)]
    b = [rng.standard_normal(15) for _ in range(3)]
    g = problems.group_lasso(A, b, l1=0.3, groups=[0, 0, 1, 1, -1, 2])
    mc = problems.matrix_completion(n_clients=3, shape=(4, 4), samples=12, l_nuc=0.2, shared_rank=2, seed=0)
    for p in (g, mc):
        a, b2 = _both(p, "fedmirror", batch_size=4)
        assert np.abs(a.iterates - b2.iterates).max() <= 1e-10


def test_gradient_noise_stream_is_shared():
    p = problems.quadratic(4, 3, heterogeneity=1.0, noise=0.3, seed=0)
    a, b = _both(p, "scaffold", clients_per_round=2)
    assert np.abs(a.iterates - b.iterates).max() <= 1e-12


def test_divergence_is_reported_with_round_and_client():
    kw = dict(rounds=20, local_steps=5, lr=1e200, clients_per_round=3)
    a = ft.run(_least_squares(), "fedavg", backend="torch", device="cpu", **kw)
    b = ft.run(_least_squares(), "fedavg", **kw)
    assert a.status == b.status == "diverged"
    assert a.message == b.message and "non-finite local iterate at local step" in a.message


# ------------------------------------------------------------------ deep problems
def _digits_problem(model=None, n=8, partition="iid"):
    model = model or models.mlp(64, 10, hidden=(32,), seed=0)
    return problems.vision.image_problem("digits", model, n_clients=n, partition=partition, seed=0, eval_grad=True)


RULE_HP = {"fedspeed": dict(lam=10.0, alpha=0.5, rho=0.05), "fedsps": dict(c=0.5, gamma_b=0.5),
           "fedsps_dec": dict(c0=0.5, gamma_b=0.5), "fedsps_normalized": dict(gamma_b=0.5),
           "fedsps_global": dict(gamma_b=0.5), "feddyn": dict(alpha=0.1), "fedadmm": dict(rho=0.1),
           "fedpd": dict(eta=10.0), "pfedfbe": dict(lam=15.0), "fedadam": dict(server_lr=0.03),
           "fedams": dict(server_lr=0.03), "pfedme": dict(inner=2)}   # (pfedme: 2 inner steps, not 5: its time)


@pytest.mark.parametrize("name", sorted(ft.algorithms()))
def test_digits_mlp_trains_with_every_rule(name):
    p = _digits_problem()
    kw = dict(rounds=8, local_steps=5, lr=0.1, batch_size=16, backend="torch", device="cpu", seed=0)
    if not get_algorithm(name).full_participation_only and name != "nfsgd":
        kw["clients_per_round"] = 4
    r = ft.run(p, name, **kw, **RULE_HP.get(name, {}))
    v = r.history.value.to_numpy()
    assert r.status == "max_rounds" and np.isfinite(v).all()
    assert v[-1] < 0.99 * v[0], f"{name}: training loss {v[0]:.4f} -> {v[-1]:.4f}"
    assert {"train_acc", "test_acc", "test_loss"} <= set(r.history.columns)


def test_deep_run_is_deterministic_and_small_cnn_trains():
    p = _digits_problem(models.cnn(1, 8, convs=[(4, 3)], fcs=[16], seed=1), partition="shards")
    kw = dict(rounds=6, local_steps=5, lr=0.2, clients_per_round=4, batch_size=16, backend="torch", device="cpu")
    a, b = ft.run(p, "scaffold", **kw), ft.run(p, "scaffold", **kw)
    np.testing.assert_array_equal(a.x, b.x)
    assert a.history.value.iloc[-1] < a.history.value.iloc[0]


def test_deep_global_gradient_is_weighted_sum_of_client_gradients():
    X, y = problems.vision.load_digits_images(flatten=True)
    parts = problems.partition_indices(y, 4, "quantity_skew", seed=0)
    w = np.array([0.1, 0.2, 0.3, 0.4])
    p = DeepProblem(models.mlp(64, 10, hidden=(8,), seed=0), X, y, parts, l2=0.01, weights=w,
                    dtype=torch.float64, eval_batch=97)            # chunks cut across clients
    x = p.initial_point()
    g = p.grad(x)
    ref = sum(w[i] * p.client_grad(i, x) for i in range(4))
    np.testing.assert_allclose(g, ref, rtol=1e-10, atol=1e-13)
    assert abs(p.value(x) - sum(w[i] * p.client_value(i, x) for i in range(4))) < 1e-12


def test_deep_hvp_matches_gradient_difference():
    p = _digits_problem(models.mlp(64, 10, hidden=(8,), seed=0))
    p = DeepProblem(p.model, p.X.numpy(), p.y.numpy(), [np.arange(50), np.arange(50, 120)], dtype=torch.float64)
    o = p.oracles("cpu")
    x = o.tensor(p.initial_point())
    v = o.tensor(np.random.default_rng(0).standard_normal(p.dim))
    h = 1e-6
    fd = (o.grad(1, x + h * v) - o.grad(1, x - h * v)) / (2 * h)
    torch.testing.assert_close(o.hvp(1, x, v), fd, rtol=1e-5, atol=1e-7)


def test_model_parameter_counts():
    count = lambda m: sum(q.numel() for q in m.parameters())      # noqa: E731
    assert count(models.lenet5()) == 61706                         # LeNet-5 on 28x28 inputs
    assert count(models.resnet18_gn(10)) == 11181642               # torchvision ResNet-18, 10 classes
    assert count(models.mlp(784, 10)) == 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10
    assert count(models.feddeper_cnn_mnist()) == 320 + 18496 + 3136 * 1024 + 1024 + 1024 * 512 + 512 + 5130
    assert models.feddeper_cnn_cifar()(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    assert models.resnet18_gn(100)(torch.zeros(2, 3, 32, 32)).shape == (2, 100)
    assert not list(models.resnet18_gn().buffers())


# ------------------------------------------------------------------ errors
def test_deep_problem_errors():
    X, y = problems.vision.load_digits_images(flatten=True)
    parts = problems.partition_indices(y, 3, "iid", seed=0)
    bn = torch.nn.Sequential(torch.nn.Linear(64, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 10))
    with pytest.raises(InvalidParameterError, match="no buffers"):
        DeepProblem(bn, X, y, parts)
    with pytest.raises(InvalidParameterError, match="same number of samples"):
        DeepProblem(models.mlp(64, 10, hidden=(4,)), X[:10], y, parts)
    p = DeepProblem(models.mlp(64, 10, hidden=(4,)), X, y, parts)
    with pytest.raises(InvalidParameterError, match="must be 'torch' for a DeepProblem"):
        ft.run(p, "fedavg", rounds=1)
    if not torch.cuda.is_available():
        with pytest.raises(InvalidParameterError, match="no CUDA device"):
            ft.run(p, "fedavg", rounds=1, backend="torch", device="cuda")
    with pytest.raises(InvalidParameterError, match="'device' parameter of run must be a torch device"):
        ft.run(p, "fedavg", rounds=1, backend="torch", device="gpu0")


def _digits_arrays(n=3):
    X, y = problems.vision.load_digits_images(flatten=True)
    return X, y, problems.partition_indices(y, n, "iid", seed=0)


def test_frozen_parameters_stay_frozen_and_x_is_the_trainable_ones():
    """A first layer with requires_grad=False was trained like the rest (it moved by 0.055): x now
    holds the trainable parameters only, and F at the final x is the loss of the network with the
    frozen layer as it was (computed here with the plain module)."""
    X, y, parts = _digits_arrays()
    net = models.mlp(64, 10, hidden=(16,), seed=0)
    first = next(net.parameters())
    first.requires_grad_(False)
    frozen = first.detach().clone()
    p = DeepProblem(net, X, y, parts, dtype=torch.float64)
    assert p.dim == sum(q.numel() for q in net.parameters() if q.requires_grad)
    res = ft.run(p, "fedavg", rounds=3, local_steps=3, lr=0.2, batch_size=16, backend="torch", device="cpu")
    assert np.abs(res.x - p.initial_point()).max() > 1e-3                       # the rest trained
    check = copy.deepcopy(net).double()
    with torch.no_grad():
        trainable = [q for q in check.parameters() if q.requires_grad]
        torch.nn.utils.vector_to_parameters(torch.as_tensor(res.x), trainable)
        order = np.concatenate(parts)
        per = torch.nn.functional.cross_entropy(check(torch.as_tensor(X[order], dtype=torch.float64)),
                                                torch.as_tensor(y[order]).long(), reduction="none")
        w = torch.as_tensor(np.repeat(p.weights / p.client_sizes, p.client_sizes))
        expected = float((w * per).sum())
    assert torch.equal(next(check.parameters()).float(), frozen.float()) and torch.equal(first, frozen)
    assert abs(res.history.value.iloc[-1] - expected) <= 1e-12 * max(1.0, abs(expected))


def test_dropout_model_is_run_in_evaluation_mode_and_runs_repeat():
    """With dropout, F(x0) gave 2.338, 2.334, 2.336 on three calls, two runs of one seed ended 0.015
    apart, and the evaluation schedule changed the trained model: the network now runs in evaluation
    mode (f_i a function of x), with a warning saying so."""
    X, y, parts = _digits_arrays(4)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(32, 10))
    with pytest.warns(UserWarning, match="evaluation mode"):
        p = DeepProblem(net, X, y, parts, dtype=torch.float64)
    assert net.training                                           # the user's module is left as it was
    x0 = p.initial_point()
    assert len({p.value(x0) for _ in range(3)}) == 1
    kw = dict(rounds=3, local_steps=5, lr=0.1, batch_size=16, backend="torch", device="cpu", seed=0)
    a, b = ft.run(p, "fedavg", eval_every=1, **kw), ft.run(p, "fedavg", eval_every=3, **kw)
    np.testing.assert_array_equal(a.x, b.x)
    with warnings.catch_warnings(record=True) as seen:           # no such warning without dropout
        warnings.simplefilter("always")
        DeepProblem(models.mlp(64, 10, hidden=(4,)), X, y, parts)
    assert not [w for w in seen if "evaluation mode" in str(w.message)]


def test_deep_problem_refuses_bad_indices_labels_and_options():
    X, y, parts = _digits_arrays()
    net = models.mlp(64, 10, hidden=(4,))
    cases = [(dict(parts=[np.array([-1, 2]), *parts[1:]]), r"sample indices in \[0, 1797\). Got -1 for client 0"),
             (dict(parts=[parts[0] + 0.5, *parts[1:]]), "integer sample indices"),
             (dict(parts=[np.array([0, 1797]), *parts[1:]]), "Got 1797 for client 0"),
             (dict(model=models.mlp(64, 5, hidden=(4,))), r"C >= 10.*Got outputs of shape \(8, 5\)"),
             (dict(X_test=X[:5]), "'X_test' and 'y_test' parameters of DeepProblem must be given together"),
             (dict(X_test=X[:5], y_test=y[:4]), "one class label >= 0 per sample of 'X_test'"),
             (dict(dtype=torch.int64), "floating torch dtype"),
             (dict(y=-np.ones_like(y)), "class labels >= 0"),
             (dict(weights=[0.5, 0.5, 0.5]), r"Got \[0.5, 0.5, 0.5\]"),
             (dict(model=torch.nn.Linear(3, 10)), "cannot be applied to the inputs 'X'")]
    for change, match in cases:
        kw = {**dict(model=net, X=X, y=y, parts=parts), **change}
        with pytest.raises(InvalidParameterError, match=match):
            DeepProblem(kw.pop("model"), kw.pop("X"), kw.pop("y"), kw.pop("parts"), **kw)
    frozen = models.mlp(64, 10, hidden=(4,))
    for q in frozen.parameters():
        q.requires_grad_(False)
    with pytest.raises(InvalidParameterError, match="requires_grad=True"):
        DeepProblem(frozen, X, y, parts)
    p = DeepProblem(net, X, y, parts, eval_grad=False)
    with pytest.raises(InvalidParameterError, match="'tol' parameter of run needs the gradient norm"):
        ft.run(p, "fedavg", rounds=2, backend="torch", device="cpu", tol=1e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_deep_model_and_data_already_on_the_gpu():
    """A model moved to the GPU crashed run with "can't convert cuda:0 device type tensor to numpy"."""
    X, y, parts = _digits_arrays()
    net = models.mlp(64, 10, hidden=(8,), seed=0).cuda()
    p = DeepProblem(net, torch.as_tensor(X).cuda(), torch.as_tensor(y).cuda(), parts,
                    X_test=torch.as_tensor(X[:50]).cuda(), y_test=torch.as_tensor(y[:50]).cuda())
    res = ft.run(p, "fedavg", rounds=2, local_steps=2, lr=0.1, batch_size=16, backend="torch", device="cuda")
    assert res.status == "max_rounds" and np.isfinite(res.history.test_acc).all()


def test_no_device_tensor_reaches_numpy_implicitly(tmp_path, monkeypatch):
    """On a GPU, NumPy cannot read a tensor: NFSGD's mixing matrix (np.asarray of the weights) and an
    init written with NumPy only (np.array(x0), as docs/add-your-own-algorithm.md's FedAvgM) crashed
    with "can't convert cuda:0 device type tensor to numpy" (measured on an H100; every other rule
    ran). Emulated here on the CPU: a tensor refuses NumPy's implicit conversion, as a CUDA tensor
    does, and every rule still runs and agrees with numba."""
    import importlib
    from fedtheory.runs.arrays import to_numpy
    from fedtheory.registry import ALGORITHMS

    def refuse(self, dtype=None, copy=None):
        raise TypeError("can't convert cuda:0 device type tensor to numpy (emulated)")

    (tmp_path / "test_torch_nesterov_mod.py").write_text(_NESTEROV_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = dict(ALGORITHMS)
    try:
        importlib.import_module("test_torch_nesterov_mod")
        monkeypatch.setattr(torch.Tensor, "__array__", refuse)
        p = problems.quadratic(8, 5, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)
        for name in sorted(ALGORITHMS):
            A = get_algorithm(name)
            kw = dict(rounds=3, local_steps=2, seed=0, record_iterates=True, **{"lr": 0.1, **A.test_params})
            if not A.full_participation_only and name != "nfsgd":
                kw["clients_per_round"] = 4
            a = ft.run(p, name, **kw)
            c = ft.run(p, name, backend="torch", device="cpu", **kw)
            err = max(float(np.abs(to_numpy(u) - v).max()) for u, v in zip(c.iterates, a.iterates))
            assert err <= 1e-10, (name, err)
    finally:
        ALGORITHMS.clear()
        ALGORITHMS.update(saved)
        sys.modules.pop("test_torch_nesterov_mod", None)


# ------------------------------------------------------------------ loaders (offline)
def _idx_gz(path, arr):
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def _trust_local_files(monkeypatch, tmp_path, table):
    """Point the loader's MD5 table at the synthetic files (local files are MD5-checked)."""
    from problems.datasets import file_digest
    new = {f: file_digest(tmp_path / f, "md5") for f in table}
    monkeypatch.setattr(problems.vision, "MNIST_FILES", new)
    return new


def test_mnist_loader_reads_idx_files(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (5, 28, 28))
    labels = rng.integers(0, 10, 5)
    for kind in ("train", "t10k"):
        _idx_gz(tmp_path / f"{kind}-images-idx3-ubyte.gz", imgs)
        _idx_gz(tmp_path / f"{kind}-labels-idx1-ubyte.gz", labels)
    with pytest.raises(OSError, match="has md5 .* expected"):         # the published MD5s: rejected
        problems.vision.load_mnist(data_dir=tmp_path, download=False)
    _trust_local_files(monkeypatch, tmp_path, problems.vision.MNIST_FILES)
    X, y, Xt, yt = problems.vision.load_mnist(data_dir=tmp_path, download=False)
    assert X.shape == (5, 1, 28, 28) and X.dtype == np.float32
    np.testing.assert_array_equal(X[:, 0] * 255, imgs)
    np.testing.assert_array_equal(yt, labels)


def test_cifar_loader_reads_archive(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    batches = {f"data_batch_{k}": rng.integers(0, 256, (2, 3072)) for k in range(1, 6)}
    batches["test_batch"] = rng.integers(0, 256, (3, 3072))
    with tarfile.open(tmp_path / "cifar-10-python.tar.gz", "w:gz") as tar:
        for name, data in batches.items():
            raw = pickle.dumps({"data": data.astype(np.uint8), "labels": list(range(len(data)))})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    with pytest.raises(OSError, match="cifar-10-python.tar.gz has md5"):
        problems.vision.load_cifar10(data_dir=tmp_path, download=False)
    from problems.datasets import file_digest
    url, archive, _, folder = problems.vision.CIFAR["cifar10"]
    monkeypatch.setitem(problems.vision.CIFAR, "cifar10",
                        (url, archive, file_digest(tmp_path / archive, "md5"), folder))
    X, y, Xt, yt = problems.vision.load_cifar10(data_dir=tmp_path, download=False, normalize=False)
    assert X.shape == (10, 3, 32, 32) and Xt.shape == (3, 3, 32, 32)
    np.testing.assert_array_equal(X[0].reshape(-1) * 255, batches["data_batch_1"][0])
    Xn = problems.vision.load_cifar10(data_dir=tmp_path, download=False)[0]
    np.testing.assert_allclose(Xn[0, 1], (X[0, 1] - 0.482) / 0.243, rtol=1e-5)


def test_offline_loader_says_where_to_put_files(tmp_path, monkeypatch):
    import urllib.request
    monkeypatch.setenv("FEDTHEORY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FEDTHEORY_DATA", str(tmp_path / "data"))

    def offline(*a, **k):
        raise urllib.error.URLError("no network")
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(FileNotFoundError, match=r"(?s)mnist is not available.*download failed.*"
                                                r"train-images-idx3-ubyte\.gz.*data.mnist"):
        problems.vision.load_mnist()
    with pytest.raises(FileNotFoundError, match=r"(?s)cifar10 is not available \(download=False\).*cache.cifar10"):
        problems.vision.load_cifar10(download=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run on a lent accelerator)")
def test_cuda_float64_matches_numba():
    p = _logistic()
    kw = dict(rounds=5, local_steps=3, lr=0.1, clients_per_round=3, batch_size=5, record_iterates=True)
    a = ft.run(p, "scaffold", **kw)
    b = ft.run(p, "scaffold", backend="torch", device="cuda", **kw)
    assert np.abs(a.iterates - b.iterates).max() <= 1e-10


def test_download_with_wrong_md5_is_rejected_and_removed(tmp_path, monkeypatch):
    import urllib.request
    monkeypatch.setenv("FEDTHEORY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FEDTHEORY_DATA", raising=False)
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: io.BytesIO(b"not the archive"))
    with pytest.raises(OSError, match=r"cifar-10-python\.tar\.gz has md5 [0-9a-f]{32}, expected "
                                      r"c58f30108f718f92721af3b95e74349a"):
        problems.vision.load_cifar10()
    assert list((tmp_path / "cache" / "cifar10").iterdir()) == []


def test_an_init_written_with_numpy_runs_on_torch():
    """An algorithm whose ``init`` builds its state with NumPy (``np.zeros_like(x0)``, as a user
    writes it) runs on the torch backend: its float arrays become tensors like x0, and the run
    agrees with the numba backend."""
    from dataclasses import dataclass
    from typing import ClassVar

    from fedtheory.algorithms.base import Algorithm, Interval
    from fedtheory.registry import ALGORITHMS, register

    @register
    @dataclass(frozen=True)
    class NumpyInitMomentum(Algorithm):
        beta: float = 0.5
        name: ClassVar[str] = "numpy_init_momentum"
        constraints: ClassVar[dict] = {"beta": [Interval(float, 0, 1, "left")]}

        def init(self, problem, x0):
            x = np.array(x0, dtype=float)
            return {"x": x, "m": np.zeros_like(x), "count": np.zeros(1, dtype=np.int64)}

        def local_round(self, state, ctx):
            Y, fail = ctx.local_sgd(state["x"])
            return {"y": Y, "fail": fail}

        def server_update(self, state, ctx, messages):
            x, w = state["x"], ctx.weights
            m = self.beta * state["m"] + (w @ messages["y"] - w.sum() * x)
            return {"x": x + m, "m": m, "count": state["count"] + 1}

    try:
        _both(_least_squares(), "numpy_init_momentum")
    finally:
        ALGORITHMS.pop("numpy_init_momentum", None)


def test_a_compiled_server_rule_that_torch_cannot_run_says_what_to_write():
    """An algorithm in the compiled form only, whose ``server`` calls NumPy on the state: on torch
    (which runs the rule as plain Python on tensors) the error says why and what to write."""
    import sys
    import types
    src = '''
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar
import numpy as np
from fedtheory._kernels import rounds as ops
from fedtheory.algorithms.base import Algorithm
from fedtheory.registry import register
State = namedtuple("NpServerState", "x")
Messages = namedtuple("NpServerMessages", "y")
def local(pk, rd, hp, st, rng):
    x = ops.row(st.x)
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, 0.0, ops.empty2())
    return Messages(Y), bad
def server(pk, rd, hp, st, m):
    d = rd.weights @ m.y - rd.weights.sum() * st.x
    return State(st.x + d / max(1.0, np.sqrt(np.sum(d * d))))
@register
@dataclass(frozen=True)
class NpServer(Algorithm):
    name: ClassVar[str] = "np_server_rule"
    constraints: ClassVar[dict] = {}
    compiled_rules: ClassVar[bool] = True
    def local_round(self, state, ctx):
        Y, fail = ctx.local_sgd(state["x"])
        return {"y": Y, "fail": fail}
'''
    mod = types.ModuleType("np_server_rule_mod")
    sys.modules[mod.__name__] = mod
    from fedtheory.registry import ALGORITHMS
    try:
        exec(compile(src, "<np_server_rule>", "exec"), mod.__dict__)
        with pytest.raises(TypeError, match="runs the compiled rule server .* as plain Python on tensors.*"
                                            "needs a server_update of its own for torch"):
            ft.run(_least_squares(), "np_server_rule", rounds=2, local_steps=2, lr=0.1, backend="torch", device="cpu")
    finally:
        ALGORITHMS.pop("np_server_rule", None)
        sys.modules.pop(mod.__name__, None)


_NESTEROV_MODULE = 'from dataclasses import dataclass\nfrom typing import ClassVar\n\nimport numpy as np\n\nfrom fedtheory.algorithms.base import Algorithm, Interval\nfrom fedtheory.registry import register\n\n\n@register\n@dataclass(frozen=True)\nclass FedAvgM(Algorithm):\n    r"""FedAvg with server momentum.\n\n    .. math:: m^{t+1} = \\beta m^t + \\sum_i \\omega_i (y_{i,K} - x^t), \\quad x^{t+1} = x^t + \\eta_g m^{t+1}\n\n    Parameters\n    ----------\n    beta : float, default 0.9\n        Server momentum in [0, 1).\n    server_lr : float, default 1\n        Global step size eta_g > 0.\n\n    References\n    ----------\n    Hsu, Qi, Brown 2019, Algorithm 1 with server momentum.\n    """\n\n    beta: float = 0.9\n    server_lr: float = 1.0\n\n    name: ClassVar[str] = "test_torch_fedavgm"\n    reference: ClassVar[str] = "Hsu, Qi, Brown 2019, Alg. 1 (server momentum)"\n    constraints: ClassVar[dict] = {"beta": [Interval(float, 0, 1, "left")],\n                                   "server_lr": [Interval(float, 0, None, "neither")]}\n    comm: ClassVar[tuple] = (1, 1)\n    test_params: ClassVar[dict] = {"lr": 0.1, "beta": 0.5}\n    reductions: ClassVar[list] = [({"beta": 0.0}, "fedavg", {})]\n\n    def init(self, problem, x0):\n        x = np.array(x0, dtype=float)\n        return {"x": x, "m": np.zeros_like(x)}\n\n    def local_round(self, state, ctx):\n        Y, fail = ctx.local_sgd(state["x"])                  # K local SGD steps (Numba kernel)\n        return {"y": Y, "fail": fail}\n\n    def local_round_reference(self, state, ctx):\n        x = state["x"]\n        Y = np.empty((ctx.S, x.shape[0]))\n        for s in range(ctx.S):\n            y = x.copy()                                     # y_{i,0} = x^t\n            ctx.record("local", s, 0, y)\n            for k in range(ctx.K):\n                y = y - ctx.lrs[k] * ctx.grad(s, k, y)       # y <- y - eta_l g_i(y; xi)\n                ctx.record("local", s, k + 1, y)\n            Y[s] = y\n        return {"y": Y}\n\n    def server_update(self, state, ctx, messages):\n        x, w = state["x"], ctx.weights\n        m = self.beta * state["m"] + (w @ messages["y"] - w.sum() * x)   # m <- beta m + sum_i omega_i Delta_i\n        return {**state, "x": x + self.server_lr * m, "m": m}\n\nfrom collections import namedtuple\n\nfrom fedtheory._kernels import rounds as ops\n\nState = namedtuple("FedAvgMState", "x m")\nMessages = namedtuple("FedAvgMMessages", "y")\n\n\ndef local(pk, rd, hp, st, rng):\n    """K local SGD steps from y_{i,0} = x^t."""\n    x = ops.row(st.x)\n    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, 0.0, ops.empty2())\n    return Messages(Y), bad\n\n\ndef server(pk, rd, hp, st, m):\n    """m <- beta m + sum_i omega_i (y_i - x^t); x <- x + eta_g m."""\n    mom = hp.beta * st.m + (rd.weights @ m.y - rd.weights.sum() * st.x)\n    return State(st.x + hp.server_lr * (hp.beta * mom + (rd.weights @ m.y - rd.weights.sum() * st.x)), mom)   # Nesterov variant\n\n\n@register\n@dataclass(frozen=True)\nclass FedAvgMCompiled(FedAvgM):\n    """FedAvgM with compiled rules (``local`` and ``server`` of its module)."""\n\n    name: ClassVar[str] = "test_torch_fedavgm_nesterov"\n    reductions: ClassVar[list] = []\n    compiled_rules: ClassVar[bool] = True      # the rules above are this class\'s round\n\n    def local_round(self, state, ctx):        # the torch backend\'s glue\n        Y, fail = ctx.local_sgd(state["x"])\n        return {"y": Y, "fail": fail}\n\n\nassert FedAvgMCompiled.rules_module() is not None          # it has compiled rules: the fused path\nassert FedAvgM.rules_module() is None                      # the per-round form keeps its own round\n'


def test_torch_runs_a_subclass_own_compiled_server_not_the_inherited_server_update(tmp_path, monkeypatch):
    """docs/add-your-own-algorithm.md, section 3: a class with compiled rules that subclasses a
    round-by-round one inherits its server_update. Its own compiled server (here a Nesterov step)
    ran on numba and python, but torch ran the parent's server_update: 0.17 apart, silently, and the
    public check suite compared numba with python only. Torch runs the subclass's rule now, and
    check_backends_agree compares torch too."""
    import importlib
    from fedtheory.registry import ALGORITHMS
    from fedtheory.testing.checks import check_backends_agree
    (tmp_path / "test_torch_nesterov_mod.py").write_text(_NESTEROV_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = dict(ALGORITHMS)
    try:
        importlib.import_module("test_torch_nesterov_mod")
        p = problems.quadratic(8, 5, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)
        kw = dict(rounds=10, local_steps=5, lr=0.1, beta=0.5, clients_per_round=4, seed=0, record_iterates=True)
        a = ft.run(p, "test_torch_fedavgm_nesterov", **kw)
        c = ft.run(p, "test_torch_fedavgm_nesterov", backend="torch", **kw)
        parent = ft.run(p, "test_torch_fedavgm", **kw)
        assert np.abs(a.iterates - np.asarray(c.iterates)).max() <= 1e-12
        assert np.abs(parent.iterates - a.iterates).max() > 1e-2          # the two rules differ
        check_backends_agree("test_torch_fedavgm_nesterov")
    finally:
        ALGORITHMS.clear()
        ALGORITHMS.update(saved)
        sys.modules.pop("test_torch_nesterov_mod", None)
