"""Real data: LIBSVM binary data sets and scikit-learn's bundled data sets."""
import hashlib
import os
import shutil
import urllib.request
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fedtheory._argcheck import Interval, check_param
from fedtheory.truth.store import cache_dir

from .classification import logistic
from .partition import partition_indices

LIBSVM_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/{file}"

#: Known LIBSVM binary data sets: file name, number of features, sha256 of the .bz2 file and sha256
#: of the uncompressed file (every file the loader accepts is checked against one of them).
LIBSVM_DATASETS = {
    "a9a": ("a9a.bz2", 123, "1dcb2b4aedea0b5a9e964192dd211675d16cf05ab6477ddd0702d87c1d1af8da",
            "f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906"),
    "a9a.t": ("a9a.t.bz2", 123, "e55725b53c3c47f7053bd3ef12e41555539eac4c0fe989e69345cc4dd0ea6e8d",
              "1f448a153f0320399a7e40836eb207655b0bde0f21fc941cc472193daa9f5de9"),
    "mushrooms": ("mushrooms.bz2", 112, "ebb1b6efabfaf28f5a35ac50d64bba111b8a37c7e6622c03e31dd61b296f167a",
                  "eb26424a54203ca9e8956ff3e5b10e613dfc3587f65d21bdbdbc28020fd995e0"),
    "w8a": ("w8a.bz2", 300, "821765de2cbea06f54f2f06b1db12c946aec2f95aed74105d12556b11bc34526",
            "b464b4f6ce6a5d9e181ffc793e19a04751036273722312398ef7673705014902"),
}


def file_digest(path, algorithm="sha256"):
    """Hex digest of a file, read in 1 MiB chunks (``algorithm``: any :mod:`hashlib` name).

    Parameters
    ----------
    path : str or Path
        The file.
    algorithm : str, default "sha256"
        Any :mod:`hashlib` name.

    Returns
    -------
    str
        The hex digest.
    """
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _find_file(name, data_dir):
    """Return ``(path or None, searched directories, file name)``."""
    fname = LIBSVM_DATASETS[name][0] if name in LIBSVM_DATASETS else name
    candidates = [fname, fname[:-4]] if fname.endswith(".bz2") else [fname, fname + ".bz2"]
    dirs = []
    if data_dir is not None:
        dirs.append(("data_dir", Path(data_dir)))
    if os.environ.get("FEDTHEORY_DATA"):
        dirs.append(("$FEDTHEORY_DATA", Path(os.environ["FEDTHEORY_DATA"])))
    dirs.append(("cache", cache_dir() / "libsvm"))
    for _, d in dirs:
        for c in candidates:
            if (d / c).is_file():
                return d / c, dirs, fname
    return None, dirs, fname


def _download(name, fname):
    dest = cache_dir() / "libsvm"
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / fname
    tmp = dest / (fname + ".part")
    with urllib.request.urlopen(LIBSVM_URL.format(file=fname), timeout=60) as r, open(tmp, "wb") as f:
        shutil.copyfileobj(r, f)
    digest = file_digest(tmp)
    if name in LIBSVM_DATASETS and digest != LIBSVM_DATASETS[name][2]:
        tmp.unlink()
        raise OSError(f"downloaded {fname} has sha256 {digest}, expected {LIBSVM_DATASETS[name][2]}; "
                      "the file was removed.")
    tmp.rename(target)
    return target


def load_libsvm(name, data_dir=None, download=True, sha256=None):
    """Load a LIBSVM binary data set as ``(X, y)`` with X CSR (float64) and y in {-1, +1}.

    The file is looked up in ``data_dir``, then ``$FEDTHEORY_DATA``, then the user cache
    (:func:`cache_dir`/libsvm). If absent and ``download`` is True it is downloaded from the
    LIBSVM site into the cache and its sha256 checked; offline, an error says where to put it.
    Every file is checked before use: a known data set against the digest table
    (``LIBSVM_DATASETS``: the .bz2 file or the uncompressed one), any other file against
    ``sha256``, which it then requires (a truncated or relabelled file never loads silently).

    Parameters
    ----------
    name : str
        One of ``LIBSVM_DATASETS`` ("a9a", "a9a.t", "mushrooms", "w8a") or a file name.
    data_dir : str or Path, optional
        Directory holding the file (``<name>.bz2`` or uncompressed).
    download : bool, default True
        Try to download a missing known data set.
    sha256 : str, optional
        Expected sha256 of a file that is not a known data set (required for those).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (m, d)
        The features (float64).
    y : ndarray of shape (m,)
        The labels, in {-1, +1}.

    Examples
    --------
    >>> X, y = load_libsvm("mushrooms")   # reads $FEDTHEORY_DATA or the cache, else downloads
    >>> X.shape, sorted(set(y.tolist()))
    ((8124, 112), [-1.0, 1.0])
    """
    from sklearn.datasets import load_svmlight_file

    path, dirs, fname = _find_file(name, data_dir)
    if path is None:
        where = ", ".join(f"{label} ({d})" for label, d in dirs)
        err = None
        if download and name in LIBSVM_DATASETS:
            try:
                path = _download(name, fname)
            except OSError as e:  # no network, HTTP error, checksum mismatch
                err = e
        else:
            err = "not a known data set, so it is not downloaded" if name not in LIBSVM_DATASETS \
                else "download=False"
        if err is not None:
            known = ", ".join(sorted(LIBSVM_DATASETS))
            raise FileNotFoundError(
                f"LIBSVM data set {name!r} ({fname}) was not found in {where} and could not be "
                f"downloaded ({err}). Put the file from {LIBSVM_URL.format(file=fname)} into one of "
                f"those directories, or pass data_dir=... (known data sets: {known}).")
    _check_digest(name, path, sha256)
    n_features = LIBSVM_DATASETS[name][1] if name in LIBSVM_DATASETS else None
    X, y = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64)
    return sp.csr_matrix(X), _to_pm1(y, name)


