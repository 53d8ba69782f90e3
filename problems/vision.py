"""Image classification data (MNIST, CIFAR-10/100, scikit-learn's digits) for the torch backend.

The loaders return NumPy arrays ``(X_train, y_train, X_test, y_test)`` with X of shape
(N, C, H, W), float32 in [0, 1] (optionally normalised per channel) and int64 labels; they need
neither torch nor torchvision. Files are looked up in ``data_dir``, then ``$FEDTHEORY_DATA/<name>``,
then the user cache (``problems.datasets.cache_dir()/<name>``); when absent they are downloaded
into the cache and their MD5 checked, and offline an error says where to put them.

:func:`image_problem` partitions a data set with :func:`problems.partition_indices` and returns a
:class:`fedtheory.backends.torch.DeepProblem` (torch extra).
"""
from __future__ import annotations

import gzip
import os
import pickle
import shutil
import tarfile
import urllib.request
from pathlib import Path

import numpy as np

from .datasets import cache_dir, file_digest
from .partition import partition_indices

MNIST_URLS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/")
MNIST_FILES = {  # file -> md5 (the values torchvision checks)
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
CIFAR = {  # name -> (url, archive, md5, folder)
    "cifar10": ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "cifar-10-python.tar.gz",
                "c58f30108f718f92721af3b95e74349a", "cifar-10-batches-py"),
    "cifar100": ("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", "cifar-100-python.tar.gz",
                 "eb9058c3a382ffc7106e4002c42a8d85", "cifar-100-python"),
}
#: Per-channel mean and std of FedSpeed's preprocessing (docs/papers/fedspeed.md, §6.1).
CIFAR_STATS = {"cifar10": ((0.491, 0.482, 0.447), (0.247, 0.243, 0.262)),
               "cifar100": ((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761))}


def _dirs(name, data_dir):
    dirs = []
    if data_dir is not None:
        dirs.append(Path(data_dir))
    if os.environ.get("FEDTHEORY_DATA"):
        dirs.append(Path(os.environ["FEDTHEORY_DATA"]) / name)
    dirs.append(cache_dir() / name)
    return dirs


def _fetch(name, files, urls, data_dir, download):
    """Paths of ``files`` (name -> md5) from the search directories, downloading what is missing."""
    dirs = _dirs(name, data_dir)
    for d in dirs:
        if all((d / f).is_file() for f in files):
            for f, md5 in files.items():          # local files are checked as downloads are
                digest = file_digest(d / f, "md5")
                if digest != md5:
                    raise OSError(f"{d / f} has md5 {digest}, expected {md5}: the file is truncated, corrupt "
                                  "or a different version. Replace it (or delete it to download it again).")
            return {f: d / f for f in files}
    if not download:
        raise FileNotFoundError(_missing(name, files, dirs, "download=False"))
    dest = cache_dir() / name
    dest.mkdir(parents=True, exist_ok=True)
    out = {}
    for f, md5 in files.items():
        target = dest / f
        if not target.is_file():
            tmp = dest / (f + ".part")
            err = None
            for base in urls:
                url = base if base.endswith(f) else base + f
                try:
                    with urllib.request.urlopen(url, timeout=60) as r, open(tmp, "wb") as fh:
                        shutil.copyfileobj(r, fh)
                    err = None
                    break
                except OSError as e:          # URLError is an OSError: offline or unreachable
                    err = e
            if err is not None:
                tmp.unlink(missing_ok=True)
                raise FileNotFoundError(_missing(name, files, dirs, f"the download failed: {err}")) from None
            digest = file_digest(tmp, "md5")
            if digest != md5:
                tmp.unlink()
                raise OSError(f"downloaded {f} has md5 {digest}, expected {md5}; the file was removed.")
            tmp.rename(target)
        out[f] = target
    return out


def _missing(name, files, dirs, why):
    where = "\n".join(f"  {d}" for d in dirs)
    return (f"{name} is not available ({why}). Put the files {sorted(files)} in one of:\n{where}\n"
            f"(data_dir=..., $FEDTHEORY_DATA/{name}, or the cache, which $FEDTHEORY_CACHE moves).")


