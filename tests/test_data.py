"""Real data loaders and partitions."""

import numpy as np
import pytest
import scipy.sparse as sp

import fedtheory as ft
import problems


@pytest.mark.parametrize("name,rows,cols,pos", [("mushrooms", 8124, 112, 4208), ("a9a", 32561, 123, 7841),
                                                ("a9a.t", 16281, 123, 3846), ("w8a", 49749, 300, 1479)])
def test_libsvm_files_as_documented(data_dir, name, rows, cols, pos):
    X, y = problems.load_libsvm(name, data_dir=data_dir)
    assert sp.issparse(X) and X.shape == (rows, cols)
    assert set(np.unique(y)) == {-1.0, 1.0} and int((y == 1).sum()) == pos


def test_libsvm_problem_is_sparse_end_to_end(data_dir):
    p = problems.libsvm("a9a", n_clients=100, l2=1e-3, data_dir=data_dir)
    assert p.sparse and p.n_clients == 100 and p.client_sizes.sum() == 32561
    res = ft.run(p, "scaffold", rounds=5, local_steps=5, lr=0.5, clients_per_round=10, batch_size=20)
    assert res.status == "max_rounds" and res.history.value.iloc[-1] < np.log(2)
    dense = problems.logistic([p.client_matrix(i).toarray() for i in range(100)],
                              [p.client_data(i)[1] for i in range(100)], l2=1e-3)
    res_d = ft.run(dense, "scaffold", rounds=5, local_steps=5, lr=0.5, clients_per_round=10, batch_size=20)
    assert np.abs(res.x - res_d.x).max() < 1e-12


def test_environment_variable_lookup(data_dir, monkeypatch):
    monkeypatch.setenv("FEDTHEORY_DATA", data_dir)
    X, _ = problems.load_libsvm("mushrooms", download=False)
    assert X.shape[0] == 8124


@pytest.mark.parametrize("scheme", problems.PARTITIONS)
def test_partitions_cover_every_sample_once(scheme):
    labels = np.random.default_rng(0).integers(0, 4, size=500)
    parts = problems.partition_indices(labels, 10, scheme, seed=1, alpha=0.5)
    allidx = np.concatenate(parts)
    assert len(parts) == 10 and min(len(q) for q in parts) >= 1
    assert np.array_equal(np.sort(allidx), np.arange(500))
    again = problems.partition_indices(labels, 10, scheme, seed=1, alpha=0.5)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def _label_entropy(labels, parts):
    ent = []
    for q in parts:
        p = np.bincount(labels[q], minlength=labels.max() + 1) / len(q)
        p = p[p > 0]
        ent.append(-(p * np.log(p)).sum())
    return np.mean(ent)


def test_non_iid_partitions_are_more_skewed_than_iid():
    labels = np.repeat(np.arange(10), 100)
    iid = _label_entropy(labels, problems.partition_indices(labels, 20, "iid", seed=0))
    for scheme in ("dirichlet_per_class", "dirichlet_per_client"):
        skew = _label_entropy(labels, problems.partition_indices(labels, 20, scheme, seed=0, alpha=0.1))
        assert skew < 0.6 * iid, (scheme, skew, iid)
    shard = problems.partition_indices(labels, 20, "shards", seed=0, shards_per_client=2)
    assert max(len(np.unique(labels[q])) for q in shard) <= 2


def test_quantity_skew_sizes_vary():
    parts = problems.partition_indices(np.zeros(1000), 10, "quantity_skew", seed=0, alpha=0.5)
    sizes = [len(q) for q in parts]
    assert max(sizes) > 3 * min(sizes)


def test_sklearn_adapters_need_no_network():
    bc = problems.breast_cancer(n_clients=5, l2=1e-2, partition="dirichlet_per_class", alpha=1.0)
    assert bc.dim == 30 and bc.client_sizes.sum() == 569
    dg = problems.digits(n_clients=10, positive_class=3, partition="shards", shards_per_client=2)
    assert dg.dim == 64 and dg.client_sizes.sum() == 1797
    # MNIST-style shards: each client holds about two digit classes, so the +1 share varies a lot
    share = [np.mean(dg.client_data(i)[1] == 1) for i in range(10)]
    assert max(share) > 0.3 and min(share) == 0.0


def test_sample_proportional_weights(data_dir):
    p = problems.libsvm("mushrooms", n_clients=8, partition="quantity_skew", weights="samples", data_dir=data_dir)
    assert np.allclose(p.weights, p.client_sizes / p.client_sizes.sum())


def _serve(directory):
    import functools
    import http.server
    import threading
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a, **k: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_download_verifies_checksum(tmp_path, monkeypatch, data_dir):
    """Missing file + network: downloaded into the cache and checked (a loopback server plays LIBSVM)."""
    import shutil
    import problems.datasets as ds
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(f"{data_dir}/mushrooms.bz2", site / "mushrooms.bz2")
    srv = _serve(site)
    try:
        monkeypatch.setattr(ds, "LIBSVM_URL", f"http://127.0.0.1:{srv.server_port}/{{file}}")
        monkeypatch.setenv("FEDTHEORY_CACHE", str(tmp_path / "cache"))
        monkeypatch.delenv("FEDTHEORY_DATA", raising=False)
        X, y = problems.load_libsvm("mushrooms")
        assert X.shape == (8124, 112)
        assert (tmp_path / "cache" / "libsvm" / "mushrooms.bz2").is_file()
        # a tampered download is rejected and removed
        with open(site / "w8a.bz2", "wb") as f:
            f.write(b"not the real file")
        with pytest.raises(FileNotFoundError, match="sha256"):
            problems.load_libsvm("w8a")
        assert not list((tmp_path / "cache" / "libsvm").glob("w8a*"))
    finally:
        srv.shutdown()


