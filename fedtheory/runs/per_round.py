"""The per-round executor: one round at a time in Python, for the python and torch backends and for
an algorithm without compiled rules (its ``local_round`` on the numba kernels).

Each round draws its randomness with the compiled draws the fused path runs
(:meth:`fedtheory.runs.plan.Plan.draw`), so every path follows the same trajectory.
"""
from __future__ import annotations

import time

import numpy as np

from .._kernels import rounds as _rk
from .arrays import is_tensor, to_numpy


class PerRoundExecutor:
    """Runs the rounds of a plan one by one.

    Parameters
    ----------
    plan : Plan
        The run (:class:`fedtheory.runs.plan.Plan`).
    log : RunLog
        Where the rounds are recorded (:class:`fedtheory.runs.log.RunLog`).
    """

    def __init__(self, plan, log):
        self.plan, self.log = plan, log

    def run(self, bar=None):
        """Every round, until one stops the run.

        Parameters
        ----------
        bar : tqdm progress bar, optional
            Advanced by one per completed round.
        """
        for r in range(1, self.plan.rounds + 1):          # (a Python int: a NumPy uint8 255 + 1 wraps to 0)
            stop = self.round(r)
            if bar is not None and self.log.completed == r:
                bar.update(1)
            if stop:
                break

    def _context(self, r, K, t0, lrs):
        """Round r's (1-based) draws, and its round context: ``(drawn, clients, ctx)``."""
        plan = self.plan
        drawn, clients, weights, idx, noise, u = plan.draw(r, K)
        ctx = plan.context_cls(plan.problem if plan.oracles is None else plan.oracles, r - 1, clients, weights,
                               idx, noise, lrs, u, plan.rng_aux, plan.weight_decay, plan.clip_norm)
        ctx.t0 = t0
        ctx.batch_replacement = plan.batch_replacement
        if plan.trace is not None and plan.trace.wants(r - 1):
            ctx.want = plan.trace.paths
        return drawn, clients, ctx

    def _local_and_server(self, ctx):
        """The round's local work and server update; returns ``(messages dict, failure text or None)``
        and sets the log's state."""
        plan, log = self.plan, self.log
        alg, state = plan.alg, log.state
        if plan.rules is None:                     # torch, or an algorithm without compiled rules
            msgs = alg.local_round(state, ctx) if plan.backend != "python" else alg.local_round_reference(state, ctx)
            bad = _first_nonfinite(msgs, ctx)
            if bad is None:
                log.state = (alg.torch_server_update(state, ctx, msgs) if plan.backend == "torch"
                             else alg.server_update(state, ctx, msgs))
            return msgs, bad
        rd, st = ctx.round_record(), alg.state_tuple(state)
        msgs = alg.local_round_reference(state, ctx)          # python: the NumPy twin, then the same rule
        bad = _first_nonfinite(msgs, ctx)
        if bad is None:
            m = plan.rules.Messages(*(msgs[f] for f in plan.rules.Messages._fields))
            log.state = dict(plan.rules.server(plan.pk, rd, plan.hp, st, m)._asdict())
        return msgs, bad

    def round(self, r):
        """Run one round.

        Parameters
        ----------
        r : int
            The round, 1-based.

        Returns
        -------
        bool
            True when the run stops after it.
        """
        plan, log = self.plan, self.log
        K, t0, lrs = plan.round_steps(r)
        drawn, clients, ctx = self._context(r, K, t0, lrs)
        log.sampled.append(drawn)                   # as drawn: a replayable client_schedule entry
        tracing = plan.trace is not None and plan.trace.wants(r - 1)
        x_start = to_numpy(log.state["x"]).copy() if tracing else None
        Sr = ctx.S
        t_start = time.perf_counter()
        msgs = {}
        if Sr:
            x_before = np.array(to_numpy(log.state["x"]), dtype=np.float64)    # the last finite model
            msgs, bad = self._local_and_server(ctx)
            if bad is not None:
                log.diverged(r, bad)
                log.counters["time"] += time.perf_counter() - t_start
                if tracing:
                    plan.trace.add(r - 1, ctx, x_start, msgs, None)
                return True
        log.counters["time"] += time.perf_counter() - t_start
        state = log.state
        if tracing:
            plan.trace.add(r - 1, ctx, x_start, msgs, state)
        log.completed = r
        self._count(ctx, clients)
        if plan.record:
            log.iterates.append(np.array(to_numpy(state["x"]), dtype=np.float64))
        if not _all_finite(state["x"]):                          # NaN or inf anywhere
            log.last_finite_x = x_before if Sr else None
            log.diverged(r, "the global model became non-finite after aggregation")
            return True
        stop = plan.callback is not None and bool(plan.callback(r, to_numpy(state["x"])))
        if log.due(r) or r == plan.rounds or stop:
            if log.evaluate_and_check(r):
                return True
        if stop:
            log.status, log.message = "callback_stop", f"callback asked to stop after round {r}"
            return True
        return False

    def _count(self, ctx, clients):
        """Oracle calls, per-sample gradients and communication of the round."""
        plan, counters = self.plan, self.log.counters
        alg = plan.alg
        Sr, K, B = ctx.S, ctx.K, plan.B
        n_unique = np.unique(clients).size if plan.mode == "with_replacement" else Sr
        calls = plan.calls
        if plan.rules is not None:                 # the rules' cost hooks (python backend: as Python)
            rd = ctx.round_record()
            extra_calls, extra_rows = getattr(plan.rules, "extra_grads", _rk.no_extra_grads)(plan.pk, rd, plan.hp)
            down, up = getattr(plan.rules, "comm", _rk.comm_per_participant)(
                plan.pk, rd, plan.hp, alg.state_tuple(self.log.state), n_unique, alg.comm[0], alg.comm[1])
        else:
            extra_calls, extra_rows = alg.round_extra_grads(ctx)
            down, up = alg.round_comm(ctx, n_unique, self.log.state)
        counters["grad_evals"] += int(Sr * K * calls + extra_calls)
        sizes = plan.problem.client_sizes
        counters["sample_grads"] += int(calls * (Sr * K * B if B else int(sizes[clients].sum()) * K) + extra_rows)
        counters["comm_up"] += int(up)
        counters["comm_down"] += int(down)


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
