r"""Ditto ("pFedditto"; Li, Hu, Beirami, Smith 2021) with a composite h, docs/baselines.md, Ditto.

The global model follows FedMiD (local proximal SGD, server mean). Each client also keeps a
persistent personal model :math:`v_i` (:math:`v_i = x^0` at start); when sampled in round t it runs
K personal steps

.. math:: v_i \leftarrow \operatorname{prox}_{\eta_l h}\bigl(v_i - \eta_l(\nabla\tilde f_i(v_i; B) + \lambda_d (v_i - x^t))\bigr)

(the prox is our composite extension; original Ditto has none) on the same minibatches as
its global steps. Communication: as FedAvg. Personalized model: :math:`v_i`.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval
from ..registry import register
from ..runs.arrays import copy, repeat_rows
from .base import Algorithm
from ..runs.metrics import personalized_extras

State = namedtuple("DittoState", "x v")
Messages = namedtuple("DittoMessages", "y v")


def local(pk, rd, hp, st, rng):
    """y <- prox_{eta h}(y - eta g(y)) from x^t; v_i <- prox_{eta h}(v_i - eta (g(v_i) + lam_d (v_i - x^t))).

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
    Y, _, bad = ops.local_prox_sgd(pk, rd, x, ops.empty2(), 0.0, False, 0.0)            # global: FedMiD
    V, _, bad2 = ops.local_prox_sgd(pk, rd, st.v[rd.clients], x, hp.lam_d, False, 0.0)  # personal
    return Messages(Y, V), (bad if bad >= 0 else bad2)


def server(pk, rd, hp, st, m):
    """x^{t+1} = x^t + sum_i omega_i (y_i - x^t); v_i <- v_i^+ for the participants (in place).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    v = st.v
    ops.set_rows(v, rd.clients, m.v)                   # v[S] = m.v (in place)
    return State(ops.averaged_step(st.x, rd.weights, m.y, 1.0), v)


@register
@dataclass(frozen=True)
class Ditto(Algorithm):
    r"""Ditto: FedMiD for the global model plus regularized personal models kept on the clients.

    Parameters
    ----------
    lam_d : float, default 0.1
        Pull of the personal model towards the global one (tune in {0.01, 0.1, 1, 2}).

    Notes
    -----
    ``state["v"]`` holds the personal models; the history records ``pm_value`` (mean of f_i + h
    at v_i) and, for problems with known signals, support / rank metrics of the v_i.

    References
    ----------
    T. Li, S. Hu, A. Beirami, V. Smith, "Ditto: fair and robust federated learning through
    personalization", ICML 2021, Algorithm 1; docs/baselines.md, Ditto.

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(30, 5)) for _ in range(4)], [rng.normal(size=30) for _ in range(4)], l1=0.1)
    >>> ft.run(p, "ditto", rounds=10, local_steps=5, lr=0.05).state["v"].shape
    (4, 5)
    """

    lam_d: float = 0.1

    name: ClassVar[str] = "ditto"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options_reason: ClassVar[str] = (
        "its local steps are proximal steps of the composite objective, not plain "
        "gradient steps")
    traceables: ClassVar[dict] = {}          # the proximal kernels record no local path yet
    reference: ClassVar[str] = "Li, Hu, Beirami, Smith 2021 (Ditto); docs/baselines.md, Ditto"
    constraints: ClassVar[dict] = {"lam_d": [Interval(float, 0, None, "left")]}
    stateful_clients: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1}

    def check_problem(self, problem):
        """Any smooth problem, or a composite one (l1, group, nuclear)."""

    def oracle_calls_per_step(self):
        return 2

    def init(self, problem, x0):
        return {"x": copy(x0), "v": repeat_rows(x0, problem.n_clients)}

    def local_round(self, state, ctx):         # the torch backend's glue
        X, _, fail = ctx.local_prox_sgd(state["x"])
        V, _, fail2 = ctx.local_prox_sgd(state["v"][ctx.clients], state["x"], self.lam_d)
        return {"y": X, "v": V, "fail": fail if fail is not None else fail2}

    def local_round_reference(self, state, ctx):
        p, x = ctx.problem, state["x"]
        X, V = np.empty((ctx.S, p.dim)), np.empty((ctx.S, p.dim))
        for s in range(ctx.S):
            y, v = x.copy(), state["v"][ctx.clients[s]].copy()
            for k in range(ctx.K):
                eta = ctx.lrs[k]
                y = p.prox(y - eta * ctx.grad(s, k, y), eta)                                   # global: FedMiD
                v = p.prox(v - eta * (ctx.grad(s, k, v) + self.lam_d * (v - x)), eta)          # personal
            X[s], V[s] = y, v
        return {"y": X, "v": V}

    def history_extras(self, state, problem):
        return personalized_extras(problem, state["v"], state["x"])
