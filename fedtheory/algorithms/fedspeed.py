r"""FedSpeed (Sun et al., ICLR 2023), Algorithm 1, as specified in docs/papers/fedspeed.md, §2.

Client i keeps the prox-correction :math:`\hat g_i` (0 before round 0; clients not sampled
keep theirs). In round t every sampled client runs K steps from :math:`x_{i,0} = x^t`
(Alg. 1 lines 7-11), with the *same* minibatch :math:`\xi_{i,k}` for both gradients:

.. math::

    g_1 &= \nabla F_i(x_{i,k};\xi_{i,k}), \qquad
    \breve x_{i,k} = x_{i,k} + \rho\, g_1, \qquad
    g_2 = \nabla F_i(\breve x_{i,k};\xi_{i,k}),\\
    \tilde g_{i,k} &= (1-\alpha) g_1 + \alpha g_2,\\
    x_{i,k+1} &= x_{i,k} - \eta_l\Bigl(\tilde g_{i,k} - \hat g_i^{t-1}
                 + \tfrac{1}{\lambda}(x_{i,k} - x^t)\Bigr),

then (lines 13-14) :math:`\hat g_i^t = \hat g_i^{t-1} - \frac1\lambda(x_{i,K} - x^t)` and the
upload :math:`\hat x_i^t = x_{i,K} - \lambda \hat g_i^t`. The server (line 16) is

* ``server="alg1"`` (as printed): :math:`x^{t+1} = \frac1S\sum_{i\in S_t}\hat x_i^t`;
* ``server="dyn"`` (the authors' released code, the FedDyn server):
  :math:`x^{t+1} = \frac1S\sum_{i\in S_t} x_{i,K} - \lambda\,\frac1n\sum_{i=1}^n \hat g_i^t`.

They coincide under full participation; under partial participation with exact gradients
"alg1" has no fixed point (docs/papers/fedspeed.md, §2.5, A5, P15) while "dyn" converges to x*. Worse, "alg1" as
printed has no fixed point at x* under partial participation: it can end worse than its start. Measured (exact
gradients, default hyperparameters, ``lr=0.1``, K = 5, 200 rounds, x^0 = 0, 3 of 10 clients per
round, seeds 0/1/2): on ``problems.quadratic(10, 5, heterogeneity=1.0, seed=0)`` F - F* goes from
0.289 to 14.8 / 12.5 / 18.2 with "alg1" and to 9.0e-05 / 4.0e-04 / 3.6e-04 with "dyn" (1.6e-11
for both under full participation); on ``problems.breast_cancer(n_clients=10, l2=0.01)`` from
0.591 to 1.8e-02 / 1.6e-02 / 1.6e-02 ("alg1" stalls) against 2.0e-04 / 1.7e-04 / 2.8e-04
("dyn"). A run with ``server="alg1"`` and partial participation therefore emits a
:class:`~fedtheory.exceptions.FedSpeedServerWarning` (once per run).
``perturbation="raw"`` uses rho as printed (theory); ``"sam"`` uses
:math:`\rho/(\|g_1\| + \epsilon)` with :math:`\epsilon` = ``sam_eps`` (default :math:`10^{-7}`) as in
the experiments (A2).

The authors' released code (FL-Simulator, ``client/fedspeed.py`` with its ESAM optimizer) is
this method with ``perturbation="sam"``, ``alpha=1`` (its ESAM step keeps only the perturbed
gradient :math:`g_2`), ``lam`` = 1 / its ``lamb``, ``server="dyn"``, ``sam_eps=1e-7`` (the
constant of its norm, for a model whose parameters are the vector x; another parameterisation of
the same model, e.g. a two-output linear layer, has another gradient norm and needs its own value),
the run options ``weight_decay`` = its ``weight_decay`` and ``clip_norm=10`` (its
``clip_grad_norm_``), and its per-round learning-rate decay as an ``lr`` schedule. In that code
the decay is part of its SGD optimizer's ``weight_decay = weight_decay + lamb``, so it enters
neither the SAM ascent nor :math:`f_i`, and the clipped vector is
:math:`g_2 - \hat g_i - x^t/\lambda` (the prox pull :math:`x_{i,k}/\lambda` is added after
clipping): exactly the run options' rule (:meth:`RoundContext.released_step`).
With non-uniform client weights the averages are the run's aggregation weights
:math:`\omega_i` (sampled) and :math:`w_i` (all clients).
"""
import os
import sys
from collections import namedtuple
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels import evaluation as ev
from .._kernels import rounds as ops
from .._argcheck import Interval, Options
from ..runs.arrays import copy, zeros
from ..registry import register
from .base import Algorithm
from ..exceptions import FedSpeedServerWarning

