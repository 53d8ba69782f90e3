"""The algorithm contract and the per-round context handed to it by the runner.

An algorithm is a small frozen dataclass of its own hyperparameters plus three methods:

* ``init(problem, x0) -> state`` (a dict of arrays; ``state["x"]`` is the global model);
* ``local_round(state, ctx) -> messages`` (dict of arrays with one row per sampled client),
  computed by Numba kernels; ``local_round_reference`` is the NumPy twin that follows the
  paper's pseudo-code line by line and is used by the ``"python"`` backend and the tests;
* ``server_update(state, ctx, messages) -> state`` (NumPy; shared by both backends).

The runner owns the loop, the randomness and the bookkeeping (see :mod:`fedtheory.runs.runner`).
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._kernels.fbe import fbe_local_steps, pfedme_local, prox_local_sgd
from .._kernels.local_steps import DIR_PLAIN, DIR_SAM, DIR_VR, corrected_local_sgd, feddeper_local
from .._kernels.sps import sps_local_steps
from .._argcheck import Bool, Interval, NoneOk, Options, check_param  # noqa: F401  (for algorithms' constraints)
from ..runs.arrays import copy
from ..exceptions import InvalidParameterError

_EMPTY2 = np.zeros((0, 0))
_ROUND_METHODS = ("init", "local_round", "local_round_reference", "server_update")
_PARAMS = {}          # encoded name -> hyperparameter named-tuple class (Algorithm.params_class)
_NUMERIC = {bool: bool, int: int, float: float, "bool": bool, "int": int, "float": float}


def __getattr__(name):
    """The hyperparameter tuple class of the encoded name ``hp<base32 of the field names>`` (for
    unpickling: made from the name alone, in any process, whatever module defined the algorithm)."""
    if name.startswith("hp") and name != "hp":
        import base64
        try:
            raw = base64.b32decode(name[2:] + "=" * (-len(name[2:]) % 8)).decode()
        except (ValueError, UnicodeDecodeError):
            raise AttributeError(name) from None
        fields = raw.split(",") if raw else []
        if all(f.isidentifier() for f in fields):
            return _params_tuple(tuple(fields))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _params_tuple(fields):
    """The named-tuple class of hyperparameters with these field names (one per tuple of names,
    shared by every algorithm whose compiled rules read those fields)."""
    import base64
    key = "hp" + base64.b32encode(",".join(fields).encode()).decode().rstrip("=")
    nt = _PARAMS.get(key)
    if nt is None:
        from collections import namedtuple
        nt = namedtuple("Params", fields)
        nt.__module__, nt.__qualname__ = __name__, key
        _PARAMS[key] = nt
    return nt


_EMPTY3 = np.zeros((0, 0, 0))
_UNDECLARED = object()    # a class that does not set compiled_rules in its body


def _has_rules(mod):
    """Whether the module defines the compiled rules: ``local``, ``server``, ``State``, ``Messages``."""
    return all(callable(getattr(mod, f, None)) for f in ("local", "server")) and \
        all(hasattr(getattr(mod, t, None), "_fields") for t in ("State", "Messages"))


def _algorithm_classes(mod):
    """The algorithm classes defined in the module ``mod`` (not imported into it)."""
    return [c for c in vars(mod).values()
            if isinstance(c, type) and issubclass(c, Algorithm) and c.__module__ == mod.__name__]


def _prepare_rules(name):
    """``name``, after giving the rules module's named tuples their module-level names (pickle, and
    with it Numba's disk cache, finds them under that name)."""
    mod = sys.modules[name]
    for rule in ("local", "server"):           # the python backend never calls local: check its form here
        fn = getattr(getattr(mod, rule), "py_func", getattr(mod, rule))
        try:
            params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):        # pragma: no cover - a builtin or C function
            continue
        want = ["pk", "rd", "hp", "st", "rng"] if rule == "local" else ["pk", "rd", "hp", "st", "m"]
        if len(params) != 5:
            from ..exceptions import DeclarationError
            raise DeclarationError(f"the compiled rule {rule} of module {name!r} takes ({', '.join(params)}); it must "
                                   f"take five arguments, {rule}({', '.join(want)}) (section 3 of "
                                   "docs/add-your-own-algorithm.md).")
    for t, nt in list(vars(mod).items()):
        if isinstance(nt, type) and issubclass(nt, tuple) and hasattr(nt, "_fields") and \
                nt.__module__ == mod.__name__ and getattr(mod, nt.__qualname__, None) is not nt:
            nt.__qualname__ = t
    return name


def averaged_step(x, weights, Y, server_lr):
    """Server step of the FedAvg family: x + eta_g sum_i omega_i (y_i - x)."""
    return x + server_lr * (weights @ Y - weights.sum() * x)


