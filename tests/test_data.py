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