SAM_EPS = 1e-7
#: ``perturbation`` and ``server`` as the compiled rules read them (``FedSpeed.compiled_params``)
RAW, SAM = 0, 1
ALG1, DYN = 0, 1

State = namedtuple("FedSpeedState", "x ghat gbar z gamma constant_gamma partial_warning")
Messages = namedtuple("FedSpeedMessages", "y ghat")


def local(pk, rd, hp, st, rng):
    """x_{i,k+1} = x_{i,k} - eta_k (gt - ghat_i + (x_{i,k} - x^t)/lam); ghat_i^+ = ghat_i - (x_{i,K} - x^t)/lam.

    Parameters
    ----------
    pk, rd, hp, st, rng : Pack, Round, Params, State, numpy.random.Generator
        The arguments of every ``local`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    tuple
        ``(Messages, bad)``, ``bad`` the first failing slot * K + step (-1: none).
    """
    ghat_old = st.ghat[rd.clients]
    x = ops.row(st.x)
    Y, bad = ops.local_sam(pk, rd, x, x, 1.0 / hp.lam, -ghat_old, hp.alpha, hp.rho, hp.perturbation == SAM,
                           hp.sam_eps)
    ghat_new = ghat_old - (Y - st.x) * (1.0 / hp.lam)                    # line 13
    return Messages(Y, ghat_new), bad


def server(pk, rd, hp, st, m):
    """x^{t+1} = sum_S omega_i (x_{i,K} - lam ghat_i) ("alg1") or sum_S omega_i x_{i,K} - lam sum_n w_i ghat_i ("dyn");
    z^{t+1} = x^{t+1} + lam (2 - 1/gamma) gbar^t; ghat updated in place.

    Parameters
    ----------
    pk, rd, hp, st, m : Pack, Round, Params, State, Messages
        The arguments of every ``server`` rule (:mod:`fedtheory._kernels.rounds`).

    Returns
    -------
    State
        The state after the round.
    """
    n = pk.w.shape[0]
    flag = st.partial_warning
    if hp.server == ALG1 and flag[0] == 0 and (rd.S < n or np.unique(rd.clients).shape[0] < n):
        flag[0] = 1                                    # warned by history_extras (or run_ended)
        flag[1] = rd.S
    x, lam, w = st.x, hp.lam, rd.weights
    ghat = st.ghat
    ops.set_rows(ghat, rd.clients, m.ghat)             # non-sampled keep theirs
    gbar = pk.w @ ghat
    if hp.server == ALG1:
        xhat = m.y - lam * m.ghat                                         # line 14 upload
        x_new = x + w @ (xhat - x)                                        # line 16: mean over S_t
    else:
        x_new = x + w @ (m.y - x) - lam * gbar                            # released code
    # auxiliary z^{t+1} = x^{t+1} + lam (2 - 1/gamma) gbar^t (docs/papers/fedspeed.md, §4.2); it exists only for a
    # constant gamma (no step-size decay, docs/papers/fedspeed.md, run E11), so it is dropped (empty) once gamma changes
    gamma = 1.0 - np.prod(1.0 - rd.lrs / lam)
    constant = st.constant_gamma and (np.isnan(st.gamma) or gamma == st.gamma)
    if constant and gamma != 0:
        z = x_new + lam * (2.0 - 1.0 / gamma) * gbar
    else:
        z = np.empty(0)
    return State(x_new, ghat, gbar, z, gamma, constant, flag)


