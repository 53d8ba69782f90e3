r"""Personalized FedProx ("pFedprox" of pFedFBE's matrix-completion plots), docs/baselines.md, Personalized FedProx.

FedProx with the composite h handled by a prox (our prox version):

.. math:: x_{i,k+1} = \operatorname{prox}_{\eta_l h}\bigl(x_{i,k} - \eta_l(\nabla\tilde f_i(x_{i,k}; B)
          + \mu(x_{i,k} - x^t))\bigr),\qquad x^{t+1} = \frac1S\sum_{i\in S_t} x_{i,K};

the personalized model of client i is its last local iterate :math:`x_{i,K}` (kept until the client is
sampled again; :math:`x^0` before). The pFedFBE paper does not define it; this is our reading.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval
from ..registry import register
from ..runs.arrays import broadcast_rows, copy, repeat_rows
from .base import Algorithm
from ..runs.metrics import personalized_extras

State = namedtuple("PFedProxState", "x personal")
Messages = namedtuple("PFedProxMessages", "y")


def local(pk, rd, hp, st, rng):
    """x_{i,k+1} = prox_{eta h}(x_{i,k} - eta (g(x_{i,k}) + mu (x_{i,k} - x^t))) from x_{i,0} = x^t.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    X0 = np.empty((rd.S, st.x.shape[0]))            # one start row per participant, as local_round passes
    for s in range(rd.S):
        X0[s] = st.x
    Y, _, bad = ops.local_prox_sgd(pk, rd, X0, ops.row(st.x), hp.mu, False, 0.0)
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """x^{t+1} = x^t + sum_i omega_i (x_{i,K} - x^t); personal_i <- x_{i,K} for the participants (in place).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    per = st.personal
    ops.set_rows(per, rd.clients, m.y)
    return State(ops.averaged_step(st.x, rd.weights, m.y, 1.0), per)


@register
@dataclass(frozen=True)
class PFedProx(Algorithm):
    r"""Personalized FedProx: proximal local steps with a pull mu (x - x^t); personal model = local iterate.

    Parameters
    ----------
    mu : float, default 0.1
        Proximal weight (tune in {0.001, 0.01, 0.1, 1}).

    References
    ----------
    T. Li et al., "Federated optimization in heterogeneous networks", MLSys 2020, with the prox
    version and the personalized reading in docs/baselines.md, Personalized FedProx.

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(30, 5)) for _ in range(4)], [rng.normal(size=30) for _ in range(4)], l1=0.1)
    >>> ft.run(p, "pfedprox", rounds=10, local_steps=5, lr=0.05).state["personal"].shape
    (4, 5)
    """

    mu: float = 0.1

    name: ClassVar[str] = "pfedprox"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options_reason: ClassVar[str] = (
        "its local step is a proximal step of the composite objective, not a plain "
        "gradient step")
    traceables: ClassVar[dict] = {}          # the proximal kernels record no local path yet
    reference: ClassVar[str] = "Li et al. 2020 (FedProx), personalized reading in docs/baselines.md, Personalized FedProx"
    constraints: ClassVar[dict] = {"mu": [Interval(float, 0, None, "left")]}
    stateful_clients: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1, "mu": 0.1}

    def check_problem(self, problem):
        """Any smooth problem, or a composite one (l1, group, nuclear)."""

    def init(self, problem, x0):
        return {"x": copy(x0), "personal": repeat_rows(x0, problem.n_clients)}

    def local_round(self, state, ctx):         # the torch backend's glue
        x = state["x"]
        Y, _, fail = ctx.local_prox_sgd(broadcast_rows(x, ctx.S), x, self.mu)
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        p, x = ctx.problem, state["x"]
        Y = np.empty((ctx.S, p.dim))
        for s in range(ctx.S):
            y = x.copy()
            for k in range(ctx.K):
                y = p.prox(y - ctx.lrs[k] * (ctx.grad(s, k, y) + self.mu * (y - x)), ctx.lrs[k])
            Y[s] = y
        return {"y": Y}

    def history_extras(self, state, problem):
        return personalized_extras(problem, state["personal"], state["x"])
