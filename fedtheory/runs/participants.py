"""Compact record of the participants of every round (``RunResult.sampled``).

Also the explicit participation of ``fedtheory.run(client_schedule=...)``: :func:`check_schedule`
validates it (the runner's compiled draw then reads each round's entry in place of a draw).

A long run keeps one small integer array, not one array per round: a full-participation round is
a marker (no storage), a sampled round appends its client indices (int32) to one growing buffer.
1e5 rounds with 1000 clients take about 1.5 MB under full participation and 6 MB with 10
clients per round (offsets with growth slack, plus the indices), against about 1.2 GB as a list
of arrays.

Examples
--------
>>> import numpy as np
>>> P = Participants(n_clients=4)
>>> P.append(np.arange(4)); P.append(np.array([2, 0]))
>>> len(P), P[0].tolist(), P[1].tolist(), [len(c) for c in P]
(2, [0, 1, 2, 3], [2, 0], [4, 2])
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

import numpy as np

from ..exceptions import InvalidParameterError


class Participants(Sequence):
    """The participants of each round as drawn, a read-only sequence of int64 arrays.

    Entry t is round t's draw in the order the sampler drew it: ``arange(n)`` under full
    participation, the S distinct clients of uniform sampling, the participants of Bernoulli
    participation, and the S draws of sampling with replacement *with their duplicates* (a
    client drawn twice appears twice), whether or not the algorithm replicates duplicates.
    That is exactly what ``run(client_schedule=...)`` takes to replay the round.

    With replacement and ``merge_duplicates`` (an algorithm without replicated duplicates), a
    client drawn m times ran once with weight m/S: :meth:`slots` gives those clients, one per
    local run, as the round context and a trace's ``RoundTrace.clients`` hold them.

    Parameters
    ----------
    n_clients : int
        n; indices lie in [0, n).
    merge_duplicates : bool, default False
        Whether the run merged duplicate draws into one local run (with-replacement sampling
        without replicated duplicates); only :meth:`slots` reads it.
    """

    def __init__(self, n_clients, merge_duplicates=False):
        self.n = int(n_clients)
        self.merge_duplicates = bool(merge_duplicates)
        self._idx = np.empty(64, dtype=np.int32 if self.n < 2 ** 31 else np.int64)
        self._size = 0
        self._start = np.empty(64, dtype=np.int64)     # start in _idx, or -1 for "every client"
        self._len = np.empty(64, dtype=np.int32)
        self._rounds = 0

    def append(self, clients):
        """Record one round's participants."""
        c = np.asarray(clients)
        if self._rounds == self._start.shape[0]:
            self._start = np.resize(self._start, 2 * self._rounds)
            self._len = np.resize(self._len, 2 * self._rounds)
        k = c.shape[0]
        if k == self.n and k and c[0] == 0 and c[-1] == self.n - 1 and (k <= 2 or (np.diff(c) == 1).all()):
            self._start[self._rounds] = -1
        else:
            if self._size + k > self._idx.shape[0]:
                self._idx = np.resize(self._idx, max(2 * self._idx.shape[0], self._size + k))
            self._idx[self._size:self._size + k] = c
            self._start[self._rounds] = self._size
            self._size += k
        self._len[self._rounds] = k
        self._rounds += 1

    def extend(self, flat, lens, every=False):
        """Record many rounds at once: round j's participants are the next ``lens[j]`` entries of
        ``flat`` (what :meth:`append` records, round by round, without a Python loop). ``every``:
        the caller knows each round is every client in order (full participation), which is then
        recorded without reading ``flat``."""
        flat, lens = np.asarray(flat), np.asarray(lens, dtype=np.int64)
        m = lens.shape[0]
        if every and self.n:
            need = self._rounds + m
            if need > self._start.shape[0]:
                self._start = np.resize(self._start, max(2 * self._start.shape[0], need))
                self._len = np.resize(self._len, max(2 * self._len.shape[0], need))
            self._start[self._rounds:need] = -1
            self._len[self._rounds:need] = self.n
            self._rounds = need
            return
        if m <= 1:                          # one round: append is cheaper than the vectorised path
            if m:
                self.append(flat[:lens[0]])
            return
        starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
        full = np.zeros(m, dtype=bool)
        cand = np.flatnonzero(lens == self.n) if self.n else np.zeros(0, dtype=np.int64)
        if cand.size:
            ar = np.arange(self.n)
            full[cand] = (flat[starts[cand][:, None] + ar] == ar).all(axis=1)
        keep_lens = np.where(full, 0, lens)
        sel = flat[np.repeat(~full, lens)]
        need = self._rounds + m
        if need > self._start.shape[0]:
            self._start = np.resize(self._start, max(2 * self._start.shape[0], need))
            self._len = np.resize(self._len, max(2 * self._len.shape[0], need))
        if self._size + sel.shape[0] > self._idx.shape[0]:
            self._idx = np.resize(self._idx, max(2 * self._idx.shape[0], self._size + sel.shape[0]))
        self._idx[self._size:self._size + sel.shape[0]] = sel
        new_starts = self._size + np.concatenate(([0], np.cumsum(keep_lens)[:-1]))
        self._start[self._rounds:need] = np.where(full, -1, new_starts)
        self._len[self._rounds:need] = lens
        self._size += sel.shape[0]
        self._rounds = need

    def __len__(self):
        return self._rounds

    def __getitem__(self, t):
        if isinstance(t, slice):
            return [self[i] for i in range(*t.indices(self._rounds))]
        if t < 0:
            t += self._rounds
        if not 0 <= t < self._rounds:
            raise IndexError(f"round index {t} out of range for {self._rounds} rounds")
        s = self._start[t]
        if s < 0:
            return np.arange(self.n, dtype=np.int64)
        return self._idx[s:s + self._len[t]].astype(np.int64)

    def slots(self, t):
        """The clients that ran round t's local phase, one per local run: ``self[t]`` with
        duplicate draws merged (sorted distinct clients) when the run merges them, else ``self[t]``.
        Their number is the round's S_t in the oracle-call and communication counters."""
        c = self[t]
        return np.unique(c) if self.merge_duplicates else c

    @property
    def nbytes(self):
        return self._idx.nbytes + self._start.nbytes + self._len.nbytes

    def counts(self):
        """Draws of each client over the run, shape (n,): the participations, a client drawn m
        times in a round counting m times (as in ``self[t]``)."""
        out = np.zeros(self.n, dtype=np.int64)
        full = int(np.sum(self._start[:self._rounds] < 0))
        out += full
        out += np.bincount(self._idx[:self._size], minlength=self.n)
        return out

    def __repr__(self):
        return f"Participants({self._rounds} rounds, {self.n} clients, {self.nbytes / 2 ** 20:.3g} MB)"


