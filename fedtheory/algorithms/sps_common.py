r"""Shared machinery of the FedSPS family (docs/papers/fedsps.md, §2): the SPS step-size primitive, the
kernel call, the NumPy twin and the step-size statistics recorded in the history.

Every method runs Algorithm 1's driver: each sampled client starts from the global model and
takes :math:`\tau` steps :math:`x \leftarrow x - \gamma_t^i g_t^i`, with the value
:math:`F_i(x_t^i, B)` and the gradient :math:`g_t^i` on the *same* minibatch; only the step-size
rule :math:`\gamma_t^i` and the aggregation differ between the variants.

Compiled rules: each variant's file defines its ``State``, ``Messages``, ``local`` and ``server``
(the driver of :mod:`fedtheory._kernels.drivers` hashes the algorithm's own file, so the rules live
there, not here); they share the primitives of the FedSPS section of :mod:`fedtheory._kernels.rounds`
(``local_sps``, ``sps_step``, ``sps_factor``, ``sps_bookkeeping``, ``sps_last_grads``). The state of
every variant holds ``x``, the lower bounds ``ell`` (n,), the per-client step-size memory ``state``
(n,), ``last_steps`` = (step sizes (S, tau), cap indicators (S, tau) int64) of the last round and the
integer totals ``steps_total`` and ``capped_total``; the hyperparameters the rules read are
:meth:`SPSBase.compiled_params` (string options mapped to integers by each variant's ``_rule_params``).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from .._kernels.rounds import sps_step
from ..exceptions import InvalidParameterError
from ..runs.arrays import copy
from .base import Algorithm
from .context import averaged_step

STAT_COLUMNS = ("step_mean", "step_min", "step_max", "step_capped_frac", "step_intra_cv", "step_inter_cv")
# statistics are of the last round before an evaluation; step_capped_frac_total counts every step so far


#: The SPS step size of eq. (2): min{(F - ell)/(c ||g||^2), cap}, clipped at 0; the cap when g = 0
#: (``sps(F, gg, ell, c, cap, eps=0.0)``; the compiled rules call the same function).
sps = sps_step


def lower_bounds(value, problem, name):
    """Per-client lower bounds ell_i* (scalar broadcast, or an array of length n).

    Parameters
    ----------
    value : float, array or str
        The ``lower_bound`` hyperparameter: a number, one per client, or the name of a rule.
    problem : FederatedProblem
        The problem.
    name : str
        The algorithm (for the error).

    Returns
    -------
    ndarray of shape (n,)
        ell_i*.
    """
    try:
        ell = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        ell = None
    bad_shape = ell is not None and ell.ndim != 0 and ell.shape != (problem.n_clients,)
    if ell is None or bad_shape or not np.all(np.isfinite(ell)):
        got = f"shape {ell.shape}" if bad_shape else repr(value)
        raise InvalidParameterError(f"The 'lower_bound' parameter of {name} must be a finite float or a finite "
                                    f"array of shape ({problem.n_clients},) (ell_i^* bounds every sample loss "
                                    f"of client i from below). Got {got} instead.")
    return np.full(problem.n_clients, float(ell)) if ell.ndim == 0 else ell


def _mean_std(G, axis):
    """NumPy's ``G.mean(axis)`` and ``G.std(axis)`` by the same reductions (the sum, then the mean
    squared deviation), without the per-call overhead of ``ndarray.std``: about 25 us a call, most
    of an evaluation's cost on a small problem (``step_stats`` runs at every evaluation)."""
    n = G.shape[axis]
    m = np.add.reduce(G, axis=axis, keepdims=True) / n
    dev = G - m
    return np.squeeze(m, axis=axis), np.sqrt(np.add.reduce(dev * dev, axis=axis) / n)


def step_stats(G, C):
    """Step-size statistics of one round: G, C are (S, K) step sizes and cap indicators.

    ``step_intra_cv``: mean over clients of std/mean over the client's K steps;
    ``step_inter_cv``: mean over steps of std/mean across clients (Fig. 7 of the paper). Standard
    deviations with NumPy's default ``ddof=0``.

    Parameters
    ----------
    G : ndarray of shape (S, K)
        The round's step sizes.
    C : ndarray of shape (S, K)
        Whether each was capped.

    Returns
    -------
    dict
        The statistics by name.
    """
    if G.size == 0:
        return {k: np.nan for k in STAT_COLUMNS}

    def cv(axis):
        mean, std = _mean_std(G, axis)
        ok = mean > 0
        if not ok.any():
            return np.nan
        r = std[ok] / mean[ok]
        return float(np.add.reduce(r) / r.shape[0])
    intra = cv(1)
    inter = cv(0) if G.shape[0] > 1 else 0.0
    return {"step_mean": float(np.add.reduce(G, axis=None) / G.size), "step_min": float(np.minimum.reduce(G, axis=None)),
            "step_max": float(np.maximum.reduce(G, axis=None)),
            "step_capped_frac": float(np.add.reduce(C, axis=None, dtype=np.float64) / C.size),
            "step_intra_cv": float(intra), "step_inter_cv": float(inter)}


