"""Partitions of a data set over clients (i.i.d. and non-i.i.d. schemes).

Each function returns a list of ``n_clients`` sorted int64 index arrays that cover the
samples once each (``quantity_skew`` and ``iid`` cover all of them; the label-based schemes
too). Every client receives at least ``min_size`` samples or a ValueError says why not.
"""
import numpy as np

from fedtheory._argcheck import Interval, check_param
from fedtheory.exceptions import DataError

PARTITIONS = ("iid", "dirichlet_per_class", "dirichlet_per_client", "shards", "quantity_skew")


def _finish(parts, n_clients, min_size, scheme, retry_hint):
    sizes = np.array([len(p) for p in parts])
    if sizes.min() < min_size:
        raise ValueError(f"partition {scheme!r}: client {int(sizes.argmin())} received "
                         f"{int(sizes.min())} samples (< min_size={min_size}); {retry_hint}")
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def iid(n_samples, n_clients, rng, min_size=1):
    """Shuffle and split into ``n_clients`` parts of (almost) equal size.

    Parameters
    ----------
    n_samples : int
        The samples.
    n_clients : int
        The clients.
    rng : numpy.random.Generator
        The random stream.
    min_size : int, default 1
        The smallest client.

    Returns
    -------
    list of ndarray
        The sample indices of each client.
    """
    perm = rng.permutation(n_samples)
    return _finish(np.array_split(perm, n_clients), n_clients, min_size, "iid",
                   "use fewer clients")


def quantity_skew(n_samples, n_clients, rng, alpha=0.5, min_size=1, max_tries=100):
    """Client sizes proportional to Dirichlet(alpha) weights, samples otherwise i.i.d.

    Parameters
    ----------
    n_samples : int
        The samples.
    n_clients : int
        The clients.
    rng : numpy.random.Generator
        The random stream.
    alpha : float, default 0.5
        The Dirichlet concentration.
    min_size : int, default 1
        The smallest client.
    max_tries : int, default 100
        Draws tried until every client has ``min_size`` samples.

    Returns
    -------
    list of ndarray
        The sample indices of each client.
    """
    for _ in range(max_tries):
        p = rng.dirichlet(np.full(n_clients, alpha))
        cuts = (np.cumsum(p)[:-1] * n_samples).astype(int)
        parts = np.split(rng.permutation(n_samples), cuts)
        if min(len(q) for q in parts) >= min_size:
            break
    return _finish(parts, n_clients, min_size, "quantity_skew", "increase alpha")


