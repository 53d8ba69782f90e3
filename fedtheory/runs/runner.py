"""The federated loop: sampling, randomness, evaluation, bookkeeping (docs/user-guide.md: "Running a method")."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import functools
import math

from .._argcheck import Bool, Interval, NoneOk, Options, check_param
from .._kernels import rounds as _rk
from .._kernels.cache import harden_all
from ..algorithms.base import Algorithm, RoundContext
from ..exceptions import InvalidParameterError
from ..problem import FederatedProblem
from ..registry import get_algorithm, reserved_column
from .arrays import HostView, as_like, is_tensor, to_numpy
from .metrics import reference_metrics
from .participants import Participants, check_schedule
from .trace import _TraceRecorder

SAMPLING = ("uniform", "with_replacement", "bernoulli")
harden_all()            # a damaged Numba cache file is recompiled, never fatal
_CORE_METRICS = ("value", "grad_mapping_sq", "suboptimality", "dist_sq")
EVAL_BUDGET = 0.25      # default schedule: evaluations cost at most this fraction of the training work
EVAL_ROW_COST = 4.0     # an evaluation's cost per data row, in per-sample gradients (F and grad F, two passes)
EVAL_FIXED_COST = 3000.0   # its fixed cost (the Python side: leaving the compiled loop, the row), same unit
#: A run has diverged when F(x) exceeds F(x^0) by more than this many times max(|F(x^0)|, 1), even
#: while it is finite (an objective grown by tens of orders of magnitude only measures the overflow).
DIVERGENCE_GROWTH = 1e20
_SEGMENT = 4096         # at most this many rounds per compiled segment call (bounds its buffers)
_COUNTERS = ("grad_evals", "sample_grads", "comm_up", "comm_down")


class _DeferredInterrupt:
    """Ctrl-C (SIGINT) held while a compiled segment runs: Python raises KeyboardInterrupt at the next
    bytecode it runs, which inside a segment is its object-mode evaluation or trace callback, and
    Numba does not unwind through it (the process crashed, exit 139, or the interrupt was lost).
    While active (main thread, Python's default handler in place) a SIGINT only sets ``hit``; the
    segment stops at its next evaluation and the runner raises KeyboardInterrupt in Python. Held
    once per run (:func:`run`, around the compiled paths), not per segment call: a run with a
    callback calls one segment per round."""

    def __init__(self):
        self.hit, self._prev = False, None

    def __enter__(self):
        import signal
        import threading
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._prev = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        self.hit = True

    def __exit__(self, *exc):
        if self._prev is not None:
            import signal
            signal.signal(signal.SIGINT, self._prev)
            self._prev = None
        return False


@dataclass
class RunResult:
    """Outcome of :func:`run` (an ``OptimizeResult``-like record).

    Attributes
    ----------
    x : ndarray (d,)
        Final global model.
    status : str
        "max_rounds", "converged", "diverged" or "callback_stop".
    message : str
        Human-readable reason for the status (names round and client on divergence).
    rounds : int
        Rounds whose aggregation completed (on divergence in the local phase of round r,
        r - 1). On divergence ``x`` is the last finite global model and the history keeps only
        rows with finite metrics.
    grad_evals : int
        Local stochastic-gradient oracle calls (one per client per local step).
    sample_grads : int
        Per-sample gradients computed (B per call, m_i for an exact client gradient).
    comm_up, comm_down : int
        d-vectors sent client->server and server->client.
    history : pandas.DataFrame
        One row per evaluated round (see :func:`run`).
    iterates : ndarray (rounds + 1, d) or None
        Global models x^0..x^R when ``record_iterates=True``.
    state : dict
        Final algorithm state (control variates, duals, ...).
    sampled : Participants
        The participants of each round as drawn (a sequence of int64 arrays, stored compactly,
        :class:`fedtheory.runs.participants.Participants`): ``arange(n)`` under full participation,
        the S distinct clients of uniform sampling in their draw order, the participants of
        Bernoulli participation, and under sampling with replacement the S sorted draws *with
        their duplicates* (a client drawn m times appears m times), with or without replicated
        duplicates. Without replicated duplicates such a client ran once with weight m/S:
        ``sampled.slots(t)`` gives the clients that ran round t (distinct there), as the
        counters and a trace's ``clients`` count them. ``client_schedule=list(sampled)``
        replays the run bit for bit in every mode.
    algorithm : Algorithm
        The algorithm instance that ran (its hyperparameters resolved).
    seed : int
        The run's seed.
    backend : str
        "numba", "python" or "torch".
    time : float
        Wall-clock seconds of the rounds' local work and server updates (evaluations excluded; on
        the fused path the compiled calls, which include drawing the rounds' randomness).
    trace : fedtheory.runs.trace.Trace or None
        Per-round, per-client recorded sequences when ``trace=...`` was given.
    finished : bool
        Every planned round ran and ``x`` is finite: status "max_rounds", or "diverged" because F
        grew past :data:`DIVERGENCE_GROWTH` times its start at the last round (a finite model
        that a theorem check still measures).
    """

    x: np.ndarray
    status: str
    message: str
    rounds: int
    grad_evals: int
    sample_grads: int
    comm_up: int
    comm_down: int
    history: pd.DataFrame
    iterates: np.ndarray | None
    state: dict = field(repr=False)
    sampled: object = field(default=None, repr=False)
    algorithm: object = None
    seed: int = 0
    backend: str = "numba"
    time: float = 0.0
    trace: object = field(default=None, repr=False)
    finished: bool = False

    def __repr__(self):
        """One line: algorithm, status, rounds, the last evaluated metrics and the costs."""
        name = getattr(self.algorithm, "name", self.algorithm)
        last = ""
        if len(self.history):
            row = self.history.iloc[-1]
            last = "".join(f", {k}={row[k]:.4g}" for k in ("value", "suboptimality") if k in row)
        return (f"RunResult({name!r}, status={self.status!r}, rounds={self.rounds}{last}, "
                f"grad_evals={self.grad_evals}, comm_up={self.comm_up}, d={np.shape(self.x)[0]}, "
                f"seed={self.seed}, backend={self.backend!r})")

    def summary(self):
        """Every detail of the run as text: the algorithm and its hyperparameters, status and
        message, costs, the last history row, the final model, the state, trace and iterates."""
        x = np.asarray(self.x)
        lines = [f"algorithm: {self.algorithm!r}", f"status:    {self.status} ({self.message})",
                 f"rounds:    {self.rounds} completed; seed {self.seed}; backend {self.backend}; "
                 f"local work {self.time:.3g} s",
                 f"costs:     {self.grad_evals} oracle calls, {self.sample_grads} per-sample gradients, "
                 f"{self.comm_up} vectors up, {self.comm_down} down",
                 f"x:         d={x.shape[0]}, ||x||={np.linalg.norm(x):.6g}, "
                 f"{np.array2string(x, precision=4, threshold=8, edgeitems=3)}",
                 f"history:   {len(self.history)} evaluated rounds, columns {list(self.history.columns)}"]
        if len(self.history):
            lines.append("last row:  " + ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                                                   for k, v in self.history.iloc[-1].items()))
        state = {k: (f"array{tuple(np.shape(v))}" if hasattr(v, "shape") else type(v).__name__)
                 for k, v in (self.state or {}).items()}
        lines.append(f"state:     {state}")
        if self.iterates is not None:
            lines.append(f"iterates:  {np.shape(self.iterates)}")
        if self.trace is not None:
            lines.append(f"trace:     {self.trace!r}")
        return "\n".join(lines)


def _step_sizes(lr, t0, K, const=None):
    """Step sizes of the K local steps with global step counters t0 .. t0 + K - 1."""
    if const is not None and const.shape[0] == K:
        return const
    if callable(lr):
        t = t0 + np.arange(K)
        vals = [lr(int(s)) for s in t]
        try:
            lrs = np.array([float(v) for v in vals])
        except (TypeError, ValueError):
            raise InvalidParameterError(f"The 'lr' schedule of run must return floats in the range (0, inf). "
                                        f"Got {vals!r} for global steps {t.tolist()}.") from None
        if not np.all(np.isfinite(lrs)) or np.any(lrs <= 0):
            raise InvalidParameterError(f"The 'lr' schedule of run must return floats in the range "
                                        f"(0, inf). Got {lrs.tolist()} for global steps {t.tolist()}.")
        return lrs
    return np.full(K, float(lr))


_MODES = {"full": _rk.FULL, "uniform": _rk.UNIFORM, "with_replacement": _rk.WITH_REPLACEMENT,
          "bernoulli": _rk.BERNOULLI}


@dataclass
class _Sampler:
    """How a round's participants are drawn (:func:`fedtheory._kernels.rounds.draw_round` draws
    them): the mode, S, the with-replacement probabilities ``q``, the Bernoulli probability, whether
    duplicate draws are replicated, and a replayed ``client_schedule`` (None: draw)."""

    mode: str
    S: int
    q: np.ndarray | None
    replicate: bool
    participation: float | None
    schedule: list | None = None

    def __post_init__(self):
        self.code = _MODES[self.mode]
        cdf = np.zeros(1)
        if self.q is not None:
            cdf = np.cumsum(self.q)                 # NumPy's Generator.choice(p=q): the normalised cdf
            cdf /= cdf[-1]
        self.cdf = cdf
        self.part = float(self.participation or 0.0)
        if self.schedule is not None:
            self.sched = np.concatenate([np.zeros(0, dtype=np.int64), *self.schedule]).astype(np.int64)
            self.sched_ptr = np.concatenate([[0], np.cumsum([len(e) for e in self.schedule])]).astype(np.int64)
        else:
            self.sched, self.sched_ptr = np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)

    def entry(self, r):
        """``(has_schedule, entry)`` of round r (1-based)."""
        if self.schedule is None:
            return False, self.sched
        return True, self.schedule[r - 1]


def _run_parameters():
    """The parameter names of :func:`run` (offered by an algorithm's unknown-hyperparameter error)."""
    return tuple(_signatures()[0].parameters)


def run(problem, algorithm, rounds=100, local_steps=1, lr=0.1, clients_per_round=None,
        batch_size=None, seed=0, x0=None, record_iterates=False, backend="numba", device=None,
        *, eval_every=None, callback=None, progress=False, sampling=None, q=None,
        participation=None, batch_replacement=False, reference=None, tol=None, trace=None,
        trace_max_mb=1024.0, trace_rounds=None, weight_decay=None, clip_norm=None, client_schedule=None,
        **hyperparameters):
    r"""Run a federated algorithm on a problem.

    With ``batch_size=None`` and ``clients_per_round=None`` the run is deterministic and is
    the paper's algorithm with exact gradients and full participation, round by round.

    Parameters
    ----------
    problem : FederatedProblem
        From :mod:`problems`.
    algorithm : str
        A registered name (:func:`fedtheory.algorithms`).
    rounds : int, default 100
        Communication rounds R >= 0.
    local_steps : int, default 1
        Local steps K (tau, E in the papers) >= 1.
    lr : float or callable, default 0.1
        Local step size eta_l > 0, or a schedule ``lr(t) -> float`` of the global local-step
        counter t = r K + k (e.g. Theorem 4.2 of Haddadpour & Mahdavi).
    clients_per_round : int, optional
        S clients per round; None means every client every round.
    batch_size : int, optional
        Minibatch size B (1 <= B <= smallest client); None uses exact client gradients.
    seed : int, default 0
        Seed of the run's single random stream (SeedSequence(seed) spawns one stream for
        client sampling and one for minibatches and noise).
    x0 : array (d,), optional
        Initial global model (zeros by default).
    record_iterates : bool, default False
        Keep x^0..x^R in ``result.iterates``.
    backend : {"numba", "python", "torch"}
        Numba kernels, or the NumPy twins of the papers' pseudo-code. All follow the same
        trajectory from the same index arrays. "torch" (optional extra ``fedtheory[torch]``) runs
        the same update rules on tensors (:mod:`fedtheory.backends.torch`): float64 for the
        convex problems (the numba iterates to rounding), the network's dtype for a
        :class:`~fedtheory.backends.torch.DeepProblem` (required for one). Per-client state is
        then kept in preallocated tensors and ``result.state`` holds tensors.
    device : str, optional
        Torch device ("cpu", "cuda", "cuda:1", ...); None picks "cuda" when available, else
        "cpu". Torch backend only.
    eval_every : int, optional
        Evaluate every this many rounds (round 0 and the last round always). None (the default)
        uses a cost-based schedule: round r is evaluated when the evaluations so far, counting
        this one, cost at most 25% of the training work so far, both counted in per-sample
        gradients. An evaluation counts 4 per data row (F and its gradient over all the data,
        each about twice a gradient's cost) plus 3000 for its fixed, per-call cost (leaving the
        compiled loop, building the row), measured on the tiny problems where that part
        dominates. So the evaluation stays within a quarter of the training time beyond round 0
        and the last round, and the schedule is deterministic (it depends on counts, not time). With ``tol`` set, None
        means every round. Theorem checks and rate plots that need every round say so with
        ``eval_every=1``.
    callback : callable, optional
        ``callback(round, x)`` after each round; returning True stops with "callback_stop". A run
        with a callback or a trace takes the per-round path (Python between rounds); otherwise,
        on the numba backend, the rounds between two evaluations run as one compiled call (the
        algorithm's compiled rules, see docs/add-your-own-algorithm.md). Both paths draw from
        the same streams and give the same run, bit for bit.
    progress : bool, default False
        Show a tqdm progress bar.
    sampling : {"uniform", "with_replacement", "bernoulli"}, optional
        How the S clients are drawn when ``clients_per_round`` is set: uniformly without
        replacement (weights w_i n/S, i.e. 1/S for uniform w), i.i.d. with replacement by
        ``q`` (weight 1/S per draw), or each client independently with probability
        ``participation`` (weights w_i / sum of participants' w). Defaults to the
        algorithm's own (uniform; with replacement for ``lfd``).
    q : array (n,), optional
        Sampling probabilities for ``"with_replacement"``; they are also the objective's
        weights, so they must equal ``problem.weights`` (the default).
    participation : float, optional
        Bernoulli participation probability (default S/n).
    batch_replacement : bool, default False
        Draw minibatch rows with replacement.
    reference : object with ``f`` and ``x``, optional
        Ground truth (e.g. :func:`validation.ground_truth`); adds ``suboptimality``,
        ``dist_sq`` and ``reference_certified`` columns (:func:`fedtheory.runs.metrics.reference_metrics`:
        NaN metrics against a reference marked ``certified=False``, an error when F(x) falls
        below a certified F* by more than its accuracy).
    tol : float, optional
        Stop with "converged" when the squared gradient mapping norm is <= tol.
    trace : bool, str or sequence of str, optional
        Record, per round and per participating client, the sequences the algorithm declares in
        ``traceables`` (``ft.describe`` lists them): True records all of them, a name or a list
        records those. Every traced round also keeps the broadcast model x^t, the participants,
        their weights, the step sizes, the minibatch rows and the noise. The result is
        ``result.trace`` (:class:`fedtheory.runs.trace.Trace`). Off by default: a local path costs
        8 S (K + 1) d bytes per round; the numba, python and torch backends record the same
        values (to rounding). On the numba backend a traced run uses compiled rounds of its own
        (the rounds without a trace carry none of its code and compile in about half the time),
        so an algorithm's first traced run compiles them once more.
    trace_max_mb : float, default 1024
        Upper bound on the memory of the trace, checked before the run from S, K, d and the
        rounds (an error names the estimate and how to lower it).
    trace_rounds : collection of int, optional
        Trace only these rounds t (0-based: the round from x^t to x^{t+1}); None traces all.
    weight_decay : float, optional
        Decoupled weight decay wd >= 0 of the authors' released codes (``torch.optim.SGD(
        weight_decay=wd)``): ``wd * y`` is added to the final local step direction at the current
        local iterate y. It is not part of f_i: it changes neither F, the history's values, the
        gradients nor FedSpeed's SAM ascent (unlike a problem's ``l2``, which is inside f_i).
        None or 0 (the default): none, the papers' algorithms. Accepted by the algorithms whose
        local step is a gradient step (``Algorithm.released_options``; others raise an error
        naming the reason). The one exception is ``pfedme``, whose reference code has a weight
        decay of its own (its ``weight_decay`` hyperparameter, default 0.001): there None (the
        default) keeps that value and a number, 0 included, replaces it, so ``weight_decay=0.0``
        and leaving it out differ for ``pfedme`` only. See docs/conventions.md.
    clip_norm : float, optional
        Gradient clipping of the released codes (``torch.nn.utils.clip_grad_norm_`` before the
        optimizer step): the local direction before weight decay, u, is multiplied by
        c = clip_norm / (||u|| + 1e-6) when c < 1 and left unchanged (bit for bit) otherwise. u
        is the gradient of the released codes' loss: the (quasi-)gradient plus the linear
        correction terms; a prox pull mu (y - anchor) contributes -mu anchor to u, and mu y is
        added after clipping, as the released codes' optimizer weight decay (FedProx, FedDyn,
        FedSpeed). None (the default): no clipping. Same algorithms as ``weight_decay``.
    client_schedule : sequence of int arrays, optional
        The participants of each round, used instead of sampling: exactly ``rounds`` entries,
        entry t the client indices (in [0, n)) of round t, in the order aggregated. Their
        weights are those the run's sampling mode gives a draw (``sampling``, or the algorithm's
        default when ``clients_per_round`` is given; then each entry has ``clients_per_round``
        indices, distinct except with replacement); with neither, w_i / sum_{j in S_t} w_j (as
        Bernoulli participation, w under full participation). This replays another system's
        participation (e.g. FL-Simulator's, see docs/conventions.md). Replay guarantee: the
        schedule draws nothing from the run's streams and minibatches, noise and the
        algorithms' coins depend only on the number of participants of each round, so
        ``client_schedule=list(res.sampled)`` with the run's other arguments reproduces ``res``
        bit for bit (model, iterates, history, counters, trace and ``sampled``) in every
        sampling mode. With replacement an entry lists the S draws with their duplicates, as
        ``res.sampled`` records them; without replicated duplicates a client listed m times
        runs once with weight m/S, exactly as a sampled draw. A mapping (e.g. a dict of
        rounds) is rejected: pass ``[d[t] for t in range(rounds)]``. For a method defined for
        full participation only (FedPD, NFSGD) every entry lists all n clients, in any order,
        and is read in client order.
    **hyperparameters
        The algorithm's own hyperparameters (e.g. ``mu`` for fedprox).

    Returns
    -------
    RunResult
        ``history`` columns: round, comm_up, comm_down, grad_evals, sample_grads, time,
        value (F(x)), grad_mapping_sq, and suboptimality / dist_sq with a reference.

    Examples
    --------
    >>> import fedtheory as ft, problems
    >>> p = problems.quadratic(8, 5, L=1.0, mu=0.1, heterogeneity=0.5, seed=0)
    >>> res = ft.run(p, "fedavg", rounds=200, local_steps=5, lr=0.1)
    >>> res.status, res.history["round"].tolist()        # the cost-based evaluation schedule
    ('max_rounds', [0, 64, 127, 190, 200])
    >>> ft.run(p, "fedavg", rounds=20, local_steps=5, lr=0.1, eval_every=1).history.shape[0]
    21
    """
    job = _Job(problem, algorithm, rounds, local_steps, lr, clients_per_round, batch_size, seed, x0,
               record_iterates, backend, device, eval_every, callback, sampling, q, participation,
               batch_replacement, reference, tol, trace, trace_max_mb, trace_rounds, hyperparameters,
               weight_decay=weight_decay, clip_norm=clip_norm, client_schedule=client_schedule)
    _, bad0 = job.evaluate(0)
    if bad0 is not None:      # nothing to measure progress against: the history would start empty
        raise InvalidParameterError(f"run: at the starting point x0 {bad0}: a run from there has no history to "
                                    "measure (the rounds would run and report it only at their end). Start from a "
                                    "point where F is finite (the 'x0' parameter of run), or rescale the data.")
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=job.rounds, desc=job.alg.name)
    with np.errstate(all="ignore"):
        if job.driver is not None:
            with job.sigint:
                job.run_fused(bar) if job.fused else job.run_with_callback(bar)
        else:
            for r in range(1, job.rounds + 1):          # (a Python int: a NumPy uint8 255 + 1 wraps to 0)
                stop = job.round(r)
                if bar is not None and job.completed == r:
                    bar.update(1)
                if stop:
                    break
    if bar is not None:
        bar.close()
    return job.result()


