"""Array operations shared by the NumPy (numba/python backends) and torch algorithm states.

The algorithms' ``init`` and ``server_update`` are written once and run on NumPy arrays (numba
and python backends) or on torch tensors (torch backend). Arithmetic operators (``+ - * / @``,
indexing, in-place row assignment) behave the same on both; the few constructors and
element-wise functions that do not are dispatched here, without importing torch.

Examples
--------
>>> import numpy as np
>>> from fedtheory.runs import arrays
>>> arrays.repeat_rows(np.array([1.0, 2.0]), 2)
array([[1., 2.],
       [1., 2.]])
"""
from __future__ import annotations

import numpy as np


def is_tensor(a):
    """Tell whether ``a`` is a torch tensor (checked by type, so torch is never imported here).

    Parameters
    ----------
    a : object
        Any value.

    Returns
    -------
    bool
        True for a torch tensor.
    """
    return type(a).__module__.split(".")[0] == "torch"


def copy(a):
    """Copy an array (``ndarray.copy`` or ``Tensor.clone``).

    Parameters
    ----------
    a : array or torch.Tensor
        The array.

    Returns
    -------
    array or torch.Tensor
        A copy of the same kind.
    """
    return a.clone() if is_tensor(a) else a.copy()


def zeros(like, shape):
    """Zeros of ``shape`` with the dtype (and device) of ``like``.

    Parameters
    ----------
    like : array or torch.Tensor
        The array whose kind, dtype and device the result takes.
    shape : int or tuple of int
        The shape.

    Returns
    -------
    array or torch.Tensor
        The zeros.
    """
    if is_tensor(like):
        return like.new_zeros(tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),))
    return np.zeros(shape, dtype=like.dtype)


def full(like, shape, value):
    """An array of ``shape`` filled with ``value``, with the dtype (and device) of ``like``.

    Parameters
    ----------
    like : array or torch.Tensor
        Its kind, dtype and device are the result's.
    shape : int or tuple of int
        The result's shape.
    value : float
        The fill value.

    Returns
    -------
    array or torch.Tensor
        The filled array.
    """
    if is_tensor(like):
        return like.new_full(tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),), float(value))
    return np.full(shape, value, dtype=like.dtype)


def repeat_rows(x, n):
    """The (n, d) array whose every row is the vector ``x`` (a copy).

    Parameters
    ----------
    x : array or torch.Tensor
        A vector of shape (d,).
    n : int
        The number of rows.

    Returns
    -------
    array or torch.Tensor
        A new (n, d) array.
    """
    return x.unsqueeze(0).repeat(n, 1) if is_tensor(x) else np.repeat(x[None], n, axis=0)


def broadcast_rows(x, n):
    """A read-only (n, d) view whose every row is ``x`` (no copy).

    Parameters
    ----------
    x : array or torch.Tensor
        The row, of shape (d,); the view shares its memory.
    n : int
        How many times the row appears.

    Returns
    -------
    array or torch.Tensor
        The view (NumPy's ``broadcast_to``, torch's ``expand``).
    """
    return x.unsqueeze(0).expand(n, -1) if is_tensor(x) else np.broadcast_to(x, (n, x.shape[0]))


def sqrt(a):
    """Element-wise square root.

    Parameters
    ----------
    a : array or torch.Tensor
        Non-negative values.

    Returns
    -------
    array or torch.Tensor
        Its square root, of the same kind.
    """
    return a.sqrt() if is_tensor(a) else np.sqrt(a)


def maximum(a, b):
    """Element-wise maximum of two arrays of the same kind.

    Parameters
    ----------
    a, b : array or torch.Tensor
        The arrays (both NumPy or both torch).

    Returns
    -------
    array or torch.Tensor
        The element-wise maximum.
    """
    if is_tensor(a):
        import torch
        return torch.maximum(a, b)
    return np.maximum(a, b)


def to_numpy(a):
    """A NumPy array of ``a`` (a tensor is moved to the host).

    Parameters
    ----------
    a : object
        A tensor, an array or any other value.

    Returns
    -------
    object
        The tensor's values as a NumPy array; anything else as it is.
    """
    if is_tensor(a):
        return a.detach().cpu().numpy()
    return a


def as_like(a, like):
    """The NumPy array ``a`` as an array of the kind, dtype (and device) of ``like``.

    Parameters
    ----------
    a : ndarray
        The values.
    like : array or torch.Tensor
        The array whose kind, dtype and device the result takes.

    Returns
    -------
    array or torch.Tensor
        ``a`` itself for a NumPy ``like``, else a tensor of its values.
    """
    if is_tensor(like):
        import torch
        return torch.as_tensor(a, dtype=like.dtype, device=like.device)
    return a


class HostView(dict):
    """A read-only NumPy view of an algorithm state: tensors are copied to the host on access.

    The torch backend hands it to ``history_extras``, which is written for NumPy states.
    """

    def __getitem__(self, key):
        return to_numpy(super().__getitem__(key))

    def get(self, key, default=None):
        return self[key] if key in self else default
