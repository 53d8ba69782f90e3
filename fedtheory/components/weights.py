"""The client weights of a federated objective F = sum_i w_i f_i: checked and normalised once, for the
problem and for the quadratic constructions that need them before a problem exists."""
import numpy as np

from ..exceptions import DataError


def client_weights(weights, n, caller):
    """The client weights w, normalised to sum 1 (uniform 1/n for None).

    Parameters
    ----------
    weights : array of shape (n,) or None
        Non-negative finite numbers with a positive sum.
    n : int
        The number of clients.
    caller : str
        The name the error cites.

    Returns
    -------
    ndarray of shape (n,)
        ``weights / sum(weights)``.

    Raises
    ------
    DataError
        For weights of another shape, negative or non-finite entries, or a sum that is not positive.
    """
    if weights is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise DataError(f"{caller}: 'weights' must be {n} non-negative finite numbers "
                        f"with a positive sum; got {weights!r}.")
    return w / w.sum()
