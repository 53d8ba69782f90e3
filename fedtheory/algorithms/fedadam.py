r"""FedAdam: Adam on the server over FedAvg updates (Reddi et al., ICLR 2021).

Clients run plain local SGD (as FedAvg). With :math:`D^t = \sum_{i\in S_t}\omega_i\Delta_i`
the server updates (docs/baselines.md, FedAdam)

.. math::

    m &\leftarrow \beta_1 m + (1-\beta_1) D^t, \qquad
    v \leftarrow \beta_2 v + (1-\beta_2) (D^t)^2,\\
    x^{t+1} &= x^t + \eta_g\, \frac{m}{\sqrt v + \tau}
    \quad\text{or, with bias correction (FedCAMS),}\quad
    x^{t+1} = x^t + \frac{\eta_g}{1-\beta_1^{r}}\,\frac{m}{\sqrt{v/(1-\beta_2^{r})} + \tau},

r = t + 1 the number of server steps taken. Communication: 1 down, 1 up.
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

from .._kernels import rounds as ops
from .._argcheck import Bool, Interval
from ..runs.arrays import copy, maximum, sqrt, zeros
from ..registry import register
from .fedavg import FedAvg

State = namedtuple("FedAdamState", "x m v steps")
Messages = namedtuple("FedAdamMessages", "y")


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
    """m <- b1 m + (1-b1) D, v <- b2 v + (1-b2) D^2, x <- x + eta_g m / (sqrt(v) + tau) (r = steps + 1).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    x, mm, v, _, r = ops.adaptive_step(st.x, rd.weights, m.y, st.m, st.v, st.v, st.steps, hp.server_lr, hp.beta1,
                                       hp.beta2, hp.tau, hp.bias_correction, False)
    return State(x, mm, v, r)


@register
@dataclass(frozen=True)
class FedAdam(FedAvg):
    r"""FedAdam: local SGD on the clients, Adam on the averaged update at the server.

    Parameters
    ----------
    server_lr : float, default 1
        Server step size eta_g > 0 (FedSpeed's experiments use 0.1).
    beta1 : float, default 0.9
        First-moment decay in [0, 1).
    beta2 : float, default 0.99
        Second-moment decay in [0, 1).
    tau : float, default 1e-3
        Adaptivity (the epsilon of Adam) > 0.
    bias_correction : bool, default False
        Reddi et al.'s original has none (default, as FedSpeed's released code); FedSPS's
        baseline (FedCAMS) uses it.

    References
    ----------
    S. J. Reddi, Z. Charles, M. Zaheer, Z. Garrett, K. Rush, J. Konecny, S. Kumar,
    H. B. McMahan, "Adaptive federated optimization", ICLR 2021, Algorithm 2 (FedAdam);
    docs/baselines.md, FedAdam.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(5, 3, seed=0)
    >>> res = ft.run(p, "fedadam", rounds=100, local_steps=5, lr=0.05, server_lr=0.05)
    >>> h = res.history
    >>> bool(h.value.iloc[-1] < h.value.iloc[0])
    True
    """

    server_lr: float = 1.0
    beta1: float = 0.9
    beta2: float = 0.99
    tau: float = 1e-3
    bias_correction: bool = False

    name: ClassVar[str] = "fedadam"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    reference: ClassVar[str] = "Reddi et al. 2021, Algorithm 2 (FedAdam); docs/baselines.md, FedAdam"
    constraints: ClassVar[dict] = {"server_lr": [Interval(float, 0, None, "neither")],
                                   "beta1": [Interval(float, 0, 1, "left")],
                                   "beta2": [Interval(float, 0, 1, "left")],
                                   "tau": [Interval(float, 0, None, "neither")],
                                   "bias_correction": [Bool()]}
    test_params: ClassVar[dict] = {"lr": 0.1, "server_lr": 0.05}
    reductions: ClassVar[list] = []
    # the normalised server step keeps x bounded; local steps must overflow on their own
    divergence_params: ClassVar[dict] = {"local_steps": 300}

    def init(self, problem, x0):
        d = problem.dim
        return {"x": copy(x0), "m": zeros(x0, d), "v": zeros(x0, d), "steps": 0}

    def server_update(self, state, ctx, messages):
        # the torch backend only (numba and python run the rule ``server``): the rule's np.sqrt does not
        # take torch tensors, so the tensors go through the same step written with fedtheory.runs.arrays
        return adaptive_server_step(state, ctx, messages, self.server_lr, self.beta1, self.beta2, self.tau,
                                    self.bias_correction)


def adaptive_server_step(state, ctx, messages, lr, beta1, beta2, eps, bias_correction, amsgrad=False):
    r"""The torch backend's twin of ``fedtheory._kernels.rounds.adaptive_step`` (the same operations, on
    tensors through :mod:`fedtheory.runs.arrays`): Adam (or AMSGrad with ``amsgrad``) on the averaged update
    :math:`\Delta = \sum_S \omega_i \Delta_i`.

    m <- b1 m + (1 - b1) Delta;  v <- b2 v + (1 - b2) Delta^2;  s = v, or vhat <- max(vhat, v) with
    ``amsgrad``;  x <- x + lr/(1 - b1^r) m / (sqrt(s/(1 - b2^r)) + eps) with bias correction (r the
    server steps so far, from 1), x <- x + lr m / (sqrt(s) + eps) without. FedAdam and FedAMS.

    Parameters
    ----------
    state : dict
        The server state (tensors).
    ctx : TorchRoundContext
        The round.
    messages : dict
        The participants' messages.
    lr : float
        The server step size.
    beta1, beta2 : float
        The moment decays.
    eps : float
        The denominator's offset.
    bias_correction : bool
        Whether the moments are bias-corrected.
    amsgrad : bool, default False
        The running maximum of the second moment (FedAMS).

    Returns
    -------
    dict
        The state after the round.
    """
    D = ctx.weights @ (messages["y"] - state["x"])
    m = beta1 * state["m"] + (1 - beta1) * D
    v = beta2 * state["v"] + (1 - beta2) * D * D
    s = maximum(state["vhat"], v) if amsgrad else v
    r = state["steps"] + 1
    if bias_correction:
        step = lr / (1 - beta1 ** r) * m / (sqrt(s / (1 - beta2 ** r)) + eps)
    else:
        step = lr * m / (sqrt(s) + eps)
    new = {"x": state["x"] + step, "m": m, "v": v, "steps": r}
    if amsgrad:
        new["vhat"] = s
    return new
