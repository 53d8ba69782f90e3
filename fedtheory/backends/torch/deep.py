r"""Federated classification with a torch network on flat parameters.

:class:`DeepProblem` is the deep-learning counterpart of :class:`fedtheory.problem.FederatedProblem`:

.. math:: F(x) = \sum_{i=1}^n w_i f_i(x), \qquad
          f_i(x) = \frac{1}{m_i}\sum_{j=1}^{m_i} \mathrm{CE}\bigl(\mathrm{net}(a_{ij}; x), y_{ij}\bigr)
          + \frac{\lambda_2}{2}\|x\|^2,

with :math:`x \in \mathbb{R}^d` the network's trainable parameters flattened in ``named_parameters``
order (frozen ones keep the model's values).
The network is never rebuilt: ``torch.func.functional_call`` evaluates it with the views of a
flat tensor as its parameters, and autograd returns the flat gradient.
"""
from __future__ import annotations

import copy
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from ..._argcheck import Interval, check_param
from ...exceptions import InvalidParameterError
from .oracles import TorchOracles, resolve_device


def _tensor(v):
    """``v`` as a tensor (a tensor as it is, on its device)."""
    return v if torch.is_tensor(v) else torch.as_tensor(np.asarray(v))


def _client_indices(i, idx, n):
    """Client i's sample indices as int64, checked: integers in [0, n)."""
    a = idx.detach().cpu().numpy() if torch.is_tensor(idx) else np.asarray(idx)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InvalidParameterError(f"The 'parts' parameter of DeepProblem must hold one 1-D array of integer "
                                    f"sample indices per client. Got {a.dtype} of shape {a.shape} for client {i}.")
    if a.size and (a.min() < 0 or a.max() >= n):
        bad = a[(a < 0) | (a >= n)][0]
        raise InvalidParameterError(f"The 'parts' parameter of DeepProblem must hold sample indices in [0, {n}). "
                                    f"Got {int(bad)} for client {i}.")
    return a.astype(np.int64)


