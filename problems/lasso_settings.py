"""The federated-lasso data of pFedFBE's experiments (docs/papers/pfedfbe.md, §8.1, after Yuan et al. 2021)."""
import numpy as np

from fedtheory._argcheck import Interval, Options, check_param

from .regression import lasso


def federated_lasso(setting="II", n_clients=30, dim=1024, samples=128, l1=0.1, normalization="half_mse", seed=0):
    r"""Federated lasso with known per-client signals (settings (I) and (II) of pFedFBE).

    Client j has a mean :math:`\mu_j \sim N(0, I_d)`; its features are :math:`a = \mu_j + \delta`,
    :math:`\delta \sim N(0, I_d)`, and responses :math:`y = w_j^\top a + \varepsilon`, :math:`\varepsilon\sim N(0,1)`.
    Setting (I): :math:`w_j = [1_{d-32}, 0_{32}]` for every client. Setting (II): 8 shared ones in
    coordinates 0..7 plus 2 client-specific coordinates (uniform among the rest) set to 0.5.
    No intercept (the paper's b_real = 0).

    Parameters
    ----------
    setting : {"I", "II"}
    n_clients, dim, samples : int
        30, 1024, 128 in the paper; dim >= 33 in setting (I) (the signal has d - 32 ones), >= 11 in (II).
    l1 : float
        The l1 weight tau (0.1 in the paper).
    normalization : {"half_mse", "mse"}
        The paper does not state its loss normalisation (docs/papers/pfedfbe.md, §8.4): "half_mse" is
        :math:`\frac{1}{2m}\|Aw - y\|^2` (the library's least squares), "mse" is :math:`\frac1m\|Aw-y\|^2`
        (features and responses scaled by sqrt 2; it doubles L).
    seed : int
        Seed of the data.

    Returns
    -------
    FederatedProblem
        ``info["w_clients"]`` holds the (n, d) true signals.

    Examples
    --------
    >>> import problems
    >>> p = problems.federated_lasso("II", n_clients=4, dim=20, samples=16, seed=0)
    >>> p.info["w_clients"].shape, int((p.info["w_clients"][0] != 0).sum())
    ((4, 20), 10)
    """
    c = "problems.federated_lasso"
    check_param("setting", setting, [Options("I", "II")], c)
    check_param("normalization", normalization, [Options("half_mse", "mse")], c)
    check_param("n_clients", n_clients, [Interval(int, 1, None)], c)
    # setting (I) zeroes the last 32 coordinates of a ones vector (at least one 1); (II) places 8 ones
    # and two more coordinates after them
    check_param("dim", dim, [Interval(int, 33 if setting == "I" else 11, None)], c)
    check_param("samples", samples, [Interval(int, 1, None)], c)
    rng = np.random.default_rng(seed)
    W = np.zeros((n_clients, dim))
    A, y = [], []
    for j in range(n_clients):
        if setting == "I":
            W[j, : dim - 32] = 1.0
        else:
            W[j, :8] = 1.0
            W[j, 8 + rng.choice(dim - 8, 2, replace=False)] = 0.5
        mu = rng.normal(size=dim)
        a = mu + rng.normal(size=(samples, dim))
        A.append(a)
        y.append(a @ W[j] + rng.normal(size=samples))
    s = np.sqrt(2.0) if normalization == "mse" else 1.0
    p = lasso([a * s for a in A], [t * s for t in y], l1=l1)
    p.name = f"federated_lasso_{setting}"
    p.info = dict(w_clients=W, setting=setting, normalization=normalization)
    return p
