"""A user's package, as docs/add-your-own-algorithm.md and docs/how-a-problem-is-built.md describe
one: an algorithm, a datafit and a problem factory that are not built in (log-cosh regression,
:mod:`userpkg.logcosh`), registered when the package is imported (``fedtheory --import userpkg``,
``import = ["userpkg"]``); its theorem is in :mod:`userpkg.theory`.

The tests import it by name from a fresh process, a loky worker and a Dask worker.
"""
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fedtheory.algorithms.base import Algorithm, Interval
from fedtheory.runs.arrays import copy
from fedtheory.registry import register

from . import logcosh  # noqa: F401  (registers the datafit and the problem factory userpkg_logcosh)


@register
@dataclass(frozen=True)
class ServerHeavyBall(Algorithm):
    r"""FedAvg whose server adds a heavy-ball term on the global models.

    .. math:: x^{t+1} = x^t + \sum_i \omega_i (y_{i,K} - x^t) + \beta (x^t - x^{t-1})

    Parameters
    ----------
    beta : float, default 0.3
        Heavy-ball coefficient in [0, 1); 0 is FedAvg.

    References
    ----------
    A test fixture (Polyak's heavy ball on the server's model sequence).

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> res = ft.run(problems.quadratic(4, 3, seed=0), "userpkg_heavyball", rounds=5, lr=0.1)
    """

    beta: float = 0.3

    name: ClassVar[str] = "userpkg_heavyball"
    reference: ClassVar[str] = "docs/baselines.md, FedAvg (with a server heavy-ball term; a test fixture)"
    constraints: ClassVar[dict] = {"beta": [Interval(float, 0, 1, "left")]}
    comm: ClassVar[tuple] = (1, 1)
    scalars: ClassVar[dict] = {"server_step": "||x^{t+1} - x^t||, the server's step of the round (nan before the first)"}
    test_params: ClassVar[dict] = {"lr": 0.1, "beta": 0.3}
    reductions: ClassVar[list] = [({"beta": 0.0}, "fedavg", {})]

    def init(self, problem, x0):
        state = super().init(problem, x0)                # NumPy or torch (fedtheory.runs.arrays.copy)
        return {**state, "x_prev": copy(state["x"]), "server_step": np.nan}

    def local_round(self, state, ctx):
        Y, fail = ctx.local_sgd(state["x"])
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        x = state["x"]
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            y = x.copy()
            for k in range(ctx.K):
                y = y - ctx.lrs[k] * ctx.grad(s, k, y)
            Y[s] = y
        return {"y": Y}

    def server_update(self, state, ctx, messages):
        x, w = state["x"], ctx.weights
        new = x + (w @ messages["y"] - w.sum() * x) + self.beta * (x - state["x_prev"])
        return {**state, "x": new, "x_prev": x, "server_step": ((new - x) ** 2).sum() ** 0.5}
