"""A run's plan: every argument of :func:`fedtheory.run` checked and resolved once, before any round.

:class:`Plan` holds what does not change while the rounds run: the problem, the algorithm with its
hyperparameters, the client sampling (:class:`Sampler`), the step sizes of every round, the random
streams, the evaluation schedule, the trace recorder, the initial state and what the backend needs
(the compiled pack, rules and driver, or the torch oracles). The executors
(:mod:`fedtheory.runs.fused`, :mod:`fedtheory.runs.per_round`) carry it out and the run's log
(:mod:`fedtheory.runs.log`) records what happens.
"""
from __future__ import annotations

import copy
import functools
import math
import sys
from dataclasses import dataclass

import numpy as np

from ..backends import require_torch
from .._argcheck import Bool, Interval, NoneOk, Options, check_param
from .._kernels import evaluation as _evaluation
from .._kernels import sampling as _smp
from .._kernels.drivers import driver
from ..algorithms.base import Algorithm
from ..algorithms.context import RoundContext
from ..constants import smoothness
from ..exceptions import InvalidParameterError
from ..problem import FederatedProblem
from ..registry import get_algorithm
from .arrays import as_like, to_numpy
from .participants import check_schedule
from .trace import _TraceRecorder

SAMPLING = ("uniform", "with_replacement", "bernoulli")
EVAL_BUDGET = 0.25      # default schedule: evaluations cost at most this fraction of the training work
EVAL_ROW_COST = 4.0     # an evaluation's cost per data row, in per-sample gradients (F and grad F, two passes)
EVAL_FIXED_COST = 3000.0   # its fixed cost (the Python side: leaving the compiled loop, the row), same unit
#                            (one schedule, whether the rows are computed in Python or in compiled code)
#: Whether the numba backend evaluates rounds in compiled code where it can (:attr:`Plan.compiled_eval`);
#: the tests set it False to compare with the Python evaluation.
COMPILED_EVALUATION = True
_MODES = {"full": _smp.FULL, "uniform": _smp.UNIFORM, "with_replacement": _smp.WITH_REPLACEMENT,
          "bernoulli": _smp.BERNOULLI}


def step_sizes(lr, t0, K, const=None):
    """Step sizes of the K local steps with global step counters t0 .. t0 + K - 1.

    Parameters
    ----------
    lr : float or callable
        The ``lr`` of :func:`fedtheory.run`: a constant, or a schedule ``lr(t)`` of the global step.
    t0 : int
        The global step counter of the first local step.
    K : int
        The number of local steps.
    const : ndarray or None
        The constant step sizes of a run with a float ``lr`` (returned when it has K entries).

    Returns
    -------
    ndarray of shape (K,)
        The step sizes, each finite and > 0.
    """
    if const is not None and const.shape[0] == K:
        return const
    if callable(lr):
        t = t0 + np.arange(K)
        return _scheduled(t, [lr(int(s)) for s in t])
    return np.full(K, float(lr))


def _scheduled(t, vals):
    """The values ``vals`` an ``lr`` schedule returned for the global steps ``t``, as an array: an
    InvalidParameterError naming them unless each is a finite float > 0."""
    try:
        lrs = np.array([float(v) for v in vals])
    except (TypeError, ValueError):
        raise InvalidParameterError(f"The 'lr' schedule of run must return floats in the range (0, inf). "
                                    f"Got {vals!r} for global steps {t.tolist()}.") from None
    if not np.all(np.isfinite(lrs)) or np.any(lrs <= 0):
        raise InvalidParameterError(f"The 'lr' schedule of run must return floats in the range "
                                    f"(0, inf). Got {lrs.tolist()} for global steps {t.tolist()}.")
    return lrs


@dataclass
class Sampler:
    """How a round's participants are drawn (:func:`fedtheory._kernels.sampling.draw_round_arrays` draws
    them): the mode, S, the with-replacement probabilities ``q``, the Bernoulli probability, whether
    duplicate draws are replicated, and a replayed ``client_schedule`` (None: draw).

    Parameters
    ----------
    mode : {"full", "uniform", "with_replacement", "bernoulli"}
        The sampling mode.
    S : int
        Clients per round.
    q : ndarray or None
        The with-replacement probabilities.
    replicate : bool
        Whether duplicate draws run as replicas.
    participation : float or None
        The Bernoulli probability.
    schedule : list of int arrays, optional
        A replayed ``client_schedule`` (None: draw).
    """

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
        """The replayed participants of a round.

        Parameters
        ----------
        r : int
            The round, 1-based.

        Returns
        -------
        tuple
            ``(has_schedule, entry)``: whether the participants are replayed, and their int64 indices
            (an empty array when they are drawn).
        """
        if self.schedule is None:
            return False, self.sched
        return True, np.asarray(self.schedule[r - 1], dtype=np.int64)


