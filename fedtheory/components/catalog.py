"""Registries of datafit and regularizer components: name -> class.

Every lookup by name goes through :func:`get_datafit` / :func:`get_regularizer`, so an unknown
name is an error that lists the known ones. Built-in components are registered when
:mod:`fedtheory.components` is imported; a new component registers itself with the
:func:`register_datafit` / :func:`register_regularizer` class decorators.

A component without a Numba kernel (``code = None``) still runs on the numba backend: the
registry lends its problem a kernel id of its own (:func:`kernel_id`) and the kernels' dispatch
(:mod:`fedtheory._kernels.oracles`) calls back into its NumPy code with it (:func:`kernel_fallback`).
"""
from __future__ import annotations

import inspect
import itertools
import weakref

import numpy as np

from .._argcheck import did_you_mean
from ..exceptions import InvalidParameterError
from .._kernels.datafits import OP_HVP, OP_VALUE_GRAD
from .base import Datafit, Regularizer

DATAFITS = {}
REGULARIZERS = {}

_FIRST_FALLBACK_ID = 1000
_fallback_ids = itertools.count(_FIRST_FALLBACK_ID)
_FALLBACKS = {"datafit": weakref.WeakValueDictionary(), "regularizer": weakref.WeakValueDictionary()}


def _origin(cls):
    return cls.__module__, cls.__qualname__


