"""Execution backends of :func:`fedtheory.run`.

* ``"numba"`` (default): the compiled kernels of :mod:`fedtheory._kernels`, called through
  :class:`fedtheory.algorithms.context.RoundContext`;
* ``"python"``: the NumPy twins of the papers' pseudo-code (``local_round_reference``);
* ``"torch"`` (optional extra ``pip install "fedtheory[torch]"``): :mod:`fedtheory.backends.torch`,
  the same update rules on torch tensors, on CPU or GPU, for the convex problems (float64, the same
  iterates as numba) and for deep networks (:class:`fedtheory.backends.torch.DeepProblem`).

All three follow one trajectory for one seed: the runner draws the sampled clients, the minibatch
rows and the noise in NumPy and hands the same index arrays to every backend.

May import the foundations (``fedtheory.exceptions``, ``fedtheory._argcheck``), the components,
the kernels and the algorithms' base; never the run engine above it, the theory or the reporting
layer; torch only inside :mod:`fedtheory.backends.torch`.
"""


def require_torch(what="backend='torch'"):
    """Import and return torch, or raise an ImportError naming the extra to install.

    Parameters
    ----------
    what : str, default "backend='torch'"
        What needs torch (for the error).

    Returns
    -------
    module
        torch.
    """
    try:
        import torch
    except ImportError as e:
        raise ImportError(f"{what} needs PyTorch, an optional extra of fedtheory: "
                          "pip install \"fedtheory[torch]\" (torch==2.13.0).") from e
    return torch