class Plan:
    """One run of :func:`fedtheory.run`, resolved: its arguments checked (the errors :func:`run` raises,
    in the same order), the algorithm created, the sampling, streams, step sizes, evaluation schedule,
    trace recorder, initial state and backend resources set up. Nothing runs.

    Parameters
    ----------
    problem, algorithm, rounds, local_steps, lr, clients_per_round, batch_size, seed, x0, record_iterates : object
        As in :func:`fedtheory.run`.
    backend, device, eval_every, callback, sampling, q, participation, batch_replacement, reference : object
        As in :func:`fedtheory.run`.
    tol, trace, trace_max_mb, trace_rounds : object
        As in :func:`fedtheory.run`.
    hyperparameters : dict
        The algorithm's own hyperparameters.
    weight_decay, clip_norm, client_schedule : object
        As in :func:`fedtheory.run`.
    run_parameters : tuple of str
        The names of :func:`fedtheory.run`'s parameters, for the algorithm's unknown-name error.
    """

    def __init__(self, problem, algorithm, rounds, local_steps, lr, clients_per_round, batch_size, seed,
                 x0, record_iterates, backend, device, eval_every, callback, sampling, q, participation,
                 batch_replacement, reference, tol, trace, trace_max_mb, trace_rounds, hyperparameters,
                 weight_decay=None, clip_norm=None, client_schedule=None, *, run_parameters=()):
        self.problem, self.lr, self.backend, self.callback = problem, lr, backend, callback
        if eval_every is None and tol is not None:
            eval_every = 1                       # convergence is detected at evaluations
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
            from ..truth.record import check_reference     # (loads the ground-truth package: only with a reference)
            check_reference(problem, reference, "run")
        alg_cls = _check_arguments(problem, algorithm, rounds, local_steps, lr, clients_per_round, batch_size,
                                   seed, record_iterates, backend, device, eval_every, sampling, batch_replacement,
                                   tol)
        # the counts as Python ints: a NumPy int16 or uint32 (accepted as the number it holds) would
        # compile the rounds anew for its type
        self.rounds, self.local_steps, self.seed = int(rounds), int(local_steps), int(seed)
        clients_per_round = None if clients_per_round is None else int(clients_per_round)
        batch_size = None if batch_size is None else int(batch_size)
        self.eval_every = None if eval_every is None else int(eval_every)
        self.eval_unit = (EVAL_ROW_COST * float(problem.client_sizes.sum()) + EVAL_FIXED_COST
                          + float(alg_cls.eval_extra_cost))
        check_param("trace_max_mb", trace_max_mb, [Interval(float, 0, None, "neither")], "run")   # with or without trace
        self.oracles = None
        if backend == "torch":
            require_torch()
            from ..backends.torch import make_oracles      # (torch: an optional dependency)
            self.oracles = make_oracles(problem, device)
        if "q" in alg_cls.hyperparameters() and q is None:
            q = hyperparameters.get("q")
        hyperparameters, self.weight_decay, self.clip_norm = released_options(alg_cls, weight_decay, clip_norm,
                                                                              hyperparameters)
        self._creation = (alg_cls, run_parameters, hyperparameters)      # (for :meth:`reseeded`)
        self.alg = alg = alg_cls.create(run_parameters=run_parameters, **hyperparameters)
        alg.check_problem(problem)
        self.sampler = _make_sampler(problem, alg, clients_per_round, sampling, q, participation)
        self.mode = self.sampler.mode
        if client_schedule is not None:
            self.sampler.schedule = check_schedule(client_schedule, alg, problem.n_clients, self.rounds, self.mode,
                                                   clients_per_round)
            self.sampler.__post_init__()
        self.x0 = _initial_point(problem, self.deep, x0)
        self.trace = _TraceRecorder.create(trace, alg, problem, self.rounds, self.local_steps,
                                           clients_per_round, batch_size, trace_max_mb, trace_rounds)
        self.const_lrs = None if callable(lr) else np.full(self.local_steps, float(lr))
        self._x0 = self.x0.copy() if isinstance(self.x0, np.ndarray) else None     # (for :meth:`reseeded`)
        self.rng_clients, self.rng_data, self.aux_seq, self.rng_aux, self.rng_start = _streams(self.seed)
        self.initial_state = self._initial_state()
        _check_state(alg, self.initial_state)
        self.calls = alg.oracle_calls_per_step()
        self.pk = problem.compiled_pack() if not self.deep else None
        # the compiled rules (numba backend: compiled, python backend: the same functions as Python)
        self.rules = self.driver = self.hp = None
        name = alg.rules_module() if self.oracles is None else None
        if name is not None:
            self.rules = sys.modules[name]
            self.hp = alg.compiled_params()
            if backend == "numba":
                self.driver = driver(name)
        self.context_cls = RoundContext
        if self.oracles is not None:
            from ..backends.torch.context import TorchRoundContext     # (torch: an optional dependency)
            self.context_cls = TorchRoundContext
        self.B = batch_size or 0
        self.batch_replacement = batch_replacement
        self.L_eval = 1.0 / smoothness(problem) if problem.is_composite else 1.0   # the gradient mapping's step
        self.compiled_eval, self.extras_names = self._compiled_evaluation(reference)
        self._form = None

    def reseeded(self, seed):
        """This plan for another seed, before or after a run of it: the plan ``run(..., seed=seed)``
        sets up with the other arguments the same. What a run draws from, changes or returns is made
        anew (the streams, x^0, the algorithm from its hyperparameters and its compiled parameters,
        the initial state, the trace's recorder); what it only reads is shared (the checked
        arguments, the sampler, the problem's pack, the driver).

        Parameters
        ----------
        seed : int
            The seed, >= 0.

        Returns
        -------
        Plan
            A new plan.
        """
        check_param("seed", seed, [Interval(int, 0, math.inf)], "run")
        new = copy.copy(self)
        new.seed = int(seed)
        if self._x0 is not None:
            new.x0 = self._x0.copy()
        new.rng_clients, new.rng_data, new.aux_seq, new.rng_aux, new.rng_start = _streams(new.seed)
        alg_cls, run_parameters, hyperparameters = self._creation
        new.alg = alg_cls.create(run_parameters=run_parameters, **hyperparameters)
        if self.hp is not None:
            new.hp = new.alg.compiled_params()
        new.trace = None if self.trace is None else self.trace.fresh()
        new.initial_state = new._initial_state()
        return new

    def _compiled_evaluation(self, reference):
        """``(compiled_eval, extras_names)``: whether the compiled rounds evaluate the rounds due
        themselves (:mod:`fedtheory._kernels.evaluation`, the rows never leave the compiled loop), and
        the names of the algorithm's columns they compute (``Algorithm.compiled_extras``). So on the
        numba backend with compiled rules, for a problem whose datafit and regularizer have Numba
        kernels, without ``reference`` (its metrics and checks are Python's), an algorithm whose
        extras and scalars compiled code computes; else the rows are evaluated in Python."""
        if self.driver is None or self.deep or reference is not None or not COMPILED_EVALUATION:
            return False, ()
        p = self.problem
        if p.datafit.native_code() is None or not (p.regularizer.is_zero or p.regularizer.native_code() is not None):
            return False, ()
        names = self.alg.compiled_extras()
        return (False, ()) if names is None else (True, names)

    def evaluation_form(self):
        """How the compiled evaluation computes F: ``(step, quad, smooth)``, one of them not None: the
        gradient mapping's step of a composite problem (every client's rows), a smooth quadratic's
        weighted sums (H, c) (one product, as the NumPy evaluation), or True for another smooth
        problem (every client's rows). Computed once per plan."""
        if self._form is None:
            p = self.problem
            sums = None if p.is_composite else p.datafit.evaluation_sums(p.data)
            if p.is_composite:
                self._form = (float(self.L_eval), None, None)
            elif sums is not None:
                self._form = (None, tuple(np.ascontiguousarray(a, dtype=np.float64) for a in sums), None)
            else:
                self._form = (None, None, True)
        return self._form

    def compiled_metrics(self, x):
        """(F(x), the squared gradient mapping) by the compiled evaluation, in the form of
        :meth:`evaluation_form` (the rows of round 0 and of a round a callback stops)."""
        step, quad, _ = self.evaluation_form()
        if step is not None:
            return _evaluation.metrics(self.pk, x, step)
        if quad is not None:
            return _evaluation.quadratic_metrics(quad[0], quad[1], self.pk.l2, x)
        return _evaluation.smooth_metrics(self.pk, x)

    @property
    def fused(self):
        """Whether the rounds between evaluations run as one compiled call (numba backend, compiled
        rules, no callback; traced rounds are recorded from the call's buffers, or handed over from
        inside it when the trace names messages or state entries)."""
        return self.driver is not None and self.callback is None

    def _initial_state(self):
        """The algorithm's state at x^0; on the torch backend its float arrays as tensors like x^0."""
        alg = self.alg
        if self.oracles is None:
            return alg.init(self.problem, self.x0)
        x0t = self.oracles.tensor(self.x0)           # the same rules on tensors (fedtheory.runs.arrays helpers)
        try:
            state = alg.init(self.oracles, x0t)
        except TypeError as e:
            # an init written with NumPy only (np.array(x0)) cannot read a GPU tensor: it gets x0 on
            # the host, and its arrays are made tensors below
            if "device type tensor to numpy" not in str(e):
                raise
            state = alg.init(self.oracles, np.array(self.x0, dtype=np.float64))
        # an init written with NumPy only (np.array(x0), np.zeros_like: the model comes back a NumPy
        # array) has its float arrays made tensors like x0; integer arrays (counters, flags) stay.
        # An init that returns the model as a tensor keeps the host arrays it chose (FedSPS's).
        if isinstance(state.get("x"), np.ndarray):
            state = {k: as_like(v, x0t) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
                     for k, v in state.items()}
        return state

    def round_steps(self, r):
        """A round's local steps and step sizes.

        Parameters
        ----------
        r : int
            The round, 1-based.

        Returns
        -------
        tuple
            ``(K, t0, lrs)``: its local steps, first global step and step sizes.
        """
        K, t0 = self.alg.round_schedule(r - 1, self.local_steps)
        return K, t0, step_sizes(self.lr, t0, K, self.const_lrs)

    def schedule_table(self, r0, r1):
        """The local steps and step sizes of rounds r0..r1, as the compiled segment reads them.

        An ``lr`` schedule is called once per global step, as on the per-round path. Rounds from the
        first whose step sizes the schedule gets wrong are left out (the table ends before it, and the
        segment with it): the error is raised when that round is about to run, as on the per-round
        path, not for a round a stopped run (tol, divergence) never reaches.

        Parameters
        ----------
        r0, r1 : int
            The first and last round, 1-based.

        Returns
        -------
        tuple
            ``(r0, Ks, t0s, lrs)``: local steps, first global step and the step sizes (zero-padded rows).
        """
        alg, m = self.alg, r1 - r0 + 1
        if type(alg).round_schedule is Algorithm.round_schedule:    # K steps every round, t0 = r K
            K = self.local_steps
            Ks, t0s = np.full(m, K, dtype=np.int64), K * np.arange(r0 - 1, r1, dtype=np.int64)
            if self.const_lrs is not None:
                return r0, Ks, t0s, np.repeat(self.const_lrs[None, :], m, axis=0)   # C order, writable: one type
        else:
            Ks, t0s = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
            for j, rr in enumerate(range(r0, r1 + 1)):
                Ks[j], t0s[j] = alg.round_schedule(rr - 1, self.local_steps)
        if callable(self.lr):                       # the schedule called once per step, in order
            # rounds of K steps each starting where the previous ended: the steps are one range
            K = int(Ks[0])
            steady = bool((Ks == K).all() and (t0s[1:] - t0s[:-1] == K).all())
            t = np.arange(t0s[0], t0s[0] + m * K, dtype=np.int64) if steady else \
                np.concatenate([t0 + np.arange(K) for t0, K in zip(t0s.tolist(), Ks.tolist())])
            vals = [self.lr(s) for s in t.tolist()]
            try:
                flat = _scheduled(t, vals)
                if steady:                          # row j: round r0 + j's K steps
                    return r0, Ks, t0s, flat.reshape(m, K)
                lrs = np.split(flat, np.cumsum(Ks)[:-1])
            except InvalidParameterError:           # round by round: the first it fails at
                lrs, at = [], 0
                for j, K in enumerate(Ks.tolist()):
                    try:
                        lrs.append(_scheduled(t[at:at + K], vals[at:at + K]))
                    except InvalidParameterError:
                        if j == 0:                  # the round about to run: the per-round path's error
                            raise
                        Ks, t0s = Ks[:j], t0s[:j]
                        break
                    at += K
        else:
            lrs = [step_sizes(self.lr, int(t0), int(K), self.const_lrs) for t0, K in zip(t0s, Ks)]
        tab = np.zeros((len(lrs), int(Ks.max())))
        for j, a in enumerate(lrs):
            tab[j, :a.shape[0]] = a
        return r0, Ks, t0s, tab

    def draw(self, r, K):
        """Round r's randomness from the run's streams, by the compiled draw the fused path runs
        (:func:`fedtheory._kernels.sampling.draw_round_arrays`).

        Parameters
        ----------
        r : int
            The round, 1-based.
        K : int
            Its local steps.

        Returns
        -------
        tuple
            ``(drawn, clients, weights, idx, noise, u)``.
        """
        smp, p = self.sampler, self.problem
        has, entry = smp.entry(r)
        w = self.pk.w if self.pk is not None else np.ascontiguousarray(p.weights, dtype=np.float64)
        noise_level = float(getattr(p, "noise", 0.0)) if not self.deep else 0.0
        drawn, clients, weights, idx, noise, u = _smp.draw_round_arrays(
            w, p.client_ptr, p.client_sizes, noise_level, p.dim, smp.code, self.rng_clients, self.rng_data,
            self.rng_aux, smp.S, smp.cdf, smp.part, smp.replicate, has, entry, K, self.B, self.batch_replacement)
        return drawn, clients, weights, idx, noise, u


