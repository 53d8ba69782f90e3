"""Registered algorithms, one file each (see :func:`fedtheory.algorithms`)."""
from . import (ditto, fedadam, fedadmm, fedams, fedavg, fedcm, feddeper, feddual, feddyn, fedmirror,  # noqa: F401
               fedpd, fedprox, fedsps, fedsps_dec, fedsps_global, fedsps_normalized, fedspeed, lfd, mime, nfsgd,
               pfedfbe, pfedme, pfedprox, scaffold)  # (registration side effects)


class _CallableAlgorithms(__import__("types").ModuleType):
    """``fedtheory.algorithms`` is both this subpackage and the function listing the registered
    names: importing a submodule (``import fedtheory.algorithms.fedspeed``) rebinds the package
    attribute to the subpackage, so the subpackage answers the call too."""

    def __call__(self):
        from ..registry import algorithms
        return algorithms()


__import__("sys").modules[__name__].__class__ = _CallableAlgorithms
