"""A run's log: what the rounds did, as every executor records it.

:class:`RunLog` keeps the state, the counters, the participants, the iterates, the evaluated
history rows and the status of one run; it evaluates a round (:meth:`RunLog.evaluate`), decides
whether the run stops there, and assembles the :class:`~fedtheory.runs.result.RunResult`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..exceptions import InvalidParameterError
from ..registry import reserved_column
from .arrays import HostView, to_numpy
from .metrics import reference_metrics
from .participants import Participants
from .plan import EVAL_BUDGET
from .result import Deferred, RunResult

_CORE_METRICS = ("value", "grad_mapping_sq", "suboptimality", "dist_sq")
#: A run has diverged when F(x) exceeds F(x^0) by more than this many times max(|F(x^0)|, 1), even
#: while it is finite (an objective grown by tens of orders of magnitude only measures the overflow).
DIVERGENCE_GROWTH = 1e20
COUNTERS = ("grad_evals", "sample_grads", "comm_up", "comm_down")
_COUNTER_KEYS = ("round",) + COUNTERS


class RunLog:
    """The record of one run: state, counters, participants, iterates, history rows and status.

    Parameters
    ----------
    plan : Plan
        The run's :class:`fedtheory.runs.plan.Plan` (its initial state, its evaluation settings).
    """

    def __init__(self, plan):
        self.plan = plan
        self.state = plan.initial_state
        self.eval_spent = 0.0                    # cost of the evaluations so far (auto schedule)
        self.rows = []
        self.sampled = Participants(plan.problem.n_clients, merge_duplicates=plan.mode == "with_replacement"
                                    and not bool(getattr(plan.alg, "replicate_duplicates", False)))
        self.iterates = [np.array(plan.x0, dtype=np.float64)] if plan.record else None
        self.counters = dict(grad_evals=0, sample_grads=0, comm_up=0, comm_down=0, time=0.0)
        self.status, self.message = "max_rounds", f"completed {plan.rounds} rounds"
        self.completed = 0
        self.last_evaluated = 0
        self.last_finite_x = None
        self.grown_at = None                    # the round at which F was found grown past DIVERGENCE_GROWTH
        self._checked_names = None              # the history's and the algorithm's column names, once checked

    def diverged(self, r, why):
        """Stop the run as diverged.

        Parameters
        ----------
        r : int
            The round, 1-based.
        why : str
            What diverged (the message names the round).
        """
        self.status, self.message = "diverged", f"round {r}: {why}"

    def due(self, r):
        """Whether a round is evaluated: every ``eval_every`` rounds, or by the cost-based budget.

        Parameters
        ----------
        r : int
            The round, 1-based.

        Returns
        -------
        bool
            True when it is due.
        """
        if self.plan.eval_every is not None:
            return r % self.plan.eval_every == 0
        return self.eval_spent + self.plan.eval_unit <= EVAL_BUDGET * self.counters["sample_grads"]

    def evaluate_and_check(self, r):
        """Evaluate a round and decide whether the run stops there.

        Parameters
        ----------
        r : int
            The round (0: the start).

        Returns
        -------
        bool
            True when the run stops (non-finite metrics, or ``tol`` met).
        """
        return self._decide(r, *self.evaluate(r))

    def compiled_row_and_check(self, values, time):
        """Record a row the compiled rounds evaluated (``evaluate_compiled`` of
        :mod:`fedtheory._kernels.drivers`) and decide whether the run stops there, as
        :meth:`evaluate_and_check` decides for a row evaluated here.

        Parameters
        ----------
        values : ndarray
            The row: round, grad_evals, sample_grads, comm_up, comm_down, F(x), the squared
            gradient mapping, then the algorithm's compiled extras (``plan.extras_names``).
        time : float
            The run's time counter when the compiled call began (the rows a call evaluates carry
            it, as those the Python evaluation computes from inside the call).

        Returns
        -------
        bool
            True when the run stops there.
        """
        r = int(values[0])
        row = {"round": r, "grad_evals": int(values[1]), "sample_grads": int(values[2]), "comm_up": int(values[3]),
               "comm_down": int(values[4]), "time": time, "value": float(values[5]),
               "grad_mapping_sq": float(values[6])}
        names = self.plan.extras_names
        return self._decide(r, *self._record(row, r, lambda: dict(zip(names, values[7:7 + len(names)].tolist()))))

    def compiled_rows(self, values, time, stopped):
        """Record the rows one compiled call evaluated, in order; the last stopped the run when
        ``stopped``. The first row and a stopping one go through :meth:`compiled_row_and_check`
        (which raises when it decides otherwise than the compiled rounds); the rows between, which
        the compiled rounds found stop nothing, are added as they are (most of a run evaluated every
        round).

        Parameters
        ----------
        values : ndarray of shape (rows, 7 + len(plan.extras_names))
            The rows (:meth:`compiled_row_and_check`).
        time : float
            The run's time counter when the call began.
        stopped : bool
            Whether the call stopped the run at its last row.

        Returns
        -------
        bool
            Whether the log stopped the run at the last row (the same as ``stopped``: else an error).
        """
        n = values.shape[0]
        quiet = n - 1 if stopped else n                # the rows that did not stop the run
        if quiet > 0 and self.compiled_row_and_check(values[0], time):
            raise RuntimeError("fedtheory: the compiled evaluation and the run's log disagree on round "
                               f"{int(values[0, 0])} (please report this)")
        if quiet > 1:
            self.rows.append(RowBlock(values[1:quiet], time, tuple(self.plan.extras_names)))
            self.last_evaluated = int(values[quiet - 1, 0])
        if stopped and not self.compiled_row_and_check(values[n - 1], time):
            raise RuntimeError("fedtheory: the compiled evaluation stopped the run at round "
                               f"{int(values[n - 1, 0])} and the run's log would not (please report this)")
        return stopped

    def _decide(self, r, row, bad):
        self.last_evaluated = r
        if bad is not None:
            self.diverged(r, bad)
            return True
        tol = self.plan.tol
        if tol is not None and row["grad_mapping_sq"] <= tol:
            self.status = "converged"
            self.message = f"round {r}: squared gradient mapping norm <= tol={tol}"
            return True
        return False

    def evaluate(self, r):
        """One history row: counters, F(x), the gradient mapping and the extras.

        Parameters
        ----------
        r : int
            The round (0: the start).

        Returns
        -------
        tuple
            ``(row, problem)``: a row whose core metric (F, the gradient mapping, suboptimality,
            distance) is not finite is not added to the history (the history keeps the last finite
            metrics) and ``problem`` says which metric; a finite F grown past
            :data:`DIVERGENCE_GROWTH` times its start is added, and ``problem`` says so (the run has
            diverged); else None.
        """
        plan, state = self.plan, self.state
        problem, alg = plan.problem, plan.alg
        if r > 0:
            self.eval_spent += plan.eval_unit
        x = to_numpy(state["x"])
        if plan.compiled_eval:                                      # the compiled rounds' evaluation
            F, gm = plan.compiled_metrics(x)
        elif hasattr(problem, "value_and_gradient_mapping_sq"):    # one pass over the data
            F, gm = problem.value_and_gradient_mapping_sq(x, plan.L_eval)
        else:                                                       # a torch DeepProblem
            F, gm = problem.value(x), problem.gradient_mapping_sq(x, plan.L_eval)
        row = {"round": r, **self.counters, "value": F, "grad_mapping_sq": gm}
        if plan.reference is not None and math.isfinite(F):
            row.update(reference_metrics(plan.reference, F, x, where=f"run, round {r}"))

        def own():
            if plan.deep:
                row.update(problem.eval_extras(x))
            if plan.compiled_eval:                  # the rule the compiled rows run, as plain Python
                if not plan.extras_names:
                    return {}
                values = plan.rules.extras(plan.pk, plan.hp, alg.state_tuple(state))
                return dict(zip(plan.extras_names, np.asarray(values, dtype=np.float64).tolist()))
            out = dict(alg.scalar_values(state)) if alg.scalars else {}   # the algorithm's logged scalars
            out.update(alg.history_extras(state if plan.oracles is None else HostView(state), problem))
            return out
        return self._record(row, r, own)

    def _record(self, row, r, own):
        """Check a row's metrics, add the algorithm's columns (``own()``) and keep it: ``(row, problem)``
        as :meth:`evaluate` returns them."""
        plan = self.plan
        # a DeepProblem may skip the full gradient (eval_grad=False: NaN by design): F decides there;
        # against an uncertified reference suboptimality and dist_sq are NaN by design
        for key in ("value",) if plan.deep else _CORE_METRICS:
            if key in ("suboptimality", "dist_sq") and row.get("reference_certified") is False:
                continue
            if key in row and not math.isfinite(row[key]):
                what = "F(x)" if key == "value" else key
                return row, f"{what} is not finite ({row[key]})"
        grown = self._grown(row["value"]) if r > 0 else None
        mine = own()
        if mine:
            names = (tuple(row), tuple(mine))
            if names != self._checked_names:            # (the same names every evaluation: checked once)
                taken = [k for k in mine if k in row or reserved_column(k)]
                if taken:
                    raise InvalidParameterError(
                        f"The algorithm {plan.alg.name!r} logs {taken} under the name of a column of the run's "
                        "history or of the results store, which it would replace; rename them in its scalars or "
                        "history_extras.")
                self._checked_names = names
            row.update(mine)
        self.rows.append(row)
        if grown is not None:
            self.grown_at = r
        return row, grown

    def start_value(self):
        """F(x^0) from round 0's row, or NaN when the history has no finite round 0 (no growth is
        measured then)."""
        start = self.rows[0]["value"] if self.rows and self.rows[0]["round"] == 0 else math.nan
        return start if math.isfinite(start) else math.nan

    def _grown(self, F):
        """Why F has grown past :data:`DIVERGENCE_GROWTH` times its start (round 0), or None."""
        start = self.start_value()
        if math.isnan(start):
            return None
        if F - start > DIVERGENCE_GROWTH * max(abs(start), 1.0):
            return (f"F(x) = {F:.3g} has grown past {DIVERGENCE_GROWTH:.0e} times its start F(x^0) = {start:.3g} "
                    f"(max(|F(x^0)|, 1) scales it)")
        return None

    def _seed_free(self):
        """Whether the run is that of every seed: it drew no participant, minibatch row or noise, its
        algorithm's class says in its own body that it does not read the round's coin
        (``Algorithm.round_coin``: a subclass may read it where its parent did not) and it drew nothing else from
        the auxiliary stream (which then holds exactly one coin per drawn round)."""
        plan = self.plan
        drawn = [g.bit_generator.state for g in (plan.rng_clients, plan.rng_data)] != plan.rng_start
        if drawn or vars(type(plan.alg)).get("round_coin", True):
            return False
        coins = np.random.default_rng(plan.aux_seq)
        coins.random(len(self.sampled))
        return coins.bit_generator.state == plan.rng_aux.bit_generator.state

    def result(self):
        """The result of the run as it stands.

        Returns
        -------
        RunResult
            Model, status, counters, history, iterates, state, participants and trace.
        """
        plan = self.plan
        plan.alg.run_ended(self.state, plan.problem)
        c = self.counters
        x = self.last_finite_x if self.last_finite_x is not None else to_numpy(self.state["x"])
        res = RunResult(x=np.array(x, dtype=np.float64), status=self.status,
                        message=self.message, rounds=self.completed, grad_evals=c["grad_evals"],
                        sample_grads=c["sample_grads"], comm_up=c["comm_up"], comm_down=c["comm_down"],
                        history=history_of(self.rows),
                        iterates=np.array(self.iterates) if plan.record else None, state=self.state,
                        sampled=self.sampled, algorithm=plan.alg, seed=plan.seed, backend=plan.backend,
                        time=c["time"], trace=None if plan.trace is None else plan.trace.result(),
                        finished=bool(self.completed == plan.rounds and np.isfinite(x).all()
                                      and (self.status == "max_rounds" or self.grown_at == plan.rounds)))
        # no draw from the seed's streams (full participation, exact gradients, no noise, no coin): every
        # seed gives this run (fedtheory.theory.engine runs such a case's seeds once)
        res._seed_free = self._seed_free()
        return res


class RowBlock:
    """Rows one compiled call evaluated (none of which stopped the run), kept as the call's array until
    the history table is built: one row a dict was most of the time of a run evaluated every round.

    Parameters
    ----------
    values : ndarray of shape (rows, 7 + len(extras))
        Round, the four counters, F(x), the squared gradient mapping, then the extras.
    time : float
        The run's time counter when the call began (every row carries it).
    extras : tuple of str
        The algorithm's compiled extras' names.
    """

    __slots__ = ("ints", "floats", "time", "extras")

    def __init__(self, values, time, extras):
        self.ints = values[:, :5].astype(np.int64)
        self.floats = np.array(values[:, 5:], dtype=np.float64)
        self.time, self.extras = float(time), tuple(extras)

    def keys(self):
        """The rows' keys, in the order of a row's dict."""
        return list(_COUNTER_KEYS) + ["time", "value", "grad_mapping_sq", *self.extras]

    def column(self, key):
        """One column of the rows (int64 counters, float64 else)."""
        if key == "time":
            return np.full(self.ints.shape[0], self.time)
        if key in _COUNTER_KEYS:
            return self.ints[:, _COUNTER_KEYS.index(key)]
        return self.floats[:, ("value", "grad_mapping_sq", *self.extras).index(key)]

    def dicts(self):
        """The rows as dicts, as :meth:`RunLog.evaluate` makes them."""
        names = ("value", "grad_mapping_sq") + self.extras
        out = []
        for a, b in zip(self.ints.tolist(), self.floats.tolist()):
            row = dict(zip(_COUNTER_KEYS, a))
            row["time"] = self.time
            row.update(zip(names, b))
            out.append(row)
        return out


def _block_column(rows, key, ref):
    """Column ``key`` of rows some of which are :class:`RowBlock` (``ref``: a block's column), or None
    when a dict's value is not of that column's kind (Python int for int64, float for float64)."""
    kind = int if ref.dtype == np.int64 else float
    parts, loose = [], []
    try:
        for r in rows + [None]:
            if (r is None or isinstance(r, RowBlock)) and loose:
                parts.append(np.array(loose, dtype=ref.dtype))
                loose = []
            if isinstance(r, RowBlock):
                parts.append(r.column(key))
            elif r is None:
                break
            elif type(r[key]) is kind:
                loose.append(r[key])
            else:
                return None
    except OverflowError:                          # an int beyond int64
        return None
    return np.concatenate(parts)


def _uniform_keys(rows):
    """The keys every row (dict or :class:`RowBlock`) has, in the same order, or None."""
    if not rows:
        return None
    keys = list(rows[0].keys())
    return keys if all(list(r.keys()) == keys for r in rows) else None


def history_columns(rows):
    """The columns (NumPy arrays) of the history table of ``rows`` (dicts, or :class:`RowBlock` of
    rows), as :func:`history_frame` builds them column by column: ``{key: array}``, or None when the
    table is built from the rows as they are instead (the rows' keys differ, or a column's values are
    not all Python floats or all Python ints).

    Parameters
    ----------
    rows : list
        Dicts (one per evaluated round) and :class:`RowBlock` s.

    Returns
    -------
    dict or None
        The columns, in the rows' key order.
    """
    order = _uniform_keys(rows)
    if order is None:
        return None
    block = next((r for r in rows if isinstance(r, RowBlock)), None)
    cols = {}
    for k in order:
        if block is None:
            col = _column([r[k] for r in rows])
            col = col if isinstance(col, np.ndarray) else None
        else:
            col = _block_column(rows, k, block.column(k))
        if col is None:
            return None
        cols[k] = col
    return cols


def history_frame(rows):
    """The history table of the evaluated rows (dicts, or :class:`RowBlock` of rows).

    Built column by column when every row has the same keys in the same order (the usual case: a
    third of the time of ``pd.DataFrame`` on a list of dicts, which made up a quarter of a short
    run's fixed cost), else from the rows as they are (missing entries NaN). Both give the same
    frame: the same columns, order and dtypes.

    Parameters
    ----------
    rows : list of dict
        One dict per evaluated round.

    Returns
    -------
    pandas.DataFrame
        One row per dict (per row of a block).
    """
    cols = history_columns(rows)
    if cols is not None:
        return pd.DataFrame(cols)
    # keys that differ, or a column of several types: from the rows as dicts, pandas typing the columns
    rows = [d for r in rows for d in (r.dicts() if isinstance(r, RowBlock) else (r,))]
    keys = _uniform_keys(rows)
    if keys is not None:
        return pd.DataFrame({k: _column([r[k] for r in rows]) for k in keys})
    return pd.DataFrame(rows)


class HistoryColumns(Deferred):
    """A run's history as its columns (NumPy arrays), built from its rows when one is first read: the
    pandas table is built from them when the history is first read
    (:class:`fedtheory.runs.result.RunResult`), and :meth:`column` reads one without it.

    Parameters
    ----------
    rows : list, optional
        The rows (:func:`history_columns`), kept until the columns are built.
    cols : dict, optional
        The columns, built already.
    """

    def __init__(self, rows=None, cols=None):
        self.rows, self._cols = rows, cols
        super().__init__(None)

    def __call__(self):
        """The history table."""
        if "rows" not in self.__dict__:     # pickled when it held its columns only: its own build
            return super().__call__()
        cols = self._columns()
        return pd.DataFrame(cols) if cols is not None else history_frame(self.rows)

    def _columns(self):
        """The columns, or None when the rows' columns cannot be built one by one (the table is then
        built from the rows as they are, :func:`history_frame`)."""
        if "rows" not in self.__dict__:
            return self.args[0]
        cols, rows = self._cols, self.rows
        if cols is None and rows is not None:
            cols = history_columns(rows)
            if cols is not None:
                self._cols = cols
                self.rows = None
        return cols

    def column(self, key):
        """Column ``key``, read-only (a NumPy array, as the table's ``to_numpy()`` gives it), or None
        when the table is built from the rows as they are (read it there); KeyError for a column
        the history does not have."""
        cols = self._columns()
        if cols is None:
            return None
        col = cols[key].view()
        col.flags.writeable = False
        return col


#: Rows as dicts an unread history keeps as they are; beyond, its columns are built at once (a long
#: run evaluated in Python would keep one dict per evaluated round alive)
LAZY_DICTS = 8


def history_of(rows):
    """A run's ``history`` from its rows: its columns, built when first read (and the table from
    them), or built now when the rows hold more than :data:`LAZY_DICTS` dicts (then the table
    itself when the columns cannot be built one by one).

    Parameters
    ----------
    rows : list
        Dicts (one per evaluated round) and :class:`RowBlock` s, in order.

    Returns
    -------
    HistoryColumns or pandas.DataFrame
        What :class:`fedtheory.runs.result.RunResult` takes as its ``history``.
    """
    if sum(1 for r in rows if not isinstance(r, RowBlock)) <= LAZY_DICTS:
        return HistoryColumns(rows=list(rows))
    cols = history_columns(rows)
    return HistoryColumns(cols=cols) if cols is not None else history_frame(rows)


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