def _check_state(alg, state):
    """The initial state has the compiled rules' State fields and the declared scalars."""
    rules_name = alg.rules_module()
    if rules_name is not None:             # the rules' State is the init state, field for field
        fields = sys.modules[rules_name].State._fields
        if set(fields) != set(state):
            raise ValueError(
                f"Algorithm {alg.name!r}: the State of its compiled rules (module {rules_name!r}) has the fields "
                f"{list(fields)}, its init state the keys {list(state)} (not in State: "
                f"{sorted(set(state) - set(fields))}; not in init: {sorted(set(fields) - set(state))}). "
                "They must be the same names (docs/add-your-own-algorithm.md).")
    missing = [k for k in alg.scalars if k not in state]
    if missing:
        raise ValueError(f"Algorithm {alg.name!r} declares the scalars {missing} (its 'scalars' class attribute) "
                         f"but its init state has no such key: init must set each (nan when it has no value yet).")


def _streams(seed):
    """A run's random streams from its seed: ``(clients, data, aux_seq, aux, start)``, the generators of
    the participants, of the minibatches and noise and of the algorithms' own coins (the three
    children of ``SeedSequence(seed)``; ``aux_seq`` the third child) and the first two's start
    states (:meth:`RunLog._seed_free`)."""
    children, start = _children(seed)
    clients, data, aux_seq = (copy.copy(c) for c in children)     # (each run's own: a rule may spawn from them)
    return (np.random.default_rng(clients), np.random.default_rng(data), aux_seq, np.random.default_rng(aux_seq),
            list(start))


