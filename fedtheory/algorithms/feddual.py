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
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval
from ..registry import register
from ..runs.arrays import copy
from .base import Algorithm
from .context import averaged_step

State = namedtuple("FedDualAvgState", "x z acc")
Messages = namedtuple("FedDualAvgMessages", "z")


def local(pk, rd, hp, st, rng):
    """x_{i,k} = prox_{eta~_{t,k} h}(z_{i,k}), z_{i,k+1} = z_{i,k} - eta_k g(x_{i,k}), from z_{i,0} = z^t.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    _, Z, bad = ops.local_prox_sgd(pk, rd, ops.row(st.z), ops.empty2(), 0.0, True, st.acc)
    return Messages(Z), bad


def server(pk, rd, hp, st, m):
    """z^{t+1} = z^t + eta_g sum_i omega_i (z_{i,K} - z^t); eta~ += eta_g sum_k eta_k; x^{t+1} = prox_{eta~ h}(z^{t+1}).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    z = ops.averaged_step(st.z, rd.weights, m.z, hp.server_lr)
    acc = st.acc + hp.server_lr * float(ops.numpy_sum(rd.lrs))
    return State(ops.prox(pk, z, acc), z, acc)


@register
@dataclass(frozen=True)
class FedDualAvg(Algorithm):
    r"""FedDualAvg: local dual averaging with a growing soft threshold.

    Parameters
    ----------
    server_lr : float, default 1
        Global step size eta_g.

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
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
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

    def local_round(self, state, ctx):         # the torch backend's glue
        _, Z, fail = ctx.local_prox_sgd(state["z"], dual=True, t0_thresh=state["acc"])
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
        # the torch backend's server: the compiled rule's prox needs the problem pack (pk is None on
        # torch); here the torch oracles' prox of the same threshold
        z = averaged_step(state["z"], ctx.weights, messages["z"], self.server_lr)
        acc = state["acc"] + self.server_lr * float(ctx.lrs.sum())
        return {"x": ctx.problem.prox(z, acc), "z": z, "acc": acc}
