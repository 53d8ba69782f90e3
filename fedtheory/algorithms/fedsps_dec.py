r"""FedDecSPS (Mukherjee, Loizou, Stich 2023, §5), docs/papers/fedsps.md, §2.4.

.. math:: \gamma_t^i = \frac{1}{c_t}\min\Bigl\{\frac{F_i(x_t^i,\xi_t^i) - \ell_i^*}{\|g_t^i\|^2},\
          c_{t-1}\gamma_{t-1}^i\Bigr\},\qquad c_t = c_0\sqrt{t+1},\quad c_{-1}\gamma_{-1}^i = c_0\gamma_b,

kept per client as :math:`P_i = c_s\gamma_s^i` of the client's last step (so under client sampling
an idle client resumes from its own last value). The step sizes are non-increasing and
:math:`\min\{1/(2c_tL), c_0\gamma_b/c_t\} \le \gamma_t^i \le c_0\gamma_b/c_t`. ``c_index="iteration"``
uses the global iteration counter t (the paper's Algorithm 1), ``"round"`` the round index t // tau.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._kernels.sps import MODE_DEC
from .._argcheck import Interval, Options
from ..registry import register
from .fedsps import LOWER_BOUND
from .sps_common import SPSBase

State = namedtuple("FedDecSPSState", "x ell state last_steps steps_total capped_total")
Messages = namedtuple("FedDecSPSMessages", "y gammas capped state last_val last_gg")


def local(pk, rd, hp, st, rng):
    """tau steps x <- x - gamma_t^i g_t^i, gamma_t^i = min{(F_i - ell_i^*)/||g_t^i||^2, P_i} / c_t,
    c_t = c_0 sqrt(t + 1), then P_i <- c_t gamma_t^i (P_i: the client's memory).

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
    Y, G, C, lv, lg, bad = ops.local_sps(pk, rd, st.x, MODE_DEC, 1.0, hp.gamma_b, st.ell[rd.clients], hp.c0,
                                         hp.c_round, 0.0, np.ones(rd.S), mem, hp.eps)
    return Messages(Y, G, C, mem, lv, lg), bad


def server(pk, rd, hp, st, m):
    """x^{r+1} = x^r + sum_i omega_i (x_i - x^r) (the mean of the local models); the clients' P_i kept.

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
    return State(ops.averaged_step(st.x, rd.weights, m.y, 1.0), st.ell, mem, last, steps, capped)


@register
@dataclass(frozen=True)
class FedDecSPS(SPSBase):
    r"""FedDecSPS: FedSPS with a decreasing scale c_t = c0 sqrt(t + 1) (exact convergence).

    Parameters
    ----------
    c0 : float, default 0.5
        Initial scale c_0 > 0.
    gamma_b : float, default 1
        Initial cap gamma_b > 0.
    lower_bound : float or array (n,), default 0
        The lower bound ell_i^* on every sample loss of client i.
    c_index : {"iteration", "round"}, default "iteration"
        Index t of c_t: the global local-iteration counter or the round.

    References
    ----------
    S. Mukherjee, N. Loizou, S. U. Stich, "Locally adaptive federated learning", §5
    (FedDecSPS), after DecSPS of Orvieto et al. 2022; docs/papers/fedsps.md, §2.4.

    Examples
    --------
    >>> import fedtheory as ft, problems, numpy as np
    >>> p = problems.quadratic(4, 3, heterogeneity=1.0, seed=0)
    >>> lb = [p.client_value(i, np.linalg.solve(p.client_data(i)[0], p.client_data(i)[1])) for i in range(4)]
    >>> h = ft.run(p, "fedsps_dec", rounds=20, local_steps=5, c0=0.5, gamma_b=2.0, lower_bound=lb).history
    >>> bool(np.all(np.diff(h.step_max.iloc[1:]) <= 0))        # non-increasing step sizes
    True
    """

    c0: float = 0.5
    gamma_b: float = 1.0
    lower_bound: object = 0.0
    c_index: str = "iteration"

    name: ClassVar[str] = "fedsps_dec"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    reference: ClassVar[str] = "Mukherjee, Loizou, Stich 2023, §5 (FedDecSPS); docs/papers/fedsps.md, §2.4"
    constraints: ClassVar[dict] = {"c0": [Interval(float, 0, None, "neither")],
                                   "gamma_b": [Interval(float, 0, None, "neither")],
                                   "lower_bound": LOWER_BOUND,
                                   "c_index": [Options("iteration", "round")]}
    stateful_clients: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"c0": 0.5, "gamma_b": 0.5}
    # the step size ignores lr: a tiny c (huge Polyak steps) and a huge cap make it blow up
    divergence_params: ClassVar[dict] = {"c0": 1e-3, "gamma_b": 1e8}
    _mode = MODE_DEC

    def _init_state(self, problem):
        # P_i = c_{-1} gamma_{-1}, a float even for integer c0 and gamma_b (an int array would truncate P_i)
        return np.full(problem.n_clients, float(self.c0 * self.gamma_b))

    def _rule_params(self):
        """``c_round``: ``c_index == "round"`` (c_t indexed by the round, else by the local iteration)."""
        return dict(c0=float(self.c0), gamma_b=float(self.gamma_b), c_round=self.c_index == "round",
                    eps=float(self.eps))

    def _kernel_args(self, state, ctx):
        return dict(c=1.0, gamma_b=self.gamma_b, c0=self.c0, c_round=self.c_index == "round", gamma_fixed=0.0,
                    factor=np.ones(ctx.S))

    def _reference_rule(self, s, t, F, gg, ell, P, ctx, state):
        tt = t // ctx.K if self.c_index == "round" else t
        ct = self.c0 * np.sqrt(tt + 1.0)
        ratio = np.inf if gg == 0 else max(F - ell, 0.0) / gg
        m = min(ratio, P)
        gam = m / ct
        return gam, int(ratio >= P), ct * gam
