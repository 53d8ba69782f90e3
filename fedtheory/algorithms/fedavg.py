r"""FedAvg / local SGD (McMahan et al. 2017), as specified in docs/baselines.md, FedAvg.

Every sampled client i starts from the global model, :math:`y_{i,0} = x^t`, and runs K steps

.. math:: y_{i,k+1} = y_{i,k} - \eta_{l,k}\, g_i(y_{i,k}; \xi_{i,k}),

then the server aggregates the model differences :math:`\Delta_i = y_{i,K} - x^t`:

.. math:: x^{t+1} = x^t + \eta_g \sum_{i \in S_t} \omega_i \Delta_i ,

with :math:`\omega_i` the aggregation weights of the sampling scheme (1/S for uniform
sampling of S clients, w_i under full participation). Communication: 1 vector down, 1 up.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval
from ..registry import register
from .base import Algorithm

State = namedtuple("FedAvgState", "x")
Messages = namedtuple("FedAvgMessages", "y")


def local(pk, rd, hp, st, rng):
    """Every participant runs K local SGD steps from y_{i,0} = x^t (Y: their y_{i,K}).

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
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, 0.0, ops.empty2())
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """x^{t+1} = x^t + eta_g sum_i omega_i Delta_i.

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
class FedAvg(Algorithm):
    r"""FedAvg: local SGD steps, then the server averages the model differences.

    Parameters
    ----------
    server_lr : float, default 1
        Global step size eta_g > 0.

    Notes
    -----
    Released code (FL-Simulator's ``client.py``, also FedAdam's clients): the run options
    ``weight_decay=wd`` and ``clip_norm`` give the step
    :math:`y \leftarrow y - \eta(\mathrm{clip}(g) + \mathrm{wd}\,y)`; for FedAvg the decay equals
    ``l2=wd`` in the iterates but, unlike ``l2``, is not part of :math:`f_i` (docs/conventions.md).

    References
    ----------
    McMahan et al., "Communication-efficient learning of deep networks from decentralized
    data", AISTATS 2017, Algorithm 1; docs/baselines.md, FedAvg (the baseline of FedSpeed,
    Sun et al., ICLR 2023).

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> ft.run(p, "fedavg", rounds=3, local_steps=2, lr=0.1).status
    'max_rounds'
    """

    server_lr: float = 1.0

    name: ClassVar[str] = "fedavg"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "McMahan et al. 2017, Alg. 1; docs/baselines.md, FedAvg"
    constraints: ClassVar[dict] = {"server_lr": [Interval(float, 0, None, "neither")]}
    comm: ClassVar[tuple] = (1, 1)
    test_params: ClassVar[dict] = {"lr": 0.1}

    def local_round(self, state, ctx):         # the torch backend's glue
        Y, fail = ctx.local_sgd(state["x"])
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        x = state["x"]
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            y = x.copy()                                  # y_{i,0} = x^t
            ctx.record("local", s, 0, y)
            for k in range(ctx.K):
                y = y - ctx.lrs[k] * ctx.released_step(ctx.grad(s, k, y), y)    # y <- y - eta_l g(y; xi)
                ctx.record("local", s, k + 1, y)
            Y[s] = y
        return {"y": Y}
