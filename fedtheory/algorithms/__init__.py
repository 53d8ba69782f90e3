"""Registered algorithms, one file each (see :func:`fedtheory.algorithms`)."""
from . import (fedadam, fedadmm, fedams, fedavg, fedcm, feddyn, fedpd, fedprox, fedsps, fedsps_dec,  # noqa: F401
               fedsps_global, fedsps_normalized, fedspeed, lfd, mime, nfsgd, scaffold)  # (registration)
