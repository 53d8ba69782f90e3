r"""FedDyn (Acar et al., ICLR 2021) with K local SGD steps, docs/baselines.md, FedDyn.

Client i keeps :math:`\nabla_i` (the linear-term state, 0 at start), the server keeps h
(0 at start). Each sampled client runs K inexact steps on the dynamic regulariser

.. math:: y_{k+1} = y_k - \eta_l\bigl(g_i(y_k;\xi_k) - \nabla_i + a\,(y_k - x^t)\bigr),

then :math:`\nabla_i \leftarrow \nabla_i - a\,\Delta_i` with :math:`\Delta_i = y_K - x^t`; the server

.. math:: h \leftarrow h - a \sum_{i\in S_t} w_i \Delta_i, \qquad
          x^{t+1} = \frac{1}{|S_t|}\sum_{i\in S_t} y_{i,K} - \frac{1}{a} h,

(:math:`w_i = 1/n`; the sampled mean is written :math:`x^t + \sum_{i\in S_t}\omega_i\Delta_i`
with the run's aggregation weights, which is the same for uniform weights). The invariant
:math:`h = \sum_i w_i \nabla_i` holds at every round. Communication: 1 down, 1 up.
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

State = namedtuple("FedDynState", "x grad_i h")
Messages = namedtuple("FedDynMessages", "y grad_i")


def local(pk, rd, hp, st, rng):
    """y <- y - eta_k (g(y) - grad_i + a (y - x^t)) from x^t, then grad_i^+ = grad_i - a (y_K - x^t).

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    gi_old = st.grad_i[rd.clients]
    x = ops.row(st.x)
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, hp.alpha, -gi_old)        # g - grad_i + a (y - x)
    return Messages(Y, gi_old - hp.alpha * (Y - st.x)), bad


def server(pk, rd, hp, st, m):
    """h -= a sum_S w_i Delta_i; x = x^t + sum_S omega_i Delta_i - h / a; grad_i updated in place.

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    x, a, Y = st.x, hp.alpha, m.y
    grad_i = st.grad_i
    ops.set_rows(grad_i, rd.clients, m.grad_i)
    h = st.h - a * (rd.cw @ (Y - x))
    return State(x + rd.weights @ (Y - x) - h / a, grad_i, h)


@register
@dataclass(frozen=True)
class FedDyn(Algorithm):
    r"""FedDyn: dynamically regularised local SGD (inexact local solver).

    Parameters
    ----------
    alpha : float, default 0.1
        Weight a > 0 of the dynamic regulariser :math:`\frac a2\|y - x^t\|^2` (the FedSpeed
        experiments' "prox weight"; FedSpeed with lam = 1/alpha and no perturbation is FedDyn).

    Notes
    -----
    Released code (FL-Simulator's ``feddyn.py``: SGD with ``weight_decay = wd + lamb``, loss term
    :math:`\mathrm{lamb}\langle y, h_i - x^t\rangle`): ``alpha = lamb`` with the run options
    ``weight_decay=wd``, ``clip_norm``; the clipped vector is
    :math:`u = g - \nabla L_i - \alpha x^t`, and :math:`(\alpha + \mathrm{wd})y` is added after
    clipping (docs/conventions.md).

    References
    ----------
    D. A. E. Acar, Y. Zhao, R. Matas, M. Mattina, P. Whatmough, V. Saligrama, "Federated
    learning based on dynamic regularization", ICLR 2021, Algorithm 1 (K local SGD steps in
    place of the exact local minimisation); docs/baselines.md, FedDyn.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(5, 3, heterogeneity=1.0, seed=0)
    >>> res = ft.run(p, "feddyn", rounds=300, local_steps=5, lr=0.1, alpha=1.0)
    >>> bool(abs(p.value(res.x) - p.info["f_star"]) < 1e-10)
    True
    """

    alpha: float = 0.1

    name: ClassVar[str] = "feddyn"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "Acar et al. 2021, Algorithm 1 (inexact); docs/baselines.md, FedDyn"
    constraints: ClassVar[dict] = {"alpha": [Interval(float, 0, None, "neither")]}
    comm: ClassVar[tuple] = (1, 1)
    stateful_clients: ClassVar[bool] = True
    exact: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1, "alpha": 0.5}

    def init(self, problem, x0):
        return {"x": copy(x0), "grad_i": zeros(x0, (problem.n_clients, problem.dim)),
                "h": zeros(x0, problem.dim)}

    def local_round(self, state, ctx):         # the torch backend's glue
        x = state["x"]
        gi_old = state["grad_i"][ctx.clients]
        Y, fail = ctx.local_sgd(x, mu=self.alpha, corr=-gi_old)        # g - grad_i + a (y - x)
        return {"y": Y, "grad_i": gi_old - self.alpha * (Y - x), "fail": fail}

    def local_round_reference(self, state, ctx):
        x, a = state["x"], self.alpha
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            gi = state["grad_i"][ctx.clients[s]]
            y = x.copy()
            ctx.record("local", s, 0, y)
            for k in range(ctx.K):
                y = y - ctx.lrs[k] * ctx.released_step(ctx.grad(s, k, y) - gi + a * (y - x), y, a)
                ctx.record("local", s, k + 1, y)
            Y[s] = y
        return {"y": Y, "grad_i": state["grad_i"][ctx.clients] - a * (Y - x)}