def _rows(a):
    """A primitive's start or anchor as rows: one vector (d,) becomes (1, d), shared by every client;
    (S, d) is one row per sampled client."""
    return a[None] if np.ndim(a) == 1 else a


class RoundContext:
    """What one round of local work needs: sampled clients, their randomness, step sizes.

    Attributes
    ----------
    problem : FederatedProblem
    round : int
        Index r of the round (0-based).
    clients : int64 array (S,)
        Sampled clients (may repeat when duplicates are replicated).
    weights : float array (S,)
        Aggregation weights of the sampled clients (see :func:`fedtheory.run`).
    idx : int64 array (S, K, B)
        Absolute minibatch rows per client and local step; B = 0 for exact gradients.
    noise : float array (S, K, d) or (0, 0, 0)
        Additive gradient noise (already scaled by ``problem.noise``).
    lrs : float array (K,)
        Local step sizes eta_{t} of the K local steps of this round.
    u : float
        One uniform draw in [0, 1) per round from the run's auxiliary stream, for an
        algorithm's own coin flips (e.g. FedPD's "communicate this round?").
    rng : numpy.random.Generator or None
        The run's auxiliary stream, for an algorithm's extra randomness (e.g. FedDeper's
        independent minibatches for v); drawing from it affects only that algorithm's runs.
    weight_decay : float
        The run's decoupled weight decay wd (``run(weight_decay=...)``; 0: none).
    clip_norm : float or None
        The run's clipping threshold (``run(clip_norm=...)``; None: none). See
        :meth:`released_step` for both.
    """

    def __init__(self, problem, rnd, clients, weights, idx, noise, lrs, u=0.0, rng=None, weight_decay=0.0,
                 clip_norm=None):
        self.problem = problem
        self.round = rnd
        self.clients = clients
        self.weights = weights
        self.idx = idx
        self.noise = noise
        self.lrs = lrs
        self.u = u
        self.rng = rng
        self.weight_decay = float(weight_decay)
        self.clip_norm = clip_norm
        self.K = lrs.shape[0]
        self.S = clients.shape[0]
        self.t0 = 0                   # global step counter of the round's first local step (set by the runner)
        self.batch_replacement = False    # minibatch rows drawn with replacement (set by the runner)
        self.want = frozenset()       # local paths to record (set by the runner for trace=...)
        self.traced = {}              # name -> (S, K + 1, d) recorded local iterates

    # -- traces (run(..., trace=...)) -------------------------------------------------
    def path(self, name):
        """The (S, K + 1, d) buffer into which a kernel records the local path ``name``
        (NaN-filled; entries after a divergence stay NaN), or an empty (0, 0, 0) array when
        the run does not trace it."""
        if name not in self.want:
            return _EMPTY3
        buf = self.traced.get(name)
        if buf is None:
            buf = self.traced[name] = np.full((self.S, self.K + 1, self.problem.dim), np.nan)
        return buf

    def record(self, name, s, k, y):
        """Record iterate ``y`` of client slot ``s`` after local step ``k`` (0: the start) of the
        local path ``name`` (the NumPy twins and the torch context; kernels use :meth:`path`)."""
        if name in self.want:
            from ..runs.arrays import to_numpy
            self.path(name)[s, k] = to_numpy(y)

    # -- Numba path -----------------------------------------------------------------
    def _local_sgd(self, X0, anchors, gscale=1.0, mu=0.0, corr=None, direction=DIR_PLAIN, alpha=0.0, rho=0.0,
                   normalized=False, eps=0.0):
        """The corrected local SGD kernel (``corrected_local_sgd``) for every sampled client: starts
        ``X0`` and proximal anchors ``anchors`` (one row: shared; (0, d): no proximal term)."""
        p = self.problem
        Y = np.empty((self.S, p.dim))
        X0, anchors = np.ascontiguousarray(X0), np.ascontiguousarray(anchors)
        bad = corrected_local_sgd(*p.kernel_pack(), self.clients, self.idx, self.noise, self.lrs, p.l2, X0, anchors,
                                  float(gscale), float(mu), _EMPTY2 if corr is None else np.ascontiguousarray(corr),
                                  int(direction), float(alpha), float(rho), bool(normalized), float(eps),
                                  self.weight_decay, float(self.clip_norm or 0.0), Y, self.path("local"))
        return Y, self._failure(bad)

    def _failure(self, bad):
        """A kernel's return value as None or (client slot s, local step k) of the first failure."""
        return None if bad < 0 else divmod(bad, self.K)

    def local_sgd(self, x0, gscale=1.0, mu=0.0, anchor=None, corr=None):
        """Run the corrected local SGD kernel for every sampled client.

        y_{k+1} = y_k - eta_k (gscale (g(y_k) + noise_k) + mu (y_k - anchor_s) + corr_s),
        from y_0 = x0 (one start for every client, shape (d,), or one row per sampled client,
        (S, d)); ``anchor`` is one vector or one row per client, by default the start. Returns
        ``(Y, fail)`` with Y of shape (S, d) and ``fail`` None, or ``(s, k)`` for the first client
        slot and local step whose iterate became non-finite (put it in the messages under "fail"
        so that the runner reports it).
        """
        X0 = _rows(x0)
        return self._local_sgd(X0, X0 if anchor is None else _rows(anchor), gscale, mu, corr)

    def round_record(self):
        """This round as the compiled rules' :data:`~fedtheory._kernels.rounds.Round` record (the
        context's own arrays: tensors for the torch context's weights). The traced local paths
        are the buffers of :meth:`path`."""
        from .._kernels.rounds import Round
        return Round(self.round, self.clients, self.weights, self.problem.weights[self.clients], self.idx,
                     self.noise, self.lrs, self.u, self.weight_decay, float(self.clip_norm or 0.0), self.K, self.S,
                     self.t0, self.path("local"), self.path("personal"), self.path("prox_point"),
                     self.batch_replacement)

    def independent_stream(self):
        """A second set of minibatch rows (S, K, B) and noise (S, K, d), independent of ``idx`` and
        ``noise``, drawn from the run's auxiliary stream (two-minibatch methods: FedDeper, pFedFBE)
        as the run draws ``idx``: with or without replacement (``batch_replacement``). With exact
        gradients (B = 0) the rows are empty as well."""
        from .._kernels.sampling import minibatch_rows
        p = self.problem
        S, K, B = self.idx.shape
        idx2 = self.idx
        if B:
            u = self.rng.random((S, K, B))
            idx2 = minibatch_rows(u, p.client_ptr[:-1][self.clients], p.client_sizes[self.clients],
                                  self.batch_replacement, np.empty((S, K, B), dtype=np.int64))
        noise2 = self.noise
        if self.noise.shape[0] > 0:
            noise2 = p.noise * self.rng.standard_normal(self.noise.shape)
        return idx2, noise2

    def local_feddeper(self, x0, V0, rho, coupling, idx_v, noise_v):
        """FedDeper's alternating y/v local steps (see ``feddeper_local``); returns (Y, V, fail)."""
        p = self.problem
        Y, V = np.empty((self.S, p.dim)), np.empty((self.S, p.dim))
        bad = feddeper_local(*p.kernel_pack(), self.clients, self.idx, idx_v, self.noise, noise_v, self.lrs, p.l2,
                             x0, np.ascontiguousarray(V0), float(rho), int(coupling), Y, V,
                             self.path("local"), self.path("personal"))
        return Y, V, self._failure(bad)

    def local_vr(self, x0, gscale, corr):
        """Mime's local steps: y <- y - eta_k (gscale (g(y; B) - g(x0; B)) + corr_s) (same minibatch).

        Returns ``(Y, fail)`` as :meth:`local_sgd`.
        """
        return self._local_sgd(x0[None], _EMPTY2, gscale, corr=corr, direction=DIR_VR)

    def local_sam(self, x0, alpha, rho, normalized=False, mu=0.0, anchor=None, corr=None, eps=1e-7):
        """Local SGD with FedSpeed's quasi-gradient (``corrected_local_sgd`` with ``DIR_SAM``).

        gt = (1 - alpha) g(y) + alpha g(y + r g(y)) with r = rho, or rho / (||g(y)|| + eps)
        when ``normalized``; y_{k+1} = y_k - eta_k (gt + mu (y_k - anchor) + corr_s).
        Returns ``(Y, fail)`` as :meth:`local_sgd`.
        """
        return self._local_sgd(x0[None], (x0 if anchor is None else anchor)[None], 1.0, mu, corr, DIR_SAM, alpha, rho,
                               normalized, eps)

    def local_sps(self, x0, mode, c, gamma_b, ell, c0, c_round, gamma_fixed, factor, st, eps):
        """K local steps with a stochastic Polyak step size (see ``sps_local_steps``).

        ``ell``, ``factor`` and the per-client step-size memory ``st`` (updated in place) are
        NumPy arrays of the S sampled clients. Returns ``(Y, G, C, last_val, last_gg, fail)``:
        the local models, the (S, K) step sizes and cap indicators, F and ||g||^2 of each
        client's last step (NumPy), and the failure as in :meth:`local_sgd`.
        """
        p = self.problem
        S, K = self.S, self.K
        Y, G, C = np.empty((S, p.dim)), np.empty((S, K)), np.zeros((S, K), dtype=np.int64)
        lv, lg = np.empty(S), np.empty(S)
        bad = sps_local_steps(*p.kernel_pack(), self.clients, self.idx, self.noise, p.l2, x0, int(mode),
                              float(c), float(gamma_b), np.ascontiguousarray(ell), float(c0), int(self.round * K),
                              bool(c_round), int(K), float(gamma_fixed),
                              np.ascontiguousarray(factor, dtype=np.float64), st, float(eps), Y, G, C, lv, lg, self.path("local"))
        return Y, G, C, lv, lg, self._failure(bad)

    def local_prox_sgd(self, x0, anchor=None, mu=0.0, dual=False, t0_thresh=0.0):
        """Proximal local SGD for h of the problem (see ``prox_local_sgd``): FedMiD's primal steps
        (``dual`` False), pulled to ``anchor`` with weight ``mu`` when it is given (Ditto, pFedProx),
        or FedDualAvg's dual steps (``dual`` True, with the accumulated step ``t0_thresh``). ``x0``
        and ``anchor``: one vector, or one row per sampled client. Returns ``(X, Z, fail)``: the
        primal and the dual local iterates (Z the start in the primal mode)."""
        p = self.problem
        X, Z = np.empty((self.S, p.dim)), np.empty((self.S, p.dim))
        X0 = np.ascontiguousarray(_rows(x0))
        anchors = _EMPTY2 if anchor is None else np.ascontiguousarray(_rows(anchor))
        bad = prox_local_sgd(*p.kernel_pack(), self.clients, self.idx, self.noise, self.lrs, p.l2, X0, anchors,
                             float(mu), float(p.reg_weight), bool(dual), float(t0_thresh), *p.reg_pack(), X, Z)
        return X, Z, self._failure(bad)

    def local_pfedme(self, x0, lam_p, eta_p, inner, wd):
        """pFedMe's local rounds (see ``pfedme_local``). Returns ``(W, Theta, fail)``."""
        p = self.problem
        W, Th = np.empty((self.S, p.dim)), np.empty((self.S, p.dim))
        bad = pfedme_local(*p.kernel_pack(), self.clients, self.idx, self.noise, self.lrs, p.l2, x0,
                           float(lam_p), float(eta_p), int(inner), float(wd), float(p.reg_weight), *p.reg_pack(), W, Th)
        return W, Th, self._failure(bad)

    def local_fbe(self, x0, lam, hvp_mode, fd_eps, idx_h):
        """pFedFBE's local steps (see ``fbe_local_steps``) with Hessian minibatch rows ``idx_h``.
        Returns ``(Y, fail)``."""
        p = self.problem
        Y = np.empty((self.S, p.dim))
        bad = fbe_local_steps(*p.kernel_pack(), self.clients, self.idx, np.ascontiguousarray(idx_h), self.noise,
                              self.lrs, p.l2, x0, float(lam), float(p.reg_weight), int(hvp_mode), float(fd_eps),
                              *p.reg_pack(), Y, self.path("local"), self.path("prox_point"))
        return Y, self._failure(bad)

    def full_grads(self, x):
        """Exact client gradients grad f_i(x) of the sampled clients, shape (S, d)."""
        return np.array([self.problem.client_grad(int(i), x) for i in self.clients])

    # -- NumPy path (reference twins) -----------------------------------------------
    def released_step(self, d, y, mu=0.0):
        r"""The local step direction ``d`` at iterate ``y`` with the run's released-code options.

        ``d`` is the paper's direction, whose only term in ``y`` itself is a prox pull
        ``mu (y - anchor)`` (mu = 0 without one). Returns ``d`` itself when the run has neither
        weight decay nor clipping; else, as the released codes' ``clip_grad_norm_`` and
        ``torch.optim.SGD(weight_decay=mu + wd)``: with u = d - mu y (the gradient of their
        loss, which holds the linear part -mu anchor of the pull) and
        c = clip_norm / (||u|| + 1e-6), ``c u + (mu + wd) y`` when c < 1, else ``d + wd y``.
        The kernels (``corrected_local_sgd``) and the torch context apply the same rule.
        """
        wd, clip = self.weight_decay, self.clip_norm
        if clip is not None:
            u = d - mu * y if mu != 0.0 else d
            c = clip / (self._norm(u) + 1e-6)
            if c < 1.0:
                return c * u + (mu + wd) * y
        return d + wd * y if wd != 0.0 else d

    @staticmethod
    def _norm(u):
        """||u|| as a float (the torch context computes it on the device)."""
        return float(np.sqrt(u @ u))

    def value(self, s, k, y):
        """Minibatch value F_i(y; xi_k) of sampled client ``s`` at local step ``k`` (NumPy)."""
        rows = self.idx[s, k] if self.idx.shape[2] > 0 else None
        return self.problem.client_value(int(self.clients[s]), y, rows)

    def grad(self, s, k, y):
        """Stochastic gradient g(y; xi_k) of sampled client ``s`` at local step ``k`` (NumPy)."""
        rows = self.idx[s, k] if self.idx.shape[2] > 0 else None
        g = self.problem.client_grad(int(self.clients[s]), y, rows)
        if self.noise.shape[0] > 0:
            g = g + self.noise[s, k]
        return g


