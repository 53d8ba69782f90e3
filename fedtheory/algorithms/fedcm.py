r"""FedCM, client-level momentum (Xu et al. 2021), docs/baselines.md, FedCM.

The server broadcasts :math:`x^t` and the momentum :math:`\Delta^t` (0 at start). Each sampled
client runs

.. math:: v_k = a\, g_i(y_k;\xi_k) + (1 - a)\,\Delta^t, \qquad y_{k+1} = y_k - \eta_l v_k,

and the server sets :math:`x^{t+1} = x^t + \eta_g \sum_{i\in S_t}\omega_i\Delta_i` and
:math:`\Delta^{t+1} = -\frac{1}{\sum_k \eta_{l,k}}\sum_{i\in S_t}\omega_i\Delta_i` (the average
per-step "gradient"; :math:`K\eta_l` for a constant step). Communication: 2 down, 1 up.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval
from ..runs.arrays import broadcast_rows, copy, zeros
from ..registry import register
from .base import Algorithm

State = namedtuple("FedCMState", "x momentum")
Messages = namedtuple("FedCMMessages", "y")


def local(pk, rd, hp, st, rng):
    """y <- y - eta_k (a g(y) + (1 - a) Delta^t) from y_0 = x^t.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    corr = np.empty((rd.S, st.x.shape[0]))
    corr[:] = (1.0 - hp.alpha) * st.momentum            # the correction (1 - a) Delta^t of every participant
    x = ops.row(st.x)
    Y, bad = ops.local_sgd(pk, rd, x, x, hp.alpha, 0.0, corr)
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """D = sum_S omega_i Delta_i; x^{t+1} = x^t + eta_g D; Delta^{t+1} = -D / sum_k eta_k.

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    D = rd.weights @ (m.y - st.x)
    return State(st.x + hp.server_lr * D, -D / rd.lrs.sum())


@register
@dataclass(frozen=True)
class FedCM(Algorithm):
    r"""FedCM: local SGD steps along a mix of the fresh gradient and the global momentum.

    Parameters
    ----------
    alpha : float, default 0.1
        Weight a in (0, 1] of the fresh gradient (0.1 in FedSpeed's experiments, the
        released code too); a = 1 is FedAvg.
    server_lr : float, default 1
        Global step size eta_g > 0.

    Notes
    -----
    Released code (FL-Simulator's ``fedcm.py``): with the run options ``weight_decay=wd`` and
    ``clip_norm``, :math:`u = a\,g + (1 - a)\Delta^t` is clipped and :math:`\mathrm{wd}\,y` is
    added after, not scaled by a; so ``weight_decay=wd`` equals a problem with ``l2 = wd / a``
    (docs/conventions.md).

    References
    ----------
    J. Xu, S. Wang, L. Wang, A. C.-C. Yao, "FedCM: Federated learning with client-level
    momentum", arXiv 2106.10874, 2021, Algorithm 1; docs/baselines.md, FedCM.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(5, 3, heterogeneity=1.0, seed=0)
    >>> ft.run(p, "fedcm", rounds=50, local_steps=5, lr=0.1, alpha=0.1).status
    'max_rounds'
    """

    alpha: float = 0.1
    server_lr: float = 1.0

    name: ClassVar[str] = "fedcm"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "Xu et al. 2021 (FedCM), Algorithm 1; docs/baselines.md, FedCM"
    constraints: ClassVar[dict] = {"alpha": [Interval(float, 0, 1, "right")],
                                   "server_lr": [Interval(float, 0, None, "neither")]}
    comm: ClassVar[tuple] = (2, 1)
    test_params: ClassVar[dict] = {"lr": 0.1, "alpha": 0.5}
    reductions: ClassVar[list] = [({"alpha": 1.0}, "fedavg", {})]

    def init(self, problem, x0):
        return {"x": copy(x0), "momentum": zeros(x0, problem.dim)}

    def local_round(self, state, ctx):         # the torch backend's glue
        corr = broadcast_rows((1.0 - self.alpha) * state["momentum"], ctx.S)
        Y, fail = ctx.local_sgd(state["x"], gscale=self.alpha, corr=corr)
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        x, a, m = state["x"], self.alpha, state["momentum"]
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            y = x.copy()
            ctx.record("local", s, 0, y)
            for k in range(ctx.K):
                v = a * ctx.grad(s, k, y) + (1 - a) * m          # v = a g + (1 - a) Delta^t
                y = y - ctx.lrs[k] * ctx.released_step(v, y)
                ctx.record("local", s, k + 1, y)
            Y[s] = y
        return {"y": Y}
