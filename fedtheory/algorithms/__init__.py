"""The algorithms, one file each; calling this package lists their registered names.

``fedtheory.algorithms()`` returns the sorted names (list of str) of the registered algorithms:
the built-in ones and those a user registered with :func:`fedtheory.registry.register`.

``fedtheory.algorithms`` is a package (``import fedtheory.algorithms.fedavg as m`` works) and
answers the call with :func:`fedtheory.registry.algorithms`: its
module object is a :class:`types.ModuleType` subclass with ``__call__``, so no import can shadow
the function with the package or the package with the function.

An algorithm file may import the foundations (``fedtheory.registry``, ``fedtheory._argcheck``,
``fedtheory.exceptions``), the kernels (its compiled rules call ``fedtheory._kernels.rounds``) and the
run engine's leaf modules (``runs.arrays``, ``runs.metrics``, ``runs.topology``); never the runner,
which runs it, the theory or the reporting layer.

Examples
--------
>>> import fedtheory as ft
>>> import fedtheory.algorithms.fedavg as m
>>> m.FedAvg.name in ft.algorithms()
True
"""
import sys
import types

from ..registry import algorithms as _registered_names
from . import (ditto, fedadam, fedadmm, fedams, fedavg, fedcm, feddeper, feddual, feddyn, fedmirror,  # noqa: F401
               fedpd, fedprox, fedsps, fedsps_dec, fedsps_global, fedsps_normalized, fedspeed, lfd, mime, nfsgd,
               pfedfbe, pfedme, pfedprox, scaffold)  # (registration side effects)


class _CallablePackage(types.ModuleType):
    """The package's module type: a module that lists the registered algorithms when called."""

    def __call__(self):
        return _registered_names()

    __call__.__doc__ = _registered_names.__doc__


sys.modules[__name__].__class__ = _CallablePackage
