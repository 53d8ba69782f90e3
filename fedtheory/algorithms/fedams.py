r"""FedAMS (Wang, Lin, Chen 2022): AMSGrad on the server over FedAvg updates, docs/baselines.md, FedAMS.

Clients run local SGD. With :math:`\Delta^r = \sum_{i\in S_r}\omega_i\Delta_i` and r the number of
server steps taken (from 1),

.. math::

    m &\leftarrow \beta_1 m + (1-\beta_1)\Delta^r,\quad v \leftarrow \beta_2 v + (1-\beta_2)(\Delta^r)^2,
    \quad \hat v \leftarrow \max(\hat v, v)\ (\hat v_0 = \epsilon_{AMS}),\\
    x &\leftarrow x + \frac{\eta}{1-\beta_1^r}\,\frac{m}{\sqrt{\hat v/(1-\beta_2^r)} + \epsilon}

(bias correction as in the FedCAMS code; ``bias_correction=False`` drops both factors).
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

from .._kernels import rounds as ops
from .._argcheck import Bool, Interval
from ..runs.arrays import copy, full, zeros
from ..registry import register
from .fedadam import adaptive_server_step
from .fedavg import FedAvg

State = namedtuple("FedAMSState", "x m v vhat steps")
Messages = namedtuple("FedAMSMessages", "y")


def local(pk, rd, hp, st, rng):
    """Every participant runs K local SGD steps from y_{i,0} = x^t (Y: their y_{i,K}), as FedAvg.

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
    Y, bad = ops.local_sgd(pk, rd, x, x, 1.0, 0.0, ops.empty2())
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """AMSGrad on D: vhat <- max(vhat, v), x <- x + eta/(1-b1^r) m / (sqrt(vhat/(1-b2^r)) + eps), r = steps + 1.

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    x, mm, v, vhat, r = ops.adaptive_step(st.x, rd.weights, m.y, st.m, st.v, st.vhat, st.steps, hp.server_lr,
                                          hp.beta1, hp.beta2, hp.eps, hp.bias_correction, True)
    return State(x, mm, v, vhat, r)


@register
@dataclass(frozen=True)
class FedAMS(FedAvg):
    r"""FedAMS: server-side AMSGrad with a max stabilisation factor.

    Parameters
    ----------
    server_lr : float, default 1
        The server step eta > 0.
    beta1, beta2 : float, default 0.9, 0.99
        Moment decays in [0, 1).
    eps_ams : float, default 1e-3
        Max stabilisation factor epsilon (initial v-hat), > 0 (grid {1e-8, ..., 1} in the paper).
    eps : float, default 1e-8
        Added to the denominator.
    bias_correction : bool, default True
        Divide m by 1 - beta1^r and v-hat by 1 - beta2^r (the FedCAMS code); False drops both factors.

    References
    ----------
    Y. Wang, L. Lin, J. Chen, "Communication-efficient adaptive federated learning", ICML 2022
    (FedAMS, the FedCAMS code's update); the FedSPS baseline, docs/baselines.md, FedAMS.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(4, 3, seed=0)
    >>> h = ft.run(p, "fedams", rounds=50, local_steps=3, lr=0.05, server_lr=0.05).history
    >>> bool(h.value.iloc[-1] < h.value.iloc[0])
    True
    """

    server_lr: float = 1.0
    beta1: float = 0.9
    beta2: float = 0.99
    eps_ams: float = 1e-3
    eps: float = 1e-8
    bias_correction: bool = True

    name: ClassVar[str] = "fedams"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    reference: ClassVar[str] = "Wang, Lin, Chen 2022 (FedAMS); docs/baselines.md, FedAMS"
    constraints: ClassVar[dict] = {"server_lr": [Interval(float, 0, None, "neither")],
                                   "beta1": [Interval(float, 0, 1, "left")],
                                   "beta2": [Interval(float, 0, 1, "left")],
                                   "eps_ams": [Interval(float, 0, None, "neither")],
                                   "eps": [Interval(float, 0, None, "left")],
                                   "bias_correction": [Bool()]}
    test_params: ClassVar[dict] = {"lr": 0.1, "server_lr": 0.05}
    reductions: ClassVar[list] = []
    divergence_params: ClassVar[dict] = {"local_steps": 300}

    def init(self, problem, x0):
        d = problem.dim
        return {"x": copy(x0), "m": zeros(x0, d), "v": zeros(x0, d), "vhat": full(x0, d, self.eps_ams), "steps": 0}

    def server_update(self, state, ctx, messages):
        # the torch backend only (numba and python run the rule ``server``): the rule's np.sqrt and
        # np.maximum do not take torch tensors, so the tensors go through the twin written with fedtheory.runs.arrays
        return adaptive_server_step(state, ctx, messages, self.server_lr, self.beta1, self.beta2, self.eps,
                                    self.bias_correction, amsgrad=True)
