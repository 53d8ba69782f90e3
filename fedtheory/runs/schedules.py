"""Conventions of the papers' experiments that differ from their theory (docs/papers/fedspeed.md, A7, A10).

The theory counts local *iterations* with a constant step size; the experiments quote local
*epochs* and decay the step size every round. These helpers convert the experimental
conventions into :func:`fedtheory.run` arguments.
"""
import math

import numpy as np

from .._argcheck import Interval, check_param


def round_decay(lr, decay, local_steps):
    r"""Step-size schedule decayed once per round: :math:`\eta_l^{t} = \eta_l\,\mathrm{decay}^{t}`.

    Parameters
    ----------
    lr : float
        Initial local step size eta_l > 0.
    decay : float
        Per-round factor in (0, 1] (FedSpeed's experiments: 0.9995 or 0.998).
    local_steps : int
        K, the local steps per round of the run it is used in (the runner's schedules take
        the global local-step counter t = r K + k).

    Returns
    -------
    callable
        ``schedule(t) -> float`` for ``fedtheory.run(lr=...)``.

    Examples
    --------
    >>> from fedtheory.runs.schedules import round_decay
    >>> s = round_decay(0.1, 0.5, local_steps=3)
    >>> [s(t) for t in range(7)]
    [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025]
    """
    c = "round_decay"
    check_param("lr", lr, [Interval(float, 0, None, "neither")], c)
    check_param("decay", decay, [Interval(float, 0, 1, "right")], c)
    check_param("local_steps", local_steps, [Interval(int, 1, None)], c)

    def schedule(t):
        return lr * decay ** (t // local_steps)
    return schedule


def epochs_to_local_steps(problem, epochs, batch_size):
    r"""Local iterations for ``epochs`` passes with minibatch ``batch_size``: K = E ceil(m_i / B).

    The runner uses one K for every client, so the clients must hold the same number of
    samples m_i (the papers' balanced splits); otherwise a ValueError names the sizes.

    Parameters
    ----------
    problem : FederatedProblem
        Its clients must hold the same number of samples.
    epochs : int
        Passes E >= 1 over each client's data per round.
    batch_size : int
        Minibatch size B >= 1.

    Returns
    -------
    int
        The number of local steps K.

    Examples
    --------
    >>> import numpy as np, problems
    >>> from fedtheory.runs.schedules import epochs_to_local_steps
    >>> rng = np.random.default_rng(0)
    >>> p = problems.least_squares([rng.normal(size=(100, 3))] * 4, [rng.normal(size=100)] * 4)
    >>> epochs_to_local_steps(p, epochs=5, batch_size=50)
    10
    """
    c = "epochs_to_local_steps"
    check_param("epochs", epochs, [Interval(int, 1, None)], c)
    check_param("batch_size", batch_size, [Interval(int, 1, None)], c)
    sizes = np.asarray(problem.client_sizes)
    if sizes.min() != sizes.max():
        raise ValueError(f"{c}: clients hold different numbers of samples ({sizes.min()} to "
                         f"{sizes.max()}), so K = E ceil(m_i/B) differs between clients; use a "
                         "balanced partition or choose local_steps directly.")
    return int(epochs * math.ceil(int(sizes[0]) / batch_size))