class DeepProblem:
    """A federated classification problem on an ``nn.Module`` (torch backend only).

    Parameters
    ----------
    model : torch.nn.Module
        The network (no buffers such as BatchNorm statistics: use GroupNorm). x is its
        trainable parameters (``requires_grad``; frozen ones keep their values), and their
        current values are the default initial point ``x0``. It is run in evaluation mode, so
        that f_i(x) is a function of x: a model with dropout gets a warning.
    X : array or tensor (N, ...)
        Inputs of every sample.
    y : int array (N,)
        Class labels in [0, C).
    parts : list of int arrays
        Sample indices of each client (e.g. from :func:`problems.partition_indices`).
    X_test, y_test : optional
        A test set (both or neither): the history then records ``test_loss`` and ``test_acc``.
        ``train_acc`` is the fraction of all training samples classified right (not weighted
        by w_i, unlike ``value``).
    l2 : float, default 0
        Ridge weight lambda_2 (weight decay as part of the objective).
    weights : array (n,), optional
        Client weights w_i (uniform by default).
    dtype : torch.dtype, default torch.float32
        Parameter and data dtype.
    eval_grad : bool, default True
        Record the full-gradient norm ``grad_mapping_sq`` (a backward pass over all data per
        evaluation); False writes NaN (cheaper on large sets).
    eval_batch : int, default 2048
        Samples per chunk in evaluations.
    name : str
        The problem's name.

    Examples
    --------
    >>> import problems, fedtheory as ft
    >>> from fedtheory.backends.torch import models
    >>> X, y = problems.vision.load_digits_images(flatten=True)
    >>> parts = problems.partition_indices(y, 5, "iid", seed=0)
    >>> p = DeepProblem(models.mlp(64, 10, hidden=(16,), seed=0), X, y, parts)
    >>> r = ft.run(p, "fedavg", rounds=3, local_steps=5, lr=0.1, batch_size=16, backend="torch", device="cpu")
    >>> bool(r.history.value.iloc[-1] < r.history.value.iloc[0])
    True
    """

    is_deep = True
    kind = datafit_id = -1
    noise = 0.0
    l1 = reg_weight = 0.0
    reg = "l1"
    is_composite = False
    mat_shape = None

    def __init__(self, model, X, y, parts, X_test=None, y_test=None, l2=0.0, weights=None,
                 dtype=torch.float32, eval_grad=True, eval_batch=2048, name="deep"):
        if not isinstance(model, torch.nn.Module):
            raise InvalidParameterError(f"The 'model' parameter of DeepProblem must be a torch.nn.Module. "
                                        f"Got {type(model).__name__} instead.")
        buffers = [n for n, _ in model.named_buffers()]
        if buffers:
            raise InvalidParameterError("The 'model' parameter of DeepProblem must have no buffers (BatchNorm "
                                        "running statistics are client state no paper defines); use GroupNorm. "
                                        f"Got the buffers {buffers[:5]}{' ...' if len(buffers) > 5 else ''}.")
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise InvalidParameterError(f"The 'dtype' parameter of DeepProblem must be a floating torch dtype "
                                        f"(torch.float32, torch.float64). Got {dtype!r} instead.")
        trainable = [(n, q) for n, q in model.named_parameters() if q.requires_grad]
        if not trainable:
            raise InvalidParameterError("The 'model' parameter of DeepProblem must have a parameter with "
                                        "requires_grad=True (x is the trainable parameters). Got none.")
        check_param("l2", l2, [Interval(float, 0, None, "left")], "DeepProblem")
        check_param("eval_batch", eval_batch, [Interval(int, 1, None)], "DeepProblem")
        if (X_test is None) != (y_test is None):
            raise InvalidParameterError("The 'X_test' and 'y_test' parameters of DeepProblem must be given "
                                        f"together. Got {'X_test' if y_test is None else 'y_test'} only.")
        X, y = _tensor(X), _tensor(y).long()
        if X.shape[0] != y.shape[0]:
            raise InvalidParameterError(f"The 'X' and 'y' parameters of DeepProblem must have the same number of "
                                        f"samples. Got {X.shape[0]} and {y.shape[0]} instead.")
        if not torch.isfinite(X.float()).all():
            raise InvalidParameterError("The 'X' parameter of DeepProblem must be finite. Got NaN/inf entries.")
        if y.numel() and int(y.min()) < 0:
            raise InvalidParameterError(f"The 'y' parameter of DeepProblem must hold class labels >= 0. Got "
                                        f"{int(y.min())}.")
        parts = [_client_indices(i, q, X.shape[0]) for i, q in enumerate(parts)]
        if not parts or min(len(p) for p in parts) == 0:
            raise InvalidParameterError("The 'parts' parameter of DeepProblem must give every client at least "
                                        "one sample. Got an empty client.")
        order = torch.as_tensor(np.concatenate(parts), device=X.device)
        self.model = model
        self.dtype = dtype
        self.X = X[order].to(dtype)
        self.y = y[order.to(y.device)]
        self.n_classes = int(max(int(self.y.max()) + 1, 0 if y_test is None else int(_tensor(y_test).max()) + 1))
        self.X_test = None if X_test is None else _tensor(X_test).to(dtype)
        self.y_test = None if y_test is None else _tensor(y_test).long()
        if self.y_test is not None and (self.y_test.shape[0] != self.X_test.shape[0] or
                                        (self.y_test.numel() and int(self.y_test.min()) < 0)):
            raise InvalidParameterError(f"The 'y_test' parameter of DeepProblem must hold one class label >= 0 per "
                                        f"sample of 'X_test' ({self.X_test.shape[0]}). Got {self.y_test.shape[0]} "
                                        f"labels, the smallest {int(self.y_test.min()) if self.y_test.numel() else None}.")
        self.n_clients = len(parts)
        self.client_sizes = np.array([len(p) for p in parts], dtype=np.int64)
        self.client_ptr = np.concatenate([[0], np.cumsum(self.client_sizes)]).astype(np.int64)
        if weights is None:
            self.weights = np.full(self.n_clients, 1.0 / self.n_clients)
        else:
            self.weights = np.asarray(weights, dtype=np.float64)
            if self.weights.shape != (self.n_clients,) or np.any(self.weights < 0) or \
                    not np.isclose(self.weights.sum(), 1.0):
                raise InvalidParameterError(f"The 'weights' parameter of DeepProblem must be {self.n_clients} "
                                            f"non-negative numbers summing to 1. Got {np.asarray(weights).tolist()!r}.")
        self.l2 = float(l2)
        self.eval_grad = bool(eval_grad)
        self.eval_batch = int(eval_batch)
        self.name = name
        self.info = {}
        # x is the trainable parameters: a frozen one (requires_grad=False) keeps the model's value
        self._names = [n for n, _ in trainable]
        self._shapes = [q.shape for _, q in trainable]
        self._numels = [q.numel() for _, q in trainable]
        self.dim = int(sum(self._numels))
        self._oracles = {}
        self._probe(model)

    def _probe(self, model):
        """One forward pass on a few samples in each mode (the model's mode and torch's random state
        restored): the outputs must cover the labels; a model whose training mode differs (dropout)
        is run in evaluation mode, with a warning (f_i must be a function of x)."""
        q = next(model.parameters())
        batch = self.X[:8].to(device=q.device, dtype=q.dtype)
        devices = [q.device.index or 0] if q.device.type == "cuda" else []
        modes = [(m, m.training) for m in model.modules()]
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=devices):
                out_eval = model.eval()(batch)
                out_train = model.train()(batch)
        except Exception as e:
            raise InvalidParameterError(f"The 'model' parameter of DeepProblem cannot be applied to the inputs "
                                        f"'X' (a batch of shape {tuple(batch.shape)}): {type(e).__name__}: {e}") from e
        finally:
            for m, training in modes:
                m.training = training
        if out_eval.ndim != 2 or out_eval.shape[1] < self.n_classes:
            raise InvalidParameterError(f"The 'model' parameter of DeepProblem must output one score per class "
                                        f"(shape (N, C), C >= {self.n_classes}, the labels of 'y' and 'y_test'). "
                                        f"Got outputs of shape {tuple(out_eval.shape)}.")
        if not torch.equal(out_eval, out_train):
            warnings.warn("DeepProblem: the model computes something else in training mode (dropout?); it is "
                          "run in evaluation mode throughout, so that f_i(x) is a function of x (the methods' "
                          "randomness is the runner's minibatches and noise).", UserWarning, stacklevel=3)

    def __repr__(self):
        return (f"DeepProblem(name={self.name!r}, model={type(self.model).__name__}, n_clients={self.n_clients}, "
                f"dim={self.dim}, samples={self.X.shape[0]}, l2={self.l2})")

    def initial_point(self):
        """The model's current parameters as a flat float64 vector (the default x0 of a run)."""
        named = dict(self.model.named_parameters())
        return torch.cat([named[n].detach().reshape(-1).double().cpu() for n in self._names]).numpy()

    def unflatten(self, x):
        """The parameter dict {name: view of x} of a flat tensor x."""
        return {n: t.view(s) for n, t, s in zip(self._names, torch.split(x, self._numels), self._shapes)}

    def oracles(self, device=None):
        """The :class:`DeepOracles` of this problem on ``device`` (cached: data are moved once)."""
        dev = resolve_device(device)
        if dev not in self._oracles:
            self._oracles[dev] = DeepOracles(self, dev)
        return self._oracles[dev]

    def _eval(self):
        return self._oracles[next(iter(self._oracles))] if self._oracles else self.oracles("cpu")

    # NumPy-facing oracles (as FederatedProblem's), used by the runner's evaluations
    def value(self, x):
        """F(x) = sum_i w_i f_i(x) (float). The same pass counts the training accuracy, which
        :meth:`eval_extras` at the same x reuses."""
        v, _, acc = self._eval().global_value_grad(x, need_grad=False)
        self._last = (x, acc)               # the runner asks eval_extras of the same array next
        return v

    def grad(self, x):
        """grad F(x) as a float64 array."""
        return self._eval().global_value_grad(x, need_grad=True)[1]

    def gradient_mapping_sq(self, x, step=1.0):
        """||grad F(x)||^2, or NaN when ``eval_grad`` is False."""
        if not self.eval_grad:
            return float("nan")
        g = self.grad(x)
        return float(g @ g)

    def client_value(self, i, x, rows=None):
        """f_i(x), or the minibatch value on absolute ``rows``."""
        o = self._eval()
        with torch.no_grad():
            return float(o._loss(int(i), o.tensor(x), rows))

    def client_grad(self, i, x, rows=None):
        """grad f_i(x) (float64 array), or the minibatch gradient on absolute ``rows``."""
        o = self._eval()
        return o.grad(int(i), o.tensor(x), rows).double().cpu().numpy()

    def h_value(self, x):
        """The non-smooth part h(x): 0 (a deep problem is smooth)."""
        return 0.0

    def prox(self, x, step):
        """Proximal map of step * h = 0: the identity (a copy)."""
        return np.array(x, dtype=np.float64)

    def eval_extras(self, x):
        """Training accuracy, and test loss and accuracy when a test set was given."""
        last = getattr(self, "_last", None)
        return self._eval().accuracy_extras(x, last[1] if last is not None and last[0] is x else None)


