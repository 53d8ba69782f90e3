r"""pFedFBE (personalized federated composite learning with forward-backward envelopes),
Algorithm 1, as specified in docs/papers/pfedfbe.md, §3.

Each client's composite loss :math:`f_i + h` (here :math:`h = \tau\|\cdot\|_1`, the problem's
``l1``) is replaced by its forward-backward envelope
:math:`F_i(x) = f_i(x) - \frac{1}{2\lambda}\|\nabla f_i(x)\|^2 + M_{h,\lambda}(x - \nabla f_i(x)/\lambda)`,
whose gradient is (eq. 6) :math:`\nabla F_i(x) = \lambda R_i(x) - \nabla^2 f_i(x) R_i(x)`, with
:math:`R_i(x) = x - \operatorname{prox}_{h/\lambda}(x - \nabla f_i(x)/\lambda)`. Local steps (eq. 9)

.. math:: R = x - \operatorname{prox}_{h/\lambda}\bigl(x - \nabla\tilde f_i(x; B_g)/\lambda\bigr),\qquad
          x \leftarrow x - \eta_l\bigl(\lambda R - \nabla^2\tilde f_i(x; B_H) R\bigr),

with two independent minibatches (``hvp_batch="independent"``; ``"same"`` uses B_g twice), the
exact Hessian-vector product (``fd_eps=0``) or the forward difference
:math:`(\nabla\tilde f(x + \delta R) - \nabla\tilde f(x))/\delta`, :math:`\delta = \text{fd\_eps}/\|R\|`, and the
cheap variant :math:`\lambda R`. The server averages the models (FedAvg). The personalized model
is one proximal-gradient step from the global one,
:math:`\theta_i(x) = \operatorname{prox}_{h/\lambda}(x - \nabla f_i(x)/\lambda)` (eq. 8 with the 1/lambda of
Algorithm 1, docs/papers/pfedfbe.md, §2.4).
"""
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import rounds as ops
from .._kernels.fbe import HVP_EXACT, HVP_FD, HVP_NONE
from .._argcheck import Interval, Options
from ..registry import register
from .base import Algorithm
from ..runs.metrics import personalized_extras

State = namedtuple("PFedFBEState", "x")
Messages = namedtuple("PFedFBEMessages", "y")
#: The hyperparameters as the compiled rules read them (:meth:`PFedFBE.compiled_params`).
Params = namedtuple("PFedFBEParams", "lam fd_eps hvp hvp_batch")
HVP_INDEPENDENT, HVP_SAME = 0, 1          # hp.hvp_batch: "independent", "same"


def local(pk, rd, hp, st, rng):
    """x <- x - eta_k (lam R - H(x; B_H) R), R = x - prox_{h/lam}(x - g(x; B_g)/lam) (eq. 9), from x^t;
    B_H drawn from the auxiliary stream when independent minibatches are asked for.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    idx_h = rd.idx
    if hp.hvp != HVP_NONE and hp.hvp_batch == HVP_INDEPENDENT and rd.idx.shape[2] > 0:
        idx_h, _ = ops.independent_stream(pk, rd, rng)
    Y, bad = ops.local_fbe(pk, rd, st.x, hp.lam, hp.hvp, hp.fd_eps, idx_h)
    return Messages(Y), bad


def server(pk, rd, hp, st, m):
    """x^{t+1} = x^t + sum_i omega_i (x_{i,K} - x^t).

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    return State(ops.averaged_step(st.x, rd.weights, m.y, 1.0))


def soft(u, t):
    """Soft thresholding, the prox of t ||.||_1.

    Parameters
    ----------
    u : ndarray
        The point.
    t : float
        The threshold.

    Returns
    -------
    ndarray
        sign(u) max(|u| - t, 0).
    """
    return np.sign(u) * np.maximum(np.abs(u) - t, 0.0)