def dirichlet_per_class(labels, n_clients, rng, alpha=0.5, min_size=1, max_tries=100):
    """Each class is split over the clients by proportions ~ Dirichlet(alpha).

    The "hetero-dir" scheme of NIID-Bench and FedLab; redrawn until every client has at
    least ``min_size`` samples.

    Parameters
    ----------
    labels : ndarray
        One label per sample.
    n_clients : int
        The clients.
    rng : numpy.random.Generator
        The random stream.
    alpha : float, default 0.5
        The Dirichlet concentration.
    min_size : int, default 1
        The smallest client.
    max_tries : int, default 100
        Draws tried until every client has ``min_size`` samples.

    Returns
    -------
    list of ndarray
        The sample indices of each client.
    """
    classes = np.unique(labels)
    for _ in range(max_tries):
        parts = [[] for _ in range(n_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            p = rng.dirichlet(np.full(n_clients, alpha))
            cuts = (np.cumsum(p)[:-1] * len(idx)).astype(int)
            for k, chunk in enumerate(np.split(idx, cuts)):
                parts[k].extend(chunk.tolist())
        if min(len(q) for q in parts) >= min_size:
            break
    return _finish(parts, n_clients, min_size, "dirichlet_per_class", "increase alpha")


def dirichlet_per_client(labels, n_clients, rng, alpha=0.5, min_size=1):
    """Each client draws a class mix ~ Dirichlet(alpha) and fills an equal share with it.

    The FedDyn / FL-Simulator scheme: client k gets about n/n_clients samples, each of class
    c with probability p_kc; when a class runs out its mass is spread over the others.

    Parameters
    ----------
    labels : ndarray
        One label per sample.
    n_clients : int
        The clients.
    rng : numpy.random.Generator
        The random stream.
    alpha : float, default 0.5
        The Dirichlet concentration.
    min_size : int, default 1
        The smallest client.

    Returns
    -------
    list of ndarray
        The sample indices of each client.
    """
    classes = np.unique(labels)
    pools = [list(rng.permutation(np.flatnonzero(labels == c))) for c in classes]
    mix = rng.dirichlet(np.full(len(classes), alpha), size=n_clients)
    quota = np.array([len(a) for a in np.array_split(np.arange(len(labels)), n_clients)])
    parts = [[] for _ in range(n_clients)]
    for k in range(n_clients):
        for _ in range(quota[k]):
            avail = np.array([len(p) > 0 for p in pools], dtype=float)
            p = mix[k] * avail
            p = p / p.sum() if p.sum() > 0 else avail / avail.sum()
            c = rng.choice(len(classes), p=p)
            parts[k].append(pools[c].pop())
    return _finish(parts, n_clients, min_size, "dirichlet_per_client", "use fewer clients")


def shards(labels, n_clients, rng, shards_per_client=2, min_size=1):
    """Sort by label, cut into n_clients * k shards, give each client k random shards.

    The pathological non-i.i.d. split of McMahan et al. (2017): each client sees about k labels.

    Parameters
    ----------
    labels : ndarray
        One label per sample.
    n_clients : int
        The clients.
    rng : numpy.random.Generator
        The random stream.
    shards_per_client : int, default 2
        k.
    min_size : int, default 1
        The smallest client.

    Returns
    -------
    list of ndarray
        The sample indices of each client.
    """
    order = np.argsort(labels, kind="stable")
    pieces = np.array_split(order, n_clients * shards_per_client)
    assign = rng.permutation(len(pieces)).reshape(n_clients, shards_per_client)
    parts = [np.concatenate([pieces[j] for j in row]) for row in assign]
    return _finish(parts, n_clients, min_size, "shards", "use fewer clients or shards")


def partition_indices(labels, n_clients, partition="iid", seed=0, alpha=0.5,
                      shards_per_client=2, min_size=1):
    """Split sample indices over clients.

    Parameters
    ----------
    labels : array of shape (m,)
        Class label of each sample (used by the label-based schemes).
    n_clients : int
        Number of clients, 1 <= n_clients <= m.
    partition : {"iid", "dirichlet_per_class", "dirichlet_per_client", "shards", "quantity_skew"}
        The scheme.
    seed : int
        Seed of the split.
    alpha : float
        Dirichlet concentration (smaller is more heterogeneous).
    shards_per_client : int
        Shards per client for ``"shards"``.
    min_size : int
        Minimum samples per client.

    Returns
    -------
    list of int64 arrays
        The sample indices of each client.

    Examples
    --------
    >>> import numpy as np
    >>> parts = partition_indices(np.array([0, 1] * 10), 4, "shards", seed=0, shards_per_client=1)
    >>> sorted(len(p) for p in parts)
    [5, 5, 5, 5]
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise DataError(f"partition_indices: 'labels' must be one label per sample, a 1-D array; got shape "
                        f"{labels.shape} (one-hot labels: pass labels.argmax(axis=1))")
    if labels.dtype.kind in "fc" and not np.all(np.isfinite(labels)):
        raise DataError(f"partition_indices: 'labels' must be finite; got {int(np.sum(~np.isfinite(labels)))} "
                        f"NaN or infinite label(s) of {labels.shape[0]}")
    m = labels.shape[0]
    check_param("n_clients", n_clients, [Interval(int, 1, m)], "partition_indices")
    check_param("alpha", alpha, [Interval(float, 0, None, "neither")], "partition_indices")
    check_param("shards_per_client", shards_per_client, [Interval(int, 1, None)], "partition_indices")
    rng = np.random.default_rng(seed)
    if partition == "iid":
        return iid(m, n_clients, rng, min_size)
    if partition == "quantity_skew":
        return quantity_skew(m, n_clients, rng, alpha, min_size)
    if partition == "dirichlet_per_class":
        return dirichlet_per_class(labels, n_clients, rng, alpha, min_size)
    if partition == "dirichlet_per_client":
        return dirichlet_per_client(labels, n_clients, rng, alpha, min_size)
    if partition == "shards":
        return shards(labels, n_clients, rng, shards_per_client, min_size)
    raise ValueError(f"The 'partition' parameter of partition_indices must be a str among "
                     f"{{{', '.join(repr(p) for p in PARTITIONS)}}}. Got {partition!r} instead.")
