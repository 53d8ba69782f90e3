r"""FedSPS-Normalized (Mukherjee, Loizou, Stich 2023, Algorithm 2), docs/papers/fedsps.md, §2.5.

Local steps as FedSPS; each client sums its step sizes of the round, :math:`\nu_i = \sum_k
\gamma_{r\tau+k}^i` (all :math:`\tau` of them: the printed algorithm omits the last one and divides by
zero for :math:`\tau = 1`, docs/papers/fedsps.md, §2.5; ``nu_literal=True`` reproduces it for :math:`\tau \ge 2`), and the
server takes the :math:`1/\nu_i`-weighted average of the local models,

.. math:: x \leftarrow \frac{\sum_i \omega_i x_i/\nu_i}{\sum_i \omega_i/\nu_i}
          = x - \bar\nu_H \sum_i\omega_i \frac{\Delta_i}{\nu_i},\qquad
          \bar\nu_H = \Bigl(\sum_i\omega_i/\nu_i\Bigr)^{-1}

(:math:`\omega_i = 1/S`: the paper's harmonic-mean form). Equal :math:`\nu_i` gives FedSPS.
Uplink: the model and one scalar.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._kernels.sps import MODE_SPS
from .._argcheck import Bool, Interval
from ..runs.arrays import as_like, copy
from ..registry import register
from .fedsps import LOWER_BOUND
from .sps_common import SPSBase, sps

State = namedtuple("FedSPSNormalizedState", "x ell state last_steps steps_total capped_total")
Messages = namedtuple("FedSPSNormalizedMessages", "y gammas capped state last_val last_gg")


def local(pk, rd, hp, st, rng):
    """tau FedSPS steps x <- x - gamma_t^i g_t^i, gamma_t^i = min{(F_i - ell_i^*)/(c ||g_t^i||^2), gamma_b}.

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
    Y, G, C, lv, lg, bad = ops.local_sps(pk, rd, st.x, MODE_SPS, hp.c, hp.gamma_b, st.ell[rd.clients], 0.0, False,
                                         0.0, np.ones(rd.S), mem, hp.eps)
    return Messages(Y, G, C, mem, lv, lg), bad


def server(pk, rd, hp, st, m):
    """x^{r+1} = x^r + sum_i (omega_i/nu_i) (x_i - x^r) / sum_i (omega_i/nu_i), nu_i = sum_k gamma_{r tau+k}^i.

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
    nu = ops.sps_normalized_nu(m.gammas, rd.K, hp.nu_literal)
    w = rd.weights / np.where(nu > 0, nu, np.inf)
    if not (w > 0).any():                  # every client took zero steps: nothing moved
        x = st.x.copy()
    else:
        x = st.x + (w @ (m.y - st.x)) / w.sum()
    return State(x, st.ell, mem, last, steps, capped)


@register
@dataclass(frozen=True)
class FedSPSNormalized(SPSBase):
    r"""FedSPS-Normalized: FedSPS local steps, aggregation weighted by the inverse step-size sums.

    Parameters
    ----------
    c : float, default 0.5
        SPS scale c > 0.
    gamma_b : float, default 1
        Step-size cap gamma_b > 0.
    lower_bound : float or array (n,), default 0
        The lower bound ell_i^* on every sample loss of client i.
    nu_literal : bool, default False
        Sum only the first tau - 1 step sizes, as printed (needs tau >= 2).

    References
    ----------
    S. Mukherjee, N. Loizou, S. U. Stich, "Locally adaptive federated learning", App. D.1,
    Algorithm 2; docs/papers/fedsps.md, §2.5.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> ft.run(p, "fedsps_normalized", rounds=5, local_steps=3, lower_bound=-10.0).status
    'max_rounds'
    """

    c: float = 0.5
    gamma_b: float = 1.0
    lower_bound: object = 0.0
    nu_literal: bool = False

    name: ClassVar[str] = "fedsps_normalized"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    reference: ClassVar[str] = "Mukherjee, Loizou, Stich 2023, Algorithm 2; docs/papers/fedsps.md, §2.5"
    constraints: ClassVar[dict] = {"c": [Interval(float, 0, None, "neither")],
                                   "gamma_b": [Interval(float, 0, None, "neither")],
                                   "lower_bound": LOWER_BOUND, "nu_literal": [Bool()]}
    comm: ClassVar[tuple] = (1, 1)
    test_params: ClassVar[dict] = {"c": 0.5, "gamma_b": 0.5}
    # the step size ignores lr: a tiny c (huge Polyak steps) and a huge cap make it blow up
    divergence_params: ClassVar[dict] = {"c": 1e-3, "gamma_b": 1e8}
    _mode = MODE_SPS

    def _reference_rule(self, s, t, F, gg, ell, st, ctx, state):
        gam = sps(F, gg, ell, self.c, self.gamma_b)
        return gam, int(gg == 0 or max(F - ell, 0) / (self.c * gg) >= self.gamma_b), st

    def _rule_params(self):
        return dict(c=float(self.c), gamma_b=float(self.gamma_b), nu_literal=bool(self.nu_literal),
                    eps=float(self.eps))

    def server_update(self, state, ctx, messages):
        # the torch backend only: the rule divides the weights (a tensor there) by a NumPy array of nu_i
        # (np.where), which torch does not support; the same update with the arrays helpers
        return self._torch_server_update(state, ctx, messages)

    def _aggregate(self, state, ctx, messages):        # the torch backend's aggregation (see server_update)
        nu = ops.sps_normalized_nu(messages["gammas"], ctx.K, self.nu_literal)
        w = ctx.weights / as_like(np.where(nu > 0, nu, np.inf), ctx.weights)
        if not bool((w > 0).any()):            # every client took zero steps: nothing moved
            return copy(state["x"])
        return state["x"] + (w @ (messages["y"] - state["x"])) / w.sum()
