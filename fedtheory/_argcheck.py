"""Parameter validation with scikit-learn style messages.

:func:`check_param` is the one check of every public parameter: it raises
:class:`~fedtheory.exceptions.InvalidParameterError` naming the parameter, its caller, the
accepted range and the value received. Its constraints take numbers the way a user writes them:
Python ints of any size and numpy integer scalars are ints, numpy float scalars
(``np.float32``) are floats, booleans (``True``, ``np.bool_``) are never numbers.
"""
import math
import numbers

import numpy as np

from .exceptions import InvalidParameterError


INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def _bound_text(v):
    return {INT64_MAX: "2**63 - 1", INT64_MIN: "-2**63"}.get(v, f"{v}") if isinstance(v, int) else f"{v}"


class Interval:
    """A real or integer interval constraint, e.g. ``Interval(float, 0, None, "neither")``.

    Parameters
    ----------
    kind : {float, int}
        float accepts any finite real number, int only integers; bool is never accepted.
    low, high : float or None
        The bounds (None: unbounded on that side; for ``int``, the int64 range's end, since an
        integer parameter is stored in an int64: ``math.inf`` leaves an int unbounded, e.g. a
        random seed, which NumPy takes of any size).
    closed : {"both", "left", "right", "neither"}, default "both"
        Which bounds belong to the interval.
    """

    def __init__(self, kind, low, high, closed="both"):
        if kind is int:             # an integer parameter ends up in an int64 (NumPy, Numba): an
            low = INT64_MIN if low is None else low         # unbounded side stops at its range, unless
            high = INT64_MAX if high is None else (None if high == math.inf else high)  # inf says so
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def accepts(self, v):
        t = type(v)
        if t is float or t is int:          # (the common case, without the ABC checks below)
            if t is float and (self.kind is int or not math.isfinite(v)):
                return False
            return self._within(v)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            return False
        if self.kind is int and not isinstance(v, numbers.Integral):
            return False
        if not isinstance(v, numbers.Integral):          # ints of any size are finite (np.isfinite
            try:                                         # fails on a Python int >= 2**64)
                if not math.isfinite(v):
                    return False
            except (OverflowError, TypeError, ValueError):
                return False
        return self._within(v)

    def _within(self, v):
        lo_ok = self.low is None or (v >= self.low if self.closed in ("both", "left") else v > self.low)
        hi_ok = self.high is None or (v <= self.high if self.closed in ("both", "right") else v < self.high)
        return bool(lo_ok and hi_ok)

    def __str__(self):
        left = "[" if self.closed in ("both", "left") and self.low is not None else "("
        right = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        lo = "-inf" if self.low is None else _bound_text(self.low)
        hi = "inf" if self.high is None else _bound_text(self.high)
        name = "an int" if self.kind is int else "a float"
        return f"{name} in the range {left}{lo}, {hi}{right}"


class Options:
    """A constraint accepting one of a fixed set of values."""

    def __init__(self, *values):
        for v in values:
            if isinstance(v, (type, set, frozenset, list, dict)):
                raise TypeError(f"Options takes the accepted values themselves, e.g. Options('last', 'plain'); "
                                f"got {v!r} among them (a type or a collection is never a value it accepts).")
        self.values = values

    def accepts(self, v):
        try:
            return v in self.values
        except TypeError:
            return False

    def __str__(self):
        return "a str among {" + ", ".join(repr(v) for v in self.values) + "}"


class NoneOk:
    """Marker accepting ``None``."""

    def accepts(self, v):
        return v is None

    def __str__(self):
        return "None"


class ArrayLike:
    """Accepts any non-string value (validated further by the caller)."""

    def __init__(self, what="an array"):
        self.what = what

    def accepts(self, v):
        return v is not None and not isinstance(v, str)

    def __str__(self):
        return self.what


def check_param(name, value, constraints, caller):
    """Raise InvalidParameterError unless ``value`` satisfies one of ``constraints``.

    The message names the parameter, the caller, what is accepted and what was received:
    "The 'lr' parameter of run must be a float in the range (0, inf). Got -1 instead."
    """
    for c in constraints:
        if c.accepts(value):
            return value
    if len(constraints) == 1:
        what = str(constraints[0])
    else:
        what = ", ".join(str(c) for c in constraints[:-1]) + " or " + str(constraints[-1])
    options = [v for c in constraints if isinstance(c, Options) for v in c.values]
    raise InvalidParameterError(
        f"The {name!r} parameter of {caller} must be {what}. Got {value!r} instead.{did_you_mean(value, options)}")


class Bool:
    """Accepts ``True`` or ``False``."""

    def accepts(self, v):
        return isinstance(v, (bool, np.bool_))

    def __str__(self):
        return "a bool"


def did_you_mean(name, candidates, n=3, cutoff=0.6):
    """The close matches of a misspelled ``name`` among ``candidates``, as a sentence or "".

    The one helper every lookup by name uses (algorithms, problem factories, theorems,
    components, configuration keys, hyperparameters), so that every unknown-name error ends
    the same way (:func:`difflib.get_close_matches`).

    Parameters
    ----------
    name : object
        The name given (anything else than a str gives "").
    candidates : iterable of str
        The known names.
    n : int, default 3
        At most this many suggestions.
    cutoff : float, default 0.6
        Similarity in [0, 1] a suggestion needs (difflib's ratio, case ignored); a suggestion
        must also be within 0.05 of the closest one.

    Returns
    -------
    str
        ``" Did you mean 'fedavg'?"`` (with a leading space; several matches joined by "or"),
        or ``""`` when nothing is close.

    Examples
    --------
    >>> did_you_mean("fedavgg", ["fedavg", "scaffold", "fedprox"])
    " Did you mean 'fedavg'?"
    >>> did_you_mean("fedsps.theorem_3", ["fedsps.theorem_3a", "fedsps.theorem_3b", "fedsps.theorem_18"])
    " Did you mean 'fedsps.theorem_3a' or 'fedsps.theorem_3b'?"
    >>> did_you_mean("xyz", ["fedavg", "scaffold"])
    ''
    """
    import difflib
    if not isinstance(name, str) or not name:
        return ""
    known = sorted({c for c in candidates if isinstance(c, str)})
    lower = {c.lower(): c for c in known}      # "FedAvg" is close to "fedavg"
    scored = sorted(((difflib.SequenceMatcher(None, name.lower(), c).ratio(), lower[c]) for c in lower),
                    key=lambda t: -t[0])
    best = scored[0][0] if scored else 0.0
    # the close ones, and among them only those nearly as close as the closest ("theorem_44" is
    # "theorem_4_4", not also "theorem_6b")
    matches = [c for r, c in scored if r >= max(cutoff, best - 0.05) and c != name][:n]
    if not matches:
        return ""
    return " Did you mean " + " or ".join(repr(m) for m in matches) + "?"