def check_arguments(problem, algorithm, **kwargs):
    """Raise what ``run(problem, algorithm, **kwargs)`` raises for a bad argument, without running.

    The run is set up as :func:`run` sets it up (arguments, the algorithm's hyperparameters,
    the problem's compatibility, client sampling, ``x0``, the trace budget) and then dropped:
    no round and no evaluation. Configurations (:mod:`fedtheory.reporting.config`) check every grid point
    with it before a sweep starts.

    Parameters
    ----------
    problem : FederatedProblem
        The problem the run would use.
    algorithm : str or Algorithm
        A registered name or an algorithm instance, as :func:`run` takes it.
    **kwargs
        Every other argument of :func:`run`, the algorithm's hyperparameters included.

    Raises
    ------
    InvalidParameterError
        For the first bad argument, with the message :func:`run` gives.

    Examples
    --------
    >>> import problems
    >>> from fedtheory.runs.runner import check_arguments
    >>> check_arguments(problems.quadratic(4, 3), "fedavg", lr=-1.0)
    Traceback (most recent call last):
    ...
    fedtheory.exceptions.InvalidParameterError: The 'lr' parameter of run must be a float in the range (0, inf). Got -1.0 instead.
    """
    run_sig, accepted = _signatures()
    bound = run_sig.bind(problem, algorithm, **kwargs)
    bound.apply_defaults()
    args = dict(bound.arguments)
    hyper = args.pop("hyperparameters", {})
    _Job(**{k: v for k, v in args.items() if k in accepted}, hyperparameters=hyper)


