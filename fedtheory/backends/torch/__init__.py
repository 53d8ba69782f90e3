"""The torch backend (optional extra ``pip install "fedtheory[torch]"``).

``fedtheory.run(problem, name, backend="torch", device=...)`` runs a registered algorithm's update
rules on flat parameter tensors, on CPU or GPU:

* on the convex problems of :mod:`problems` in float64, with the numba backend's iterates (the
  oracles differentiate the same losses with autograd; see :mod:`.oracles`);
* on deep networks through :class:`DeepProblem` (an ``nn.Module`` evaluated on flat parameters with
  ``torch.func.functional_call``: no per-client model construction), with the models of
  :mod:`.models` and the image data of :mod:`problems.vision`.

Examples
--------
>>> import fedtheory as ft, problems
>>> p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
>>> a = ft.run(p, "scaffold", rounds=5, local_steps=3, lr=0.1, backend="torch", device="cpu")
>>> b = ft.run(p, "scaffold", rounds=5, local_steps=3, lr=0.1)
>>> bool(abs(a.x - b.x).max() < 1e-12)
True
"""
import weakref

from .. import require_torch

require_torch()

from .context import TorchRoundContext  # noqa: E402
from .deep import DeepOracles, DeepProblem  # noqa: E402
from .oracles import ConvexOracles, TorchOracles, resolve_device  # noqa: E402
from . import models  # noqa: E402


_CONVEX = weakref.WeakKeyDictionary()      # problem -> {device: ConvexOracles}: data moved once


def make_oracles(problem, device=None):
    """Torch oracles of ``problem`` on ``device`` (None: cuda when available, else cpu), built once
    per problem and device (the data are converted and moved to the device once per sweep).

    Parameters
    ----------
    problem : FederatedProblem or DeepProblem
        The problem.
    device : str or torch.device or None
        The device (None: cuda when available, else cpu).

    Returns
    -------
    TorchOracles
        The oracles.
    """
    dev = resolve_device(device)
    if getattr(problem, "is_deep", False):
        return problem.oracles(dev)
    per = _CONVEX.setdefault(problem, {})
    if dev not in per:
        per[dev] = ConvexOracles(problem, dev)
    return per[dev]


__all__ = ["models", "DeepProblem", "DeepOracles", "ConvexOracles", "TorchOracles", "TorchRoundContext",
           "make_oracles", "resolve_device"]
