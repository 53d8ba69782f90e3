"""Registered algorithms, one file each (see :func:`fedtheory.algorithms`)."""
from . import fedavg, fedprox, lfd, scaffold  # noqa: F401  (registration side effects)