@functools.lru_cache(maxsize=1)
def _signatures():
    """``(signature of run, parameter names of _Job)``: computed once (a grid of 1e6 points is
    checked with one check_arguments call per point; inspect.signature was 60% of it)."""
    import inspect
    return inspect.signature(run), frozenset(inspect.signature(_Job.__init__).parameters)


class _Job:
    """One run's phases: setup (validation, sampler, streams, state), round, evaluation, result."""

    # ------------------------------------------------------------------ setup
    def __init__(self, problem, algorithm, rounds, local_steps, lr, clients_per_round, batch_size, seed,
                 x0, record_iterates, backend, device, eval_every, callback, sampling, q, participation,
                 batch_replacement, reference, tol, trace, trace_max_mb, trace_rounds, hyperparameters,
                 weight_decay=None, clip_norm=None, client_schedule=None):
        self.problem, self.rounds, self.local_steps, self.lr = problem, rounds, local_steps, lr
        self.seed, self.backend, self.callback = seed, backend, callback
        if eval_every is None and tol is not None:
            eval_every = 1                       # convergence is detected at evaluations
        self.eval_every = eval_every
        self.eval_spent = 0.0                    # cost of the evaluations so far (auto schedule)
        self.reference, self.tol, self.record = reference, tol, record_iterates
        if callback is not None and not callable(callback):
            raise InvalidParameterError(f"The 'callback' parameter of run must be None or a function "
                                        f"callback(round, x). Got {type(callback).__name__} {callback!r} instead.")
        if reference is not None and not (hasattr(reference, "f") and hasattr(reference, "x")):
            raise InvalidParameterError(
                "The 'reference' parameter of run must be None or a ground truth with 'f' and 'x' (e.g. "
                f"validation.ground_truth(problem)). Got {type(reference).__name__} {reference!r} instead"
                + (" (reference = true in a configuration file; fedtheory.run takes the ground truth "
                   "itself)" if isinstance(reference, bool) else "") + ".")
        self.deep = bool(getattr(problem, "is_deep", False))
        if reference is not None and not self.deep:
            from ..truth.record import check_reference
            check_reference(problem, reference, "run")
        alg_cls = self._check_arguments(problem, algorithm, rounds, local_steps, lr, clients_per_round,
                                        batch_size, seed, record_iterates, backend, device, eval_every,
                                        sampling, batch_replacement, tol)
        # the counts as Python ints: a NumPy int16 or uint32 (accepted as the number it holds) would
        # compile the rounds anew for its type
        rounds, local_steps, seed = int(rounds), int(local_steps), int(seed)
        clients_per_round = None if clients_per_round is None else int(clients_per_round)
        batch_size = None if batch_size is None else int(batch_size)
        self.rounds, self.local_steps, self.seed = rounds, local_steps, seed
        if eval_every is not None:
            self.eval_every = eval_every = int(eval_every)
        self.eval_unit = (EVAL_ROW_COST * float(problem.client_sizes.sum()) + EVAL_FIXED_COST
                          + float(alg_cls.eval_extra_cost))
        check_param("trace_max_mb", trace_max_mb, [Interval(float, 0, None, "neither")], "run")   # with or without trace
        self.oracles = None
        if backend == "torch":
            from ..backends import require_torch
            require_torch()
            from ..backends.torch import make_oracles
            self.oracles = make_oracles(problem, device)
        if "q" in alg_cls.hyperparameters() and q is None:
            q = hyperparameters.get("q")
        hyperparameters, self.weight_decay, self.clip_norm = _released_options(alg_cls, weight_decay, clip_norm,
                                                                               hyperparameters)
        self.alg = alg = alg_cls.create(run_parameters=_run_parameters(), **hyperparameters)
        alg.check_problem(problem)
        self.sampler, self.mode = self._make_sampler(alg, clients_per_round, sampling, q, participation)
        if client_schedule is not None:
            self.sampler.schedule = check_schedule(client_schedule, alg, problem.n_clients, rounds, self.mode,
                                                   clients_per_round)
            self.sampler.__post_init__()
        self.x0 = self._initial_point(x0)
        self.trace = _TraceRecorder.create(trace, alg, problem, rounds, local_steps,
                                           clients_per_round, batch_size, trace_max_mb, trace_rounds)
        self.const_lrs = None if callable(lr) else np.full(local_steps, float(lr))
        ss = np.random.SeedSequence(seed)
        self.rng_clients, self.rng_data = (np.random.default_rng(s) for s in ss.spawn(2))
        self._aux_seq = ss.spawn(1)[0]
        self.rng_aux = np.random.default_rng(self._aux_seq)      # algorithms' own coins (third child)
        self._rng_start = [g.bit_generator.state for g in (self.rng_clients, self.rng_data)]
        if self.oracles is None:
            self.state = alg.init(problem, self.x0)
        else:                                  # the same rules on tensors (fedtheory.runs.arrays helpers)
            x0t = self.oracles.tensor(self.x0)
            try:
                self.state = alg.init(self.oracles, x0t)
            except TypeError as e:
                # an init written with NumPy only (np.array(x0)) cannot read a GPU tensor: it gets x0 on
                # the host, and its arrays are made tensors below
                if "device type tensor to numpy" not in str(e):
                    raise
                self.state = alg.init(self.oracles, np.array(self.x0, dtype=np.float64))
            # an init written with NumPy only (np.array(x0), np.zeros_like: the model comes back a NumPy
            # array) has its float arrays made tensors like x0; integer arrays (counters, flags) stay.
            # An init that returns the model as a tensor keeps the host arrays it chose (FedSPS's).
            if isinstance(self.state.get("x"), np.ndarray):
                self.state = {k: as_like(v, x0t) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
                              for k, v in self.state.items()}
        rules_name = alg.rules_module()
        if rules_name is not None:             # the rules' State is the init state, field for field
            import sys
            fields = sys.modules[rules_name].State._fields
            if set(fields) != set(self.state):
                raise ValueError(
                    f"Algorithm {alg.name!r}: the State of its compiled rules (module {rules_name!r}) has the fields "
                    f"{list(fields)}, its init state the keys {list(self.state)} (not in State: "
                    f"{sorted(set(self.state) - set(fields))}; not in init: {sorted(set(fields) - set(self.state))}). "
                    "They must be the same names (docs/add-your-own-algorithm.md).")
        missing = [k for k in alg.scalars if k not in self.state]
        if missing:
            raise ValueError(f"Algorithm {alg.name!r} declares the scalars {missing} (its 'scalars' class attribute) "
                             f"but its init state has no such key: init must set each (nan when it has no value yet).")
        self.calls = alg.oracle_calls_per_step()
        self.pk = problem.compiled_pack() if not self.deep else None
        # the compiled rules (numba backend: compiled, python backend: the same functions as Python)
        self.rules = self.driver = None
        self.sigint = _DeferredInterrupt()      # held by run() around the compiled paths
        self._last_code, self._last_evaluated = 0, 0   # of the last segment call / evaluation
        name = alg.rules_module() if self.oracles is None else None
        if name is not None:
            import sys
            self.rules = sys.modules[name]
            self.hp = alg.compiled_params()
            if backend == "numba":
                from .._kernels.drivers import driver
                self.driver = driver(name)
        self.context_cls = RoundContext
        if self.oracles is not None:
            from ..backends.torch.context import TorchRoundContext
            self.context_cls = TorchRoundContext
        self.B = batch_size or 0
        self.batch_replacement = batch_replacement
        self.L_eval = _eval_step(problem)
        self.rows = []
        self.sampled = Participants(problem.n_clients, merge_duplicates=self.mode == "with_replacement"
                                    and not bool(getattr(alg, "replicate_duplicates", False)))
        self.iterates = [np.array(self.x0, dtype=np.float64)] if record_iterates else None
        self.counters = dict(grad_evals=0, sample_grads=0, comm_up=0, comm_down=0, time=0.0)
        self.status, self.message = "max_rounds", f"completed {rounds} rounds"
        self.completed = 0
        self.last_finite_x = None
        self.grown_at = None                    # the round at which F was found grown past DIVERGENCE_GROWTH
        self._checked_names = None              # the history's and the algorithm's column names, once checked

    @staticmethod
    def _check_arguments(problem, algorithm, rounds, local_steps, lr, clients_per_round, batch_size, seed,
                         record_iterates, backend, device, eval_every, sampling, batch_replacement, tol):
        c = "run"
        deep = bool(getattr(problem, "is_deep", False))
        if not isinstance(problem, FederatedProblem) and not deep:
            raise InvalidParameterError(f"The 'problem' parameter of run must be a FederatedProblem "
                                        f"(see the problems package) or a torch DeepProblem. Got "
                                        f"{type(problem).__name__} instead.")
        alg_cls = get_algorithm(algorithm)
        check_param("rounds", rounds, [Interval(int, 0, None)], c)
        check_param("local_steps", local_steps, [Interval(int, 1, None)], c)
        if not callable(lr):
            check_param("lr", lr, [Interval(float, 0, None, "neither")], c)
        n = problem.n_clients
        check_param("clients_per_round", clients_per_round, [NoneOk(), Interval(int, 1, n)], c)
        check_param("seed", seed, [Interval(int, 0, math.inf)], c)
        check_param("record_iterates", record_iterates, [Bool()], c)
        check_param("backend", backend, [Options("numba", "python", "torch")], c)
        check_param("eval_every", eval_every, [NoneOk(), Interval(int, 1, None)], c)
        check_param("sampling", sampling, [NoneOk(), Options(*SAMPLING)], c)
        check_param("batch_replacement", batch_replacement, [Bool()], c)
        check_param("tol", tol, [NoneOk(), Interval(float, 0, None, "left")], c)
        if tol is not None and getattr(problem, "eval_grad", True) is False:
            raise InvalidParameterError(f"The 'tol' parameter of run needs the gradient norm, which this problem "
                                        f"does not evaluate ({problem.name!r} was built with eval_grad=False). "
                                        f"Got tol={tol!r}.")
        min_m = int(problem.client_sizes.min())
        if batch_size is not None:
            if getattr(getattr(problem, "datafit", None), "has_samples", True) is False:
                raise InvalidParameterError(
                    "The 'batch_size' parameter of run must be None for a quadratic problem (it has no "
                    "samples; use its 'noise' for stochastic gradients). Got "
                    f"{batch_size!r} instead.")
            hi = None if batch_replacement else min_m
            check_param("batch_size", batch_size, [Interval(int, 1, hi)], c)
        if deep and backend != "torch":
            raise InvalidParameterError(f"The 'backend' parameter of run must be 'torch' for a DeepProblem (a torch "
                                        f"network). Got {backend!r} instead.")
        if device is not None and backend != "torch":
            raise InvalidParameterError(f"The 'device' parameter of run applies to backend='torch' only and must be "
                                        f"None with backend={backend!r}. Got {device!r} instead.")
        return alg_cls

    def _make_sampler(self, alg, clients_per_round, sampling, q, participation):
        """The sampling scheme: full participation, uniform, with replacement or Bernoulli."""
        problem, n, c = self.problem, self.problem.n_clients, "run"
        if alg.full_participation_only and (clients_per_round not in (None, n) or sampling is not None):
            raise InvalidParameterError(
                f"{alg.name!r} is defined for full participation only, so the 'clients_per_round' "
                f"parameter of run must be None or {n} and 'sampling' None. Got "
                f"clients_per_round={clients_per_round!r}, sampling={sampling!r} instead.")
        if sampling in ("uniform", "with_replacement") and clients_per_round is None:
            raise InvalidParameterError(
                f"sampling={sampling!r} draws clients_per_round clients per round, so the "
                "'clients_per_round' parameter of run must be an int in the range "
                f"[1, {n}]. Got None instead.")
        mode = "full"
        if clients_per_round is not None or sampling == "bernoulli":
            mode = sampling or alg.default_sampling
        replicate = bool(getattr(alg, "replicate_duplicates", False))
        qv = None
        if mode == "with_replacement" or q is not None:
            qv = problem.weights if q is None else np.asarray(q, dtype=np.float64)
            if qv.shape != (n,) or not np.allclose(qv, problem.weights, rtol=1e-12, atol=1e-15):
                raise InvalidParameterError(
                    "The 'q' parameter of run must equal the problem's client weights (q are both the "
                    "sampling probabilities and the objective weights); build the problem with "
                    f"weights=q. Got q={np.asarray(q).tolist()!r} instead.")
        if mode == "with_replacement" and alg.stateful_clients and replicate:
            raise InvalidParameterError(f"{alg.name!r} keeps per-client state, so duplicate draws cannot "
                                        "be independent replicas; use replicate_duplicates=False.")
        if participation is not None and mode != "bernoulli":
            raise InvalidParameterError("The 'participation' parameter of run is the probability of "
                                        "sampling='bernoulli' and must be None otherwise. "
                                        f"Got {participation!r} with sampling={sampling!r} instead.")
        if mode == "bernoulli":
            if participation is None:
                participation = (clients_per_round or n) / n
            check_param("participation", participation, [Interval(float, 0, 1, "right")], c)
        S = clients_per_round if clients_per_round is not None else n
        return _Sampler(mode, S, qv, replicate, participation), mode

    def _initial_point(self, x0):
        d = self.problem.dim
        if x0 is None:
            return self.problem.initial_point() if self.deep else np.zeros(d)
        kind = np.asarray(to_numpy(x0)).dtype.kind
        if kind not in "iuf":                                       # strings, booleans, complex, objects
            raise InvalidParameterError(f"The 'x0' parameter of run must be an array of real numbers. Got an array "
                                        f"of dtype {np.asarray(to_numpy(x0)).dtype} instead.")
        x0 = np.array(to_numpy(x0), dtype=np.float64, order="C")     # a contiguous copy
        if x0.shape != (d,):
            raise InvalidParameterError(f"The 'x0' parameter of run must be an array of shape ({d},). "
                                        f"Got an array of shape {x0.shape} instead.")
        if not np.all(np.isfinite(x0)):
            raise InvalidParameterError("The 'x0' parameter of run must be finite. Got NaN/inf entries.")
        return x0

    # ------------------------------------------------------------------ one round
    def _draw(self, r):
        """Round r's (1-based) randomness, drawn as the compiled ``draw_round`` draws it (the same
        streams in the same order; NumPy draws here, since handing a Generator to a compiled
        function costs more than the draw): returns ``(drawn, clients, weights, idx, noise, u, lrs,
        t0)``."""
        smp, p = self.sampler, self.problem
        K, t0 = self.alg.round_schedule(r - 1, self.local_steps)
        has, entry = smp.entry(r)
        n = p.n_clients
        if has:
            drawn = np.array(entry, dtype=np.int64)
        elif smp.code == _rk.FULL:
            drawn = np.arange(n, dtype=np.int64)
        elif smp.code == _rk.UNIFORM:
            drawn = _rk.sample_clients(self.rng_clients.random(smp.S), n, np.empty(smp.S, dtype=np.int64))
        elif smp.code == _rk.WITH_REPLACEMENT:
            drawn = np.sort(np.searchsorted(smp.cdf, self.rng_clients.random(smp.S), side="right")).astype(np.int64)
        else:
            drawn = np.flatnonzero(self.rng_clients.random(n) < smp.part).astype(np.int64)
        w = self.pk.w if self.pk is not None else np.ascontiguousarray(p.weights, dtype=np.float64)
        clients, weights = _rk.weigh(smp.code, drawn, w, smp.S, smp.replicate)
        Sr = clients.shape[0]
        if self.B:
            u3 = self.rng_data.random((Sr, K, self.B))
            idx = _rk.minibatch_rows(u3, p.client_ptr[:-1][clients], p.client_sizes[clients], self.batch_replacement,
                                     np.empty((Sr, K, self.B), dtype=np.int64))
        else:
            idx = np.zeros((Sr, K, 0), dtype=np.int64)
        noise_level = getattr(p, "noise", 0.0) if not self.deep else 0.0
        if noise_level > 0:
            noise = noise_level * self.rng_data.standard_normal((Sr, K, p.dim))
        else:
            noise = np.zeros((0, 0, 0))
        u = float(self.rng_aux.random())
        return drawn, clients, weights, idx, noise, u, _step_sizes(self.lr, t0, K, self.const_lrs), t0

    def _context(self, r, clients, weights, idx, noise, u, lrs, t0):
        """The round context of round r (1-based)."""
        p = self.problem
        ctx = self.context_cls(p if self.oracles is None else self.oracles, r - 1, clients, weights, idx, noise,
                               lrs, u, self.rng_aux, self.weight_decay, self.clip_norm)
        ctx.t0 = t0
        ctx.batch_replacement = self.batch_replacement
        if self.trace is not None and self.trace.wants(r - 1):
            ctx.want = self.trace.paths
        return ctx

    def _local_and_server(self, ctx):
        """The round's local work and server update; returns ``(messages dict, failure text or None)``
        and sets ``self.state``."""
        alg, state = self.alg, self.state
        if self.rules is None:                     # torch, or an algorithm without compiled rules
            msgs = alg.local_round(state, ctx) if self.backend != "python" else alg.local_round_reference(state, ctx)
            bad = _first_nonfinite(msgs, ctx)
            if bad is None:
                self.state = (alg.torch_server_update(state, ctx, msgs) if self.backend == "torch"
                              else alg.server_update(state, ctx, msgs))
            return msgs, bad
        rd, st = ctx.round_record(), alg.state_tuple(state)
        msgs = alg.local_round_reference(state, ctx)          # python: the NumPy twin, then the same rule
        bad = _first_nonfinite(msgs, ctx)
        if bad is None:
            m = self.rules.Messages(*(msgs[f] for f in self.rules.Messages._fields))
            self.state = dict(self.rules.server(self.pk, rd, self.hp, st, m)._asdict())
        return msgs, bad

    def round(self, r):
        """Run round r (1-based) on the per-round path (the python and torch backends, and algorithms
        without compiled rules); returns True when the run stops after it."""
        drawn, clients, weights, idx, noise, u, lrs, t0 = self._draw(r)
        self.sampled.append(drawn)                  # as drawn: a replayable client_schedule entry
        ctx = self._context(r, clients, weights, idx, noise, u, lrs, t0)
        tracing = self.trace is not None and self.trace.wants(r - 1)
        x_start = to_numpy(self.state["x"]).copy() if tracing else None
        Sr = ctx.S
        t_start = time.perf_counter()
        msgs = {}
        if Sr:
            x_before = np.array(to_numpy(self.state["x"]), dtype=np.float64)    # the last finite model
            msgs, bad = self._local_and_server(ctx)
            if bad is not None:
                self.status, self.message = "diverged", f"round {r}: {bad}"
                self.counters["time"] += time.perf_counter() - t_start
                if tracing:
                    self.trace.add(r - 1, ctx, x_start, msgs, None)
                return True
        self.counters["time"] += time.perf_counter() - t_start
        state = self.state
        if tracing:
            self.trace.add(r - 1, ctx, x_start, msgs, state)
        self.completed = r
        self._count(ctx, clients)
        if self.record:
            self.iterates.append(np.array(to_numpy(state["x"]), dtype=np.float64))
        if not _all_finite(state["x"]):                          # NaN or inf anywhere
            self.last_finite_x = x_before if Sr else None
            self.status = "diverged"
            self.message = f"round {r}: the global model became non-finite after aggregation"
            return True
        stop = self.callback is not None and bool(self.callback(r, to_numpy(state["x"])))
        if self._due(r) or r == self.rounds or stop:
            if self._evaluate_and_check(r):
                return True
        if stop:
            self.status, self.message = "callback_stop", f"callback asked to stop after round {r}"
            return True
        return False

    def _evaluate_and_check(self, r):
        """Evaluate round r; True when the run stops there (non-finite metrics, or ``tol`` met)."""
        self._last_evaluated = r
        row, bad = self.evaluate(r)
        if bad is not None:
            self.status, self.message = "diverged", f"round {r}: {bad}"
            return True
        if self.tol is not None and row["grad_mapping_sq"] <= self.tol:
            self.status = "converged"
            self.message = f"round {r}: squared gradient mapping norm <= tol={self.tol}"
            return True
        return False

    def _count(self, ctx, clients):
        """Oracle calls, per-sample gradients and communication of the round."""
        alg, counters = self.alg, self.counters
        Sr, K, B = ctx.S, ctx.K, self.B
        n_unique = np.unique(clients).size if self.mode == "with_replacement" else Sr
        calls = self.calls
        if self.rules is not None:                 # the rules' cost hooks (python backend: as Python)
            rd = ctx.round_record()
            extra_calls, extra_rows = getattr(self.rules, "extra_grads", _rk.no_extra_grads)(self.pk, rd, self.hp)
            down, up = getattr(self.rules, "comm", _rk.comm_per_participant)(
                self.pk, rd, self.hp, alg.state_tuple(self.state), n_unique, alg.comm[0], alg.comm[1])
        else:
            extra_calls, extra_rows = alg.round_extra_grads(ctx)
            down, up = alg.round_comm(ctx, n_unique, self.state)
        counters["grad_evals"] += int(Sr * K * calls + extra_calls)
        sizes = self.problem.client_sizes
        counters["sample_grads"] += int(calls * (Sr * K * B if B else int(sizes[clients].sum()) * K) + extra_rows)
        counters["comm_up"] += int(up)
        counters["comm_down"] += int(down)

    # ------------------------------------------------------------------ fused segments
    def run_with_callback(self, bar=None):
        """The compiled rules with a callback: each round is one ``segment`` call (the fused path's
        compiled code, evaluations included), then the callback, in the order of :meth:`round`: the
        callback sees every completed round (also one whose evaluation stops the run), and a round it
        stops is evaluated when it was not due."""
        for r in range(1, self.rounds + 1):
            stopped = self.run_fused(bar, r, r)
            if self._last_code in (2, 3):           # diverged: no callback (as on the per-round path)
                return
            stop = bool(self.callback(r, to_numpy(self.state["x"])))
            if stopped:
                return
            if stop:
                if self._last_evaluated != r and self._evaluate_and_check(r):
                    return
                self.status, self.message = "callback_stop", f"callback asked to stop after round {r}"
                return

    def _segment(self, *args):
        """The driver's compiled ``segment``; a rules module that Numba cannot compile (a rule with
        another signature, one returning something other than its named tuple, a plain Python helper)
        is a TypeError naming the module and the form the rules take, with Numba's message."""
        try:
            return self.driver.segment(*args)
        except Exception as e:
            from .._kernels.drivers import compile_error_text
            said = compile_error_text(e)
            if said is None or self.rules is None or self.rules.__name__.startswith("fedtheory."):
                raise
            raise TypeError(
                f"{self.alg.name!r}: Numba cannot compile the rules of module {self.rules.__name__!r}. They must "
                "be local(pk, rd, hp, st, rng) -> (Messages(...), bad) and server(pk, rd, hp, st, m) -> State(...), "
                "in the NumPy subset Numba compiles; a helper they call needs @njit (or numba's register_jitable) "
                "(section 3 of docs/add-your-own-algorithm.md). backend='python' runs the same rules as plain "
                f"Python and shows their own error. Numba said: {said}") from None

    @property
    def fused(self):
        """Whether the rounds between evaluations run as one compiled call (numba backend, compiled
        rules, no callback; traced rounds are recorded from inside the call)."""
        return self.driver is not None and self.callback is None

    def _segment_trace(self, r, x_start, clients, weights, lrs, idx, noise, p_loc, p_per, p_prox, m, st,
                       completed):
        """Record traced round r from inside a segment (``rounds.trace_hook``), as :meth:`round` does."""
        paths = None
        if p_loc is not None:
            every = {"local": p_loc, "personal": p_per, "prox_point": p_prox}
            paths = {k: every[k] for k in self.trace.paths}
        self.trace.record(r - 1, x_start, clients, weights, lrs, idx, noise, paths, m, st if completed else None)

    def _schedule_table(self, r0, r1):
        """``(r0, Ks, t0s, lrs)`` of rounds r0..r1: local steps, first global step and the step sizes
        (zero-padded rows); an ``lr`` schedule is called once per global step, as on the per-round path.
        Rounds from the first whose step sizes the schedule gets wrong are left out (the table ends
        before it, and the segment with it): the error is raised when that round is about to run, as
        on the per-round path, not for a round a stopped run (tol, divergence) never reaches."""
        alg, m = self.alg, r1 - r0 + 1
        if self.const_lrs is not None and type(alg).round_schedule is Algorithm.round_schedule:
            K = self.local_steps                    # constant steps: K per round, t0 = r K
            return (r0, np.full(m, K, dtype=np.int64), K * np.arange(r0 - 1, r1, dtype=np.int64),
                    np.repeat(self.const_lrs[None, :], m, axis=0))     # C order, writable: one type
        Ks, t0s = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
        lrs = []
        for j, rr in enumerate(range(r0, r1 + 1)):
            Ks[j], t0s[j] = alg.round_schedule(rr - 1, self.local_steps)
            try:
                lrs.append(_step_sizes(self.lr, int(t0s[j]), int(Ks[j]), self.const_lrs))
            except InvalidParameterError:
                if j == 0:                          # the round about to run: the per-round path's error
                    raise
                Ks, t0s = Ks[:j], t0s[:j]
                break
        tab = np.zeros((len(lrs), int(Ks.max())))
        for j, a in enumerate(lrs):
            tab[j, :a.shape[0]] = a
        return r0, Ks, t0s, tab

    def run_fused(self, bar=None, r_from=1, r_to=None):
        """Run rounds ``r_from..r_to`` (default: to the last) through the driver's compiled
        ``segment``: one call per chunk of at most ``_SEGMENT`` rounds, the evaluations done by
        :meth:`evaluate` from inside the call (``rounds.evaluate_hook``), so a run evaluated every
        round stays in one call too. Returns True when the run stopped (diverged, converged)."""
        r_to = self.rounds if r_to is None else r_to
        smp, alg, p = self.sampler, self.alg, self.problem
        n, d = p.n_clients, p.dim
        self._cnt = cnt = np.array([self.counters[k] for k in _COUNTERS], dtype=np.int64)
        self._ev = np.array([self.eval_spent])
        self._eval_time = 0.0
        info = np.zeros(3 + d)
        st = alg.state_tuple(self.state)
        max_drawn = n if smp.code in (_rk.FULL, _rk.BERNOULLI) else smp.S
        token = id(self)
        _rk._EVALUATORS[token] = self._segment_evaluate
        tr = self.trace
        want = np.array([tr is not None and k in tr.paths for k in ("local", "personal", "prox_point")])
        if tr is not None:
            _rk._TRACERS[token] = self._segment_trace
        try:
            r = r_from
            while r <= r_to:
                if self.sigint.hit:                 # Ctrl-C meanwhile (a callback's time): raised in Python
                    raise KeyboardInterrupt
                r0, Ks, t0s, lrs_tab = self._schedule_table(r, min(r_to, r + _SEGMENT - 1))
                r1 = r0 + Ks.shape[0] - 1
                cap = (smp.sched_ptr[r1] - smp.sched_ptr[r0 - 1]) if smp.schedule is not None else \
                    (r1 - r0 + 1) * max_drawn
                drawn_buf, drawn_len = np.empty(int(cap), dtype=np.int64), np.zeros(r1 - r0 + 1, dtype=np.int64)
                iters = np.empty((r1 - r0 + 1 if self.record else 0, d))
                traced = None if tr is None else \
                    np.array([tr.wants(rr - 1) for rr in range(r0, r1 + 1)], dtype=np.bool_)
                self._chunk = (r0, drawn_buf, drawn_len, iters)
                t_start, e_start = time.perf_counter(), self._eval_time
                st, r_end, code = self._segment(
                    self.pk, self.hp, st, self.rng_clients, self.rng_data, self.rng_aux, smp.code, smp.S, smp.cdf,
                    smp.part, smp.replicate, smp.schedule is not None, smp.sched, smp.sched_ptr, r0, r1, Ks, t0s,
                    lrs_tab, self.B, self.batch_replacement, self.weight_decay, float(self.clip_norm or 0.0),
                    self.calls, alg.comm[0], alg.comm[1], cnt, 0 if self.eval_every is None else self.eval_every,
                    self._ev, self.eval_unit, EVAL_BUDGET, self.rounds, drawn_buf, drawn_len, iters, info, token,
                    traced, want)
                self.counters["time"] += time.perf_counter() - t_start - (self._eval_time - e_start)
                self._last_code = code
                done = r_end if code != 2 else r_end - 1
                self._flush(r0, r_end, done, st)
                if self.sigint.hit:                 # Ctrl-C during the call: raised here, in Python
                    raise KeyboardInterrupt
                if bar is not None:
                    bar.update(done - r0 + 1)
                if code == 1:                       # the evaluation of round r_end stopped the run
                    return True
                if code == 2:
                    self.status = "diverged"
                    self.message = (f"round {r_end}: client {int(info[0])} produced a non-finite local iterate at "
                                    f"local step {int(info[1])} of {int(info[2])}")
                    return True
                if code == 3:
                    self.last_finite_x = info[3:].copy()
                    self.status = "diverged"
                    self.message = f"round {r_end}: the global model became non-finite after aggregation"
                    return True
                r = r_end + 1
            return False
        finally:
            _rk._EVALUATORS.pop(token, None)
            _rk._TRACERS.pop(token, None)

    def _flush(self, r0, r_end, done, st):
        """After a segment call: participants of rounds r0..r_end, the iterates of the rounds
        completed (r0..done), the counters and the state."""
        _, drawn_buf, drawn_len, iters = self._chunk
        m = r_end - r0 + 1
        self.sampled.extend(drawn_buf[:int(drawn_len[:m].sum())], drawn_len[:m])
        if self.record:
            self.iterates.extend(np.array(iters[j]) for j in range(done - r0 + 1))
        for k, v in zip(_COUNTERS, self._cnt):
            self.counters[k] = int(v)
        self.state = dict(st._asdict())
        self.completed = done

    def _segment_evaluate(self, r, st):
        """The evaluation of round r from inside a segment (``rounds.evaluate_hook``): True stops the run
        (and a Ctrl-C received meanwhile ends the call: :class:`_DeferredInterrupt`)."""
        if self.sigint.hit:
            return True
        t = time.perf_counter()
        for k, v in zip(_COUNTERS, self._cnt):
            self.counters[k] = int(v)
        self.state = dict(st._asdict())
        self.completed = r
        stop = self._evaluate_and_check(r)
        self._ev[0] = self.eval_spent
        self._eval_time += time.perf_counter() - t
        return stop

    # ------------------------------------------------------------------ evaluation
    def _due(self, r):
        """Whether round r is evaluated: every ``eval_every`` rounds, or by the cost-based budget."""
        if self.eval_every is not None:
            return r % self.eval_every == 0
        return self.eval_spent + self.eval_unit <= EVAL_BUDGET * self.counters["sample_grads"]

    def evaluate(self, r):
        """One history row at round r: counters, F(x), the gradient mapping and the extras.

        Returns ``(row, problem)``: a row whose core metric (F, the gradient mapping,
        suboptimality, distance) is not finite is not added to the history (the history keeps
        the last finite metrics) and ``problem`` says which metric; a finite F grown past
        :data:`DIVERGENCE_GROWTH` times its start is added, and ``problem`` says so (the run has
        diverged); else None.
        """
        problem, state = self.problem, self.state
        if r > 0:
            self.eval_spent += self.eval_unit
        x = to_numpy(state["x"])
        if hasattr(problem, "value_and_gradient_mapping_sq"):        # one pass over the data
            F, gm = problem.value_and_gradient_mapping_sq(x, self.L_eval)
        else:                                                       # a torch DeepProblem
            F, gm = problem.value(x), problem.gradient_mapping_sq(x, self.L_eval)
        row = {"round": r, **self.counters, "value": F, "grad_mapping_sq": gm}
        if self.reference is not None and math.isfinite(F):
            row.update(reference_metrics(self.reference, F, x, where=f"run, round {r}"))
        # a DeepProblem may skip the full gradient (eval_grad=False: NaN by design): F decides there;
        # against an uncertified reference suboptimality and dist_sq are NaN by design
        for key in ("value",) if self.deep else _CORE_METRICS:
            if key in ("suboptimality", "dist_sq") and row.get("reference_certified") is False:
                continue
            if key in row and not math.isfinite(row[key]):
                what = "F(x)" if key == "value" else key
                return row, f"{what} is not finite ({row[key]})"
        grown = self._grown(F) if r > 0 else None
        if self.deep:
            row.update(problem.eval_extras(x))
        own = dict(self.alg.scalar_values(state)) if self.alg.scalars else {}   # the algorithm's logged scalars
        own.update(self.alg.history_extras(state if self.oracles is None else HostView(state), problem))
        if own:
            names = (tuple(row), tuple(own))
            if names != self._checked_names:            # (the same names every evaluation: checked once)
                taken = [k for k in own if k in row or reserved_column(k)]
                if taken:
                    raise InvalidParameterError(
                        f"The algorithm {self.alg.name!r} logs {taken} under the name of a column of the run's "
                        "history or of the results store, which it would replace; rename them in its scalars or "
                        "history_extras.")
                self._checked_names = names
            row.update(own)
        self.rows.append(row)
        if grown is not None:
            self.grown_at = r
        return row, grown

    def _grown(self, F):
        """Why F has grown past :data:`DIVERGENCE_GROWTH` times its start (round 0), or None."""
        start = self.rows[0]["value"] if self.rows and self.rows[0]["round"] == 0 else None
        if start is None or not math.isfinite(start):
            return None
        if F - start > DIVERGENCE_GROWTH * max(abs(start), 1.0):
            return (f"F(x) = {F:.3g} has grown past {DIVERGENCE_GROWTH:.0e} times its start F(x^0) = {start:.3g} "
                    f"(max(|F(x^0)|, 1) scales it)")
        return None

    # ------------------------------------------------------------------ result
    def _seed_free(self):
        """Whether the run is that of every seed: it drew no participant, minibatch row or noise, its
        algorithm's class says in its own body that it does not read the round's coin
        (``Algorithm.round_coin``: a subclass may read it where its parent did not) and it drew nothing else from
        the auxiliary stream (which then holds exactly one coin per drawn round)."""
        drawn = [g.bit_generator.state for g in (self.rng_clients, self.rng_data)] != self._rng_start
        if drawn or vars(type(self.alg)).get("round_coin", True):
            return False
        coins = np.random.default_rng(self._aux_seq)
        coins.random(len(self.sampled))
        return coins.bit_generator.state == self.rng_aux.bit_generator.state

    def result(self):
        self.alg.run_ended(self.state, self.problem)
        c = self.counters
        x = self.last_finite_x if self.last_finite_x is not None else to_numpy(self.state["x"])
        res = RunResult(x=np.array(x, dtype=np.float64), status=self.status,
                        message=self.message, rounds=self.completed, grad_evals=c["grad_evals"],
                        sample_grads=c["sample_grads"], comm_up=c["comm_up"], comm_down=c["comm_down"],
                        history=_history_frame(self.rows),
                        iterates=np.array(self.iterates) if self.record else None, state=self.state,
                        sampled=self.sampled, algorithm=self.alg, seed=self.seed, backend=self.backend,
                        time=c["time"], trace=None if self.trace is None else self.trace.result(),
                        finished=bool(self.completed == self.rounds and np.isfinite(x).all()
                                      and (self.status == "max_rounds" or self.grown_at == self.rounds)))
        # no draw from the seed's streams (full participation, exact gradients, no noise, no coin): every
        # seed gives this run (fedtheory.theory.engine runs such a case's seeds once)
        res._seed_free = self._seed_free()
        return res


