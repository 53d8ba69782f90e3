"""Reusable checks (``checks``) and hypothesis strategies (``strategies``, needs the test extra).

May import the whole library below the reporting layer (the run engine, the algorithms, the
components, the kernels, the theory's engine); never the reporting layer or the top-level
``problems`` and ``validation`` packages (its suite problems are built from the components)."""
from .checks import ALL_CHECKS, yield_checks

__all__ = ["ALL_CHECKS", "yield_checks"]
