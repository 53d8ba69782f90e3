r"""FedDeper: depersonalized FL by alternating SGD, Algorithm 1 (docs/papers/feddeper.md, §2).

Client i keeps a personalized model :math:`v_i` (:math:`v_{i,0}^0 = x^0`; clients not sampled keep
theirs). In round t a sampled client starts :math:`y_{i,0} = x^t`, :math:`v_{i,0} = v_i` and takes K
alternating steps (line 7 uses the current :math:`v_{i,k}`, docs/papers/feddeper.md, §2.3):

.. math::

    y_{i,k+1} &= y_{i,k} - \eta_l\, g_i(y_{i,k}) - \rho\,(v_{i,k} + y_{i,k} - 2x^t)
               \quad(\text{SGD on } f_i^\rho(y) = f_i(y) + \tfrac{\rho}{2\eta_l}\|v + y - 2x^t\|^2),\\
    v_{i,k+1} &= v_{i,k} - \eta_l\, g_i(v_{i,k}),

then mixes :math:`v_i \leftarrow (1-\lambda) v_{i,K} + \lambda y_{i,K}` (eq. 6) and uploads
:math:`y_{i,K} - x^t`; the server averages, :math:`x^{t+1} = x^t + \frac1S\sum_{i\in S_t}(y_{i,K} - x^t)`.
Communication as FedAvg (1 down, 1 up); two gradients per local step. ``star=True`` is FedDeper*
(half the local steps, the same gradient budget as the baselines, §2.5).
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import evaluation as ev
from .._kernels import rounds as ops
from .._argcheck import Bool, Interval, Options
from ..runs.arrays import copy, repeat_rows
from ..registry import register
from .base import Algorithm

COUPLING = {"current": 0, "next": 1, "frozen": 2}
#: ``minibatch`` and ``stale_v`` as the compiled rules read them (``FedDeper.compiled_params``)
SAME, INDEPENDENT = 0, 1
X0, REFRESH = 0, 1

State = namedtuple("FedDeperState", "x v seen")
Messages = namedtuple("FedDeperMessages", "y v")


def local(pk, rd, hp, st, rng):
    """From y_0 = x^t, v_0 = v_i, K times: y <- y - eta g(y) - rho (v + y - 2 x^t), v <- v - eta g(v).

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    idx_v, noise_v = rd.idx, rd.noise
    if hp.minibatch == INDEPENDENT:
        idx_v, noise_v = ops.independent_stream(pk, rd, rng)
    V0 = st.v[rd.clients]                                        # a copy
    if hp.stale_v == REFRESH:
        for s in range(rd.S):
            if not st.seen[rd.clients[s]]:
                V0[s] = st.x                                     # first participation: v_{i,0} = x^t
    Y, V, bad = ops.local_feddeper(pk, rd, st.x, V0, hp.rho, hp.v_coupling, idx_v, noise_v)
    return Messages(Y, V), bad


