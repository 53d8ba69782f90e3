r"""FedSPS (Mukherjee, Loizou, Stich 2023), Algorithm 1, docs/papers/fedsps.md, §2.3 and §2.7.

Every sampled client takes :math:`\tau` local steps with its own stochastic Polyak step size

.. math:: \gamma_t^i = \min\Bigl\{\frac{F_i(x_t^i,\xi_t^i) - \ell_i^*}{c\,\|g_t^i\|^2},\ \gamma_b\Bigr\},
          \qquad x_{t+1}^i = x_t^i - \gamma_t^i g_t^i,

(value and gradient on the same minibatch; the cap when :math:`g = 0`; a negative numerator,
possible only with an invalid lower bound, gives 0), and the server averages the local models.
``smoothing="sps_code"`` replaces :math:`\gamma_b` by the smoothed cap of the experiments,
:math:`2^{|B|/m_i}\gamma_{t-1}^i` (the SPS reference code; :math:`\gamma_{-1}^i = 1`, kept per client);
``"literal"`` is the printed :math:`\gamma_{b,t}^i = 2^{|B|/m_i}\gamma_{b,t-1}^i` (it grows without
bound, docs/papers/fedsps.md, P14). Clients are stateless otherwise; no step size is communicated.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._kernels.sps import MODE_SMOOTH, MODE_SMOOTH_LIT, MODE_SPS
from .._argcheck import ArrayLike, Bool, Interval, Options
from ..registry import register
from .sps_common import SPSBase, sps

LOWER_BOUND = [Interval(float, None, None, "neither"), ArrayLike("an array of per-client lower bounds")]

State = namedtuple("FedSPSState", "x ell state last_steps steps_total capped_total")
Messages = namedtuple("FedSPSMessages", "y gammas capped state last_val last_gg")


def local(pk, rd, hp, st, rng):
    """tau steps x <- x - gamma_t^i g_t^i, gamma_t^i = min{(F_i - ell_i^*)/(c ||g_t^i||^2), cap} (cap: gamma_b,
    or 2^{|B|/m_i} gamma_{t-1}^i smoothed), from x^r; the memory gamma_{t-1}^i reset to 1 if asked.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    if hp.reset_each_round:
        st.state[rd.clients] = 1.0
    mem = st.state[rd.clients]
    Y, G, C, lv, lg, bad = ops.local_sps(pk, rd, st.x, hp.mode, hp.c, hp.gamma_b, st.ell[rd.clients], 0.0, False,
                                         0.0, ops.sps_factor(pk, rd), mem, hp.eps)
    return Messages(Y, G, C, mem, lv, lg), bad