@dataclass(frozen=True)
class Algorithm:
    """Base class of every registered algorithm (a frozen dataclass of hyperparameters).

    Class attributes to set in a subclass:

    name : str
        Registered name.
    reference : str
        Paper, algorithm and equation implemented.
    constraints : dict
        ``{hyperparameter: [constraint, ...]}`` used for validation.
    comm : (int, int)
        d-vectors sent down / up per participating client per round.
    stateful_clients : bool
        The algorithm keeps per-client memory (forbids replicated duplicate draws).
    exact : bool
        With exact gradients and full participation x* is a fixed point under heterogeneity.
    default_sampling : str
        Client sampling used when ``clients_per_round`` is given and ``sampling`` is not.
    test_params : dict
        Fast, stable settings for the common test suite (runner arguments included).
    reductions : list of (dict, str, dict)
        Declared equivalences ``(own params, other algorithm, other params)``: the two runs
        must produce the same iterates.
    full_participation_only : bool
        The method is defined for full participation only (the runner rejects client sampling).
    round_coin : bool
        Whether the method reads the round's uniform coin (``rd.u`` in the compiled rules, ``ctx.u``
        round by round), which every round draws whether it is read or not. True by default; a
        method that never reads it says False, so that a run of it that draws nothing else (full
        participation, exact gradients, no noise) is known to be the run of every seed, and a
        theorem check runs such a case's seeds once (``RunResult`` copies for the others). Read from
        the class's own body only: a subclass that never reads it says so again.
    divergence_params : dict
        Overrides of the common suite's divergence check (lr=50, K=5) for methods whose
        server step is bounded (Adam-type), which need more local steps to overflow.
    released_options : tuple of str
        The released codes' run options the local step supports (``"weight_decay"``,
        ``"clip_norm"``; see :func:`fedtheory.run` and :meth:`RoundContext.released_step`);
        the runner rejects the others with ``released_options_reason``. An algorithm that lists
        ``"weight_decay"`` and has a hyperparameter of that name receives the option there.
    released_options_reason : str
        Why the algorithm rejects a run option it does not list (named in the error).
    traceables : dict
        Sequences that ``run(..., trace=...)`` can record, ``{name: (source, description)}``.
        ``source`` is ``"path"`` (a local path recorded by the round context: (S, K + 1, d) per
        round; every primitive records ``"local"``), ``"message"`` (the entry of the round's
        messages, one row per participating client) or ``"state"`` (the entry of the state after
        the server update). The default declares the local iterates ``"local"``.
    scalars : dict
        The algorithm's own scalars logged in the run's history, ``{name: description}`` (a
        server step, a step size chosen adaptively, ...). The state holds each under its name:
        ``init`` sets its initial value (``nan`` when it has none yet) and ``server_update``
        its value after each round. At every evaluated round the runner writes the value as the
        history column of that name, on every backend (a tensor is copied to the host). Empty by
        default: no column and no cost. ``fedtheory describe NAME`` lists them.
    compiled_rules : bool, str or None
        Not set by default. Which compiled rules the class runs (:meth:`rules_module`): ``True``
        those of its own module, a module's dotted name that module's, ``False`` or ``None`` none
        (the round-by-round form). Unset, a class that changes none of the round inherits its
        parent's choice, and one that defines a round method runs round by round.
    """

    name: ClassVar[str] = "algorithm"
    reference: ClassVar[str] = ""
    constraints: ClassVar[dict] = {}
    comm: ClassVar[tuple] = (1, 1)
    stateful_clients: ClassVar[bool] = False
    exact: ClassVar[bool] = False
    default_sampling: ClassVar[str] = "uniform"
    test_params: ClassVar[dict] = {}
    reductions: ClassVar[list] = []
    full_participation_only: ClassVar[bool] = False
    round_coin: ClassVar[bool] = True
    divergence_params: ClassVar[dict] = {}
    released_options: ClassVar[tuple] = ()
    released_options_reason: ClassVar[str] = "its local step is not a plain gradient step"
    traceables: ClassVar[dict] = {"local": ("path", "local iterates y_{i,k}, k = 0..K, of each participating "
                                                     "client (row s: client clients[s])")}
    scalars: ClassVar[dict] = {}
    #: the cost of :meth:`history_extras` at an evaluation, in the unit of the default evaluation
    #: schedule (per-sample gradients; ``fedtheory.runs.runner.EVAL_FIXED_COST`` is the rest of an
    #: evaluation's Python): the schedule keeps the evaluations within 25% of the training time
    eval_extra_cost: ClassVar[float] = 0.0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            allowed = self.constraints.get(f.name)
            if not allowed:
                from ..exceptions import DeclarationError
                raise DeclarationError(
                    f"{type(self).__qualname__} declares the hyperparameter {f.name!r} without constraints: "
                    f"constraints[{f.name!r}] must list what it accepts, e.g. [Interval(float, 0, None, "
                    "'neither')] (docs/add-your-own-algorithm.md).")
            check_param(f.name, getattr(self, f.name), allowed, type(self).__name__)

    @classmethod
    def hyperparameters(cls):
        """Names and defaults of the algorithm's own hyperparameters."""
        return {f.name: f.default for f in dataclasses.fields(cls)}

    @classmethod
    def create(cls, run_parameters=(), **kwargs):
        """Build an instance, rejecting unknown hyperparameters with the list of known ones.

        Parameters
        ----------
        run_parameters : sequence of str, default ()
            The caller's own parameter names (the runner passes those of :func:`fedtheory.run`),
            offered too when a misspelled name is close to one of them.
        **kwargs
            The algorithm's hyperparameters.

        Returns
        -------
        Algorithm
            The instance.
        """
        known = cls.hyperparameters()
        unknown = sorted(set(kwargs) - set(known))
        if unknown:
            from .._argcheck import did_you_mean
            names = [*known, *run_parameters]
            raise InvalidParameterError(
                f"Unknown hyperparameter(s) {unknown} for algorithm {cls.name!r}; its own "
                f"hyperparameters are {sorted(known) or 'none'} (plus the runner's lr, "
                "local_steps, rounds, clients_per_round, batch_size, ...)."
                + (did_you_mean(unknown[0], names) if len(unknown) == 1 else
                   "".join(f" For {u!r}: did you mean{did_you_mean(u, names)[len(' Did you mean'):]}"
                           for u in unknown if did_you_mean(u, names))))
        return cls(**kwargs)

    def check_problem(self, problem):
        """Raise IncompatibleProblemError when the algorithm cannot run on ``problem``."""
        from ..exceptions import IncompatibleProblemError
        if problem.is_composite:
            raise IncompatibleProblemError(
                f"{self.name!r} handles smooth objectives only, but problem {problem.name!r} has "
                f"a non-smooth part h(x) = {problem.reg_weight} h_0(x), h_0 the regularizer "
                f"{problem.regularizer.name!r}; use a composite method.")

    def init(self, problem, x0):
        """Initial state: a dict with at least ``x``."""
        return {"x": copy(x0)}

    def local_round(self, state, ctx):
        raise NotImplementedError(self._missing_round("local_round"))

    def local_round_reference(self, state, ctx):
        raise NotImplementedError(self._missing_round("local_round_reference"))

    @classmethod
    def _missing_round(cls, method):
        """Why the round-by-round form's ``method`` is missing, and what to do."""
        text = f"{cls.name!r} ({cls.__qualname__}) defines no {method} and runs no compiled rules"
        off = next((k for k in cls.__mro__ if vars(k).get("compiled_rules", True) in (None, False)), None)
        if off is not None:
            return (f"{text}: {off.__qualname__} declares compiled_rules = {vars(off)['compiled_rules']!r} (the "
                    f"round-by-round form), which needs {method}: write it, or drop the declaration to run the "
                    "rules it would inherit (docs/add-your-own-algorithm.md).")
        for parent in cls.__mro__[1:]:
            if parent is not Algorithm and issubclass(parent, Algorithm) and parent.rules_module() is not None:
                changed = sorted({m for k in cls.__mro__[:cls.__mro__.index(parent)] for m in _ROUND_METHODS
                                  if m in vars(k)})
                return (f"{text}: it changes {', '.join(changed)} of {parent.__qualname__}, whose compiled rules (module "
                        f"{parent.rules_module()!r}) run the local steps and the server update together; a "
                        "subclass that changes part of the round writes its round-by-round form (local_round, "
                        "local_round_reference) or compiled rules of its own (docs/add-your-own-algorithm.md).")
        for klass in cls.__mro__:
            mod = sys.modules.get(klass.__module__)
            if klass is not Algorithm and issubclass(klass, Algorithm) and mod is not None and _has_rules(mod):
                others = ", ".join(c.__qualname__ for c in _algorithm_classes(mod))
                return (f"{text}: the compiled rules of its module {mod.__name__!r} are bound to none of the "
                        f"algorithm classes defined there ({others}); set compiled_rules = True in the body of "
                        "the class they implement (section 3 of docs/add-your-own-algorithm.md).")
        return f"{text}: write {method} or the compiled rules (docs/add-your-own-algorithm.md)."

    def torch_server_update(self, state, ctx, messages):
        """The server update the torch backend runs: :meth:`server_update` where the class (or a
        subclass of the one that binds its compiled rules) defines it, else the compiled rule
        ``server`` on tensors. A subclass with rules of its own that inherits its parent's
        ``server_update`` runs its own ``server``, as the numba and python backends do (it ran
        the parent's)."""
        owner = type(self)._rules_owner()
        definer = next((k for k in type(self).__mro__ if "server_update" in vars(k)), Algorithm)
        if owner is not None and definer is not owner and definer in owner.__mro__[1:]:
            return Algorithm.server_update(self, state, ctx, messages)
        return self.server_update(state, ctx, messages)

    def server_update(self, state, ctx, messages):
        """The server update on a round context's arrays (the torch backend): by default the
        module's compiled rule ``server`` run as plain Python on the context's
        :meth:`RoundContext.round_record` (``pk`` is None there: a rule that reads the problem
        pack overrides this method)."""
        import sys
        name = self.rules_module()
        if name is None:
            raise NotImplementedError(self._missing_round("server_update"))
        mod = sys.modules[name]
        m = mod.Messages(*(messages[f] for f in mod.Messages._fields))
        try:
            out = mod.server(None, ctx.round_record(), self.compiled_params(), self.state_tuple(state), m)
        except (TypeError, AttributeError) as e:
            raise TypeError(
                f"{self.name!r}: the torch backend runs the compiled rule server of {name!r} as plain Python on "
                f"tensors, with pk None, and it failed ({type(e).__name__}: {' '.join(str(e).split())}). A rule "
                "that calls NumPy "
                "functions on the state or reads the problem pack needs a server_update of its own for torch, "
                "written with fedtheory.runs.arrays (as FedAdam's).") from e
        return dict(out._asdict())

    def round_schedule(self, rnd, local_steps):
        """(local steps of round ``rnd``, global step counter of its first step).

        Every round runs ``local_steps`` steps by default (t0 = rnd * K); LFD's literal loop
        of Algorithm 1 runs one step in round 0 and K afterwards.
        """
        return local_steps, rnd * local_steps

    def oracle_calls_per_step(self):
        """Stochastic-gradient oracle calls per local step (2 for SAM-type ascent steps)."""
        return 1

    def round_comm(self, ctx, n_participants, state):
        """(down, up) d-vectors communicated in this round (the torch backend's counters): the rules
        module's ``comm`` hook when it has one, else ``comm`` per participant."""
        hook = self._rules_hook("comm")
        if hook is not None:
            return hook(None, ctx.round_record(), self.compiled_params(), self.state_tuple(state), n_participants,
                        self.comm[0], self.comm[1])
        return n_participants * self.comm[0], n_participants * self.comm[1]

    def round_extra_grads(self, ctx):
        """(oracle calls, per-sample gradients) a round spends outside the local steps (the torch
        backend's counters): the rules module's ``extra_grads`` hook, else (0, 0). The hook reads the
        problem only through ``pk.sizes``."""
        hook = self._rules_hook("extra_grads")
        if hook is not None:
            from types import SimpleNamespace
            sizes = np.asarray(ctx.problem.client_sizes)
            return hook(SimpleNamespace(sizes=sizes), ctx.round_record(), self.compiled_params())
        return 0, 0

    def _rules_hook(self, name):
        import sys
        mod = self.rules_module()
        return getattr(sys.modules[mod], name, None) if mod is not None else None

    def history_extras(self, state, problem):
        """Extra per-evaluation columns computed from the state and the problem (e.g. step-size
        statistics over the clients); empty by default. A scalar kept in the state is declared in
        :attr:`scalars` instead."""
        return {}

    def run_ended(self, state, problem):
        """Called once when a run ends, whatever ended it (the last round, ``tol``, a divergence, a
        callback), with the final state: a warning that the evaluations emit is emitted here too when
        no evaluation came after the round that raised it. Nothing by default."""

    # -- compiled rules (fedtheory._kernels.rounds, docs/add-your-own-algorithm.md) ----------
    @classmethod
    def rules_module(cls):
        """Dotted name of the module holding the algorithm's compiled rules, or None.

        The rules are module-level functions of the algorithm's file, in the NumPy subset Numba
        compiles: ``local(pk, rd, hp, st, rng) -> (messages, bad)`` (the glue around the local
        primitives of :mod:`fedtheory._kernels.rounds`) and ``server(pk, rd, hp, st, m) -> st``,
        over the named tuples ``State`` (the fields of :meth:`init`'s dict) and ``Messages``
        (those of :meth:`local_round_reference`'s dict). An algorithm without them runs through
        :meth:`local_round` and :meth:`server_update` round by round.

        Which rules a class runs is declared, never inferred from what a module holds. Walking
        its method resolution order from the class itself:

        * a class that sets ``compiled_rules`` in its body decides: ``True`` (the rules of its own
          module), a module's dotted name (that module's rules) or ``False`` / ``None`` (none: the
          round-by-round form);
        * else a class that defines a round method itself (``init``, ``local_round``,
          ``local_round_reference``, ``server_update``) runs round by round: it changed the round
          its parent's rules run;
        * else the search goes on with its parent (a subclass that changes none of the round
          inherits its parent's rules).
        """
        key = tuple(vars(k).get("compiled_rules", _UNDECLARED) for k in cls.__mro__)
        cached = cls.__dict__.get("_rules_module_cached")    # asked every round: found again only when a
        if cached is not None and cached[0] == key:          # declaration of the lineage changed
            return cached[1]
        found, owner = cls._find_rules()
        cls._rules_module_cached = (key, found, owner)
        return found

    @classmethod
    def _rules_owner(cls):
        """The class of the method resolution order whose compiled rules the algorithm runs (the one
        :meth:`rules_module` stops at), or None without rules (cached with :meth:`rules_module`)."""
        cls.rules_module()
        return cls.__dict__["_rules_module_cached"][2]

    @classmethod
    def _find_rules(cls):
        """``(rules module name or None, the class that binds it or None)``."""
        for klass in cls.__mro__:
            if klass is Algorithm:
                return None, None
            if not issubclass(klass, Algorithm):       # a mixin: it may change the round, not bind rules
                if any(m in vars(klass) for m in _ROUND_METHODS):
                    return None, None
                continue
            if "compiled_rules" in vars(klass):
                decl = vars(klass)["compiled_rules"]
                if decl is None or decl is False:
                    return None, None
                name = klass.__module__ if decl is True else decl
                if not isinstance(name, str):
                    raise TypeError(f"{klass.__qualname__}.compiled_rules must be True, False, None or a module's "
                                    f"dotted name; got {decl!r}.")
                if name not in sys.modules:
                    import importlib
                    try:
                        importlib.import_module(name)
                    except ImportError as e:
                        raise TypeError(f"{klass.__qualname__}.compiled_rules names the module {name!r}, which "
                                        f"cannot be imported ({type(e).__name__}: {e}).") from e
                if not _has_rules(sys.modules[name]):
                    raise TypeError(
                        f"{klass.__qualname__}.compiled_rules names the module {name!r}, which does not define the "
                        "compiled rules: module-level functions local and server and the named tuples State and "
                        "Messages (section 3 of docs/add-your-own-algorithm.md).")
                return _prepare_rules(name), klass
            if any(m in vars(klass) for m in _ROUND_METHODS):
                return None, None              # its own round, without rules bound to it: the per-round path
        return None, None                      # pragma: no cover - every algorithm derives from Algorithm

    @classmethod
    def params_class(cls):
        """The named-tuple class of :meth:`compiled_params`: one per tuple of field names.

        It lives in :mod:`fedtheory.algorithms.base` under a name that encodes the field names (the
        module's ``__getattr__`` rebuilds it from the name alone), so pickle, and with it Numba's
        disk cache of every compiled function whose signature holds it, finds it in any process: a
        subclass defined in a script or a notebook that runs a built-in's rules leaves that rules'
        cache readable by every other process. A class redefined with other fields (a reload) gets
        the tuple of its new fields."""
        return _params_tuple(tuple(cls.params_fields()))

    @classmethod
    def params_fields(cls):
        """The field names of :meth:`params_class`: the dataclass fields by default (an algorithm
        whose :meth:`compiled_params` holds other fields overrides this)."""
        return [f.name for f in dataclasses.fields(cls)]

    def compiled_params(self):
        """The hyperparameters as the compiled rules read them (``hp``): a named tuple of the
        dataclass fields, in declaration order (numbers and booleans; an algorithm with other
        hyperparameters overrides this)."""
        cls = type(self)
        nt = cls.params_class()
        vals = []
        for f in dataclasses.fields(cls):          # one numeric type per field: one compiled specialisation
            v = getattr(self, f.name)
            kind = _NUMERIC.get(f.type if not isinstance(f.type, str) else f.type.strip())
            if kind is None:                       # not annotated as a number: the default's type
                kind = next((t for t in (bool, float, int) if isinstance(f.default, t)), None)
            if kind is bool or isinstance(v, (bool, np.bool_)):
                v = bool(v)
            elif kind is not None:                 # ``step: float = 1`` reads 0.5 as 0.5, not int(0.5)
                v = kind(v)
            vals.append(v)
        return nt(*vals)

    def state_tuple(self, state):
        """The state dict of :meth:`init` as the rules' ``State`` named tuple."""
        st = sys.modules[self.rules_module()].State
        return st(*(state[f] for f in st._fields))

    def scalar_values(self, state):
        """The declared :attr:`scalars` in ``state`` as floats, ``{name: value}`` (the runner's
        history columns at an evaluated round)."""
        from ..runs.arrays import to_numpy
        return {k: float(to_numpy(state[k])) for k in self.scalars}
