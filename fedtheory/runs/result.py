"""The outcome of a run: :class:`RunResult`, what :func:`fedtheory.run` returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:                   # (the annotation only: pandas loads with the runner)
    import pandas as pd


class Deferred:
    """A value computed by ``build(*args)`` when called; a field of :class:`_BuiltOnRead` calls it
    once, on the field's first read.

    Parameters
    ----------
    build : callable
        Computes the value.
    *args
        Its arguments.
    """

    def __init__(self, build, *args):
        self.build, self.args = build, args

    def __call__(self):
        return self.build(*self.args)


class _BuiltOnRead:
    """A dataclass field given either its value or a :class:`Deferred` that computes it on the first
    read (a data descriptor: dataclasses call its ``__set__`` in ``__init__``). The history table
    is one: building a pandas frame cost a third of a short run, and most runs a theorem check makes
    never read it."""

    def __set_name__(self, owner, name):
        self.name, self.slot = name, "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:                  # the class attribute: dataclasses read it as the field's default
            raise AttributeError(self.name)
        held = obj.__dict__
        if self.slot not in held:
            if self.name in held:        # a result pickled before the field was built on read
                return held[self.name]
            raise AttributeError(self.name)
        value = held[self.slot]
        if isinstance(value, Deferred):
            value = held[self.slot] = value()
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = value


@dataclass
class RunResult:
    """Outcome of :func:`fedtheory.run` (an ``OptimizeResult``-like record).

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
        One row per evaluated round (see :func:`fedtheory.run`).
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
    history: pd.DataFrame = _BuiltOnRead()
    iterates: np.ndarray | None
    state: dict = field(repr=False)
    sampled: object = field(default=None, repr=False)
    algorithm: object = None
    seed: int = 0
    backend: str = "numba"
    time: float = 0.0
    trace: object = field(default=None, repr=False)
    finished: bool = False

    def column(self, name):
        """One column of :attr:`history` as a NumPy array, read without building the pandas table when
        it was not read yet (the values and dtype of ``history[name].to_numpy()``).

        Parameters
        ----------
        name : str
            A column of the history ("round", "value", "grad_mapping_sq", an algorithm's own, ...).

        Returns
        -------
        ndarray
            One entry per evaluated round.

        Examples
        --------
        >>> import fedtheory as ft, problems
        >>> res = ft.run(problems.quadratic(4, 3, seed=0), "fedavg", rounds=4, lr=0.1, eval_every=2)
        >>> res.column("round").tolist()
        [0, 2, 4]
        """
        held = self.__dict__.get("_history")
        if isinstance(held, Deferred) and hasattr(held, "column"):
            col = held.column(name)
            if col is not None:
                return col
        return self.history[name].to_numpy()

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