def check_schedule(schedule, alg, n, rounds, mode, clients_per_round):
    """A ``client_schedule`` as a list of ``rounds`` int64 arrays, validated for the sampling mode.

    Parameters
    ----------
    schedule : sequence of array_like
        ``run``'s ``client_schedule``: the participants of each round, in round order.
    alg : Algorithm
        The run's algorithm (one defined for full participation only refuses a partial round).
    n : int
        Number of clients.
    rounds : int
        Number of rounds; the schedule has one entry each.
    mode : str
        The run's sampling mode (with replacement, an entry may repeat a client).
    clients_per_round : int or None
        The run's S: under uniform sampling or sampling with replacement each entry has S clients.

    Returns
    -------
    list of ndarray
        One int64 array of client indices per round (sorted for an algorithm defined for full
        participation only).

    Raises
    ------
    InvalidParameterError
        Naming the first entry that is not a valid round of participants.
    """
    what = "The 'client_schedule' parameter of run"
    if isinstance(schedule, (Mapping, Set)):
        raise InvalidParameterError(f"{what} must be a sequence of client-index arrays, one per round in round "
                                    f"order (e.g. a list), not a {type(schedule).__name__}: iterating it would "
                                    "read its keys or an arbitrary order as the rounds. For a dict of rounds "
                                    "pass [d[t] for t in range(rounds)]. Got "
                                    f"{type(schedule).__name__} instead.")
    if isinstance(schedule, (str, bytes)) or not hasattr(schedule, "__len__"):
        raise InvalidParameterError(f"{what} must be a sequence of client-index arrays, one per round. "
                                    f"Got {type(schedule).__name__} instead.")
    if len(schedule) != rounds:
        raise InvalidParameterError(f"{what} must have exactly one entry per round, i.e. rounds={rounds} entries. "
                                    f"Got {len(schedule)} entries instead.")
    out = []
    for t, entry in enumerate(schedule):
        try:
            a = np.asarray(entry)
        except (ValueError, TypeError):              # ragged: numpy's "inhomogeneous shape" error
            try:
                shapes = ", ".join(str(np.shape(x)) for x in entry)
            except (ValueError, TypeError):
                shapes = "?"
            raise InvalidParameterError(f"{what} must hold 1-d integer arrays of client indices. Got entry {t} "
                                        f"= {entry!r}, a ragged sequence whose items have the shapes "
                                        f"{shapes}, instead.") from None
        if a.size == 0:
            a = a.astype(np.int64).reshape(0)
        if a.ndim != 1 or not (np.issubdtype(a.dtype, np.integer)):
            raise InvalidParameterError(f"{what} must hold 1-d integer arrays of client indices. Got entry {t} "
                                        f"with dtype {a.dtype} and shape {a.shape} instead.")
        a = a.astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= n):
            raise InvalidParameterError(f"{what} must hold client indices in the range [0, {n - 1}]. Got "
                                        f"entry {t} = {a.tolist()} instead.")
        if mode != "with_replacement" and np.unique(a).size != a.size:
            raise InvalidParameterError(f"{what} must list distinct clients in each round (sampling mode "
                                        f"{mode!r}). Got entry {t} = {a.tolist()} instead.")
        if mode in ("uniform", "with_replacement") and a.size != clients_per_round:
            if mode == "with_replacement":
                cause = ("each entry lists the round's draws with their duplicates (a client drawn twice "
                         "appears twice, as res.sampled records them); a shorter entry is likely the "
                         "distinct participants of a draw, or the schedule comes from a run with another "
                         "clients_per_round")
            else:
                cause = ("the schedule likely comes from a run with another clients_per_round or with "
                         "Bernoulli participation; with clients_per_round=None (and no sampling) entries of "
                         "any length are weighted w_i / sum_{j in S_t} w_j")
            raise InvalidParameterError(f"{what} must list clients_per_round={clients_per_round} clients in each "
                                        f"round (sampling mode {mode!r}): {cause}. Got entry {t} with {a.size} "
                                        f"clients ({a.tolist()}) instead.")
        if alg.full_participation_only:
            if np.unique(a).size != n:
                raise InvalidParameterError(f"{alg.name!r} is defined for full participation only, so every entry "
                                            f"of the 'client_schedule' parameter of run must list all {n} clients. "
                                            f"Got entry {t} = {a.tolist()} instead.")
            # every client, in client order: the rules of such a method may keep per-client arrays in
            # client order (FedPD's anchors, NFSGD's mixing matrix), and the order carries no meaning
            a = np.sort(a)
        out.append(a)
    return out
