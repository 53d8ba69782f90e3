r"""Mime and MimeLite with SGD momentum (Karimireddy et al. 2021), docs/baselines.md, Mime / MimeLite.

The server holds a momentum s (0 at start). Each sampled client computes its full gradient
:math:`\nabla f_i(x)` at the server model; Mime also receives
:math:`c = \sum_{j\in S}\omega_j\nabla f_j(x) / \sum_{j\in S}\omega_j` (the paper's
:math:`\frac1S\sum_{j\in S}\nabla f_j(x)` for uniform objective weights).
Local steps, with s frozen during the round:

.. math::

    \text{Mime: } g = \nabla F_i(y;B) - \nabla F_i(x;B) + c, \qquad \text{MimeLite: } g = \nabla F_i(y;B),
    \qquad y \leftarrow y - \eta_l\bigl((1-\beta) g + \beta s\bigr),

then :math:`s \leftarrow (1-\beta)\bar g + \beta s` with :math:`\bar g` the same normalised average
as c (a convex combination: the momentum never takes the random scale of
:math:`\sum_S\omega_i`) and :math:`x \leftarrow x + \sum_{i\in S}\omega_i (y_i - x)` (FedAvg's server,
the mean of the local models for uniform weights). Communication: MimeLite 2 down
(x, s) and 2 up (y_i, grad f_i(x)); Mime 3 down (x, s, c) and 2 up. Gradient work: the full client
gradient at x once per round, plus one (MimeLite) or two (Mime) minibatch gradients per step.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._argcheck import Interval, Options
from ..runs.arrays import broadcast_rows, copy, zeros
from ..registry import register
from .base import Algorithm

#: ``variant`` as the compiled rules read it (``Mime.compiled_params``)
MIMELITE, MIME = 0, 1

State = namedtuple("MimeState", "x s")
Messages = namedtuple("MimeMessages", "y gx")


def local(pk, rd, hp, st, rng):
    """Gx_i = grad f_i(x); y <- y - eta_k ((1-b) g + b s), g = g(y;B) (MimeLite) or g(y;B) - g(x;B) + c (Mime).

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    b = hp.beta
    Gx = ops.full_grads(pk, rd, st.x)
    if hp.variant == MIME:
        c = rd.weights @ Gx / ops.participant_total(rd.weights)          # c = sum_S omega_i grad f_i(x) / sum omega
        Y, bad = ops.local_vr(pk, rd, st.x, 1 - b, ops.tile_row((1 - b) * c + b * st.s, rd.S))
    else:
        x = ops.row(st.x)
        Y, bad = ops.local_sgd(pk, rd, x, x, 1 - b, 0.0, ops.tile_row(b * st.s, rd.S))
    return Messages(Y, Gx), bad


def server(pk, rd, hp, st, m):
    """x <- x + sum_S omega_i (y_i - x);  s <- (1-b) gbar + b s, gbar = sum_S omega_i grad f_i(x) / sum omega.

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    w = rd.weights
    gbar = w @ m.gx / ops.participant_total(w)
    return State(st.x + w @ (m.y - st.x), (1 - hp.beta) * gbar + hp.beta * st.s)


def extra_grads(pk, rd, hp):
    """The exact client gradients at x: one oracle call and m_i per-sample gradients per participant.

    Parameters
    ----------
    pk, rd, hp : Pack, Round, Params
        The arguments of every ``extra_grads`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple of int
        ``(oracle calls, per-sample gradients)`` beyond the local steps.
    """
    return rd.S, pk.sizes[rd.clients].sum()


@register
@dataclass(frozen=True)
class Mime(Algorithm):
    r"""Mime / MimeLite: local steps with the server's frozen momentum (and Mime's SVRG correction).

    Parameters
    ----------
    beta : float, default 0.9
        Momentum weight in [0, 1).
    variant : {"mimelite", "mime"}, default "mimelite"

    References
    ----------
    S. P. Karimireddy, M. Jaggi, S. Kale, M. Mohri, S. J. Reddi, S. U. Stich, A. T. Suresh,
    "Breaking the centralized barrier for cross-device federated learning", NeurIPS 2021
    (Mime, MimeLite with SGD momentum); the FedSPS baseline, docs/baselines.md, Mime / MimeLite.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
    >>> h = ft.run(p, "mime", rounds=50, local_steps=3, lr=0.1, variant="mime").history
    >>> bool(h.value.iloc[-1] < h.value.iloc[0])
    True
    """

    beta: float = 0.9
    variant: str = "mimelite"

    name: ClassVar[str] = "mime"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    reference: ClassVar[str] = "Karimireddy et al. 2021 (Mime/MimeLite, SGDm); docs/baselines.md, Mime / MimeLite"
    constraints: ClassVar[dict] = {"beta": [Interval(float, 0, 1, "left")],
                                   "variant": [Options("mimelite", "mime")]}
    test_params: ClassVar[dict] = {"lr": 0.1}

    @property
    def comm(self):
        return (3, 2) if self.variant == "mime" else (2, 2)

    def oracle_calls_per_step(self):
        return 2 if self.variant == "mime" else 1

    def compiled_params(self):
        """The hyperparameters of the compiled rules: ``variant`` as an int, 0 "mimelite", 1 "mime"."""
        return super().compiled_params()._replace(variant=MIME if self.variant == "mime" else MIMELITE)

    def init(self, problem, x0):
        return {"x": copy(x0), "s": zeros(x0, problem.dim)}

    def _full_grads(self, state, ctx):
        return ctx.full_grads(state["x"])

    def local_round(self, state, ctx):         # the torch backend's glue
        x, b = state["x"], self.beta
        Gx = self._full_grads(state, ctx)
        if self.variant == "mimelite":
            corr = broadcast_rows(b * state["s"], ctx.S)
            Y, fail = ctx.local_sgd(x, gscale=1 - b, corr=corr)
        else:
            c = ctx.weights @ Gx / ops.participant_total(ctx.weights)
            corr = broadcast_rows((1 - b) * c + b * state["s"], ctx.S)
            Y, fail = ctx.local_vr(x, 1 - b, corr)
        return {"y": Y, "gx": Gx, "fail": fail}

    def local_round_reference(self, state, ctx):
        x, b, s_mom = state["x"], self.beta, state["s"]
        Gx = self._full_grads(state, ctx)
        c = ctx.weights @ Gx / ops.participant_total(ctx.weights)
        Y = np.empty((ctx.S, x.shape[0]))
        for s in range(ctx.S):
            y = x.copy()
            ctx.record("local", s, 0, y)
            for k in range(ctx.K):
                if self.variant == "mime":
                    g = ctx.grad(s, k, y) - ctx.grad(s, k, x) + c      # same minibatch (and noise)
                else:
                    g = ctx.grad(s, k, y)
                y = y - ctx.lrs[k] * ctx.released_step((1 - b) * g + b * s_mom, y)
                ctx.record("local", s, k + 1, y)
            Y[s] = y
        return {"y": Y, "gx": Gx}
