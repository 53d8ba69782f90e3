r"""FedPD (Zhang, Hong, Dhople, Yin, Liu 2021) with K local SGD steps, docs/baselines.md, FedPD.

Every client i keeps a dual :math:`\lambda_i` (0) and a local anchor :math:`x_{0,i}` (:math:`x^0`).
In each round every client runs K steps on
:math:`f_i(x) + \langle\lambda_i, x - x_{0,i}\rangle + \frac{1}{2\eta}\|x - x_{0,i}\|^2`:

.. math:: x_{k+1} = x_k - \eta_l\bigl(g_i(x_k;\xi_k) + \lambda_i + \tfrac1\eta (x_k - x_{0,i})\bigr),

then :math:`\lambda_i \leftarrow \lambda_i + \frac1\eta(x_{i,K} - x_{0,i})` and
:math:`x_{0,i}^+ = x_{i,K} + \eta\lambda_i`. With probability :math:`1 - p` the round communicates
and every anchor becomes :math:`\sum_j w_j x_{0,j}^+`; otherwise each client keeps its own
:math:`x_{0,i}^+`. The reported global model is :math:`\sum_i w_i x_{0,i}` (the model the next
communication would produce). FedPD needs full participation. With p = 0 and
:math:`\eta = \lambda` it is FedSpeed with alpha = 0 under full participation.

The local steps start from the anchor, :math:`x_{i,0} = x_{0,i}` (``start="anchor"``, every
baseline's start at the broadcast model); ``start="previous"`` starts them from the client's
local solution :math:`x_{i,K}` of the round before (:math:`x^0` in the first round), anchored at
:math:`x_{0,i}`, as the authors' released code does (``FedPD_SGD`` swaps the two at the start of
each round).
Communication: 1 down and 1 up per client, in communicating rounds only.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval, Options
from ..runs.arrays import copy, repeat_rows, zeros
from ..registry import register
from .base import Algorithm

#: ``start`` as the compiled rules read it (``FedPD.compiled_params``)
ANCHOR, PREVIOUS = 0, 1

State = namedtuple("FedPDState", "x dual anchor synced last")
Messages = namedtuple("FedPDMessages", "y")


def local(pk, rd, hp, st, rng):
    """x <- x - eta_k (g(x) + lambda_i + (x - x_{0,i}) / eta) from x_{0,i} (one shared anchor after a sync),
    or from the client's last local solution (start "previous").

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    lam = st.dual[rd.clients]
    if hp.start == PREVIOUS:             # the released code: from x_{i,K} of the round before
        X = st.last[rd.clients]
        if st.synced:
            Y, bad = ops.local_sgd(pk, rd, X, ops.row(st.anchor[0]), 1.0, 1.0 / hp.eta, lam)
        else:
            Y, bad = ops.local_sgd(pk, rd, X, st.anchor[rd.clients], 1.0, 1.0 / hp.eta, lam)
    elif st.synced:                      # one anchor for everyone: a shared start and anchor row
        x0 = ops.row(st.anchor[0])
        Y, bad = ops.local_sgd(pk, rd, x0, x0, 1.0, 1.0 / hp.eta, lam)
    else:                                # after a silent round every client from its own x_{0,i}
        X0 = st.anchor[rd.clients]
        Y, bad = ops.local_sgd(pk, rd, X0, X0, 1.0, 1.0 / hp.eta, lam)
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """lambda_i += (x_i - x_{0,i}) / eta; x_{0,i} = x_i + eta lambda_i; x = sum_i w_i x_{0,i}; u >= p: x_{0,i} = x
    (start "previous": the x_i kept as the next round's starts).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    c, Y = rd.clients, m.y
    dual, anchor, last = st.dual, st.anchor, st.last
    if hp.start == PREVIOUS:
        last[c] = Y
    dual[c] += (Y - anchor[c]) / hp.eta                 # lambda_i += (x_i - x_{0,i}) / eta
    anchor[c] = Y + hp.eta * dual[c]                    # x_{0,i}^+ = x_i + eta lambda_i
    x_new = rd.cw @ anchor                              # full participation: rd.cw holds every w_i, in order
    synced = bool(rd.u >= hp.p)                         # the round's coin: communicate with probability 1 - p
    if synced:
        anchor[:] = x_new
    return State(x_new, dual, anchor, synced, last)


def comm(pk, rd, hp, st, n_participants, down, up):
    """(down, up) d-vectors: (1, 1) per client in a communicating round, none in a silent one.

    Parameters
    ----------
    pk, rd, hp, st : Pack, Round, Params, State
        The arguments of every ``comm`` rule (:mod:`fedtheory._kernels.rounds`), the state after the round.
    n_participants, down, up : int
        The distinct participants, and the d-vectors each sends and receives.

    Returns
    -------
    tuple of int
        ``(vectors down, vectors up)`` of the round.
    """
    c = n_participants if rd.u >= hp.p else 0
    return c * down, c * up


@register
@dataclass(frozen=True)
class FedPD(Algorithm):
    r"""FedPD: federated primal-dual method with inexact (K-step) local solves.

    Parameters
    ----------
    eta : float, default 10
        Penalty parameter eta > 0 (the local prox term is :math:`\frac{1}{2\eta}\|x - x_0\|^2`).
    p : float, default 0
        Probability in [0, 1) of skipping communication in a round (coin drawn from the run's
        auxiliary random stream).
    start : {"anchor", "previous"}, default "anchor"
        Where each round's local steps start: the client's anchor :math:`x_{0,i}` (the broadcast
        model after a communicating round), or its local solution of the round before, as the
        authors' released code does (docs/baselines.md, FedPD).

    References
    ----------
    X. Zhang, M. Hong, S. Dhople, W. Yin, Y. Liu, "FedPD: A federated learning framework with
    adaptivity to non-IID data", IEEE TSP 2021, Algorithm 1 (oracle I: K local SGD steps);
    docs/baselines.md, FedPD.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(5, 3, heterogeneity=1.0, seed=0)
    >>> res = ft.run(p, "fedpd", rounds=300, local_steps=5, lr=0.1, eta=1.0)
    >>> bool(abs(p.value(res.x) - p.info["f_star"]) < 1e-10)
    True
    """

    eta: float = 10.0
    p: float = 0.0
    start: str = "anchor"

    name: ClassVar[str] = "fedpd"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = True          # communicates with probability 1 - p (the round's coin)
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "Zhang et al. 2021 (FedPD), Algorithm 1; docs/baselines.md, FedPD"
    constraints: ClassVar[dict] = {"eta": [Interval(float, 0, None, "neither")],
                                   "p": [Interval(float, 0, 1, "left")],
                                   "start": [Options("anchor", "previous")]}
    comm: ClassVar[tuple] = (1, 1)
    stateful_clients: ClassVar[bool] = True
    exact: ClassVar[bool] = True
    full_participation_only: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1, "eta": 2.0}
    reductions: ClassVar[list] = []

    def compiled_params(self):
        """The hyperparameters of the compiled rules: ``start`` as an int, 0 "anchor", 1 "previous"."""
        return super().compiled_params()._replace(start=PREVIOUS if self.start == "previous" else ANCHOR)

    def init(self, problem, x0):
        return {"x": copy(x0), "dual": zeros(x0, (problem.n_clients, problem.dim)),
                "anchor": repeat_rows(x0, problem.n_clients), "synced": True,
                "last": repeat_rows(x0, problem.n_clients)}

    def local_round(self, state, ctx):         # the torch backend's glue
        lam = state["dual"][ctx.clients]
        if self.start == "previous":             # from each client's last local solution
            anchors = state["anchor"][0] if state["synced"] else state["anchor"][ctx.clients]
            Y, fail = ctx.local_sgd(state["last"][ctx.clients], mu=1.0 / self.eta, corr=lam, anchor=anchors)
            return {"y": Y, "fail": fail}
        if state["synced"]:                      # one anchor for everyone: one kernel call
            x0 = state["anchor"][0]
            Y, fail = ctx.local_sgd(x0, mu=1.0 / self.eta, corr=lam)
            return {"y": Y, "fail": fail}
        # per-client anchors after a silent round: every client from its own x_{0,i}
        Y, fail = ctx.local_sgd(state["anchor"][ctx.clients], mu=1.0 / self.eta, corr=lam)
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        Y = np.empty((ctx.S, ctx.problem.dim))
        for s in range(ctx.S):
            i = ctx.clients[s]
            x0, lam = state["anchor"][i], state["dual"][i]
            xi = (state["last"][i] if self.start == "previous" else x0).copy()
            ctx.record("local", s, 0, xi)
            for k in range(ctx.K):
                xi = xi - ctx.lrs[k] * ctx.released_step(ctx.grad(s, k, xi) + lam + (xi - x0) / self.eta, xi,
                                                          1.0 / self.eta)
                ctx.record("local", s, k + 1, xi)
            Y[s] = xi
        return {"y": Y}
