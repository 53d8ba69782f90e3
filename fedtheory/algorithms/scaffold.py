r"""SCAFFOLD with option II control variates (Karimireddy et al. 2020), docs/baselines.md, SCAFFOLD.

Client i holds :math:`c_i`, the server holds :math:`c` (both 0 at start). Local steps

.. math:: y_{i,k+1} = y_{i,k} - \eta_{l,k}\bigl(g_i(y_{i,k};\xi_{i,k}) - c_i + c\bigr),

then option II, :math:`c_i^+ = c_i - c + \frac{x^t - y_{i,K}}{\sum_k \eta_{l,k}}`
(:math:`= (x^t - y_{i,K})/(K\eta_l)` for a constant step), and the server

.. math:: x^{t+1} = x^t + \eta_g \sum_{i\in S_t}\omega_i \Delta_i,\qquad
          c \leftarrow c + \sum_{i \in S_t} w_i (c_i^+ - c_i),

with w_i the objective weights (1/n: the paper's :math:`\frac{1}{N}\sum_{i\in S}\Delta c_i`),
which keeps :math:`c = \sum_i w_i c_i`. Communication: 2 down (x, c), 2 up (Delta, Delta c).
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval
from ..runs.arrays import copy, zeros
from ..registry import register
from .base import Algorithm

State = namedtuple("ScaffoldState", "x c c_i")
Messages = namedtuple("ScaffoldMessages", "y dc")


def local(pk, rd, hp, st, rng):
    """Local steps with the correction c - c_i, then option II: Delta c_i = -c + (x^t - y_K) / sum_k eta_k.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    c_old = st.c_i[rd.clients]
    x = ops.row(st.x)
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, 0.0, st.c - c_old)         # g - c_i + c
    dc = (st.x - Y) * (1.0 / ops.numpy_sum(rd.lrs)) - st.c     # the sum in NumPy's order
    return Messages(Y, dc), bad


def server(pk, rd, hp, st, m):
    """x += eta_g sum_i omega_i Delta_i; c += sum_{i in S} w_i Delta c_i; c_i += Delta c_i (in place).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    c_i = st.c_i
    ops.add_rows(c_i, rd.clients, m.dc)                 # c_i[S] += dc
    return State(ops.averaged_step(st.x, rd.weights, m.y, hp.server_lr), st.c + rd.cw @ m.dc, c_i)


@register
@dataclass(frozen=True)
class Scaffold(Algorithm):
    r"""SCAFFOLD (option II): drift-corrected local SGD with client and server control variates.

    Parameters
    ----------
    server_lr : float, default 1
        Global step size eta_g > 0.

    Notes
    -----
    Released code (FL-Simulator's ``scaffold.py``): the run options ``weight_decay=wd`` and
    ``clip_norm`` clip :math:`u = g - c_i + c` and add :math:`\mathrm{wd}\,y` after clipping;
    the control variates use the model difference, decay included (docs/conventions.md).

    References
    ----------
    Karimireddy et al., "SCAFFOLD: Stochastic controlled averaging for federated learning",
    ICML 2020, Alg. 1 option II; docs/baselines.md, SCAFFOLD.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
    >>> res = ft.run(p, "scaffold", rounds=200, local_steps=5, lr=0.1)
    >>> bool(abs(p.value(res.x) - p.info["f_star"]) < 1e-10)
    True
    """

    server_lr: float = 1.0

    name: ClassVar[str] = "scaffold"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "Karimireddy et al. 2020, Alg. 1 (option II); docs/baselines.md, SCAFFOLD"
    constraints: ClassVar[dict] = {"server_lr": [Interval(float, 0, None, "neither")]}
    comm: ClassVar[tuple] = (2, 2)
    stateful_clients: ClassVar[bool] = True
    exact: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1}

    def init(self, problem, x0):
        return {"x": copy(x0), "c": zeros(x0, problem.dim),
                "c_i": zeros(x0, (problem.n_clients, problem.dim))}

    def local_round(self, state, ctx):         # the torch backend's glue
        c_old = state["c_i"][ctx.clients]
        Y, fail = ctx.local_sgd(state["x"], corr=state["c"] - c_old)      # g - c_i + c
        dc = (state["x"] - Y) * (1.0 / ctx.lrs.sum()) - state["c"]
        return {"y": Y, "dc": dc, "fail": fail}

    def local_round_reference(self, state, ctx):
        x, c = state["x"], state["c"]
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            c_i = state["c_i"][ctx.clients[s]]
            y = x.copy()
            ctx.record("local", s, 0, y)
            for k in range(ctx.K):
                y = y - ctx.lrs[k] * ctx.released_step(ctx.grad(s, k, y) - c_i + c, y)   # y <- y - eta (g - c_i + c)
                ctx.record("local", s, k + 1, y)
            Y[s] = y
        # c_i^+ = c_i - c + (x^t - y_K) / (K eta_l), uploaded as Delta c_i = c_i^+ - c_i
        c_new = state["c_i"][ctx.clients] - c + (x - Y) / ctx.lrs.sum()
        return {"y": Y, "dc": c_new - state["c_i"][ctx.clients]}
