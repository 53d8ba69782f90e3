r"""FedMiD ("Fedmirror"): federated mirror descent with the mirror map 1/2||.||^2, i.e. local
proximal SGD (Yuan, Zaheer, Reddi 2021), docs/baselines.md, FedMiD.

.. math:: x_{i,k+1} = \operatorname{prox}_{\eta_l h}\bigl(x_{i,k} - \eta_l \nabla\tilde f_i(x_{i,k}; B)\bigr),
          \qquad x^{t+1} = x^t + \eta_g \frac1S\sum_{i\in S_t}(x_{i,K} - x^t),

with h the problem's :math:`\ell_1\|\cdot\|_1`; ``server_prox`` optionally applies
:math:`\operatorname{prox}_{c h}` to the server average with c = eta_g eta_l or eta_g eta_l K (public
re-implementations differ, docs/baselines.md, FedMiD). With eta_l = 1/lambda it equals cheap pFedFBE (docs/papers/pfedfbe.md, §3.4).
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval, Options
from ..registry import register
from .base import Algorithm
from .context import averaged_step

State = namedtuple("FedMiDState", "x")
Messages = namedtuple("FedMiDMessages", "y")
#: The hyperparameters as the compiled rules read them (:meth:`FedMiD.compiled_params`).
Params = namedtuple("FedMiDParams", "server_lr server_prox")
SERVER_PROX = ("none", "eta_g*eta_l", "eta_g*eta_l*K")     # hp.server_prox: the index of the option


def local(pk, rd, hp, st, rng):
    """x_{i,k+1} = prox_{eta_k h}(x_{i,k} - eta_k g(x_{i,k})) from x_{i,0} = x^t.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    Y, _, bad = ops.local_prox_sgd(pk, rd, ops.row(st.x), ops.empty2(), 0.0, False, 0.0)
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """x^{t+1} = x^t + eta_g sum_i omega_i (x_{i,K} - x^t), then prox_{c h} with c = eta_g mean_k eta_k (times K).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    x = ops.averaged_step(st.x, rd.weights, m.y, hp.server_lr)
    if hp.server_prox != 0:
        c = hp.server_lr * (ops.numpy_sum(rd.lrs) / rd.K) * (rd.K if hp.server_prox == 2 else 1)
        x = ops.prox(pk, x, c)
    return State(x)


@register
@dataclass(frozen=True)
class FedMiD(Algorithm):
    r"""FedMiD: local proximal SGD steps, server average (optionally followed by a prox).

    Parameters
    ----------
    server_lr : float, default 1
        Global step size eta_g.
    server_prox : {"none", "eta_g*eta_l", "eta_g*eta_l*K"}, default "none"
        A prox of c h applied to the server average, with c = eta_g eta_l or eta_g eta_l K; "none"
        applies none.

    References
    ----------
    H. Yuan, M. Zaheer, S. Reddi, "Federated composite optimization", ICML 2021 (FedMiD);
    docs/baselines.md, FedMiD.

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(30, 5)) for _ in range(4)], [rng.normal(size=30) for _ in range(4)], l1=0.1)
    >>> ft.run(p, "fedmirror", rounds=20, local_steps=5, lr=0.05).status
    'max_rounds'
    """

    server_lr: float = 1.0
    server_prox: str = "none"

    name: ClassVar[str] = "fedmirror"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options_reason: ClassVar[str] = (
        "its local step is a proximal (mirror) step of the composite objective, not a "
        "plain gradient step")
    traceables: ClassVar[dict] = {}          # the proximal kernels record no local path yet
    reference: ClassVar[str] = "Yuan, Zaheer, Reddi 2021 (FedMiD); docs/baselines.md, FedMiD"
    constraints: ClassVar[dict] = {"server_lr": [Interval(float, 0, None, "neither")],
                                   "server_prox": [Options(*SERVER_PROX)]}
    test_params: ClassVar[dict] = {"lr": 0.1}

    def check_problem(self, problem):
        """Any smooth problem, or the l1-composite lasso."""

    def compiled_params(self):
        """``hp`` of the compiled rules: ``server_lr`` and ``server_prox`` as its index in
        :data:`SERVER_PROX` (0: "none", 1: "eta_g*eta_l", 2: "eta_g*eta_l*K")."""
        return Params(float(self.server_lr), SERVER_PROX.index(self.server_prox))

    def local_round(self, state, ctx):         # the torch backend's glue
        X, _, fail = ctx.local_prox_sgd(state["x"])
        return {"y": X, "fail": fail}

    def local_round_reference(self, state, ctx):
        p = ctx.problem
        Y = np.empty((ctx.S, p.dim))
        for s in range(ctx.S):
            x = state["x"].copy()
            for k in range(ctx.K):
                x = p.prox(x - ctx.lrs[k] * ctx.grad(s, k, x), ctx.lrs[k])          # prox_{eta h}(x - eta g)
            Y[s] = x
        return {"y": Y}

    def server_update(self, state, ctx, messages):
        # the torch backend's server: the compiled rule's prox needs the problem pack (pk is None on
        # torch); here the torch oracles' prox of the same threshold
        x = averaged_step(state["x"], ctx.weights, messages["y"], self.server_lr)
        if self.server_prox != "none":
            c = self.server_lr * float(np.mean(ctx.lrs)) * (ctx.K if self.server_prox.endswith("*K") else 1)
            x = ctx.problem.prox(x, c)
        return {**state, "x": x}