# ------------------------------------------------------- inputs a cast or a default silently changed --
def test_partition_labels_must_be_one_finite_label_per_sample():
    """One-hot labels gave 18 indices for 6 samples (up to index 17); NaN labels were dropped from the
    split although every sample is to be covered."""
    from problems.partition import partition_indices
    onehot = np.eye(3)[[0, 1, 2, 0, 1, 2]]
    for scheme in ("dirichlet_per_class", "dirichlet_per_client", "shards"):
        with pytest.raises(ft.DataError, match="1-D array; got shape \\(6, 3\\)"):
            partition_indices(onehot, 2, scheme)
    with pytest.raises(ft.DataError, match="must be finite; got 2 NaN"):
        partition_indices(np.array([0.0, 1.0, np.nan, 0.0, np.nan, 1.0]), 2, "dirichlet_per_class")
    parts = partition_indices(onehot.argmax(axis=1), 2, "dirichlet_per_class", seed=0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(6))


def test_group_ids_must_be_integers_of_at_least_minus_one():
    rng = np.random.default_rng(0)
    A, b = [rng.normal(size=(6, 4))], [rng.normal(size=6)]
    with pytest.raises(ft.DataError, match="integer group ids"):
        problems.group_lasso(A, b, l1=1.0, groups=[0.7, 0.2, 1.9, 1.1])       # was read as [0, 0, 1, 1]
    with pytest.raises(ft.DataError, match=">= -1"):
        problems.group_lasso(A, b, l1=1.0, groups=[-2, -2, -7, 0])             # was 3 unpenalised coordinates
    p = problems.group_lasso(A, b, l1=1.0, groups=[0.0, 0.0, 1.0, -1.0])       # integral floats are ids
    assert p.h_value(np.array([3.0, 4.0, 0.0, 5.0])) == pytest.approx(5.0)


def test_federated_lasso_setting_one_needs_the_signal_it_documents():
    """Setting (I) has w = [1_{d-32}, 0_32]: dim 11..32 gave fewer ones, or none at dim = 32."""
    with pytest.raises(ft.InvalidParameterError, match="'dim' .* \\[33, 2\\*\\*63 - 1\\]"):
        problems.federated_lasso("I", n_clients=2, dim=32, samples=8)
    p = problems.federated_lasso("I", n_clients=2, dim=33, samples=8)
    assert p.dim == 33
    problems.federated_lasso("II", n_clients=2, dim=11, samples=8)


def test_quadratic_refuses_what_it_cannot_build_exactly():
    # zeta^2 > 0 with one client of positive weight: 0/0 in the construction, reported as NaN targets
    with pytest.raises(ValueError, match="two clients of positive weight"):
        problems.quadratic(2, 3, heterogeneity=1.0, weights=[1.0, 0.0])
    # mu below the rounding of the stored Hessian's eigenvalues (about d eps L): not its strong convexity
    with pytest.raises(ValueError, match="'mu' must be at least 100 d eps L"):
        problems.quadratic(3, 6, mu=1e-16)
    with pytest.raises(ft.InvalidParameterError, match="'shared_minimizer' .* must be a bool"):
        problems.quadratic(3, 2, shared_minimizer="no")
    with pytest.raises(ft.DataError, match="'weights' must be 3"):
        problems.quadratic(3, 2, hessian="distinct", weights=[1, 1])
    with pytest.raises(ft.DataError, match="'weights' must be 3"):
        problems.explicit_quadratic(np.eye(2), np.ones((3, 2)), weights=[1, 1])
    p = problems.quadratic(3, 6, mu=1e-6, seed=0)
    assert np.linalg.eigvalsh(p.hessian(np.zeros(6)))[0] == pytest.approx(1e-6, rel=1e-6)


def test_problem_data_must_be_real_with_a_coordinate():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 2))
    with pytest.raises(ft.DataError, match="design matrix must be real numbers; got dtype complex128"):
        problems.least_squares([A + 1j], [np.ones(4)])
    with pytest.raises(ft.DataError, match="targets must be real numbers"):
        problems.logistic([A], [np.array([1, -1, 1, -1]) + 0.5j])
    with pytest.raises(ft.DataError, match="0 columns"):
        problems.least_squares([np.zeros((3, 0))], [np.ones(3)])


def test_matrix_completion_checks_its_shape_and_noise():
    for shape in ((2.7, 3.9), (1, 5), 5):
        with pytest.raises(ValueError, match="'shape' parameter .* pair of ints"):
            problems.matrix_completion(n_clients=2, shape=shape, samples=10, shared_rank=1)
    with pytest.raises(ft.InvalidParameterError, match="'noise_std'"):
        problems.matrix_completion(n_clients=2, shape=(4, 4), samples=10, shared_rank=1, noise_std=float("nan"))


def test_libsvm_checks_max_samples_and_weights(data_dir):
    for bad in (0, -5):
        with pytest.raises(ft.InvalidParameterError, match="'max_samples' .* \\[1, 2\\*\\*63 - 1\\]"):
            problems.libsvm("mushrooms", n_clients=3, max_samples=bad, data_dir=data_dir)
    with pytest.raises(ValueError, match="'weights' parameter of problems.libsvm .* Got 'sample'"):
        problems.libsvm("mushrooms", n_clients=3, weights="sample", data_dir=data_dir)