def _check_digest(name, path, sha256=None):
    """Raise OSError unless ``path`` has the sha256 of the digest table (or ``sha256``)."""
    if name in LIBSVM_DATASETS:
        expected = LIBSVM_DATASETS[name][2] if path.name.endswith(".bz2") else LIBSVM_DATASETS[name][3]
        what = "the .bz2 file" if path.name.endswith(".bz2") else "the uncompressed file"
    elif sha256 is None:
        raise ValueError(f"The 'sha256' parameter of load_libsvm must be the sha256 of {path} ({name!r} is not "
                         f"a known data set: {sorted(LIBSVM_DATASETS)}). Got None instead; its sha256 is "
                         f"{file_digest(path)}.")
    else:
        expected, what = str(sha256).lower(), "the given sha256"
    digest = file_digest(path)
    if digest != expected:
        raise OSError(f"{path} has sha256 {digest}, expected {expected} ({what}) for {name!r}: the file is "
                      "truncated, corrupt or a different version. Replace it (or delete it to download it again).")


def _to_pm1(y, name):
    vals = np.unique(y)
    if len(vals) != 2:
        raise ValueError(f"data set {name!r} has {len(vals)} classes {vals[:5].tolist()}; "
                         "logistic regression needs exactly 2.")
    return np.where(y == vals[1], 1.0, -1.0)


def _federate(X, y, part_labels, n_clients, partition, seed, l2, name, weights, **pkw):
    parts = partition_indices(part_labels, n_clients, partition, seed=seed, **pkw)
    if isinstance(weights, str):
        if weights != "samples":
            raise ValueError(f"The 'weights' parameter of problems.{name.split(':')[0]} must be None, \"samples\" "
                             f"(w_i proportional to the client sizes) or {n_clients} numbers. Got {weights!r} instead.")
        w = np.array([len(p) for p in parts], dtype=float)
    else:
        w = weights
    return logistic([X[p] for p in parts], [y[p] for p in parts], l2=l2, weights=w, name=name)


def libsvm(name, n_clients=10, partition="iid", l2=0.0, seed=0, data_dir=None, max_samples=None,
           weights=None, alpha=0.5, shards_per_client=2, min_size=1, download=True):
    r"""Federated logistic regression on a LIBSVM binary data set.

    .. math:: f_i(x) = \frac{1}{m_i}\sum_{j \in S_i}\log(1 + e^{-y_j a_j^\top x})
              + \frac{\ell_2}{2}\|x\|^2 .

    Parameters
    ----------
    name : str
        "a9a", "a9a.t", "mushrooms", "w8a" (see :func:`load_libsvm` for where files are read).
    n_clients : int
        Number of clients.
    partition : str
        A scheme of :func:`problems.partition_indices`; label-based schemes use the labels.
    l2 : float
        Ridge weight.
    seed : int
        Seed of the partition (and of the subsample when ``max_samples`` is set).
    data_dir : str, optional
        Directory holding the file.
    max_samples : int, optional
        Use a uniformly random subset of this many samples (for fast tests).
    weights : None, "samples" or array
        Client weights: uniform (None), proportional to client sizes, or given.
    alpha : float, default 0.5
        Dirichlet concentration of the partition (:func:`partition_indices`).
    shards_per_client : int, default 2
        Shards per client of the ``"shards"`` partition.
    min_size : int, default 1
        Minimum samples per client.
    download : bool
        Download a missing known data set when online.

    Returns
    -------
    FederatedProblem
        Logistic regression on the data set's rows (CSR), partitioned over the clients.

    Examples
    --------
    >>> p = libsvm("a9a", n_clients=100, partition="iid", l2=1e-3)
    >>> p.n_clients, p.dim, p.sparse
    (100, 123, True)
    """
    if max_samples is not None:
        check_param("max_samples", max_samples, [Interval(int, 1, None)], "problems.libsvm")
    X, y = load_libsvm(name, data_dir=data_dir, download=download)
    if max_samples is not None and max_samples < X.shape[0]:
        keep = np.sort(np.random.default_rng(seed).choice(X.shape[0], max_samples, replace=False))
        X, y = X[keep], y[keep]
    return _federate(X, y, y, n_clients, partition, seed, l2, f"libsvm:{name}", weights,
                     alpha=alpha, shards_per_client=shards_per_client, min_size=min_size)