def _history_frame(rows):
    """The history table of the evaluated rows (dicts): built column by column when every row has
    the same keys in the same order (the usual case: a third of the time of ``pd.DataFrame`` on a
    list of dicts, which made up a quarter of a short run's fixed cost), else from the rows as they
    are (missing entries NaN). Both give the same frame: the same columns, order and dtypes."""
    if rows:
        keys = list(rows[0])
        if all(len(r) == len(keys) and list(r) == keys for r in rows):
            return pd.DataFrame({k: _column([r[k] for r in rows]) for k in keys})
    return pd.DataFrame(rows)


def _column(values):
    """A history column: a NumPy array when every value is a Python float (or every one an int),
    as ``pd.DataFrame`` would type the list (float64, int64), in three quarters of its time; else the list."""
    kind = type(values[0])
    if (kind is float or kind is int) and all(type(v) is kind for v in values):
        try:
            return np.array(values, dtype=np.float64 if kind is float else np.int64)
        except OverflowError:                      # an int beyond int64: pandas decides, as before
            return values
    return values


def _released_options(alg_cls, weight_decay, clip_norm, hyperparameters):
    """Validate ``weight_decay`` and ``clip_norm`` of run against the algorithm's local step.

    Returns (hyperparameters, wd, clip) where wd and clip go to the round context; an algorithm
    that lists ``weight_decay`` among its ``released_options`` and has a hyperparameter of that
    name (pfedme) receives the option there instead.
    """
    c, name = "run", alg_cls.name
    check_param("weight_decay", weight_decay, [NoneOk(), Interval(float, 0, None, "left")], c)
    check_param("clip_norm", clip_norm, [NoneOk(), Interval(float, 0, None, "neither")], c)
    if "weight_decay" in alg_cls.released_options and "weight_decay" in alg_cls.hyperparameters():
        if weight_decay is not None:
            hyperparameters = {**hyperparameters, "weight_decay": weight_decay}
        weight_decay = None
    for opt, val, off in (("weight_decay", weight_decay, (None, 0.0)), ("clip_norm", clip_norm, (None,))):
        if val not in off and opt not in alg_cls.released_options:
            raise InvalidParameterError(
                f"The '{opt}' parameter of run is not supported by {name!r}: {alg_cls.released_options_reason}. "
                f"It must be {' or '.join(map(repr, off))} for {name!r}. Got {opt}={val!r} instead.")
    return hyperparameters, float(weight_decay or 0.0), None if clip_norm is None else float(clip_norm)