#: The columns :meth:`FedSpeed.history_extras` adds, as the rule ``extras`` computes them
EXTRAS = ("z_grad_sq",)


def extras(pk, hp, st):
    """``z_grad_sq`` = ||grad F(z^t)||^2, NaN while z is undefined: :meth:`FedSpeed.history_extras` in
    compiled code (the compiled rounds evaluate with it, :mod:`fedtheory._kernels.evaluation`).

    Parameters
    ----------
    pk, hp, st : Pack, Params, State
        The problem, the hyperparameters and the state after the round.

    Returns
    -------
    ndarray of shape (1,)
        The values of :data:`EXTRAS`.
    """
    if st.z.shape[0] == 0:
        return np.array([np.nan])
    return np.array([ev.smooth_metrics(pk, st.z)[1]])          # ||grad f(z)||^2 (FedSpeed's F is smooth)


def _caller_stacklevel():
    """The ``stacklevel`` of the first frame outside the fedtheory package, counted from the caller
    of this function (the user's call of ``ft.run``, whichever path of the runner warns)."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    f, level = sys._getframe(2), 2
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(pkg):
        f, level = f.f_back, level + 1
    return level


def _warn_alg1_partial(S, n):
    import warnings

    warnings.warn(FedSpeedServerWarning(
        f"fedspeed with server='alg1' (Algorithm 1, line 16, as printed) under partial participation "
        f"({S} of {n} clients in a round): this server step has no fixed "
        "point at x* and can end worse than its start (F - F* from 0.289 to 14.8 in 200 rounds on "
        "problems.quadratic(10, 5, heterogeneity=1.0), 3 of 10 clients per round), while server='dyn' (the "
        "authors' released code) converges (9.0e-05). Use server='dyn' unless the printed rule is what you "
        "study."), stacklevel=_caller_stacklevel())


@register
@dataclass(frozen=True)
class FedSpeed(Algorithm):
    r"""FedSpeed: prox-corrected local SGD with a SAM-type quasi-gradient.

    Parameters
    ----------
    lam : float, default 10
        Prox coefficient lambda > 0; the local penalty is :math:`\frac{1}{2\lambda}\|x-x^t\|^2`
        (the experiments' "prox weight" is 1/lambda, docs/papers/fedspeed.md, A8).
    alpha : float, default 0.9375
        Weight of the perturbed gradient in [0, 1] (the paper's best value).
    rho : float, default 0.1
        Ascent step (>= 0); raw (theory) or the SAM radius rho_0 (``perturbation="sam"``).
    perturbation : {"raw", "sam"}, default "raw"
        Unnormalised ascent step as in Alg. 1 / Theorem 4.4, or normalised as in the experiments.
    server : {"alg1", "dyn"}, default "alg1"
        Aggregation of Alg. 1 line 16 as printed, or the released code's FedDyn server. Under
        partial participation "alg1" stalls or ends worse than its start (measured in the module
        docstring) and emits a :class:`~fedtheory.exceptions.FedSpeedServerWarning`.
    sam_eps : float, default 1e-7
        The constant epsilon > 0 added to :math:`\|g_1\|` in the normalised (``"sam"``)
        ascent step (1e-7 in the released code); unused with ``perturbation="raw"``.

    Notes
    -----
    State: ``ghat`` (n, d), the per-client corrections (updated in place), and ``gbar``, their
    weighted mean, from which the auxiliary sequence of the analysis (docs/papers/fedspeed.md, §4.2)
    :math:`z^{t} = x^{t} + \lambda(2 - 1/\gamma)\bar g^{t-1}`, with
    :math:`\gamma = 1 - (1 - \eta_l/\lambda)^K`, is recorded in the history as
    ``z_grad_sq`` = :math:`\|\nabla F(z^t)\|^2` (meaningful with full participation and a
    constant step size; ``state["z"]`` is empty and ``z_grad_sq`` NaN once the step sizes change
    gamma, and before the first round). ``state["gamma"]`` is gamma of the last round (NaN before
    the first); ``state["partial_warning"]`` records whether the run's warning is due or emitted.
    Two oracle calls per local step when alpha * rho != 0.
    The run options ``weight_decay`` (wd) and ``clip_norm`` act on the step of line 11 as in the
    released code: with u the bracket of line 11 less its term in :math:`x_{i,k}`, the step is
    :math:`c\,u + (1/\lambda + \mathrm{wd})x_{i,k}` when u is clipped (c < 1), else the bracket
    plus :math:`\mathrm{wd}\,x_{i,k}`; :math:`g_1`, the ascent radius and :math:`g_2` are those of
    :math:`f_i` alone.
    Communication: 1 down (x), 1 up (the upload), docs/papers/fedspeed.md, §2.3.

    References
    ----------
    Y. Sun, L. Shen, T. Huang, L. Ding, D. Tao, "FedSpeed: Larger local interval, less
    communication round, and higher generalization accuracy", ICLR 2023, Algorithm 1;
    docs/papers/fedspeed.md, §2.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(5, 3, heterogeneity=1.0, seed=0)
    >>> res = ft.run(p, "fedspeed", rounds=300, local_steps=5, lr=0.1, lam=1.0, alpha=0.0)
    >>> bool(abs(p.value(res.x) - p.info["f_star"]) < 1e-10)     # no client drift
    True
    """

    lam: float = 10.0
    alpha: float = 0.9375
    rho: float = 0.1
    perturbation: str = "raw"
    server: str = "alg1"
    sam_eps: float = SAM_EPS

    name: ClassVar[str] = "fedspeed"
    compiled_rules: ClassVar[bool] = True
    round_coin: ClassVar[bool] = False
    released_options: ClassVar[tuple] = ("weight_decay", "clip_norm")
    traceables: ClassVar[dict] = {
        "local": ("path", "x_{i,k}, k = 0..K: the local iterates (line 11)"),
        "ghat": ("message", "ghat_i after the round (line 13), one row per participating client"),
        "z": ("state", "z^{t+1} = x^{t+1} + lam (2 - 1/gamma) gbar^t, the auxiliary sequence of the analysis "
                       "(empty once the step sizes change gamma)"),
        "gbar": ("state", "gbar^t, the mean prox-correction after the round")}
    reference: ClassVar[str] = "Sun et al. 2023 (FedSpeed), Algorithm 1; docs/papers/fedspeed.md, §2"
    constraints: ClassVar[dict] = {"lam": [Interval(float, 0, None, "neither")],
                                   "alpha": [Interval(float, 0, 1, "both")],
                                   "rho": [Interval(float, 0, None, "left")],
                                   "perturbation": [Options("raw", "sam")],
                                   "server": [Options("alg1", "dyn")],
                                   "sam_eps": [Interval(float, 0, None, "neither")]}
    comm: ClassVar[tuple] = (1, 1)
    stateful_clients: ClassVar[bool] = True
    test_params: ClassVar[dict] = {"lr": 0.1, "lam": 2.0, "alpha": 0.5, "rho": 0.05}
    reductions: ClassVar[list] = [({"alpha": 0.0, "server": "dyn"}, "feddyn", {"alpha": 0.5}),
                                  ({"rho": 0.0, "server": "dyn"}, "feddyn", {"alpha": 0.5})]

    def oracle_calls_per_step(self):
        return 2 if self.alpha * self.rho != 0 else 1

    def init(self, problem, x0):
        # z: empty while undefined; gamma: nan before the first round; partial_warning (NumPy, every backend):
        # [0] 0, 1 once a round of server="alg1" ran under partial participation ([1]: its participants), 2 warned
        return {"x": copy(x0), "ghat": zeros(x0, (problem.n_clients, problem.dim)),
                "gbar": zeros(x0, problem.dim), "z": zeros(x0, 0), "gamma": float("nan"), "constant_gamma": True,
                "partial_warning": np.zeros(2, dtype=np.int64)}

    def compiled_params(self):
        """The hyperparameters of the compiled rules: ``perturbation`` as an int (0 "raw", 1 "sam") and
        ``server`` as an int (0 "alg1", 1 "dyn")."""
        return super().compiled_params()._replace(perturbation=SAM if self.perturbation == "sam" else RAW,
                                                  server=DYN if self.server == "dyn" else ALG1)

    def local_round(self, state, ctx):         # the torch backend's glue
        x = state["x"]
        ghat_old = state["ghat"][ctx.clients]
        Y, fail = ctx.local_sam(x, self.alpha, self.rho, self.perturbation == "sam",
                                mu=1.0 / self.lam, corr=-ghat_old, eps=self.sam_eps)
        ghat_new = ghat_old - (Y - x) * (1.0 / self.lam)                 # line 13
        return {"y": Y, "ghat": ghat_new, "fail": fail}

    def local_round_reference(self, state, ctx):
        x, lam, a = state["x"], self.lam, self.alpha
        Y = np.empty((ctx.S, x.shape[0]))
        G = np.empty_like(Y)
        for s in range(ctx.S):
            ghat = state["ghat"][ctx.clients[s]]
            xi = x.copy()                                                 # line 4: x_{i,0} = x^t
            ctx.record("local", s, 0, xi)
            for k in range(ctx.K):
                g1 = ctx.grad(s, k, xi)                                   # line 7
                r = self.rho / (np.linalg.norm(g1) + self.sam_eps) if self.perturbation == "sam" else self.rho
                if a * self.rho != 0:
                    g2 = ctx.grad(s, k, xi + r * g1)                      # lines 8-9, same batch
                    gt = (1 - a) * g1 + a * g2                            # line 10
                else:
                    gt = g1
                xi = xi - ctx.lrs[k] * ctx.released_step(gt - ghat + (xi - x) / lam, xi, 1.0 / lam)   # line 11
                ctx.record("local", s, k + 1, xi)
            Y[s] = xi
            G[s] = ghat - (xi - x) / lam                                  # line 13
        return {"y": Y, "ghat": G}

    def server_update(self, state, ctx, messages):
        """The rule ``server`` on the torch backend's tensors: the rule reads the client weights of every
        client from the problem pack (``pk.w``), which the base default does not pass (``pk`` is None)."""
        from types import SimpleNamespace
        pk = SimpleNamespace(w=ctx.problem.weights)
        m = Messages(*(messages[f] for f in Messages._fields))
        return dict(server(pk, ctx.round_record(), self.compiled_params(), self.state_tuple(state), m)._asdict())

    def run_ended(self, state, problem):
        """The FedSpeedServerWarning of a round of server="alg1" under partial participation, when no
        evaluation emitted it (a run that diverged first)."""
        flag = state["partial_warning"]
        if flag[0] == 1:
            flag[0] = 2
            _warn_alg1_partial(int(flag[1]), problem.n_clients)

    def history_extras(self, state, problem):
        """``z_grad_sq`` (NaN while z is undefined; the rule ``extras`` computes the same in compiled
        code); emits the FedSpeedServerWarning of a run once, at the first evaluation after a round of
        server="alg1" under partial participation (the compiled server rule flags the round in
        ``partial_warning``, which is updated in place; a run evaluated in compiled code emits it when
        it ends, :meth:`run_ended`)."""
        self.run_ended(state, problem)
        z = state["z"]
        if z.shape[0] == 0:
            return {"z_grad_sq": np.nan}
        g = problem.grad(z)
        return {"z_grad_sq": float(g @ g)}
