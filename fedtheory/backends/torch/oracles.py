"""A problem's oracles on torch tensors: what the torch round context asks of a problem.

:class:`TorchOracles` holds the client layout (``client_ptr``, ``client_sizes``, ``weights`` as a
tensor) and differentiates one scalar, the (minibatch) client loss ``_loss(i, y, rows)``, with
autograd: gradients, values on the same minibatch, Hessian-vector products. Convex problems
(:class:`ConvexOracles`, float64) evaluate the torch form of the problem's datafit and regularizer
components (:meth:`fedtheory.components.Datafit.torch_value`,
:meth:`fedtheory.components.Regularizer.torch_prox_t`), so their iterates agree with the numba
backend to rounding; deep networks
(:class:`fedtheory.backends.torch.deep.DeepOracles`) evaluate an ``nn.Module`` on flat parameters.
"""
from __future__ import annotations

import numpy as np
import torch

from ...components import make_regularizer
from ...exceptions import InvalidParameterError


def resolve_device(device):
    """``device`` as a torch.device; None picks "cuda" when available, else "cpu".

    Parameters
    ----------
    device : str or torch.device or None
        The device (None: cuda when available, else cpu).

    Returns
    -------
    torch.device
        The device.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise InvalidParameterError(f"The 'device' parameter of run must be a torch device such as 'cpu' or "
                                    f"'cuda'. Got {device!r} instead ({e}).") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidParameterError("The 'device' parameter of run asks for 'cuda', but torch sees no CUDA "
                                    f"device on this machine. Got {device!r}; use 'cpu' or None.")
    return dev


class TorchOracles:
    """Client oracles on tensors (base class; subclasses define ``_loss``).

    Attributes mirror :class:`fedtheory.problem.FederatedProblem` where the algorithms read them
    (``n_clients``, ``dim``, ``client_ptr``, ``client_sizes``, ``noise``, ``l2``, ``l1``, ``reg``),
    except ``weights``, a tensor on ``device``, so that ``weights @ rows`` works on tensor states.

    Parameters
    ----------
    problem : FederatedProblem or DeepProblem
        The problem.
    device : torch.device
        The device.
    dtype : torch.dtype
        The tensors' dtype.
    """

    def __init__(self, problem, device, dtype):
        self.source = problem
        self.device, self.dtype = device, dtype
        self.n_clients, self.dim = problem.n_clients, problem.dim
        self.client_ptr = problem.client_ptr
        self.client_sizes = problem.client_sizes
        self.noise = float(problem.noise)
        self.l2 = float(problem.l2)
        self.l1 = float(getattr(problem, "reg_weight", getattr(problem, "l1", 0.0)))
        self.reg = getattr(problem, "reg", "l1")
        self.regularizer = getattr(problem, "regularizer", None) or make_regularizer(self.reg, weight=self.l1)
        self.is_composite = bool(getattr(problem, "is_composite", False))
        self.name = problem.name
        self.weights = torch.as_tensor(np.asarray(problem.weights), dtype=dtype, device=device)

    @property
    def reg_weight(self):
        """Weight tau of the regularizer h (the problem's ``reg_weight``; ``l1`` is its older name)."""
        return self.l1

    def tensor(self, a):
        """A NumPy array (or tensor) as a tensor of the oracles' dtype on their device."""
        return torch.as_tensor(a, dtype=self.dtype, device=self.device)

    def _rows(self, i, rows):
        """Absolute rows of client i: the minibatch ``rows`` or the whole client."""
        if rows is None or len(rows) == 0:
            return slice(int(self.client_ptr[i]), int(self.client_ptr[i + 1]))
        if torch.is_tensor(rows):                # the context's rows, already on the device
            return rows
        return torch.as_tensor(np.asarray(rows), dtype=torch.long, device=self.device)

    def _loss(self, i, y, rows):  # pragma: no cover - abstract
        raise NotImplementedError

    def value_grad(self, i, y, rows=None):
        """(F_i(y; rows) as a 0-d tensor, its gradient), the value and gradient on the same rows."""
        with torch.enable_grad():
            y = y.detach().requires_grad_(True)
            loss = self._loss(i, y, rows)
            (g,) = torch.autograd.grad(loss, y)
        return loss.detach(), g

    def grad(self, i, y, rows=None):
        """Gradient of client i's (minibatch) objective at y."""
        return self.value_grad(i, y, rows)[1]

    def hvp(self, i, y, v, rows=None):
        """Hessian-vector product of client i's (minibatch) objective at y along v (double backward)."""
        with torch.enable_grad():
            y = y.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self._loss(i, y, rows), y, create_graph=True)
            (hv,) = torch.autograd.grad(g @ v, y)
        return hv

    def client_grad(self, i, x):
        """Exact gradient of f_i at x (tensor)."""
        return self.grad(int(i), x, None)

    def client_value(self, i, x):
        """f_i(x) as a float."""
        with torch.no_grad():
            return float(self._loss(int(i), x, None))

    # ------------------------------------------------------------------ regularizer
    def prox_t(self, u, t):
        """Proximal map of t * h0 at u, h0 the problem's regularizer without its weight (the
        regularizer's :meth:`~fedtheory.components.Regularizer.torch_prox_t`)."""
        return self.regularizer.torch_prox_t(u, t)

    def prox(self, x, step):
        """Proximal operator of step * h (as :meth:`FederatedProblem.prox`), on tensors."""
        if self.l1 == 0:
            return x.clone()
        return self.prox_t(x, step * self.l1)


class ConvexOracles(TorchOracles):
    """Torch oracles of a :class:`fedtheory.problem.FederatedProblem` (float64 by default).

    CSR data are densified on the device (LIBSVM sets are small: a9a is 32561 x 123).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    device : torch.device
        The device.
    dtype : torch.dtype, default torch.float64
        The tensors' dtype.
    """

    def __init__(self, problem, device, dtype=torch.float64):
        super().__init__(problem, device, dtype)
        self.datafit = problem.datafit
        M = problem.M.toarray() if problem.sparse else np.asarray(problem.M)
        self.A = self.tensor(M)
        self.b = self.tensor(problem.b)

    def _loss(self, i, y, rows):
        r = self._rows(i, rows if self.datafit.has_samples else None)
        return self.datafit.torch_value(self.A[r], self.b[r], y)
