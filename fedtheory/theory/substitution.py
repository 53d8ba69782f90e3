"""A theorem checked on another algorithm than its own (``check(..., algorithm=...)``).

The spec's run arguments are kept; its algorithm's hyperparameters are passed on where the other
algorithm has one of the same name, and hidden from the setup otherwise: a condition, measurement or
bound that reads a hidden one raises :class:`ForeignHyperparameter` and the check is NOT APPLICABLE.
"""
from __future__ import annotations

import numpy as np
from .._argcheck import check_param, Options
from ..registry import algorithms, get_algorithm


class ForeignHyperparameter(KeyError):
    """A spec read a hyperparameter of its own algorithm that the algorithm run does not have."""


class _Substitution:
    """The spec of one algorithm run against another registered algorithm (``check(...,
    algorithm=...)``).

    The spec's run arguments are kept for the runner (rounds, local steps, step size, ``x0``,
    traces, ...); its algorithm's hyperparameters are passed on where the algorithm run has one of
    the same name, and dropped otherwise. Such a dropped hyperparameter is hidden from the setup
    the conditions, the measurement and the bound read: one that reads it raises
    :class:`ForeignHyperparameter` and the check is NOT APPLICABLE, naming it. ``own`` are the
    algorithm's hyperparameters given by the caller that the theorem's setup does not take.
    """

    def __init__(self, spec, algorithm, own):
        self.spec, self.algorithm, self.own = spec, algorithm, dict(own)
        self.theirs = get_algorithm(spec.algorithm).hyperparameters()
        self.mine = get_algorithm(algorithm).hyperparameters()
        self.dropped = {}
        self.overridden = None                  # set from the main run's arguments (the first adapted)
        self._hidden_keys = set()
        self._feeds = {}                        # a setup key -> the dropped hyperparameters it sets

    def adapt(self, kwargs):
        """The spec's run arguments for the algorithm run (foreign hyperparameters dropped)."""
        if self.overridden is None:
            self.overridden = {k: kwargs[k] for k in self.own if k in kwargs}
        out = {}
        for k, v in kwargs.items():
            if k in self.theirs and k not in self.mine:
                self.dropped[k] = v
            else:
                out[k] = v
        out.update(self.own)
        return out

    def retarget(self, setup):
        """The setup with the algorithm's own values where the caller overrode a run argument the
        theorem sets from its setup (same name, same value): the conditions read what is run."""
        out = dict(setup)
        for k, v in (self.overridden or {}).items():
            if k in out and _same(out[k], v):
                out[k] = self.own[k]
        return out

    def hide(self, setup):
        """The setup with the dropped hyperparameters made unreadable: the keys of their names, and
        the keys whose value reaches one through the theorem's run arguments under another name (the
        paper's ``eta_g`` passed as ``server_lr=st["eta_g"]``), found by changing each number of the
        setup and seeing whether a dropped hyperparameter changes with it."""
        hidden = {k for k in self.dropped if k in setup} | self._feeding(setup)
        return _HiddenKeys(setup, hidden, self) if hidden else setup

    def _feeding(self, setup):
        if not self.dropped:
            return set()
        out = set()
        for k, v in setup.items():
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
                continue
            probe = dict(setup)
            probe[k] = float(v) + abs(float(v)) + 1.0          # another number, whatever v is
            try:
                got = self.spec.run_kwargs(probe)
            except Exception:                                   # noqa: BLE001 - this key cannot be probed
                continue
            fed = [h for h, w in self.dropped.items() if not _same(got.get(h, _UNSET), w)]
            if fed:
                out.add(k)
                self._feeds[k] = fed
        return out

    def hidden_name(self, err):
        """The hidden key a KeyError or AttributeError raised by the theorem's code names, or None (a
        spec that copied the setup, ``SimpleNamespace(**st)`` or ``dict(st)``, gets it without it)."""
        name = getattr(err, "name", None) if isinstance(err, AttributeError) else (err.args[0] if err.args else None)
        return name if isinstance(name, str) and name in self._hidden_keys else None

    def reason(self, key):
        if key in self._feeds and key not in self.dropped:
            what = (f"{key!r}, which sets hyperparameter(s) {', '.join(map(repr, self._feeds[key]))} of "
                    f"{self.spec.algorithm!r} in its run arguments")
        else:
            what = f"hyperparameter {key!r} of {self.spec.algorithm!r}"
        return (f"the theorem reads {what} (its conditions, measurement or bound depend on it), which "
                f"{self.algorithm!r} does not have")


def _same(a, b):
    try:
        return a is b or bool(a == b)
    except (TypeError, ValueError):
        return False


_UNSET = object()


class _HiddenKeys(dict):
    """A setup without its hidden keys: reading one (``st[k]``, ``st.get(k)``) raises
    :class:`ForeignHyperparameter`; a copy (``dict(st)``, ``{**st}``, ``SimpleNamespace(**st)``,
    ``st.items()``) lacks them, and the KeyError or AttributeError of a later read names them."""

    def __init__(self, data, hidden, sub):
        super().__init__({k: v for k, v in data.items() if k not in hidden})
        self._hidden, self._sub = hidden, sub
        sub._hidden_keys = set(hidden)

    def __contains__(self, key):
        return key in self._hidden or super().__contains__(key)

    def __getitem__(self, key):
        if key in self._hidden:
            raise ForeignHyperparameter(self._sub.reason(key))
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in self._hidden:
            raise ForeignHyperparameter(self._sub.reason(key))
        return super().get(key, default)


def _algorithm_name(algorithm, where):
    """The registered name of ``algorithm`` (a name or a registered class)."""
    name = getattr(algorithm, "name", algorithm)
    check_param("algorithm", name, [Options(*algorithms())], where)
    return name
