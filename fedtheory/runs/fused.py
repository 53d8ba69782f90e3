"""The compiled executor: an algorithm's compiled rules on the numba backend.

Without a callback the rounds between two evaluations run as one call of the algorithm's compiled
``segment`` (:mod:`fedtheory._kernels.drivers`). It evaluates the rounds due in compiled code where
it can (else through an object-mode hook into the run's log), and writes traced rounds into buffers
the executor reads after the call (a trace of local paths only) or hands them over round by round
(object mode: a trace that names messages or state entries). With a callback each round is one
``segment`` call, then the callback. Both run the same compiled code, so they give the same run, bit
for bit.
"""
from __future__ import annotations

import _signal
import math
import signal
import threading
import time

import numpy as np

from .._kernels import rounds as _rk
from .._kernels.sampling import BERNOULLI, FULL, draw_rounds
from .._kernels.drivers import compile_error_text
from .arrays import to_numpy
from .log import COUNTERS, DIVERGENCE_GROWTH
from .plan import EVAL_BUDGET

_SEGMENT = 4096         # at most this many rounds per compiled segment call (bounds its buffers)
_DRAWS = 1 << 20        # about this many entries of drawn rows and noise per call (8 MB; a call costs ~50 us)
_PATHS = ("local", "personal", "prox_point")     # the local paths a compiled round records, in its order
_EMPTY = np.empty(0)
_NO_OFFSETS = np.zeros(1, dtype=np.int64)