class SPSBase(Algorithm):
    """Base of the FedSPS variants (not registered). Subclasses set ``_mode`` and the rule."""

    # the step-size statistics of every evaluation (step_stats: about ten NumPy reductions, 30 us),
    # counted as much as an evaluation's fixed cost (fedtheory.runs.plan.EVAL_FIXED_COST; benchmarks/RESULTS.md)
    eval_extra_cost: ClassVar[float] = 3000.0

    released_options_reason = (
        "its step size is a stochastic Polyak step computed from f_i and its gradient, "
        "which a decoupled decay or a clipped direction would leave undefined")

    _mode = 0
    eps = 0.0
    traceables = {
        "local": ("path", "x_{t}^i, the local iterates of each participating client (k = 0..tau)"),
        "gammas": ("message", "gamma_{t}^i, the step size of each local step, shape (S, tau)"),
        "capped": ("message", "1 where the step size hit its cap, shape (S, tau)")}

    def _ell(self, problem):
        return lower_bounds(self.lower_bound, problem, type(self).__name__)

    def init(self, problem, x0):
        return {"x": copy(x0), "ell": self._ell(problem), "state": self._init_state(problem),
                "last_steps": (np.zeros((0, 0)), np.zeros((0, 0), dtype=np.int64)), "steps_total": 0,
                "capped_total": 0}

    def _init_state(self, problem):
        return np.zeros(problem.n_clients)

    # -- compiled rules' hyperparameters ------------------------------------------------
    def _rule_params(self):  # pragma: no cover - abstract
        """The hyperparameters the variant's compiled rules read, ``{name: float, int or bool}`` (a
        string option mapped to an int, documented by the variant)."""
        raise NotImplementedError

    def compiled_params(self):
        """The hyperparameters as the compiled rules read them: a named tuple of :meth:`_rule_params`
        (the lower bounds are in the state as ``ell``, strings are mapped to integers).

        Returns
        -------
        tuple
            A named tuple ``<ClassName>Params`` of floats, ints and bools.

        Examples
        --------
        >>> from fedtheory.registry import get_algorithm
        >>> get_algorithm("fedsps").create(smoothing="sps_code").compiled_params().mode
        2
        """
        return type(self).params_class()(**self._rule_params())

    @classmethod
    def params_fields(cls):
        """The fields of :meth:`compiled_params`: those of :meth:`_rule_params` (of a default instance)."""
        return list(cls()._rule_params())

    # -- the torch backend's glue (the numba and python backends run the compiled rules) ---
    # parameters of the kernel call (overridden by the variants)
    def _kernel_args(self, state, ctx):
        return dict(c=self.c, gamma_b=self.gamma_b, c0=0.0, c_round=False, gamma_fixed=0.0,
                    factor=np.ones(ctx.S))

    def _run_kernel(self, state, ctx):
        a = self._kernel_args(state, ctx)                      # may reset the per-client state first
        st = np.ascontiguousarray(state["state"][ctx.clients])
        Y, G, C, lv, lg, fail = ctx.local_sps(state["x"], self._mode, a["c"], a["gamma_b"], state["ell"][ctx.clients],
                                              a["c0"], a["c_round"], a["gamma_fixed"], a["factor"], st, self.eps)
        return {"y": Y, "gammas": G, "capped": C, "state": st, "last_val": lv, "last_gg": lg, "fail": fail}

    def local_round(self, state, ctx):         # the torch backend's glue
        return self._run_kernel(state, ctx)

    def _reference_rule(self, s, t, F, gg, ell, st, ctx, state):  # pragma: no cover - abstract
        raise NotImplementedError

    def local_round_reference(self, state, ctx):
        """NumPy twin of Algorithm 1's driver (docs/papers/fedsps.md, §2.2) with the variant's rule."""
        x = state["x"]
        S, K = ctx.S, ctx.K
        Y, G, C = np.empty((S, x.shape[0])), np.empty((S, K)), np.zeros((S, K), dtype=np.int64)
        lv, lg = np.empty(S), np.empty(S)
        st = state["state"][ctx.clients].copy()
        for s in range(S):
            ell = state["ell"][ctx.clients[s]]
            y = x.copy()                                       # x_{r tau}^i = x^r
            ctx.record("local", s, 0, y)
            for k in range(K):
                F = ctx.value(s, k, y)                         # same minibatch for F and g
                g = ctx.grad(s, k, y)
                gg = float(g @ g)
                gam, cap_hit, st[s] = self._reference_rule(s, ctx.round * K + k, F, gg, ell, st[s], ctx, state)
                G[s, k], C[s, k] = gam, cap_hit
                lv[s], lg[s] = F, gg
                y = y - gam * g
                ctx.record("local", s, k + 1, y)
            Y[s] = y
        return {"y": Y, "gammas": G, "capped": C, "state": st, "last_val": lv, "last_gg": lg}

    def _aggregate(self, state, ctx, messages):
        """Plain mean of the local models (Alg. 1), written with the run's aggregation weights."""
        return averaged_step(state["x"], ctx.weights, messages["y"], 1.0)

    def _torch_server_update(self, state, ctx, messages):
        """The server update on the torch backend's tensors, for the variants whose compiled ``server``
        needs NumPy functions on the weights that torch tensors do not support (FedSPS-Normalized,
        FedSPS-Global): the same bookkeeping as ``sps_bookkeeping``, then :meth:`_aggregate` and
        :meth:`_after_round`."""
        st = state["state"]
        st[ctx.clients] = messages["state"]                   # per-client memory persists
        new = {**state, "x": self._aggregate(state, ctx, messages), "state": st,
               "last_steps": (messages["gammas"], messages["capped"]),     # statistics when evaluated
               "steps_total": state["steps_total"] + messages["capped"].size,
               "capped_total": state["capped_total"] + int(messages["capped"].sum())}
        return self._after_round(new, ctx, messages)

    def _after_round(self, state, ctx, messages):
        return state

    def history_extras(self, state, problem):
        tot = state["steps_total"]
        return {**step_stats(*state["last_steps"]),
                "step_capped_frac_total": state["capped_total"] / tot if tot else np.nan}
