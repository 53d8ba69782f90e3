r"""pFedMe (T Dinh, Tran, Nguyen 2020) with a composite h, docs/baselines.md, pFedMe.

Each sampled client sets :math:`w = \theta = x^t`; for each local step k it draws one minibatch
B and repeats ``inner`` times

.. math:: \theta \leftarrow \operatorname{prox}_{\eta_p h}\bigl(\theta - \eta_p(\nabla\tilde f_i(\theta; B)
          + \lambda_p(\theta - w) + \mu\theta)\bigr),

then :math:`w \leftarrow w - \eta_l\lambda_p(w - \theta)` (theta warm-started across k; the prox is the
our composite extension, mu the reference code's weight decay). The server sets
:math:`x^{t+1} = (1-\beta)x^t + \beta\sum_i\omega_i w_i`. Personalized model: the client's theta.
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

State = namedtuple("PFedMeState", "x theta")
Messages = namedtuple("PFedMeMessages", "w theta")


def local(pk, rd, hp, st, rng):
    """theta <- prox_{eta_p h}(theta - eta_p (g(theta) + lam_p (theta - w) + mu theta)) (inner times),
    then w <- w - eta_k lam_p (w - theta), from w = theta = x^t.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    W, Th, bad = ops.local_pfedme(pk, rd, st.x, hp.lam_p, hp.eta_p, hp.inner, hp.weight_decay)
    return Messages(W, Th), bad


def server(pk, rd, hp, st, m):
    """x^{t+1} = (1 - beta) x^t + beta (x^t + sum_i omega_i (w_i - x^t)); theta_i <- theta_i^+ (in place).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    th = st.theta
    ops.set_rows(th, rd.clients, m.theta)
    x = st.x
    mean_w = x + rd.weights @ (m.w - x)
    return State((1 - hp.beta) * x + hp.beta * mean_w, th)


@register
@dataclass(frozen=True)
class PFedMe(Algorithm):
    r"""Moreau-envelope personalization with an inner proximal solver (pFedMe).

    Parameters
    ----------
    lam_p : float, default 15
        Moreau-envelope penalty lambda.
    eta_p : float, default 0.09
        Personal (inner) step size.
    inner : int, default 5
        Inner steps K_in per local step.
    beta : float, default 1
        Server mixing beta in (0, 2].
    weight_decay : float, default 0.001
        The reference code's mu inside the inner step (the decoupled decay of that code; the
        run option ``fedtheory.run(weight_decay=...)`` sets it; ``clip_norm`` is rejected).

    Notes
    -----
    ``state["theta"]`` holds each client's last personalized model (x^0 until first sampled).

    References
    ----------
    C. T Dinh, N. H. Tran, T. D. Nguyen, "Personalized federated learning with Moreau envelopes",
    NeurIPS 2020, Algorithm 1 (and the CharlieDinh/pFedMe code); docs/baselines.md, pFedMe.

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(30, 5)) for _ in range(4)], [rng.normal(size=30) for _ in range(4)], l1=0.1)
    >>> ft.run(p, "pfedme", rounds=10, local_steps=5, lr=0.005, eta_p=0.05).status
    'max_rounds'
    """

    lam_p: float = 15.0
    eta_p: float = 0.09
    inner: int = 5
    beta: float = 1.0
    weight_decay: float = 0.001

    name: ClassVar[str] = "pfedme"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay",)
    released_options_reason: ClassVar[str] = (
        "its local step is an inexact proximal (Moreau envelope) step; the run option "
        "weight_decay is its own weight_decay hyperparameter, but no clipping is "
        "defined for it")
    traceables: ClassVar[dict] = {}          # the proximal kernels record no local path yet
    reference: ClassVar[str] = "T Dinh, Tran, Nguyen 2020 (pFedMe); docs/baselines.md, pFedMe"
    constraints: ClassVar[dict] = {"lam_p": [Interval(float, 0, None, "neither")],
                                   "eta_p": [Interval(float, 0, None, "neither")],
                                   "inner": [Interval(int, 1, None)],
                                   "beta": [Interval(float, 0, 2, "right")],
                                   "weight_decay": [Interval(float, 0, None, "left")]}
    stateful_clients: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.05, "eta_p": 0.05, "lam_p": 2.0, "inner": 3}

    def check_problem(self, problem):
        """Any smooth problem, or a composite one (l1, group, nuclear)."""

    def oracle_calls_per_step(self):
        return self.inner

    def init(self, problem, x0):
        return {"x": copy(x0), "theta": repeat_rows(x0, problem.n_clients)}

    def local_round(self, state, ctx):         # the torch backend's glue
        W, Th, fail = ctx.local_pfedme(state["x"], self.lam_p, self.eta_p, self.inner, self.weight_decay)
        return {"w": W, "theta": Th, "fail": fail}

    def local_round_reference(self, state, ctx):
        p, x = ctx.problem, state["x"]
        W, Th = np.empty((ctx.S, p.dim)), np.empty((ctx.S, p.dim))
        for s in range(ctx.S):
            w, th = x.copy(), x.copy()
            for k in range(ctx.K):
                for _ in range(self.inner):
                    g = ctx.grad(s, k, th)
                    th = p.prox(th - self.eta_p * (g + self.lam_p * (th - w) + self.weight_decay * th), self.eta_p)
                w = w - ctx.lrs[k] * self.lam_p * (w - th)
            W[s], Th[s] = w, th
        return {"w": W, "theta": Th}

    def history_extras(self, state, problem):
        return personalized_extras(problem, state["theta"], state["x"])