def server(pk, rd, hp, st, m):
    """v_i <- (1 - lambda) v_{i,K} + lambda y_{i,K} (eq. 6, in place); x^{t+1} = x^t + sum_S omega_i (y_{i,K} - x^t).

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
    ops.set_rows(v, rd.clients, (1 - hp.mix) * m.v + hp.mix * m.y)
    seen = st.seen
    ops.set_rows(seen, rd.clients, True)
    return State(ops.averaged_step(st.x, rd.weights, m.y, 1.0), v, seen)


#: The columns :meth:`FedDeper.history_extras` adds, as the rule ``extras`` computes them
EXTRAS = ("pm_loss", "gm_local_loss")


def extras(pk, hp, st):
    """``pm_loss`` = mean_i f_i(v_i) and ``gm_local_loss`` = mean_i f_i(x^t):
    :meth:`FedDeper.history_extras` in compiled code (the compiled rounds evaluate with it,
    :mod:`fedtheory._kernels.evaluation`).

    Parameters
    ----------
    pk, hp, st : Pack, Params, State
        The problem, the hyperparameters and the state after the round.

    Returns
    -------
    ndarray of shape (2,)
        The values of :data:`EXTRAS`.
    """
    n = pk.w.shape[0]
    pm, gm = 0.0, 0.0
    for i in range(n):
        pm += ev.client_value(pk, i, st.v[i])
        gm += ev.client_value(pk, i, st.x)
    return np.array([pm / n, gm / n])


@register
@dataclass(frozen=True)
class FedDeper(Algorithm):
    r"""FedDeper: a globalized y-model with a reverse-personalization penalty and a personalized v-model.

    Parameters
    ----------
    rho : float, default 0.03
        Dimensionless penalty coefficient rho >= 0 (the paper's varrho; per-step pull rho (v + y - 2x)).
    mix : float, default 0.5
        Mixing rate lambda in [0, 1] of eq. (6) (the theory needs [1/2, 1]).
    minibatch : {"same", "independent"}, default "same"
        The y- and v-gradients of a step on the same minibatch (and noise sample), or on
        independent ones (docs/papers/feddeper.md, A2).
    v_coupling : {"current", "next", "frozen"}, default "current"
        Which v enters the y-step: v_{i,k} (docs/papers/feddeper.md, §2.3), v_{i,k+1} or v_{i,0} (ablations).
    stale_v : {"x0", "refresh"}, default "x0"
        A client's first participation uses its v_{i,0} = x^0 (literal) or refreshes it to x^t.
    star : bool, default False
        FedDeper*: floor(K/2) local steps per round (at least 1).

    Notes
    -----
    ``state["v"]`` holds the personalized models; the history records ``pm_loss``
    (mean_i f_i(v_i)) and ``gm_local_loss`` (mean_i f_i(x)).

    References
    ----------
    "Depersonalized federated learning: tackling statistical heterogeneity by alternating
    stochastic gradient descent" (FedDeper), Algorithm 1 and eqs. (5)-(6); docs/papers/feddeper.md, §2.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(6, 3, heterogeneity=1.0, seed=0)
    >>> res = ft.run(p, "feddeper", rounds=50, local_steps=5, lr=0.05, rho=0.02, mix=0.5)
    >>> res.state["v"].shape, res.status
    ((6, 3), 'max_rounds')
    """

    rho: float = 0.03
    mix: float = 0.5
    minibatch: str = "same"
    v_coupling: str = "current"
    stale_v: str = "x0"
    star: bool = False

    name: ClassVar[str] = "feddeper"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options_reason: ClassVar[str] = (
        "its local step couples two sequences (Algorithm 1, lines 7-8) and no released-"
        "code convention for it is implemented")
    traceables: ClassVar[dict] = {
        "local": ("path", "y_{i,k}, k = 0..K: the globalized local model of each participating client"),
        "personal": ("path", "v_{i,k}, k = 0..K: the personalized local model (line 8)"),
        "v": ("state", "v_i of every client after the round's mixing (eq. 6), shape (n, d)")}
    reference: ClassVar[str] = "FedDeper, Algorithm 1; docs/papers/feddeper.md, §2"
    constraints: ClassVar[dict] = {"rho": [Interval(float, 0, None, "left")],
                                   "mix": [Interval(float, 0, 1, "both")],
                                   "minibatch": [Options("same", "independent")],
                                   "v_coupling": [Options(*COUPLING)],
                                   "stale_v": [Options("x0", "refresh")],
                                   "star": [Bool()]}
    comm: ClassVar[tuple] = (1, 1)
    stateful_clients: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1, "rho": 0.05, "mix": 0.5}
    reductions: ClassVar[list] = [({"rho": 0.0}, "fedavg", {})]

    def oracle_calls_per_step(self):
        return 2

    def round_schedule(self, rnd, local_steps):
        K = max(1, local_steps // 2) if self.star else local_steps
        return K, rnd * K

    def init(self, problem, x0):
        return {"x": copy(x0), "v": repeat_rows(x0, problem.n_clients),
                "seen": np.zeros(problem.n_clients, dtype=bool)}

    def compiled_params(self):
        """The hyperparameters of the compiled rules: ``minibatch`` as an int (0 "same", 1 "independent"),
        ``v_coupling`` as :data:`COUPLING` (0 "current", 1 "next", 2 "frozen") and ``stale_v`` as an int
        (0 "x0", 1 "refresh")."""
        return super().compiled_params()._replace(
            minibatch=INDEPENDENT if self.minibatch == "independent" else SAME,
            v_coupling=COUPLING[self.v_coupling], stale_v=REFRESH if self.stale_v == "refresh" else X0)

    def _v_stream(self, ctx):
        """Minibatch rows and noise of the v-gradients (the y-stream's own, or independent ones)."""
        if self.minibatch == "same":
            return ctx.idx, ctx.noise
        return ctx.independent_stream()

    def _starts(self, state, ctx):
        V0 = copy(state["v"][ctx.clients])
        if self.stale_v == "refresh":
            new = ~state["seen"][ctx.clients]
            V0[new] = state["x"]
        return V0

    def local_round(self, state, ctx):         # the torch backend's glue
        idx_v, noise_v = self._v_stream(ctx)
        Y, V, fail = ctx.local_feddeper(state["x"], self._starts(state, ctx), self.rho, COUPLING[self.v_coupling],
                                        idx_v, noise_v)
        return {"y": Y, "v": V, "fail": fail}

    def local_round_reference(self, state, ctx):
        x, rho = state["x"], self.rho
        idx_v, noise_v = self._v_stream(ctx)
        V0 = self._starts(state, ctx)
        Y, V = np.empty_like(V0), np.empty_like(V0)
        p = ctx.problem
        for s in range(ctx.S):
            i = int(ctx.clients[s])
            y, v = x.copy(), V0[s].copy()
            ctx.record("local", s, 0, y)
            ctx.record("personal", s, 0, v)
            for k in range(ctx.K):
                gy = ctx.grad(s, k, y)                                       # g_i(y_{i,k})
                gv = p.client_grad(i, v, idx_v[s, k] if idx_v.shape[2] else None)
                if noise_v.shape[0] > 0:
                    gv = gv + noise_v[s, k]
                v_next = v - ctx.lrs[k] * gv                                 # line 8
                w = {"current": v, "next": v_next, "frozen": V0[s]}[self.v_coupling]
                y = y - ctx.lrs[k] * gy - rho * (w + y - 2 * x)               # line 7
                v = v_next
                ctx.record("local", s, k + 1, y)
                ctx.record("personal", s, k + 1, v)
            Y[s], V[s] = y, v
        return {"y": Y, "v": V}

    def history_extras(self, state, problem):
        """``pm_loss`` = mean_i f_i(v_i) and ``gm_local_loss`` = mean_i f_i(x^t) (the rule ``extras``
        computes the same in compiled code)."""
        n = problem.n_clients
        pm = float(np.mean([problem.client_value(i, state["v"][i]) for i in range(n)]))
        gm = float(np.mean([problem.client_value(i, state["x"]) for i in range(n)]))
        return {"pm_loss": pm, "gm_local_loss": gm}
