"""The raw-gradient limit used by ``benchmarks/``: only the minibatch gradients, nothing else."""
import numpy as np

from .oracles import client_grad, loop_kernel


@loop_kernel
def minibatch_gradients_only(sparse, A, data, indices, indptr, b, kind, client_ptr, idx, x, l2):
    """Compute the gradient of every minibatch in ``idx`` (shape (N, B)) at a fixed x.

    This is the floor cost of any implementation of K-step local SGD: the same minibatch
    gradients in one tight compiled loop, with no model updates, sampling or bookkeeping.
    Returns the sum of the gradients' first coordinates (so the work cannot be elided).
    """
    g = np.empty(x.shape[0])
    acc = 0.0
    for t in range(idx.shape[0]):
        client_grad(sparse, A, data, indices, indptr, b, kind, 0, 0, idx[t], x, l2, g)
        acc += g[0]
    return acc
