"""Registered algorithms, one file each (see :func:`fedtheory.algorithms`)."""
from . import (fedadam, fedadmm, fedavg, fedcm, feddyn, fedpd, fedprox, fedspeed,  # noqa: F401
               lfd, nfsgd, scaffold)  # (registration side effects)
