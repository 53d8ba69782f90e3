"""Reusable checks (``checks``) and hypothesis strategies (``strategies``, needs the test extra)."""
from .checks import ALL_CHECKS, yield_checks

__all__ = ["ALL_CHECKS", "yield_checks"]