def _register(table, what, cls):
    """Add ``cls`` under ``cls.name``; the same class defined again (a re-run cell or script) replaces itself."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or (name in table and _origin(table[name]) != _origin(cls)):
        raise ValueError(f"{what} {name!r} has no name or is registered twice ({cls} and {table.get(name)})")
    if cls.native_code() is not None:
        clash = [c.name for c in table.values() if c.native_code() == cls.code and c.name != name]
        if clash or not 0 <= cls.code < _FIRST_FALLBACK_ID:
            raise ValueError(f"{what} {cls.name!r}: kernel id {cls.code} is taken by {clash} or out of "
                             f"range [0, {_FIRST_FALLBACK_ID})")
    table[cls.name] = cls
    return cls


def register_datafit(cls):
    """Class decorator adding a :class:`~fedtheory.components.base.Datafit` to :data:`DATAFITS`.

    The class is registered under its ``name``; the same class defined again (a re-run cell or
    script) replaces itself, another class of a taken name is a ValueError. See
    ``docs/how-a-problem-is-built.md``.

    Returns
    -------
    type
        The class itself, unchanged (so the function can decorate it).
    """
    return _register(DATAFITS, "datafit", cls)


def register_regularizer(cls):
    """Class decorator adding a :class:`~fedtheory.components.base.Regularizer` to :data:`REGULARIZERS`.

    The class is registered under its ``name``; the same class defined again (a re-run cell or
    script) replaces itself, another class of a taken name is a ValueError. See
    ``docs/how-a-problem-is-built.md``.

    Returns
    -------
    type
        The class itself, unchanged (so the function can decorate it).
    """
    return _register(REGULARIZERS, "regularizer", cls)


def _get(table, what, name, where):
    if isinstance(name, str) and name in table:
        return table[name]
    raise InvalidParameterError(f"The {what!r} parameter of {where} must be a str among "
                                f"{{{', '.join(repr(n) for n in sorted(table))}}} or a {what.capitalize()} "
                                f"instance. Got {name!r} instead.{did_you_mean(name, table)}")


def get_datafit(name, where="FederatedProblem"):
    """The datafit class registered as ``name`` (an error lists the known names).

    Parameters
    ----------
    name : str
        A registered datafit.
    where : str, default "FederatedProblem"
        The name the error cites.

    Returns
    -------
    type
        The datafit class.
    """
    return _get(DATAFITS, "datafit", name, where)


def get_regularizer(name, where="FederatedProblem"):
    """The regularizer class registered as ``name`` (an error lists the known names).

    Parameters
    ----------
    name : str
        A registered regularizer.
    where : str, default "FederatedProblem"
        The name the error cites.

    Returns
    -------
    type
        The regularizer class.
    """
    return _get(REGULARIZERS, "regularizer", name, where)


def make_datafit(spec, l2=0.0, where="FederatedProblem"):
    """A datafit from an instance (returned as is), a registered name or a kernel id (``problem.datafit_id``).

    Parameters
    ----------
    spec : Datafit, str or int
        An instance, a registered name or a kernel id.
    l2 : float, default 0
        The ridge weight of a datafit made here.
    where : str, default "FederatedProblem"
        The name the error cites.

    Returns
    -------
    Datafit
        The datafit.

    Examples
    --------
    >>> make_datafit("logistic", l2=0.1)
    Logistic(l2=0.1)
    >>> make_datafit("hinge")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fedtheory.exceptions.InvalidParameterError: The 'datafit' parameter of FederatedProblem must be a str among \
{'least_squares', 'logistic', 'quadratic'} or a Datafit instance. Got 'hinge' instead.
    """
    if isinstance(spec, Datafit):
        if l2:
            raise InvalidParameterError(f"{where}: give 'l2' to the datafit {spec!r}, not separately (got l2={l2!r}).")
        return spec
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        by_code = {c.native_code(): c for c in DATAFITS.values() if c.native_code() is not None}
        spec = by_code[int(spec)].name if int(spec) in by_code else spec
    return get_datafit(spec, where)(l2=l2)


def make_regularizer(spec, where="FederatedProblem", **params):
    """A regularizer from an instance (returned as is) or a registered name with its parameters.

    Parameters the class does not take are ignored when None or 0 (the problem's legacy keywords
    ``groups`` and ``mat_shape`` are passed to every name), an error otherwise.

    Parameters
    ----------
    spec : Regularizer or str
        An instance or a registered name.
    where : str, default "FederatedProblem"
        The name the error cites.
    **params
        The parameters of a regularizer made here.

    Returns
    -------
    Regularizer
        The regularizer.

    Examples
    --------
    >>> make_regularizer("group", weight=0.5, groups=[0, 0, 1])
    GroupL2(weight=0.5, groups=array([0, 0, 1]))
    """
    if isinstance(spec, Regularizer):
        extra = {k: v for k, v in params.items() if v is not None and not (k == "weight" and v == 0)}
        if extra:
            raise InvalidParameterError(f"{where}: give {sorted(extra)} to the regularizer {spec!r}, not "
                                        "separately.")
        return spec
    cls = get_regularizer(spec, where)
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    if "mat_shape" in params and "shape" in accepted:
        params["shape"] = params.pop("mat_shape")
    unknown = {k: v for k, v in params.items() if k not in accepted and v is not None and not
               (k == "weight" and v == 0)}
    if unknown:
        raise InvalidParameterError(f"{where}: the regularizer {spec!r} takes {sorted(accepted)}, not "
                                    f"{sorted(unknown)}.")
    return cls(**{k: v for k, v in params.items() if k in accepted})


# ----------------------------------------------------------------------------------- kernel ids
class _DatafitRows:
    """A datafit without a Numba kernel on a problem's data, as the kernels' dispatch calls it."""

    def __init__(self, datafit, data):
        self.datafit, self.data = datafit, data

    def rows(self, op, start, end, rows, x, v, out, val):
        data, f = self.data, self.datafit
        if rows.shape[0] > 0 and f.has_samples:
            A, t = data.M[rows], data.b[rows]
        else:
            A, t = data.M[start:end], data.b[start:end]
        if op == OP_HVP:
            out += f.block_hvp(A, t, x, v)
            return val
        if op == OP_VALUE_GRAD:
            val += float(f.block_value(A, t, x))
        out += f.block_grad(A, t, x)
        return val


def kernel_id(component, data=None):
    """``(id, keep)``: the id the Numba kernels know ``component`` by, and an object the problem must
    keep alive while it uses the id (None for a component with a native kernel).

    Parameters
    ----------
    component : Datafit or Regularizer
        The component.
    data : ClientData, optional
        Its data (a datafit without a native kernel is lent an id with them).

    Returns
    -------
    tuple
        ``(id, keep)``.
    """
    if component.native_code() is not None:
        return component.native_code(), None
    what = "datafit" if isinstance(component, Datafit) else "regularizer"
    keep = _DatafitRows(component, data) if what == "datafit" else component
    code = next(_fallback_ids)
    _FALLBACKS[what][code] = keep
    return code, keep


def kernel_fallback(what, code):
    """The component (a datafit on its data) lent kernel id ``code``; an unknown id is an error.

    Parameters
    ----------
    what : {"datafit", "regularizer"}
        The kind of component.
    code : int
        The id lent.

    Returns
    -------
    object
        The component (a datafit with its data).
    """
    found = _FALLBACKS[what].get(int(code))
    if found is None:
        table = DATAFITS if what == "datafit" else REGULARIZERS
        native = sorted((c.native_code(), n) for n, c in table.items() if c.native_code() is not None)
        raise InvalidParameterError(f"Unknown {what} kernel id {code}: the kernels know {native} and the ids lent "
                                    f"to registered {what}s without a kernel (known {what}s: {sorted(table)}).")
    return found