def breast_cancer(n_clients=10, partition="iid", l2=0.0, seed=0, standardize=True, weights=None,
                  alpha=0.5, shards_per_client=2, min_size=1):
    """Logistic regression on scikit-learn's bundled breast cancer data (569 x 30, no network).

    Features are standardised (zero mean, unit variance) when ``standardize`` is True;
    malignant = -1, benign = +1.

    Parameters
    ----------
    n_clients : int, default 10
        Number of clients.
    partition : str, default "iid"
        A scheme of :func:`problems.partition_indices`; label-based schemes use the labels.
    l2 : float, default 0
        Ridge weight.
    seed : int, default 0
        Seed of the partition.
    standardize : bool, default True
        Standardise the features.
    weights : None, "samples" or array
        Client weights: uniform (None), proportional to client sizes, or given.
    alpha : float, default 0.5
        Dirichlet concentration of the Dirichlet partitions (smaller is more heterogeneous).
    shards_per_client : int, default 2
        Shards per client of ``partition="shards"``.
    min_size : int, default 1
        Minimum samples per client.

    Returns
    -------
    FederatedProblem
        A logistic-regression problem.

    Examples
    --------
    >>> import problems
    >>> problems.breast_cancer(n_clients=5, l2=1e-2).dim
    30
    """
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    if standardize:
        X = (X - X.mean(0)) / X.std(0)
    y = np.where(y == 1, 1.0, -1.0)
    return _federate(X, y, y, n_clients, partition, seed, l2, "breast_cancer", weights,
                     alpha=alpha, shards_per_client=shards_per_client, min_size=min_size)


def digits(n_clients=10, positive_class=0, partition="iid", l2=0.0, seed=0, scale=True,
           weights=None, alpha=0.5, shards_per_client=2, min_size=1):
    """One-vs-rest logistic regression on scikit-learn's bundled digits (1797 x 64, no network).

    Label +1 for ``positive_class``, -1 otherwise. The label-based partitions split by the
    original ten digit classes, so ``partition="shards"`` gives the MNIST-style non-i.i.d.
    setting (each client sees about ``shards_per_client`` digits). Pixels are scaled to [0, 1].

    Parameters
    ----------
    n_clients : int, default 10
        Number of clients.
    positive_class : int, default 0
        The digit labelled +1, in [0, 9].
    partition : str, default "iid"
        A scheme of :func:`problems.partition_indices`; label-based schemes use the labels.
    l2 : float, default 0
        Ridge weight.
    seed : int, default 0
        Seed of the partition.
    scale : bool, default True
        Scale the pixels from [0, 16] to [0, 1].
    weights : None, "samples" or array
        Client weights: uniform (None), proportional to client sizes, or given.
    alpha : float, default 0.5
        Dirichlet concentration of the Dirichlet partitions (smaller is more heterogeneous).
    shards_per_client : int, default 2
        Shards per client of ``partition="shards"``.
    min_size : int, default 1
        Minimum samples per client.

    Returns
    -------
    FederatedProblem
        A logistic-regression problem.

    Examples
    --------
    >>> import problems
    >>> problems.digits(n_clients=10, partition="shards", l2=1e-3).n_clients
    10
    """
    from sklearn.datasets import load_digits

    X, c = load_digits(return_X_y=True)
    if scale:
        X = X / 16.0
    if positive_class not in range(10):
        raise ValueError(f"The 'positive_class' parameter of digits must be an int in [0, 9]. "
                         f"Got {positive_class!r} instead.")
    y = np.where(c == positive_class, 1.0, -1.0)
    return _federate(X, y, c, n_clients, partition, seed, l2, f"digits:{positive_class}", weights,
                     alpha=alpha, shards_per_client=shards_per_client, min_size=min_size)
