r"""FedProx (Li et al. 2020), as specified in docs/baselines.md, FedProx.

Local steps on the proximal objective :math:`f_i(y) + \frac{\mu}{2}\|y - x^t\|^2`:

.. math:: y_{i,k+1} = y_{i,k} - \eta_{l,k}\bigl(g_i(y_{i,k}; \xi_{i,k}) + \mu (y_{i,k} - x^t)\bigr),

and the FedAvg server :math:`x^{t+1} = x^t + \eta_g\sum_{i\in S_t}\omega_i\Delta_i`.
Communication: 1 down, 1 up. With mu = 0 it is FedAvg.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval
from ..registry import register
from .base import Algorithm

State = namedtuple("FedProxState", "x")
Messages = namedtuple("FedProxMessages", "y")


def local(pk, rd, hp, st, rng):
    """K steps y <- y - eta_k (g(y) + mu (y - x^t)) from y_{i,0} = x^t, anchored at x^t.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    x = ops.row(st.x)
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, hp.mu, ops.empty2())
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """x^{t+1} = x^t + eta_g sum_i omega_i Delta_i (the FedAvg server).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    return State(ops.averaged_step(st.x, rd.weights, m.y, hp.server_lr))


@register
@dataclass(frozen=True)
class FedProx(Algorithm):
    r"""FedProx: local SGD with a proximal pull mu (y - x^t) towards the global model.

    Parameters
    ----------
    mu : float, default 0.01
        Proximal weight (>= 0).
    server_lr : float, default 1
        Global step size eta_g > 0.

    Notes
    -----
    Released code (FL-Simulator's ``fedprox.py``: SGD with ``weight_decay = wd + lamb``, loss term
    :math:`-\mathrm{lamb}\langle y, x^t\rangle`): ``mu = lamb`` with the run options
    ``weight_decay=wd``, ``clip_norm``; the clipped vector is :math:`u = g - \mu x^t` and the step
    :math:`c\,u + (\mu + \mathrm{wd})y` when clipped, else :math:`g + \mu(y - x^t) + \mathrm{wd}\,y`.
    PFLlib's ``mu`` and FedJAX's ``proximal_weight`` are ``mu`` (docs/conventions.md).

    References
    ----------
    Li et al., "Federated optimization in heterogeneous networks", MLSys 2020, Alg. 2 with
    inexact (K-step) local solves; docs/baselines.md, FedProx.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> ft.run(p, "fedprox", rounds=3, local_steps=2, lr=0.1, mu=0.5).status
    'max_rounds'
    """

    mu: float = 0.01
    server_lr: float = 1.0

    name: ClassVar[str] = "fedprox"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "Li et al. 2020, Alg. 2; docs/baselines.md, FedProx"
    constraints: ClassVar[dict] = {"mu": [Interval(float, 0, None, "left")],
                                   "server_lr": [Interval(float, 0, None, "neither")]}
    test_params: ClassVar[dict] = {"lr": 0.1, "mu": 0.1}
    reductions: ClassVar[list] = [({"mu": 0.0}, "fedavg", {})]

    def local_round(self, state, ctx):         # the torch backend's glue
        Y, fail = ctx.local_sgd(state["x"], mu=self.mu)
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        x = state["x"]
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            y = x.copy()
            ctx.record("local", s, 0, y)
            for k in range(ctx.K):
                # y <- y - eta_l (g(y; xi) + mu (y - x^t))
                y = y - ctx.lrs[k] * ctx.released_step(ctx.grad(s, k, y) + self.mu * (y - x), y, self.mu)
                ctx.record("local", s, k + 1, y)
            Y[s] = y
        return {"y": Y}