def _idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * k:8 + 4 * k], "big") for k in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_mnist(data_dir=None, download=True):
    """MNIST, pixels in [0, 1] (ToTensor without Normalize, as the FedSPS/FedCAMS code).

    Parameters
    ----------
    data_dir : str or Path, optional
        Directory searched first for the files (then ``$FEDTHEORY_DATA/<name>``, then the user
        cache); every file found is checked against its md5.
    download : bool, default True
        Download missing files into the user cache; with False a missing file is an error that
        says where to put it.

    Returns
    -------
    X_train : ndarray of shape (60000, 1, 28, 28), float32
        The training images.
    y_train : ndarray of shape (60000,), int64
        Their class labels.
    X_test : ndarray of shape (10000, 1, 28, 28), float32
        The test images.
    y_test : ndarray of shape (10000,), int64
        Their class labels.

    Examples
    --------
    >>> import problems
    >>> X, y, Xt, yt = problems.vision.load_mnist()        # doctest: +SKIP
    """
    p = _fetch("mnist", MNIST_FILES, MNIST_URLS, data_dir, download)
    img = lambda f: (_idx(p[f]).astype(np.float32) / 255.0)[:, None]    # noqa: E731
    lab = lambda f: _idx(p[f]).astype(np.int64)                           # noqa: E731
    return (img("train-images-idx3-ubyte.gz"), lab("train-labels-idx1-ubyte.gz"),
            img("t10k-images-idx3-ubyte.gz"), lab("t10k-labels-idx1-ubyte.gz"))


