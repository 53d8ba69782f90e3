r"""Traces of a run: what happened inside each round, recorded by the registered algorithm itself.

``fedtheory.run(problem, name, ..., trace=True)`` returns ``result.trace``, a :class:`Trace`
with one :class:`RoundTrace` per round t = 0, 1, ... (the round that maps :math:`x^t` to
:math:`x^{t+1}`). Theorems about local iterates (virtual averages, drift, step sizes,
personalized models) are measured on these traces, so a verdict is about the code users run.

What a round records
--------------------
Always: ``x`` (the broadcast model :math:`x^t`), ``clients`` (S,), ``weights`` (S,), ``lrs``
(K,), ``idx`` (S, K, B) minibatch rows (B = 0: exact gradients) and ``noise`` (S, K, d) or
(0, 0, 0). Then every requested traceable the algorithm declares (``Algorithm.traceables``):

* ``"path"`` sequences, shape (S, K + 1, d): entry ``[s, k]`` is the iterate of client
  ``clients[s]`` after k local steps (k = 0: the start). Recorded by the Numba kernels, the
  NumPy twins and the torch context alike; steps after a divergence are NaN.
* ``"message"`` sequences: the round's message of that name (one row per participant).
* ``"state"`` sequences: the state entry of that name after the server update.

Memory
------
A path costs ``8 S (K + 1) d`` bytes per round, the minibatch rows ``8 S K B`` and the noise
``8 S K d``. The runner estimates the total before the run and refuses a trace larger than
``trace_max_mb`` (default 1024 MB), naming the estimate. ``trace_rounds`` (a collection of
round indices t) records only those rounds, e.g. ``trace_rounds=[0]`` for a theorem whose bound
depends on the first round only; ``rt.round`` tells which round a recorded entry is.

Examples
--------
>>> import fedtheory as ft, problems
>>> p = problems.quadratic(4, 3, seed=0)
>>> res = ft.run(p, "fedavg", rounds=3, local_steps=2, lr=0.1, trace=True)
>>> len(res.trace), res.trace[0]["local"].shape          # 3 rounds; S = 4, K + 1 = 3, d = 3
(3, (4, 3, 3))
>>> bool((res.trace[0]["local"][:, -1].mean(0) == res.trace[1].x).all())   # x^1 = mean of y_K
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .arrays import to_numpy
from .result import Deferred, _BuiltOnRead
from ..exceptions import InvalidParameterError
from .._argcheck import check_param, Interval

__all__ = ["Trace", "RoundTrace", "Stacked"]


def virtual_average(weights, paths):
    r"""The virtual average of local iterates, the one definition of the project:
    :math:`\bar x_k = \sum_s w_s y_{s,k} / \sum_s w_s` at every local step k.

    Parameters
    ----------
    weights : array_like (..., S)
        The participants' aggregation weights (any positive scale: they are normalised).
    paths : array_like (..., S, K, d)
        The participants' local iterates :math:`y_{s,k}` (leading axes, e.g. rounds, broadcast).

    Returns
    -------
    ndarray (..., K, d)
        The weighted averages.

    Examples
    --------
    >>> import numpy as np
    >>> Y = np.array([[[0.0], [1.0]], [[2.0], [5.0]]])          # 2 clients, 2 steps, d = 1
    >>> virtual_average([1.0, 3.0], Y)[:, 0].tolist()           # (1 y_1 + 3 y_2) / 4
    [1.5, 4.0]
    """
    w = np.asarray(weights, dtype=float)
    return np.einsum("...s,...skd->...kd", w / w.sum(axis=-1, keepdims=True), np.asarray(paths))


@dataclass
class RoundTrace:
    """What round t recorded (see the module docstring).

    Attributes
    ----------
    round : int
        t, 0-based: the round from x^t to x^{t+1}.
    x : ndarray (d,)
        Broadcast model x^t.
    clients, weights : ndarray (S,)
        The clients that ran the round (one per local run) and their aggregation weights: the
        draw ``res.sampled[t]``, except with replacement without replicated duplicates, where
        a client drawn m times runs once with weight m/S (``res.sampled.slots(t)``).
    lrs : ndarray (K,)
        Local step sizes of the round.
    idx : ndarray (S, K, B)
        Minibatch rows (absolute) of each client and step; B = 0 for exact gradients.
    noise : ndarray (S, K, d) or (0, 0, 0)
        Additive gradient noise drawn for each client and step.
    data : dict
        The traced sequences by name; ``rt[name]`` reads one.
    completed : bool
        False for a round that diverged in its local phase (no server update).
    """

    round: int
    x: np.ndarray
    clients: np.ndarray
    weights: np.ndarray
    lrs: np.ndarray
    idx: np.ndarray
    noise: np.ndarray
    data: dict = field(default_factory=dict)
    completed: bool = True

    def __getitem__(self, name):
        try:
            return self.data[name]
        except KeyError:
            raise KeyError(f"{name!r} was not traced in this run; traced: {sorted(self.data)}") from None

    @property
    def K(self):
        return int(self.lrs.shape[0])

    @property
    def S(self):
        return int(self.clients.shape[0])

    def virtual_average(self, name="local"):
        r"""Per-step weighted average :math:`\bar x_k = \sum_s w_s y_{s,k} / \sum_s w_s` of a path,
        shape (K + 1, d) (:func:`virtual_average`)."""
        return virtual_average(self.weights, self[name])


class Stacked(NamedTuple):
    """A traced sequence of every round with the round as first axis (:meth:`Trace.stacked`)."""

    clients: np.ndarray
    weights: np.ndarray
    values: np.ndarray


@dataclass
class Trace:
    """The rounds of a traced run (a sequence of :class:`RoundTrace`).

    Attributes
    ----------
    names : tuple of str
        The traced sequences.
    declared : dict
        The algorithm's declaration ``{name: (source, description)}`` of those names.
    rounds : list of RoundTrace
        Made when first read from what the compiled rounds wrote (their arrays, a block per call),
        which :meth:`stacked` and ``len`` read as they are.
    """

    names: tuple
    declared: dict
    rounds: list = _BuiltOnRead()

    def _blocks(self):
        """The recorded parts (:class:`RoundTrace` and :class:`_Block`) while :attr:`rounds` is not
        made yet, else None (a trace made by hand, or read since)."""
        held = self.__dict__.get("_rounds")
        return held.args[0] if isinstance(held, Deferred) else None

    def __len__(self):
        parts = self._blocks()
        return len(self.rounds) if parts is None else sum(len(p) if isinstance(p, _Block) else 1 for p in parts)

    def __getitem__(self, t):
        return self.rounds[t]

    def __iter__(self):
        return iter(self.rounds)

    def stack(self, name):
        """``np.stack`` of a sequence over the rounds (it must have the same shape in every round,
        e.g. under full participation)."""
        return np.stack([rt[name] for rt in self.rounds])

    def stacked(self, name):
        """A traced local path of every round at once, when every round has the same participants'
        count S and local steps K: its clients and weights (R, S) and ``values`` (R, S, K + 1, d),
        row r the r-th recorded round's (``self[r]``); None when S or K differ between rounds (or
        nothing was recorded). Read from the compiled rounds' arrays without making the rounds
        (read-only views of them where the rounds lie in one call), the same values as stacking
        ``self[r].clients``, ``self[r].weights`` and ``self[r][name]``.

        Parameters
        ----------
        name : str
            A traced path (``"path"`` in the algorithm's ``traceables``), e.g. ``"local"``.

        Returns
        -------
        Stacked or None

        Examples
        --------
        >>> import fedtheory as ft, problems
        >>> p = problems.quadratic(4, 3, seed=0)
        >>> tr = ft.run(p, "fedavg", rounds=3, local_steps=2, lr=0.1, trace="local").trace
        >>> st = tr.stacked("local")
        >>> st.values.shape, bool((st.values[1] == tr[1]["local"]).all())
        ((3, 4, 3, 3), True)
        """
        parts = self._blocks()
        if parts is None:
            parts = self.rounds
        if name not in self.names or self.declared[name][0] != "path":
            raise KeyError(f"{name!r} is not a traced path of this run; traced: {sorted(self.names)}")
        pieces = [p.stacked(name) if isinstance(p, _Block) else
                  Stacked(p.clients[None], p.weights[None], p[name][None]) for p in parts]
        if not pieces or any(q is None for q in pieces) or len({q.values.shape[1:] for q in pieces}) != 1:
            return None
        if len(pieces) == 1:
            return _read_only(pieces[0])
        return _read_only(np.concatenate(arrays) for arrays in zip(*pieces))

    @property
    def nbytes(self):
        """Bytes held by the recorded arrays."""
        tot = 0
        for rt in self.rounds:
            tot += sum(a.nbytes for a in (rt.x, rt.clients, rt.weights, rt.lrs, rt.idx, rt.noise))
            tot += sum(np.asarray(a).nbytes for a in rt.data.values())
        return tot

    def __repr__(self):
        return f"Trace({len(self)} rounds, names={list(self.names)}, {self.nbytes / 2 ** 20:.3g} MB)"


def _made(parts):
    """The RoundTraces of the recorded parts, in order."""
    out = []
    for p in parts:
        if isinstance(p, _Block):
            out.extend(p.rounds())
        else:
            out.append(p)
    return out


_NO_NOISE = np.zeros((0, 0, 0))


def _copy(a):
    return None if a is None else np.array(to_numpy(a), copy=True)


def _entry(record, name):
    """Entry ``name`` of a dict or of a named tuple, or None (no such entry, or no record)."""
    if record is None:
        return None
    if isinstance(record, dict):
        return record.get(name)
    return getattr(record, name, None)


class _TraceRecorder:
    """Collects the RoundTraces of one run (used by :func:`fedtheory.run`)."""

    def __init__(self, names, declared, wanted=None):
        self.names = tuple(names)
        self.declared = {k: declared[k] for k in self.names}
        self.paths = frozenset(k for k in self.names if declared[k][0] == "path")
        self.wanted = wanted
        self.parts = []                    # RoundTraces and _Blocks, in order

    def fresh(self):
        """An empty recorder of the same sequences and rounds (another run of the same plan)."""
        return type(self)(self.names, self.declared, self.wanted)

    def wants(self, t):
        """Whether round t (0-based) is traced."""
        return self.wanted is None or t in self.wanted

    def wanted_in(self, t0, t1):
        """Whether each round t0 .. t1 - 1 (0-based) is traced: a bool array (:meth:`wants` of each)."""
        if self.wanted is None:
            return np.ones(t1 - t0, dtype=np.bool_)
        out = np.zeros(t1 - t0, dtype=np.bool_)
        out[[t - t0 for t in self.wanted if t0 <= t < t1]] = True
        return out

    @classmethod
    def create(cls, trace, alg, problem, rounds, local_steps, clients_per_round, batch_size, max_mb,
               trace_rounds=None):
        """Validate ``trace`` against the algorithm's declaration and the memory bound; None when off."""
        if trace is None or trace is False:
            if trace_rounds is not None:
                raise InvalidParameterError("The 'trace_rounds' parameter of run applies to traced runs only and "
                                            f"must be None without 'trace'. Got {trace_rounds!r} instead.")
            return None
        declared = dict(type(alg).traceables)
        if trace is True:
            names = sorted(declared)
        elif isinstance(trace, str):
            names = [trace]
        else:
            try:
                names = list(trace)
            except TypeError:
                raise InvalidParameterError(f"The 'trace' parameter of run must be None, a bool, a name or a "
                                            f"sequence of names. Got {trace!r} instead.") from None
        if not declared:
            raise InvalidParameterError(f"The 'trace' parameter of run must be None for {alg.name!r}: the "
                                        f"algorithm declares no traceable sequence. Got {trace!r} instead.")
        unknown = [k for k in names if not isinstance(k, str) or k not in declared]
        if unknown or not names:
            raise InvalidParameterError(f"The 'trace' parameter of run must name sequences that {alg.name!r} "
                                        f"declares: {sorted(declared)} (or be True for all). Got {trace!r} "
                                        f"instead.")
        check_param("trace_max_mb", max_mb, [Interval(float, 0, None, "neither")], "run")
        wanted = None
        if trace_rounds is not None:
            try:
                wanted = frozenset(int(t) for t in trace_rounds)
            except (TypeError, ValueError):
                wanted = None
            if wanted is None or any(not 0 <= t < max(rounds, 1) for t in wanted) or \
                    any(isinstance(t, bool) or int(t) != t for t in trace_rounds):
                raise InvalidParameterError(f"The 'trace_rounds' parameter of run must be None or a collection of "
                                            f"round indices in the range [0, {rounds}). Got {trace_rounds!r} "
                                            "instead.")
        n, d = problem.n_clients, problem.dim
        S = n if clients_per_round is None else clients_per_round
        K, B = local_steps, batch_size or 0
        per_round = 8 * (d + 3 * S + K + S * K * B + (S * K * d if problem.noise > 0 else 0))
        for k in names:
            src = declared[k][0]
            per_round += 8 * (S * (K + 1) * d if src == "path" else (n * d if src == "state" else S * max(d, K)))
        est = per_round * (rounds if wanted is None else len(wanted)) / 2 ** 20
        if est > max_mb:
            raise InvalidParameterError(
                f"The trace of this run would take about {est:.4g} MB, more than trace_max_mb={max_mb!r}: "
                f"trace fewer names (of {sorted(declared)}) or rounds ('trace_rounds'), or raise "
                "'trace_max_mb'.")
        return cls(names, declared, wanted)

    def add(self, t, ctx, x_start, msgs, state):
        """Record round t from a round context (the per-round path; ``state`` None: the round
        diverged before the server update)."""
        self.record(t, x_start, ctx.clients, ctx.weights, ctx.lrs, ctx.idx, ctx.noise,
                    ctx.traced if ctx.S else None, msgs, state)

    @property
    def paths_only(self):
        """Whether every traced sequence is a local path (no message or state entry)."""
        return len(self.paths) == len(self.names)

    def record(self, t, x_start, clients, weights, lrs, idx, noise, paths, msgs, state, completed=None):
        """Record round t: ``paths`` maps a traced path's name to its (S, K + 1, d) buffer (None
        without participants); ``msgs`` and ``state`` (None: the round diverged before the server
        update) are dicts or the compiled rules' named tuples; ``completed`` (default: ``state`` is
        not None) False for a round that diverged in its local phase."""
        data = {}
        for k in self.names:
            src = self.declared[k][0]
            if src == "path":
                buf = None if paths is None else paths.get(k)
                if buf is None:
                    if len(clients):
                        raise RuntimeError(f"{k!r} is declared as a traceable path but the round's local "
                                           "update did not record it (a bug in the algorithm).")
                    buf = np.zeros((0, len(lrs) + 1, x_start.shape[0]))
                data[k] = buf
            elif src == "message":
                if msgs is not None and k in (msgs if isinstance(msgs, dict) else msgs._fields):
                    data[k] = _copy(_entry(msgs, k))
            elif state is not None:
                data[k] = _copy(_entry(state, k))
        self.parts.append(RoundTrace(t, x_start, np.array(clients), np.array(to_numpy(weights)),
                                      np.array(lrs), np.array(idx), np.array(noise), data,
                                      state is not None if completed is None else completed))

    def record_block(self, t0, traced, x_start, clients, weights, cptr, lrs, Ks, idx, iptr, B, noise, nptr, paths,
                     off, failed, views=False):
        """Record the traced rounds of one compiled call from the arrays it wrote and drew
        (``fedtheory.runs.fused``; a trace of local paths only): round t0 + j for every j with
        ``traced[j]``, kept as one :class:`_Block` whose RoundTraces are made when the trace's rounds
        are first read. Its paths and models are the call's buffers (which hold the traced rounds
        only); its draws are the call's arrays with ``views`` (every round drawn is traced: the call
        is over and nothing writes them again), else copies of the traced rounds' (the others' draws
        are not kept: the trace's memory bound does not count them).

        Parameters
        ----------
        t0 : int
            The call's first round, 0-based.
        traced : ndarray of bool
            Which of the call's rounds are recorded (those it ran).
        x_start : ndarray (traced rounds, d)
            Row k: the model before the k-th traced round.
        clients, weights, cptr : ndarray
            The participants and their weights, round j's at ``cptr[j]:cptr[j + 1]``.
        lrs : ndarray (rounds, K)
            Row j: round j's local step sizes (its first ``Ks[j]``).
        Ks : ndarray of int
            The local steps of each round.
        idx, iptr, B : ndarray, ndarray, int
            The minibatch rows, round j's at ``iptr[j]:iptr[j + 1]``, B per step (0: exact).
        noise, nptr : ndarray or None, ndarray
            The gradient noise, round j's at ``nptr[j]:nptr[j + 1]`` (None: no noise).
        paths : dict
            Each traced path's flat buffer, round j's at ``off[j]:off[j + 1]``.
        off : ndarray of int
            The offsets of the paths.
        failed : int or None
            The index j of a round that diverged in its local phase (the call's last), else None.
        views : bool, default False
            Whether the rounds' draws are views of the call's arrays (else copies).
        """
        m = traced.shape[0]
        sel = np.arange(m) if views else np.flatnonzero(traced)
        if sel.shape[0] == 0:
            return
        if not views:                        # the traced rounds' draws only, copied
            (clients, weights), cptr = _gather((clients, weights), cptr, sel)
            (idx,), iptr = _gather((idx,), iptr, sel)
            if noise is not None:
                (noise,), nptr = _gather((noise,), nptr, sel)
            lrs, Ks = lrs[sel], Ks[sel]
            off = off[np.append(sel, sel[-1] + 1)]       # (a round not traced has no paths: size 0)
        else:                                # the drawn entries (the call's arrays have room beyond them)
            clients, weights, idx = clients[:cptr[m]], weights[:cptr[m]], idx[:iptr[m]]
            noise = None if noise is None else noise[:nptr[m]]
        failed = None if failed is None or not traced[failed] else int(np.searchsorted(sel, failed))
        self.parts.append(_Block(t0 + sel, x_start, clients, weights, cptr, lrs, Ks, idx, iptr, B, noise, nptr,
                                 {k: paths[k] for k in self.names}, off, failed))

    def result(self):
        return Trace(self.names, self.declared, Deferred(_made, self.parts))


def _gather(arrays, ptr, sel):
    """Rounds ``sel`` of flat arrays whose round j lies at ``ptr[j]:ptr[j + 1]`` (copies), and their offsets."""
    lengths = ptr[sel + 1] - ptr[sel]
    new = np.zeros(sel.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=new[1:])
    at = np.repeat(ptr[sel] - new[:-1], lengths) + np.arange(new[-1])
    return tuple(a[at] for a in arrays), new


class _Block:
    """The traced rounds of one compiled call (:meth:`_TraceRecorder.record_block`), row r round
    ``t[r]``: its model ``x[r]``, its draws at ``cptr``, ``iptr``, ``nptr`` of the flat arrays, its
    paths at ``off``; ``failed`` the row of a round that diverged in its local phase, or None."""

    def __init__(self, t, x, clients, weights, cptr, lrs, Ks, idx, iptr, B, noise, nptr, paths, off, failed):
        self.t, self.x, self.clients, self.weights, self.cptr = t, x, clients, weights, cptr
        self.lrs, self.Ks, self.idx, self.iptr, self.B = lrs, Ks, idx, iptr, B
        self.noise, self.nptr, self.paths, self.off, self.failed = noise, nptr, paths, off, failed

    def __len__(self):
        return self.t.shape[0]

    def rounds(self):
        """Its RoundTraces (views of its arrays)."""
        cp, ks, ip, np_, of = self.cptr.tolist(), self.Ks.tolist(), self.iptr.tolist(), self.nptr.tolist(), \
            self.off.tolist()
        d, B, out = self.x.shape[1], self.B, []
        for j, t in enumerate(self.t.tolist()):
            a, b, K = cp[j], cp[j + 1], ks[j]
            S = b - a
            data = {k: (v[of[j]:of[j + 1]].reshape(S, K + 1, d) if S else np.zeros((0, K + 1, d)))
                    for k, v in self.paths.items()}
            noise = _NO_NOISE if self.noise is None else self.noise[np_[j]:np_[j + 1]].reshape(S, K, d)
            out.append(RoundTrace(t, self.x[j], self.clients[a:b], self.weights[a:b], self.lrs[j, :K],
                                  self.idx[ip[j]:ip[j + 1]].reshape(S, K, B), noise, data, j != self.failed))
        return out

    def stacked(self, name):
        """Path ``name`` of its rounds as :class:`Stacked` (views), or None when S or K differ."""
        R, d = len(self), self.x.shape[1]
        S, K = int(self.cptr[1] - self.cptr[0]), int(self.Ks[0])
        if (np.diff(self.cptr) != S).any() or (self.Ks != K).any():
            return None
        values = self.paths[name][self.off[0]:self.off[R]].reshape(R, S, K + 1, d) if S else np.zeros((R, 0, K + 1, d))
        return Stacked(self.clients[self.cptr[0]:self.cptr[R]].reshape(R, S),
                       self.weights[self.cptr[0]:self.cptr[R]].reshape(R, S), values)


def _read_only(arrays):
    """Views of ``arrays`` that cannot be written (the trace's own arrays stay as they are)."""
    out = []
    for a in arrays:
        v = a.view()
        v.flags.writeable = False
        out.append(v)
    return Stacked(*out)