def server(pk, rd, hp, st, m):
    """x^{r+1} = x^r + sum_i omega_i (x_i - x^r) (the mean of the local models); the clients' memory kept.

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
class FedSPS(SPSBase):
    r"""FedSPS: local SGD with locally adaptive stochastic Polyak step sizes.

    Parameters
    ----------
    c : float, default 0.5
        SPS scale c > 0 (theory: c >= 2 tau^2 convex, c >= 4 tau^2 strongly convex).
    gamma_b : float, default 1
        Step-size cap gamma_b > 0.
    lower_bound : float or array (n,), default 0
        The lower bound ell_i^* on every sample loss of client i (0 for non-negative losses).
    smoothing : {"none", "sps_code", "literal"}, default "none"
        Smoothed cap of the non-convex experiments (docs/papers/fedsps.md, §2.7).
    reset_each_round : bool, default False
        Reset the smoothing state to 1 at the start of each round.

    Notes
    -----
    The history records the step-size statistics of each round: ``step_mean``, ``step_min``,
    ``step_max``, ``step_capped_frac`` (fraction of steps at the cap), ``step_intra_cv`` and
    ``step_inter_cv`` (within-client and across-client std/mean, Fig. 7) of the last round
    before each evaluation, and ``step_capped_frac_total``, the fraction of all steps so far
    that were capped. Once a run reaches exact interpolation (every f_i - ell_i^* and
    ||g||^2 of a step are rounding residues, a 0/0 in exact arithmetic) these statistics are
    rounding noise: the ratio of the residues, or the cap where ||g||^2 rounds to exactly 0, and
    they differ between backends and CPUs (the models agree, since the steps move x by the
    gradient's residue only).

    References
    ----------
    S. Mukherjee, N. Loizou, S. U. Stich, "Locally adaptive federated learning", arXiv
    2307.06306, Algorithm 1 and eq. (2); docs/papers/fedsps.md, §2.3.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, shared_minimizer=True, hessian="distinct", seed=0)
    >>> lb = [min(p.client_value(i, p.info["x_star"]), 0.0) for i in range(4)]
    >>> res = ft.run(p, "fedsps", rounds=30, local_steps=5, c=0.5, gamma_b=10.0, lower_bound=lb)
    >>> import numpy as np
    >>> bool(np.linalg.norm(res.x - p.info["x_star"]) < 1e-7)   # F - ell loses digits: sqrt(eps) limit
    True
    >>> float(res.history.step_capped_frac.iloc[1])             # the cap never binds here
    0.0
    """

    c: float = 0.5
    gamma_b: float = 1.0
    lower_bound: object = 0.0
    smoothing: str = "none"
    reset_each_round: bool = False

    name: ClassVar[str] = "fedsps"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    reference: ClassVar[str] = "Mukherjee, Loizou, Stich 2023 (FedSPS), Algorithm 1; docs/papers/fedsps.md, §2.3"
    constraints: ClassVar[dict] = {"c": [Interval(float, 0, None, "neither")],
                                   "gamma_b": [Interval(float, 0, None, "neither")],
                                   "lower_bound": LOWER_BOUND,
                                   "smoothing": [Options("none", "sps_code", "literal")],
                                   "reset_each_round": [Bool()]}
    stateful_clients: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"c": 0.5, "gamma_b": 0.5}
    # the step size ignores lr: a tiny c (huge Polyak steps) and a huge cap make it blow up
    divergence_params: ClassVar[dict] = {"c": 1e-3, "gamma_b": 1e8}
    reductions: ClassVar[list] = []

    @property
    def _mode(self):
        return {"none": MODE_SPS, "sps_code": MODE_SMOOTH, "literal": MODE_SMOOTH_LIT}[self.smoothing]

    def _init_state(self, problem):
        return np.ones(problem.n_clients)          # gamma_{-1} = 1 ("sps_code"); gamma_{b,0} = 1 ("literal")

    def _rule_params(self):
        """``mode`` is the kernel's step rule: 0 (``smoothing="none"``, ``MODE_SPS``), 2 (``"sps_code"``,
        ``MODE_SMOOTH``) or 3 (``"literal"``, ``MODE_SMOOTH_LIT``) of :mod:`fedtheory._kernels.sps`."""
        return dict(c=float(self.c), gamma_b=float(self.gamma_b), mode=int(self._mode),
                    reset_each_round=bool(self.reset_each_round), eps=float(self.eps))

    def _factor(self, ctx):
        B = ctx.idx.shape[2]
        m = ctx.problem.client_sizes[ctx.clients].astype(float)
        return 2.0 ** ((B if B else m) / m)

    def _kernel_args(self, state, ctx):
        if self.reset_each_round:
            state["state"][ctx.clients] = 1.0
        return dict(c=self.c, gamma_b=self.gamma_b, c0=0.0, c_round=False, gamma_fixed=0.0,
                    factor=self._factor(ctx))

    def local_round_reference(self, state, ctx):
        if self.reset_each_round:
            state["state"][ctx.clients] = 1.0
        return super().local_round_reference(state, ctx)

    def _reference_rule(self, s, t, F, gg, ell, st, ctx, state):
        if self.smoothing == "none":
            gam = sps(F, gg, ell, self.c, self.gamma_b)
            return gam, int(gam == self.gamma_b and (gg == 0 or max(F - ell, 0) / (self.c * gg) >= self.gamma_b)), st
        if self.smoothing == "sps_code":                  # cap = 2^{B/m} gamma_{t-1}
            cap = self._factor(ctx)[s] * st
            gam = sps(F, gg, ell, self.c, cap)
            return gam, int(gg == 0 or max(F - ell, 0) / (self.c * gg) >= cap), gam
        cap = st                         # literal: the cap gamma_{b,t} (gamma_{b,0} = 1), then the next one
        gam = sps(F, gg, ell, self.c, cap)                  # gamma_{b,t+1} = 2^{B/m} gamma_{b,t}
        return gam, int(gg == 0 or max(F - ell, 0) / (self.c * gg) >= cap), self._factor(ctx)[s] * st
