"""The federated loop: :func:`run`, the one entry point of a run (docs/user-guide.md: "Running a method").

A run is a plan and an executor. :class:`~fedtheory.runs.plan.Plan` checks and resolves the
arguments (problem, algorithm, sampling, streams, step sizes, evaluations, trace); one executor
carries it out: :class:`~fedtheory.runs.fused.FusedExecutor` for compiled rules on the numba
backend (whole segments of rounds in one compiled call, or one call per round with a callback),
:class:`~fedtheory.runs.per_round.PerRoundExecutor` otherwise (the python and torch backends, an
algorithm without compiled rules). Both record into a :class:`~fedtheory.runs.log.RunLog`, which
evaluates rounds and builds the :class:`~fedtheory.runs.result.RunResult`.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from .._kernels.cache import harden_all
from ..exceptions import InvalidParameterError
from .fused import FusedExecutor
from .log import RunLog
from .per_round import PerRoundExecutor
from .plan import Plan

harden_all()            # a damaged Numba cache file is recompiled, never fatal


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
    plan = Plan(problem, algorithm, rounds, local_steps, lr, clients_per_round, batch_size, seed, x0,
                record_iterates, backend, device, eval_every, callback, sampling, q, participation,
                batch_replacement, reference, tol, trace, trace_max_mb, trace_rounds, hyperparameters,
                weight_decay=weight_decay, clip_norm=clip_norm, client_schedule=client_schedule,
                run_parameters=_run_parameters())
    return _execute(plan, progress)


def _execute(plan, progress=False):
    """Carry out a plan: round 0's row, the rounds by the plan's executor, the result."""
    log = RunLog(plan)
    _, bad0 = log.evaluate(0)
    if bad0 is not None:      # nothing to measure progress against: the history would start empty
        raise InvalidParameterError(f"run: at the starting point x0 {bad0}: a run from there has no history to "
                                    "measure (the rounds would run and report it only at their end). Start from a "
                                    "point where F is finite (the 'x0' parameter of run), or rescale the data.")
    bar = None
    if progress:
        from tqdm.auto import tqdm                      # (only for a progress bar)
        bar = tqdm(total=plan.rounds, desc=plan.alg.name)
    executor = FusedExecutor if plan.driver is not None else PerRoundExecutor
    with np.errstate(all="ignore"):
        executor(plan, log).run(bar)
    if bar is not None:
        bar.close()
    return log.result()


class SeededRuns:
    """``run(problem, algorithm, seed=s, **kwargs)`` for one seed after another, the arguments checked
    and the run set up once (:meth:`Plan.reseeded`): a theorem check runs each case for several
    seeds, and setting a run up was a third of a short run. Each result is the one :func:`run` gives
    for that seed.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    algorithm : str or Algorithm
        As :func:`run` takes it.
    **kwargs
        Every other argument of :func:`run` but ``seed``.

    Examples
    --------
    >>> import fedtheory as ft, numpy as np, problems
    >>> from fedtheory.runs.runner import SeededRuns
    >>> p = problems.quadratic(6, 3, noise=0.1, seed=0)
    >>> runs = SeededRuns(p, "fedavg", rounds=5, clients_per_round=2)
    >>> all(np.array_equal(runs.run(s).x, ft.run(p, "fedavg", rounds=5, clients_per_round=2, seed=s).x)
    ...     for s in (0, 3, 1))
    True
    """

    def __init__(self, problem, algorithm, **kwargs):
        if "seed" in kwargs:
            raise TypeError("SeededRuns takes the seed in run(seed), not as an argument")
        self._plan, self._progress = _plan(problem, algorithm, **kwargs)
        self._fresh = True                       # the plan set up here has not run yet

    def run(self, seed):
        """The run of ``seed`` (a RunResult, as :func:`run` returns it)."""
        plan = self._plan if self._fresh and seed == self._plan.seed else self._plan.reseeded(seed)
        self._fresh = False
        return _execute(plan, self._progress)


def _plan(problem, algorithm, **kwargs):
    """``(Plan, progress)`` of ``run(problem, algorithm, **kwargs)``: its arguments checked and resolved."""
    accepted = _signatures()[1]
    args, hyper = _arguments(problem, algorithm, kwargs)
    plan = Plan(**{k: v for k, v in args.items() if k in accepted}, hyperparameters=hyper,
                run_parameters=_run_parameters())
    return plan, args["progress"]


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
    _plan(problem, algorithm, **kwargs)


def _arguments(problem, algorithm, kwargs):
    """``(arguments, hyperparameters)`` of ``run(problem, algorithm, **kwargs)``: what
    ``inspect.signature(run).bind(...)`` with its defaults applied gives, without binding (a sixth of
    setting up a plan): run's own parameters, each given or its default, and the other keywords as
    the hyperparameters."""
    if kwargs.keys() & {"problem", "algorithm"}:            # (the TypeError the call to run raises)
        _signatures()[0].bind(problem, algorithm, **kwargs)
    args, hyper = dict(_defaults(), problem=problem, algorithm=algorithm), {}
    for k, v in kwargs.items():
        if k in args:
            args[k] = v
        else:
            hyper[k] = v
    return args, hyper


@functools.lru_cache(maxsize=1)
def _defaults():
    """The default of each parameter of :func:`run` but ``problem``, ``algorithm`` and its
    hyperparameters (computed once)."""
    return {k: v.default for k, v in _signatures()[0].parameters.items()
            if k not in ("problem", "algorithm") and v.kind is not inspect.Parameter.VAR_KEYWORD}


@functools.lru_cache(maxsize=1)
def _signatures():
    """``(signature of run, parameter names of Plan)``: computed once (a grid of 1e6 points is
    checked with one check_arguments call per point; inspect.signature was 60% of it)."""
    return inspect.signature(run), frozenset(inspect.signature(Plan.__init__).parameters) - {"run_parameters"}

