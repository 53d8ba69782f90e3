"""Registered algorithms, one file each (see :func:`fedtheory.algorithms`)."""
from . import (fedadam, fedadmm, fedams, fedavg, fedcm, feddeper, feddual, feddyn, fedmirror, fedpd,  # noqa: F401
               fedprox, fedsps, fedsps_dec, fedsps_global, fedsps_normalized, fedspeed, lfd, mime, nfsgd,
               pfedfbe, scaffold)  # (registration side effects)