@register
@dataclass(frozen=True)
class PFedFBE(Algorithm):
    r"""FedAvg on the clients' forward-backward envelopes, with personalized proximal-gradient models (pFedFBE).

    Parameters
    ----------
    lam : float, default 10
        FBE parameter lambda > 0 (step 1/lambda of the envelope; the theory needs lambda > L).
    fd_eps : float, default 0
        0: exact Hessian-vector products; > 0: the forward difference with ||delta R|| = fd_eps.
    variant : {"full", "cheap"}, default "full"
        The FBE gradient (eq. 9) or the cheap lambda R (no Hessian term).
    hvp_batch : {"independent", "same"}, default "independent"
        Minibatch of the Hessian term (Lemma 3 assumes independent ones).

    Notes
    -----
    :meth:`personalized` returns theta_i(x) for every client; the history records ``pm_value``,
    the mean of the clients' composite losses f_i + h at their personalized models, and, when the
    problem knows the true signals (``problems.federated_lasso``), the support precision, recall
    and F1 of the personalized (``pm_*``) and global (``gm_*``) models at the 0.01 threshold and
    ``pm_shift_inf`` = ``max |theta_i - x|``. Works on
    smooth problems and on the l1-composite lasso (h = l1 ||x||_1). Oracle calls per step: 1
    (cheap), 2 (exact HVP) or 3 (forward difference).

    References
    ----------
    "Personalized federated composite learning with forward-backward envelopes" (pFedFBE),
    ICLR 2023 submission, Algorithm 1 and eqs. (4)-(9); docs/papers/pfedfbe.md, §3.

    Examples
    --------
    >>> import numpy as np, fedtheory as ft, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(30, 5)) for _ in range(4)], [rng.normal(size=30) for _ in range(4)], l1=0.1)
    >>> res = ft.run(p, "pfedfbe", rounds=50, local_steps=5, lr=0.02, lam=20.0)
    >>> res.algorithm.personalized(p, res.x).shape
    (4, 5)
    """

    lam: float = 10.0
    fd_eps: float = 0.0
    variant: str = "full"
    hvp_batch: str = "independent"

    name: ClassVar[str] = "pfedfbe"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options_reason: ClassVar[str] = (
        "its local step is a forward-backward envelope step (a prox point and a "
        "Hessian-vector product), not a plain gradient step")
    traceables: ClassVar[dict] = {
        "local": ("path", "x_{i,k}, k = 0..K: the local iterates of eq. (9)"),
        "prox_point": ("path", "theta_{i,k} = prox_{h/lam}(x_{i,k} - v_{i,k}/lam), k = 0..K-1 (entry K is NaN)")}
    reference: ClassVar[str] = "pFedFBE, Algorithm 1 and eq. (9); docs/papers/pfedfbe.md, §3"
    constraints: ClassVar[dict] = {"lam": [Interval(float, 0, None, "neither")],
                                   "fd_eps": [Interval(float, 0, None, "left")],
                                   "variant": [Options("full", "cheap")],
                                   "hvp_batch": [Options("independent", "same")]}
    comm: ClassVar[tuple] = (1, 1)
    test_params: ClassVar[dict] = {"lr": 0.02, "lam": 20.0}

    def check_problem(self, problem):
        """Any smooth problem, or the l1-composite lasso (h = l1 ||x||_1)."""

    @property
    def _hvp(self):
        if self.variant == "cheap":
            return HVP_NONE
        return HVP_FD if self.fd_eps > 0 else HVP_EXACT

    def oracle_calls_per_step(self):
        return {HVP_NONE: 1, HVP_EXACT: 2, HVP_FD: 3}[self._hvp]

    def compiled_params(self):
        """``hp`` of the compiled rules: ``lam``, ``fd_eps``, ``hvp`` the kernel's Hessian term
        (``HVP_NONE`` = 0 for variant "cheap"; for "full" ``HVP_EXACT`` = 1 when fd_eps = 0, else
        ``HVP_FD`` = 2) and ``hvp_batch`` (0: "independent", 1: "same")."""
        return Params(float(self.lam), float(self.fd_eps), int(self._hvp),
                      HVP_SAME if self.hvp_batch == "same" else HVP_INDEPENDENT)

    def _h_stream(self, ctx):
        if self.hvp_batch == "same" or ctx.idx.shape[2] == 0:
            return ctx.idx
        return ctx.independent_stream()[0]

    def local_round(self, state, ctx):         # the torch backend's glue
        idx_h = self._h_stream(ctx) if self._hvp != HVP_NONE else ctx.idx
        Y, fail = ctx.local_fbe(state["x"], self.lam, self._hvp, self.fd_eps, idx_h)
        return {"y": Y, "fail": fail}

    def local_round_reference(self, state, ctx):
        p, lam = ctx.problem, self.lam
        idx_h = self._h_stream(ctx) if self._hvp != HVP_NONE else ctx.idx
        Y = np.empty((ctx.S, p.dim))
        for s in range(ctx.S):
            i = int(ctx.clients[s])
            x = state["x"].copy()
            ctx.record("local", s, 0, x)
            for k in range(ctx.K):
                v = ctx.grad(s, k, x)                                          # grad f~(x; B_g)
                th = p.prox(x - v / lam, 1.0 / lam)                            # theta_{i,k}
                ctx.record("prox_point", s, k, th)
                R = x - th                                                     # x - theta
                rows_h = idx_h[s, k] if idx_h.shape[2] else None
                if self._hvp == HVP_EXACT:
                    Hv = p.client_hessian_vector(i, x, R, rows_h)
                elif self._hvp == HVP_FD and R @ R > 0:
                    dlt = self.fd_eps / np.linalg.norm(R)
                    Hv = (p.client_grad(i, x + dlt * R, rows_h) - p.client_grad(i, x, rows_h)) / dlt
                else:
                    Hv = np.zeros_like(x)
                x = x - ctx.lrs[k] * (lam * R - Hv)                            # eq. (9)
                ctx.record("local", s, k + 1, x)
            Y[s] = x
        return {"y": Y}

    def personalized(self, problem, x):
        """theta_i(x) = prox_{h/lam}(x - grad f_i(x)/lam) for every client (full local gradients)."""
        return np.array([problem.prox(x - problem.client_grad(i, x) / self.lam, 1.0 / self.lam)
                         for i in range(problem.n_clients)])

    def history_extras(self, state, problem):
        th = self.personalized(problem, state["x"])
        out = personalized_extras(problem, th, state["x"])
        if (problem.info or {}).get("w_clients") is not None:
            out["pm_shift_inf"] = float(np.max(np.abs(th - state["x"])))
        return out
