"""Registered algorithms, one file each (see :func:`fedtheory.algorithms`)."""
from . import (fedadam, fedadmm, fedams, fedavg, fedcm, feddeper, feddyn, fedpd, fedprox, fedsps,  # noqa: F401
               fedsps_dec, fedsps_global, fedsps_normalized, fedspeed, lfd, mime, nfsgd,
               scaffold)  # (registration side effects)