def _load_cifar(name, data_dir, download, normalize):
    url, archive, md5, folder = CIFAR[name]
    path = _fetch(name, {archive: md5}, (url,), data_dir, download)[archive]
    with tarfile.open(path, "r:gz") as tar:
        def batch(member):
            d = pickle.load(tar.extractfile(f"{folder}/{member}"), encoding="latin1")
            X = np.asarray(d["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
            y = np.asarray(d["labels"] if "labels" in d else d["fine_labels"], dtype=np.int64)
            return X, y
        if name == "cifar10":
            parts = [batch(f"data_batch_{k}") for k in range(1, 6)]
            X, y = np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
            Xt, yt = batch("test_batch")
        else:
            (X, y), (Xt, yt) = batch("train"), batch("test")
    if normalize:
        mean, std = (np.array(v, dtype=np.float32)[None, :, None, None] for v in CIFAR_STATS[name])
        X, Xt = (X - mean) / std, (Xt - mean) / std
    return X, y, Xt, yt


def load_cifar10(data_dir=None, download=True, normalize=True):
    """CIFAR-10, normalised with FedSpeed's per-channel mean and std when ``normalize``.

    Parameters
    ----------
    data_dir : str or Path, optional
        Directory searched first for the files (then ``$FEDTHEORY_DATA/<name>``, then the user
        cache); every file found is checked against its md5.
    download : bool, default True
        Download missing files into the user cache; with False a missing file is an error that
        says where to put it.
    normalize : bool, default True
        Subtract the per-channel mean and divide by the std; else pixels in [0, 1].

    Returns
    -------
    X_train : ndarray of shape (50000, 3, 32, 32), float32
        The training images.
    y_train : ndarray of shape (50000,), int64
        Their class labels.
    X_test : ndarray of shape (10000, 3, 32, 32), float32
        The test images.
    y_test : ndarray of shape (10000,), int64
        Their class labels.
    """
    return _load_cifar("cifar10", data_dir, download, normalize)


def load_cifar100(data_dir=None, download=True, normalize=True):
    """CIFAR-100 (fine labels), as :func:`load_cifar10`.

    Parameters
    ----------
    data_dir : str or Path, optional
        Directory searched first for the files (then ``$FEDTHEORY_DATA/<name>``, then the user
        cache); every file found is checked against its md5.
    download : bool, default True
        Download missing files into the user cache; with False a missing file is an error that
        says where to put it.
    normalize : bool, default True
        Subtract the per-channel mean and divide by the std; else pixels in [0, 1].

    Returns
    -------
    X_train : ndarray of shape (50000, 3, 32, 32), float32
        The training images.
    y_train : ndarray of shape (50000,), int64
        Their class labels (100 classes).
    X_test : ndarray of shape (10000, 3, 32, 32), float32
        The test images.
    y_test : ndarray of shape (10000,), int64
        Their class labels.
    """
    return _load_cifar("cifar100", data_dir, download, normalize)


def load_digits_images(flatten=False, test_fraction=0.0, seed=0):
    """Load scikit-learn's bundled digits (1797 images 8x8, no network), pixels in [0, 1].

    The offline stand-in for MNIST in tests.

    Parameters
    ----------
    flatten : bool, default False
        Images of shape (64,) instead of (1, 8, 8).
    test_fraction : float, default 0
        With a value > 0, hold out this fraction of the images (a fixed random split).
    seed : int, default 0
        Seed of the split.

    Returns
    -------
    tuple of ndarray
        ``(X, y)`` with X of shape (N, 1, 8, 8) or (N, 64), float32, and y int64; with
        ``test_fraction`` > 0, ``(X, y, X_test, y_test)``.

    Examples
    --------
    >>> import problems
    >>> X, y = problems.vision.load_digits_images()
    >>> X.shape, int(y.max())
    ((1797, 1, 8, 8), 9)
    """
    from sklearn.datasets import load_digits
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    X = X if flatten else X.reshape(-1, 1, 8, 8)
    y = y.astype(np.int64)
    if not test_fraction:
        return X, y
    perm = np.random.default_rng(seed).permutation(len(y))
    nt = int(round(test_fraction * len(y)))
    te, tr = perm[:nt], perm[nt:]
    return X[tr], y[tr], X[te], y[te]


LOADERS = {"mnist": load_mnist, "cifar10": load_cifar10, "cifar100": load_cifar100}


def image_problem(dataset, model, n_clients=100, partition="iid", seed=0, alpha=0.5, shards_per_client=2,
                  l2=0.0, data_dir=None, download=True, max_samples=None, eval_grad=False, **problem_kw):
    """A federated image-classification :class:`~fedtheory.backends.torch.DeepProblem` (torch extra).

    Parameters
    ----------
    dataset : {"mnist", "cifar10", "cifar100", "digits"} or tuple
        A data set name, or arrays ``(X, y)`` / ``(X, y, X_test, y_test)``.
    model : torch.nn.Module
        The network (e.g. from :mod:`fedtheory.backends.torch.models`).
    n_clients : int, default 100
        Number of clients.
    partition : str, default "iid"
        The split of :func:`problems.partition_indices` (e.g. ``"dirichlet_per_client"`` with
        alpha=0.6 for FedSpeed's Dir-0.6, ``"shards"`` for the McMahan et al. two-shard split).
    seed : int, default 0
        Seed of the split (and of ``max_samples``' subset).
    alpha : float, default 0.5
        Dirichlet concentration of the split.
    shards_per_client : int, default 2
        Shards per client of the ``"shards"`` split.
    l2 : float
        Ridge weight (weight decay in the objective).
    data_dir : str or Path, optional
        Directory searched first for the files (then ``$FEDTHEORY_DATA/<name>``, then the user
        cache); every file found is checked against its md5.
    download : bool, default True
        Download missing files into the user cache; with False a missing file is an error that
        says where to put it.
    max_samples : int, optional
        Keep a random subset of the training set (quick runs).
    eval_grad : bool, default False
        Record the full-gradient norm at each evaluation.
    **problem_kw
        Further arguments of :class:`~fedtheory.backends.torch.DeepProblem`.

    Returns
    -------
    fedtheory.backends.torch.DeepProblem
        The network's loss on each client's images, with the test set for evaluation when there is one.

    Examples
    --------
    >>> import problems
    >>> from fedtheory.backends.torch import models
    >>> p = problems.vision.image_problem("digits", models.mlp(64, 10, hidden=(8,)), n_clients=4)
    >>> p.n_clients, p.dim
    (4, 610)
    """
    from fedtheory.backends import require_torch
    require_torch("problems.vision.image_problem")
    from fedtheory.backends.torch import DeepProblem
    if isinstance(dataset, tuple):
        arrays, name = dataset, "images"
    elif dataset == "digits":
        flat = _flat_input(model)
        arrays, name = load_digits_images(flatten=flat, test_fraction=0.2, seed=seed), "digits"
    elif dataset in LOADERS:
        arrays, name = LOADERS[dataset](data_dir=data_dir, download=download), dataset
        if _flat_input(model):
            arrays = tuple(a.reshape(a.shape[0], -1) if a.ndim > 2 else a for a in arrays)
    else:
        raise ValueError(f"The 'dataset' parameter of image_problem must be one of {sorted(LOADERS) + ['digits']} "
                         f"or a tuple of arrays. Got {dataset!r} instead.")
    X, y = arrays[0], arrays[1]
    Xt, yt = (arrays[2], arrays[3]) if len(arrays) == 4 else (None, None)
    if max_samples is not None and max_samples < len(y):
        keep = np.sort(np.random.default_rng(seed).choice(len(y), max_samples, replace=False))
        X, y = X[keep], y[keep]
    parts = partition_indices(y, n_clients, partition, seed=seed, alpha=alpha, shards_per_client=shards_per_client)
    return DeepProblem(model, X, y, parts, X_test=Xt, y_test=yt, l2=l2, eval_grad=eval_grad,
                       name=f"{name}:{type(model).__name__}:{partition}", **problem_kw)


def _flat_input(model):
    """True when the network's first layer is Linear (an MLP takes flattened images)."""
    import torch
    first = next((m for m in model.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))), None)
    return isinstance(first, torch.nn.Linear)
