"""Registered algorithms, one file each (see :func:`fedtheory.algorithms`)."""
from . import (ditto, fedadam, fedadmm, fedams, fedavg, fedcm, feddeper, feddual, feddyn, fedmirror,  # noqa: F401
               fedpd, fedprox, fedsps, fedsps_dec, fedsps_global, fedsps_normalized, fedspeed, lfd, mime, nfsgd,
               pfedfbe, pfedme, pfedprox, scaffold)  # (registration side effects)