class _DeferredInterrupt:
    """Ctrl-C (SIGINT) held while a compiled segment runs: Python raises KeyboardInterrupt at the next
    bytecode it runs, which inside a segment is its object-mode evaluation or trace callback, and
    Numba does not unwind through it (the process crashed, exit 139, or the interrupt was lost).
    While active (main thread, Python's default handler in place) a SIGINT only sets ``hit``; the
    segment stops at its next evaluation in Python, or after the round in which it looks for it
    (``rounds.interrupt_hook``, every ``rounds.POLL_WORK`` per-sample gradients: no Python runs in
    the rounds between, so no signal handler either), or at the end of its window of rounds, and the
    runner raises KeyboardInterrupt in Python. Held
    once per run (:meth:`FusedExecutor.run`), not per segment call: a run with a callback calls one
    segment per round."""

    def __init__(self):
        self.hit, self._prev = False, None

    # (the C functions under ``signal.signal`` and ``signal.getsignal``, which wrap each handler in an
    # enum: 0.2 us a run, against 4 us through the wrappers)
    def __enter__(self):
        if threading.current_thread() is threading.main_thread() and \
                _signal.getsignal(_signal.SIGINT) is signal.default_int_handler:
            self._prev = _signal.signal(_signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        self.hit = True

    def __exit__(self, *exc):
        if self._prev is not None:
            _signal.signal(_signal.SIGINT, self._prev)
            self._prev = None
        return False


class FusedExecutor:
    """Runs the rounds of a plan (compiled rules, numba backend) through its driver's ``segment``.

    Parameters
    ----------
    plan : Plan
        The run (:class:`fedtheory.runs.plan.Plan`), with its driver.
    log : RunLog
        Where the rounds are recorded (:class:`fedtheory.runs.log.RunLog`).
    """

    def __init__(self, plan, log):
        self.plan, self.log = plan, log
        self.sigint = _DeferredInterrupt()
        self.last_code = 0                      # of the last segment call

    def run(self, bar=None):
        """Every round: in segments between evaluations, or one segment per round with a callback.

        Parameters
        ----------
        bar : tqdm progress bar, optional
            Advanced by the rounds each call completes.
        """
        with self.sigint:
            if self.plan.callback is None:
                self.segments(bar)
            else:
                self._with_callback(bar)

    def _with_callback(self, bar):
        """Each round one ``segment`` call (evaluations included), then the callback, in the order of
        the per-round path: the callback sees every completed round (also one whose evaluation stops
        the run), and a round it stops is evaluated when it was not due."""
        plan, log = self.plan, self.log
        for r in range(1, plan.rounds + 1):
            stopped = self.segments(bar, r, r)
            if self.last_code in (2, 3):            # diverged: no callback (as on the per-round path)
                return
            stop = bool(plan.callback(r, to_numpy(log.state["x"])))
            if stopped:
                return
            if stop:
                if log.last_evaluated != r and log.evaluate_and_check(r):
                    return
                log.status, log.message = "callback_stop", f"callback asked to stop after round {r}"
                return

    def _segment(self, *args):
        """The driver's compiled ``segment``; a rules module that Numba cannot compile (a rule with
        another signature, one returning something other than its named tuple, a plain Python helper)
        is a TypeError naming the module and the form the rules take, with Numba's message."""
        plan = self.plan
        try:
            return plan.driver.segment(*args)
        except Exception as e:
            said = compile_error_text(e)
            if said is None or plan.rules.__name__.startswith("fedtheory."):
                raise
            raise TypeError(
                f"{plan.alg.name!r}: Numba cannot compile the rules of module {plan.rules.__name__!r}. They must "
                "be local(pk, rd, hp, st, rng) -> (Messages(...), bad) and server(pk, rd, hp, st, m) -> State(...), "
                "in the NumPy subset Numba compiles; a helper they call needs @njit (or numba's register_jitable) "
                "(section 3 of docs/add-your-own-algorithm.md). backend='python' runs the same rules as plain "
                f"Python and shows their own error. Numba said: {said}") from None

    def segments(self, bar=None, r_from=1, r_to=None):
        """Run rounds ``r_from..r_to`` through the driver's compiled ``segment``.

        One call per chunk of at most ``_SEGMENT`` rounds, the evaluations done by the log from inside
        the call (``rounds.evaluate_hook``), so a run evaluated every round stays in one call too.

        Parameters
        ----------
        bar : tqdm progress bar, optional
            Advanced by the rounds each call completes.
        r_from, r_to : int
            The first and last round (1-based; ``r_to`` None: the last of the run).

        Returns
        -------
        bool
            True when the run stopped (diverged, converged).
        """
        plan, log = self.plan, self.log
        r_to = plan.rounds if r_to is None else r_to
        smp, alg, p = plan.sampler, plan.alg, plan.problem
        n, d = p.n_clients, p.dim
        self._cnt = cnt = np.array([log.counters[k] for k in COUNTERS], dtype=np.int64)
        self._ev = np.array([log.eval_spent])
        self._eval_time = 0.0
        info = np.zeros(3 + d)
        st = alg.state_tuple(log.state)
        max_drawn = n if smp.code in (FULL, BERNOULLI) else smp.S
        token = id(self)
        _rk._EVALUATORS[token] = self._evaluate
        tr = plan.trace
        want = np.array([tr is not None and k in tr.paths for k in _PATHS])
        tr_hook = tr is not None and not tr.paths_only      # messages or state entries: recorded from the call
        ev = self._evaluation_settings() if plan.compiled_eval else None
        form = plan.evaluation_form() if plan.compiled_eval else (None, None, None)
        if tr is not None:
            _rk._TRACERS[token] = self._trace
        _rk._INTERRUPTS[token] = self._interrupted
        poll = np.array([cnt[1] + _rk.POLL_WORK])
        per_round = max_drawn * max(plan.local_steps, 1) * (plan.B + (d if p.noise > 0 else 0))
        window = int(min(_SEGMENT, max(1, _DRAWS // max(per_round, 1))))
        try:
            r = r_from
            while r <= r_to:
                if self.sigint.hit:                 # Ctrl-C meanwhile (a callback's time): raised in Python
                    raise KeyboardInterrupt
                r0, Ks, t0s, lrs_tab = plan.schedule_table(r, min(r_to, r + window - 1))
                r1 = r0 + Ks.shape[0] - 1
                iters = np.empty((r1 - r0 + 1 if plan.record else 0, d))
                traced = None if tr is None else tr.wanted_in(r0 - 1, r1)
                rows = n_rows = None
                if ev is not None:                  # the rows the call evaluates, in compiled code
                    rows, n_rows = np.empty((r1 - r0 + 1, 7 + len(plan.extras_names))), np.zeros(1, dtype=np.int64)
                time_before = log.counters["time"]
                t_start, e_start = time.perf_counter(), self._eval_time
                pk = plan.pk
                draws = draw_rounds(pk.w, pk.ptr, pk.sizes, pk.noise, pk.dim, smp.code, plan.rng_clients, plan.rng_data,
                                    smp.S, smp.cdf, smp.part, smp.replicate, smp.schedule is not None, smp.sched,
                                    smp.sched_ptr, r0, Ks, plan.B, plan.batch_replacement)
                self._chunk = (r0, draws[0], draws[1], iters)         # each round's participants, as drawn
                bufs = self._trace_buffers(traced, tr_hook, want, draws[4], Ks)
                st, r_end, code = self._segment(
                    pk, plan.hp, st, plan.rng_aux, smp.code, *draws[2:], r0, r1, Ks, t0s,
                    lrs_tab, plan.B, plan.batch_replacement, plan.weight_decay, float(plan.clip_norm or 0.0),
                    plan.calls, alg.comm[0], alg.comm[1], cnt, 0 if plan.eval_every is None else plan.eval_every,
                    self._ev, plan.eval_unit, EVAL_BUDGET, plan.rounds, iters, info, token,
                    traced, want, tr_hook, *bufs, rows, n_rows, ev, *form, None if ev is not None else token, poll)
                log.counters["time"] += time.perf_counter() - t_start - (self._eval_time - e_start)
                self.last_code = code
                if ev is not None:
                    self._record_rows(rows, int(n_rows[0]), time_before, code)
                if traced is not None and not tr_hook:
                    self._record_traced(r0, r_end, code, draws, Ks, lrs_tab, traced, bufs)
                done = r_end if code != 2 else r_end - 1
                self._flush(r0, r_end, done, st)
                if self.sigint.hit:                 # Ctrl-C during the call: raised here, in Python
                    raise KeyboardInterrupt
                if bar is not None:
                    bar.update(done - r0 + 1)
                if code == 1:                       # the evaluation of round r_end stopped the run
                    return True
                if code == 2:
                    log.diverged(r_end, f"client {int(info[0])} produced a non-finite local iterate at "
                                        f"local step {int(info[1])} of {int(info[2])}")
                    return True
                if code == 3:
                    log.last_finite_x = info[3:].copy()
                    log.diverged(r_end, "the global model became non-finite after aggregation")
                    return True
                r = r_end + 1
            return False
        finally:
            _rk._EVALUATORS.pop(token, None)
            _rk._TRACERS.pop(token, None)
            _rk._INTERRUPTS.pop(token, None)

    def _trace_buffers(self, traced, tr_hook, want, client_ptr, Ks):
        """``(tr_x, tr_loc, tr_per, tr_prox, tr_off)`` of a segment call: where the call writes its
        traced rounds' models and local paths (round j's paths from ``tr_off[j]``), when the trace
        holds local paths only; else empty (no trace, or a trace handed over round by round)."""
        d = self.plan.problem.dim
        if traced is None or tr_hook:
            return np.empty((0, d)), _EMPTY, _EMPTY, _EMPTY, _NO_OFFSETS
        m = Ks.shape[0]
        sizes = np.where(traced, np.diff(client_ptr[:m + 1]) * (Ks + 1) * d, 0)
        off = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(sizes, out=off[1:])
        return (np.empty((int(traced.sum()), d)),) + tuple(np.empty(off[-1]) if w else _EMPTY for w in want) + (off,)

    def _record_traced(self, r0, r_end, code, draws, Ks, lrs_tab, traced, bufs):
        """Record the traced rounds r0..r_end of a call from the buffers it wrote
        (:meth:`_trace_buffers`), as the per-round path records them; round r_end did not complete
        when the call ended on a non-finite local iterate (code 2)."""
        plan = self.plan
        m = r_end - r0 + 1
        clients, weights, cptr, idx, iptr, noise, nptr = draws[2:]
        # views of the call's draws when every round drawn ran traced; else copies (a view keeps its
        # whole array: the draws of rounds not traced, which the trace's memory bound does not count)
        views = m == traced.shape[0] and bool(traced.all())
        plan.trace.record_block(r0 - 1, traced[:m], bufs[0], clients, weights, cptr, lrs_tab, Ks, idx, iptr, plan.B,
                                noise if plan.pk.noise > 0 else None, nptr, dict(zip(_PATHS, bufs[1:4])), bufs[4],
                                m - 1 if code == 2 else None, views)

    def _evaluation_settings(self):
        """``ev`` of the compiled evaluation: ``tol`` (nan: none), F(x^0) (nan when round 0 has no
        finite row: no growth check, as :meth:`RunLog._grown`) and the growth factor of a divergence."""
        plan = self.plan
        return (math.nan if plan.tol is None else float(plan.tol), float(self.log.start_value()),
                float(DIVERGENCE_GROWTH))

    def _record_rows(self, rows, n, time_before, code):
        """The rows a compiled call evaluated, recorded in order (:meth:`RunLog.compiled_rows`); the call
        stopped at the last when its code is 1."""
        log = self.log
        log.eval_spent = float(self._ev[0])
        log.compiled_rows(rows[:n], time_before, code == 1)

    def _flush(self, r0, r_end, done, st):
        """After a segment call: participants of rounds r0..r_end, the iterates of the rounds
        completed (r0..done), the counters and the state."""
        log = self.log
        _, drawn, drawn_ptr, iters = self._chunk
        m = r_end - r0 + 1
        smp = self.plan.sampler
        log.sampled.extend(drawn[:drawn_ptr[m]], np.diff(drawn_ptr[:m + 1]),       # (every client, in order)
                           every=smp.code == FULL and smp.schedule is None)
        if self.plan.record:
            log.iterates.extend(np.array(iters[j]) for j in range(done - r0 + 1))
        for k, v in zip(COUNTERS, self._cnt):
            log.counters[k] = int(v)
        log.state = dict(st._asdict())
        log.completed = done

    def _interrupted(self):
        """Whether Ctrl-C came during the compiled call (``rounds.interrupt_hook``, :class:`_DeferredInterrupt`)."""
        return self.sigint.hit

    def _evaluate(self, r, st):
        """The evaluation of round r from inside a segment (``rounds.evaluate_hook``): True stops the run
        (and a Ctrl-C received meanwhile ends the call: :class:`_DeferredInterrupt`)."""
        if self.sigint.hit:
            return True
        log = self.log
        t = time.perf_counter()
        for k, v in zip(COUNTERS, self._cnt):
            log.counters[k] = int(v)
        log.state = dict(st._asdict())
        log.completed = r
        stop = log.evaluate_and_check(r)
        self._ev[0] = log.eval_spent
        self._eval_time += time.perf_counter() - t
        return stop

    def _trace(self, r, x_start, clients, weights, lrs, idx, noise, p_loc, p_per, p_prox, m, st, completed):
        """Record traced round r from inside a segment (``rounds.trace_hook``), as the per-round path does."""
        trace = self.plan.trace
        paths = None
        if p_loc is not None:
            every = {"local": p_loc, "personal": p_per, "prox_point": p_prox}
            paths = {k: every[k] for k in trace.paths}
        trace.record(r - 1, x_start, clients, weights, lrs, idx, noise, paths, m, st if completed else None)
