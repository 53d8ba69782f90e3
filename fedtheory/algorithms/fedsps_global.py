r"""FedSPS-Global (Mukherjee, Loizou, Stich 2023, Algorithm 3), docs/papers/fedsps.md, §2.6.

One step size :math:`\gamma_r` for every client and every local step of round r,

.. math:: x_{t+1}^i = x_t^i - \gamma_r\, g_t^i,

and the server averages the models. At the last local
step each participating client computes, from its last iterate and minibatch,
:math:`F_i`, :math:`\|g_i\|^2` (and :math:`g_i`); the server forms the step size of the **next** round:

* (a) :math:`\gamma = \frac1S\sum_i \min\{(F_i - \ell_i^*)/(c\|g_i\|^2), \gamma_b\}` (eq. 41, default),
* (b) :math:`\min\{\operatorname{mean}_i(F_i - \ell_i^*) / (c\,\operatorname{mean}_i\|g_i\|^2), \gamma_b\}`,
* (c) :math:`\min\{\operatorname{mean}_i(F_i - \ell_i^*) / (c\,\|\operatorname{mean}_i g_i\|^2), \gamma_b\}`.

:math:`\gamma_0` is the local SPS step of client 0 at :math:`x^0` (exact client gradient, a pre-round
probe) unless ``gamma0`` is given. Communication: down the model and :math:`\gamma`, up the model and
the scalars (and :math:`g_i` for (c)).
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._kernels.sps import MODE_FIXED
from .._argcheck import Interval, NoneOk, Options
from ..runs.arrays import as_like, copy, to_numpy, zeros
from ..registry import register
from .fedsps import LOWER_BOUND
from .sps_common import SPSBase, sps

State = namedtuple("FedSPSGlobalState", "x ell state last_steps steps_total capped_total gamma gamma_global gamma_a "
                                        "gamma_b_agg gamma_c")
#: ``last_grad``: g_i at the last local iterate for aggregation (c), (S, d); (S, 0) otherwise (nothing sent)
Messages = namedtuple("FedSPSGlobalMessages", "y gammas capped state last_val last_gg last_grad")

#: ``hp.aggregation`` of the compiled rules
AGGREGATIONS = {"a": 0, "b": 1, "c": 2}


def local(pk, rd, hp, st, rng):
    """tau steps x <- x - gamma_r g_t^i with the round's global step gamma_r, from x^r; for (c) also g_i at
    x_{r tau + tau - 1}^i.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    mem = st.state[rd.clients]
    Y, G, C, lv, lg, bad = ops.local_sps(pk, rd, st.x, MODE_FIXED, hp.c, hp.gamma_b, st.ell[rd.clients], 0.0, False,
                                         st.gamma, np.ones(rd.S), mem, hp.eps)
    if hp.aggregation == 2:
        last = ops.sps_last_grads(pk, rd, st.x, st.gamma)
    else:
        last = np.zeros((rd.S, 0))
    return Messages(Y, G, C, mem, lv, lg, last), bad


