r"""FedADMM (Wang, Marella, Anderson 2022) with K local SGD steps, docs/baselines.md, FedADMM.

Client i keeps a dual :math:`y_i` (0 at start); the server keeps every client's last
augmented model :math:`\hat x_i` (:math:`x^0` at start). A sampled client runs K steps on
:math:`f_i(x) + \langle y_i, x - x^t\rangle + \frac{\rho}{2}\|x - x^t\|^2`:

.. math:: x_{k+1} = x_k - \eta_l\bigl(g_i(x_k;\xi_k) + y_i + \rho (x_k - x^t)\bigr),

then :math:`y_i \leftarrow y_i + \rho(x_K - x^t)` and :math:`\hat x_i = x_K + y_i/\rho`; it
uploads :math:`\Delta\hat x_i` (new minus old). The server keeps the weighted average of the
*last* :math:`\hat x_i` of *all* clients (stale for those not sampled):

.. math:: x^{t+1} = x^t + \eta_g\sum_{i\in S_t} w_i\,\Delta\hat x_i
          \quad(= \textstyle\sum_{i=1}^n w_i \hat x_i \text{ for } \eta_g = 1).

With :math:`y_i = -\hat g_i` and :math:`\rho = 1/\lambda` the local step, the dual step and the
upload are FedSpeed's with alpha = 0; only the server average differs (docs/baselines.md, FedADMM).
Communication: 1 down, 1 up.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval
from ..runs.arrays import copy, repeat_rows, zeros
from ..registry import register
from .base import Algorithm

State = namedtuple("FedADMMState", "x dual xhat")
Messages = namedtuple("FedADMMMessages", "dual xhat")


def local(pk, rd, hp, st, rng):
    """x <- x - eta_k (g(x) + y_i + rho (x - x^t)) from x^t; y_i += rho (x_K - x^t); xhat_i = x_K + y_i / rho.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    x = st.x
    y_old = st.dual[rd.clients]
    X, bad = ops.local_sgd(pk, rd, ops.row(x), ops.row(x), 1.0, hp.rho, y_old)     # g + y_i + rho (x - x^t)
    dual = y_old + hp.rho * (X - x)
    return Messages(dual, X + dual / hp.rho), bad


def server(pk, rd, hp, st, m):
    """x^{t+1} = x^t + eta_g sum_S w_i (xhat_i^new - xhat_i^old); stored duals and xhat_i updated in place.

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    c = rd.clients
    dual, xhat = st.dual, st.xhat
    delta = m.xhat - xhat[c]
    dual[c] = m.dual
    xhat[c] = m.xhat
    return State(st.x + hp.server_lr * (rd.cw @ delta), dual, xhat)


@register
@dataclass(frozen=True)
class FedADMM(Algorithm):
    r"""FedADMM: inexact local augmented-Lagrangian steps with per-client duals.

    Parameters
    ----------
    rho : float, default 0.1
        Penalty rho > 0 of the augmented Lagrangian (the FedSpeed experiments' prox weight).
    server_lr : float, default 1
        Server step size eta_g > 0 on the average of the uploaded differences.

    References
    ----------
    H. Wang, S. Marella, J. Anderson, "FedADMM: A federated primal-dual algorithm allowing
    partial participation", IEEE CDC 2022 (arXiv 2203.15104), Algorithm 1 with K local SGD
    steps as the inexact solver; docs/baselines.md, FedADMM.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(5, 3, heterogeneity=1.0, seed=0)
    >>> res = ft.run(p, "fedadmm", rounds=300, local_steps=5, lr=0.1, rho=1.0)
    >>> bool(abs(p.value(res.x) - p.info["f_star"]) < 1e-10)
    True
    """

    rho: float = 0.1
    server_lr: float = 1.0

    name: ClassVar[str] = "fedadmm"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "Wang, Marella, Anderson 2022 (FedADMM), Algorithm 1; docs/baselines.md, FedADMM"
    constraints: ClassVar[dict] = {"rho": [Interval(float, 0, None, "neither")],
                                   "server_lr": [Interval(float, 0, None, "neither")]}
    comm: ClassVar[tuple] = (1, 1)
    stateful_clients: ClassVar[bool] = True
    exact: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1, "rho": 0.5}

    def init(self, problem, x0):
        return {"x": copy(x0), "dual": zeros(x0, (problem.n_clients, problem.dim)),
                "xhat": repeat_rows(x0, problem.n_clients)}

    def local_round(self, state, ctx):         # the torch backend's glue
        x = state["x"]
        y_old = state["dual"][ctx.clients]
        Y, fail = ctx.local_sgd(x, mu=self.rho, corr=y_old)             # g + y_i + rho (x - x^t)
        dual = y_old + self.rho * (Y - x)
        return {"dual": dual, "xhat": Y + dual / self.rho, "fail": fail}

    def local_round_reference(self, state, ctx):
        x, r = state["x"], self.rho
        D, H = np.empty((ctx.S, x.shape[0])), np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            yi = state["dual"][ctx.clients[s]]
            xi = x.copy()
            ctx.record("local", s, 0, xi)
            for k in range(ctx.K):
                xi = xi - ctx.lrs[k] * ctx.released_step(ctx.grad(s, k, xi) + yi + r * (xi - x), xi, r)
                ctx.record("local", s, k + 1, xi)
            D[s] = yi + r * (xi - x)                       # dual ascent
            H[s] = xi + D[s] / r                           # augmented model
        return {"dual": D, "xhat": H}