class DeepOracles(TorchOracles):
    """Torch oracles of a :class:`DeepProblem` on one device.

    Parameters
    ----------
    problem : DeepProblem
        The problem.
    device : torch.device
        The device.
    """

    def __init__(self, problem, device):
        super().__init__(problem, device, problem.dtype)
        # the frozen parameters in the problem's dtype; evaluation mode: f_i a function of x (no dropout)
        self.net = copy.deepcopy(problem.model).to(device=device, dtype=problem.dtype).eval()
        self.X = problem.X.to(device)
        self.y = problem.y.to(device)
        self.row_w = torch.as_tensor(np.repeat(problem.weights / problem.client_sizes, problem.client_sizes),
                                     dtype=self.dtype, device=device)
        self.X_test = None if problem.X_test is None else problem.X_test.to(device)
        self.y_test = None if problem.y_test is None else problem.y_test.to(device)

    def _forward(self, x, X):
        return functional_call(self.net, self.source.unflatten(x), (X,))

    def _loss(self, i, y, rows):
        r = self._rows(i, rows)
        loss = F.cross_entropy(self._forward(y, self.X[r]), self.y[r])
        if self.l2:
            loss = loss + 0.5 * self.l2 * (y @ y)
        return loss

    def _chunks(self, n):
        b = self.source.eval_batch
        return [slice(a, min(a + b, n)) for a in range(0, n, b)]

    def global_value_grad(self, x, need_grad):
        """(F(x), grad F(x) or None, training accuracy) over all clients, in chunks."""
        x = self.tensor(x)
        total, correct = 0.0, 0
        g = torch.zeros_like(x) if need_grad else None
        for sl in self._chunks(self.X.shape[0]):
            with torch.set_grad_enabled(need_grad):
                xx = x.detach().requires_grad_(need_grad)
                out = self._forward(xx, self.X[sl])
                per = F.cross_entropy(out, self.y[sl], reduction="none")
                part = (self.row_w[sl] * per).sum()
                if need_grad:
                    g += torch.autograd.grad(part, xx)[0]
            total += float(part.detach())
            correct += int((out.detach().argmax(1) == self.y[sl]).sum())
        total += 0.5 * self.l2 * float(x @ x)
        acc = correct / self.X.shape[0]
        if need_grad:
            g = g + self.l2 * x
            return total, g.double().cpu().numpy(), acc
        return total, None, acc

    @torch.no_grad()
    def accuracy_extras(self, x, train_acc=None):
        if train_acc is None:
            train_acc = self.global_value_grad(x, need_grad=False)[2]
        x = self.tensor(x)
        out = {"train_acc": train_acc}
        if self.X_test is not None:
            loss, correct = 0.0, 0
            for sl in self._chunks(self.X_test.shape[0]):
                o = self._forward(x, self.X_test[sl])
                loss += float(F.cross_entropy(o, self.y_test[sl], reduction="sum"))
                correct += int((o.argmax(1) == self.y_test[sl]).sum())
            out.update(test_loss=loss / self.X_test.shape[0], test_acc=correct / self.X_test.shape[0])
        return out
