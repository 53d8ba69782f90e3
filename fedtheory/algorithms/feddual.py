r"""FedDualAvg ("FedDual"): federated dual averaging (Yuan, Zaheer, Reddi 2021), docs/baselines.md, FedDualAvg.

The server keeps a dual vector z (:math:`z^0 = x^0`). With the accumulated step
:math:`\tilde\eta_{t,k} = \eta_g\sum_{s<t}\sum_j\eta_{s,j} + \sum_{j<k}\eta_{t,j}` (:math:`= \eta_g\eta_l tK + \eta_l k`
for a constant step), each client runs

.. math:: x_{i,k} = \operatorname{prox}_{\tilde\eta_{t,k} h}(z_{i,k}),\qquad
          z_{i,k+1} = z_{i,k} - \eta_l\nabla\tilde f_i(x_{i,k}; B),

from :math:`z_{i,0} = z^t` and uploads :math:`z_{i,K}`; the server sets
:math:`z^{t+1} = z^t + \eta_g\frac1S\sum_i(z_{i,K} - z^t)` and
:math:`x^{t+1} = \operatorname{prox}_{\tilde\eta_{t+1,0} h}(z^{t+1})`. The threshold grows with every step.
"""
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._validation import Interval
from ..registry import register
from ..arrays import copy
from .base import Algorithm, averaged_step


@register
@dataclass(frozen=True)
class FedDualAvg(Algorithm):
    r"""FedDualAvg: local dual averaging with a growing soft threshold.

    Parameters
    ----------
    server_lr : float, default 1

    References
    ----------
    H. Yuan, M. Zaheer, S. Reddi, "Federated composite optimization", ICML 2021 (FedDualAvg);
    docs/baselines.md, FedDualAvg.

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(30, 5)) for _ in range(4)], [rng.normal(size=30) for _ in range(4)], l1=0.1)
    >>> ft.run(p, "feddual", rounds=20, local_steps=5, lr=0.05).status
    'max_rounds'
    """

    server_lr: float = 1.0

    name: ClassVar[str] = "feddual"
    released_options_reason: ClassVar[str] = (
        "its local step is a dual-averaging step of the composite objective, not a "
        "plain gradient step")
    traceables: ClassVar[dict] = {}          # the proximal kernels record no local path yet
    reference: ClassVar[str] = "Yuan, Zaheer, Reddi 2021 (FedDualAvg); docs/baselines.md, FedDualAvg"
    constraints: ClassVar[dict] = {"server_lr": [Interval(float, 0, None, "neither")]}
    test_params: ClassVar[dict] = {"lr": 0.1}

    def check_problem(self, problem):
        """Any smooth problem, or the l1-composite lasso."""

    def init(self, problem, x0):
        return {"x": copy(x0), "z": copy(x0), "acc": 0.0}

    def local_round(self, state, ctx):
        _, Z, fail = ctx.prox_sgd(state["z"], dual=True, t0_thresh=state["acc"])
        return {"z": Z, "fail": fail}

    def local_round_reference(self, state, ctx):
        p = ctx.problem
        Z = np.empty((ctx.S, p.dim))
        for s in range(ctx.S):
            z, acc = state["z"].copy(), state["acc"]
            for k in range(ctx.K):
                x = p.prox(z, acc)                            # x_{i,k} = prox_{eta~_{t,k} h}(z_{i,k})
                z = z - ctx.lrs[k] * ctx.grad(s, k, x)
                acc += ctx.lrs[k]
            Z[s] = z
        return {"z": Z}

    def server_update(self, state, ctx, messages):
        z = averaged_step(state["z"], ctx.weights, messages["z"], self.server_lr)
        acc = state["acc"] + self.server_lr * float(ctx.lrs.sum())
        return {"x": ctx.problem.prox(z, acc), "z": z, "acc": acc}