@functools.lru_cache(maxsize=4096)
def _children(seed):
    """The three children of ``SeedSequence(seed)`` and the start states of the generators of the first
    two, made once per seed (spawning was a sixth of setting up a short run). A run gets copies of
    the children (a generator's ``spawn`` advances its seed sequence's count of children)."""
    children = np.random.SeedSequence(seed).spawn(3)
    return tuple(children), tuple(np.random.default_rng(c).bit_generator.state for c in children[:2])


def _check_arguments(problem, algorithm, rounds, local_steps, lr, clients_per_round, batch_size, seed,
                     record_iterates, backend, device, eval_every, sampling, batch_replacement, tol):
    """The checks of :func:`run`'s plain arguments; returns the algorithm's class."""
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


def _make_sampler(problem, alg, clients_per_round, sampling, q, participation):
    """The sampling scheme: full participation, uniform, with replacement or Bernoulli."""
    n, c = problem.n_clients, "run"
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
    return Sampler(mode, S, qv, replicate, participation)


def _initial_point(problem, deep, x0):
    """x^0 as a contiguous float64 copy (zeros, or a DeepProblem's own initial point, by default)."""
    d = problem.dim
    if x0 is None:
        return problem.initial_point() if deep else np.zeros(d)
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


def released_options(alg_cls, weight_decay, clip_norm, hyperparameters):
    """Validate ``weight_decay`` and ``clip_norm`` of run against the algorithm's local step.

    Parameters
    ----------
    alg_cls : type
        The algorithm's class.
    weight_decay, clip_norm : float or None
        The options as passed to :func:`fedtheory.run`.
    hyperparameters : dict
        The algorithm's hyperparameters as passed.

    Returns
    -------
    tuple
        ``(hyperparameters, wd, clip)``: wd and clip go to the round context; an algorithm that lists
        ``weight_decay`` among its ``released_options`` and has a hyperparameter of that name
        (pfedme) receives the option there instead.
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