def _eval_step(problem):
    """Step 1/L used by the gradient mapping of composite problems (exact L of the smooth part)."""
    if not problem.is_composite:
        return 1.0
    from ..constants import smoothness
    return 1.0 / smoothness(problem)


def _all_finite(x):
    """Whether every entry of the model ``x`` (NumPy array or torch tensor) is finite: entry by
    entry, as the kernels check local iterates (a sum could overflow while every entry is finite)."""
    if is_tensor(x):
        return bool(x.isfinite().all())
    return bool(np.isfinite(x).all())


def _first_nonfinite(msgs, ctx):
    """Describe the first non-finite message, or None.

    Kernels report under "fail" the first (client slot, local step) whose iterate became
    non-finite, or None; then the local models are finite and the messages derived from
    them are checked through the global model after aggregation, so nothing is scanned.
    NumPy twins report nothing, and their messages are scanned.
    """
    if "fail" in msgs:
        if msgs["fail"] is None:
            return None
        s, k = msgs["fail"]
        return (f"client {int(ctx.clients[s])} produced a non-finite local iterate at local "
                f"step {k + 1} of {ctx.K}")
    for key, v in msgs.items():
        if np.size(v) == 0:
            continue
        finite = np.all(np.isfinite(v.reshape(v.shape[0], -1)), axis=1)
        if not finite.all():
            s = int(np.flatnonzero(~finite)[0])
            return f"client {int(ctx.clients[s])} sent a non-finite {key!r}"
    return None