def server(pk, rd, hp, st, m):
    """x^{r+1} = x^r + sum_i omega_i (x_i - x^r); gamma_{r+1}: (a) sum_i w_i min{(F_i - ell_i^*)/(c ||g_i||^2), gamma_b},
    (b) min{sum_i w_i (F_i - ell_i^*) / (c sum_i w_i ||g_i||^2), gamma_b}, (c) the same over ||sum_i w_i g_i||^2
    (w_i = omega_i / sum_j omega_j).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    mem, last, steps, capped = ops.sps_bookkeeping(st.state, rd.clients, m.state, m.gammas, m.capped,
                                                   st.steps_total, st.capped_total)
    x = ops.averaged_step(st.x, rd.weights, m.y, 1.0)
    ell = st.ell[rd.clients]
    F, gg = m.last_val, m.last_gg
    num = np.maximum(F - ell, 0.0)
    w = rd.weights / ops.participant_total(rd.weights)
    steps_a = np.empty(F.shape[0])
    for s in range(F.shape[0]):
        steps_a[s] = ops.sps_step(F[s], gg[s], ell[s], hp.c, hp.gamma_b)
    ga = w @ steps_a
    mg = w @ gg
    gb = hp.gamma_b if mg == 0 else min((w @ num) / (hp.c * mg), hp.gamma_b)
    gc = np.nan
    if hp.aggregation == 2:
        gbar = w @ m.last_grad
        q = gbar @ gbar
        gc = hp.gamma_b if q == 0 else min((w @ num) / (hp.c * q), hp.gamma_b)
    new = ga if hp.aggregation == 0 else (gb if hp.aggregation == 1 else gc)
    return State(x, st.ell, mem, last, steps, capped, new, new, ga, gb, gc)


@register
@dataclass(frozen=True)
class FedSPSGlobal(SPSBase):
    r"""FedSPS-Global: one server-aggregated Polyak step size per round.

    Parameters
    ----------
    c : float, default 0.5
        SPS scale c > 0.
    gamma_b : float, default 1
        Step-size cap gamma_b > 0.
    lower_bound : float or array (n,), default 0
        The lower bound ell_i^* on every sample loss of client i.
    aggregation : {"a", "b", "c"}, default "a"
        The aggregation formula of App. D.2.2.
    gamma0 : float, optional
        Step size of round 0 (default: the SPS step of client 0 at x^0).

    Notes
    -----
    ``state["gamma"]`` is the step size of the next round; the history's ``gamma_a``,
    ``gamma_b_agg`` and ``gamma_c`` columns give the three aggregations at the last round (for
    Prop. 2, whose claim gamma^(a) >= gamma^(b) is false in general, docs/papers/fedsps.md, P11b).

    References
    ----------
    S. Mukherjee, N. Loizou, S. U. Stich, "Locally adaptive federated learning", App. D.2,
    Algorithm 3 and eq. (41); docs/papers/fedsps.md, §2.6.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> res = ft.run(p, "fedsps_global", rounds=5, local_steps=3, lower_bound=-10.0)
    >>> 0 < res.state["gamma"] <= 1.0
    True
    """

    c: float = 0.5
    gamma_b: float = 1.0
    lower_bound: object = 0.0
    aggregation: str = "a"
    gamma0: object = None

    name: ClassVar[str] = "fedsps_global"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    reference: ClassVar[str] = "Mukherjee, Loizou, Stich 2023, Algorithm 3; docs/papers/fedsps.md, §2.6"
    constraints: ClassVar[dict] = {"c": [Interval(float, 0, None, "neither")],
                                   "gamma_b": [Interval(float, 0, None, "neither")],
                                   "lower_bound": LOWER_BOUND, "aggregation": [Options("a", "b", "c")],
                                   "gamma0": [NoneOk(), Interval(float, 0, None, "neither")]}

    @property
    def comm(self):
        """(down, up) d-vectors per participant: the model each way, and for aggregation (c) also the
        client's last gradient g_i up (the scalars are not counted)."""
        return (1, 2) if self.aggregation == "c" else (1, 1)

    scalars: ClassVar[dict] = {
        "gamma_global": "the server's global step size for the next round (the aggregation chosen)",
        "gamma_a": "aggregation (a): weighted mean of the clients' SPS steps at their last local iterate",
        "gamma_b_agg": "aggregation (b): SPS step of the weighted mean gap over the mean squared gradient norm",
        "gamma_c": "aggregation (c): SPS step with the norm of the mean last gradient (nan unless aggregation='c')"}
    test_params: ClassVar[dict] = {"c": 0.5, "gamma_b": 0.5, "gamma0": 0.1}
    # the step size ignores lr: a tiny c (huge Polyak steps) and a huge cap make it blow up
    divergence_params: ClassVar[dict] = {"c": 1e-3, "gamma_b": 1e8, "gamma0": 1e3}
    _mode = MODE_FIXED

    def init(self, problem, x0):
        state = super().init(problem, x0)
        if self.gamma0 is not None:
            g0 = float(self.gamma0)
        else:                                   # probe: client 0's SPS step at x^0
            g = problem.client_grad(0, x0)
            g0 = float(sps(problem.client_value(0, x0), float(g @ g), state["ell"][0], self.c, self.gamma_b))
            # a float even when the cap gamma_b binds and was given as an int (one type in the compiled state)
        state.update(gamma=g0, gamma_global=g0, gamma_a=np.nan, gamma_b_agg=np.nan, gamma_c=np.nan)
        return state

    def _rule_params(self):
        """``aggregation``: 0 ("a"), 1 ("b") or 2 ("c") (:data:`AGGREGATIONS`); ``gamma0`` is read by init only."""
        return dict(c=float(self.c), gamma_b=float(self.gamma_b), aggregation=AGGREGATIONS[self.aggregation],
                    eps=float(self.eps))

    def _kernel_args(self, state, ctx):
        return dict(c=self.c, gamma_b=self.gamma_b, c0=0.0, c_round=False, gamma_fixed=state["gamma"],
                    factor=np.ones(ctx.S))

    def local_round(self, state, ctx):         # the torch backend's glue
        msgs = self._run_kernel(state, ctx)
        if self.aggregation == "c":
            msgs["last_grad"] = self._last_grads(msgs["y"], state, ctx)
        return msgs

    def _last_grads(self, Y, state, ctx):
        # g_i at the last local iterate x_{K-1}^i = y_K + gamma g  =>  g = (x_{K-1} - y_K)/gamma is not
        # recoverable after the step; recompute it at the last iterate from the kernel's inputs
        gam = state["gamma"]
        out = zeros(Y, tuple(Y.shape))
        for s in range(ctx.S):
            # replay the round (NumPy) only for aggregation (c); K steps of a fixed gamma
            y = copy(state["x"])
            for k in range(ctx.K):
                g = ctx.grad(s, k, y)
                if k == ctx.K - 1:
                    out[s] = g
                y = y - gam * g
        return out

    def local_round_reference(self, state, ctx):
        msgs = super().local_round_reference(state, ctx)
        # every message of the rules' Messages: no gradient sent, (S, 0), unless aggregation (c)
        msgs["last_grad"] = self._last_grads(msgs["y"], state, ctx) if self.aggregation == "c" else np.zeros((ctx.S, 0))
        return msgs

    def _reference_rule(self, s, t, F, gg, ell, st, ctx, state):
        return state["gamma"], int(state["gamma"] >= self.gamma_b * (1 - 1e-12)), st

    def server_update(self, state, ctx, messages):
        # the torch backend only: the rule computes the aggregated step sizes with NumPy products of the
        # weights (a tensor there) and NumPy arrays; the same update with the arrays helpers
        return self._torch_server_update(state, ctx, messages)

    def _after_round(self, state, ctx, messages):      # the torch backend's step sizes (see server_update)
        ell = state["ell"][ctx.clients]
        F, gg = messages["last_val"], messages["last_gg"]
        num = np.maximum(F - ell, 0.0)
        w = to_numpy(ctx.weights)
        w = w / ops.participant_total(w)
        ga = float(w @ np.array([sps(f, q, e, self.c, self.gamma_b) for f, q, e in zip(F, gg, ell)]))
        mg = float(w @ gg)
        gb = self.gamma_b if mg == 0 else min(float(w @ num) / (self.c * mg), self.gamma_b)
        gc = np.nan
        if messages.get("last_grad") is not None:
            gbar = to_numpy(as_like(w, messages["last_grad"]) @ messages["last_grad"])
            q = float(gbar @ gbar)
            gc = self.gamma_b if q == 0 else min(float(w @ num) / (self.c * q), self.gamma_b)
        new = {"a": ga, "b": gb, "c": gc}[self.aggregation]
        return {**state, "gamma": new, "gamma_global": new, "gamma_a": ga, "gamma_b_agg": gb, "gamma_c": gc}
