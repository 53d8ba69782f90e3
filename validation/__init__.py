"""Ground truth, problem constants and theorem checks (docs/how-a-theorem-is-checked.md).

The library owns them (:mod:`fedtheory.truth`, :mod:`fedtheory.theory`); this package re-exports
them under their public names (``validation.ground_truth`` and ``validation.constants`` are the
functions; the modules that define them are :mod:`fedtheory.truth.optimum` and
:mod:`fedtheory.truth.problem_constants`).
"""
from fedtheory.truth import Constants, GroundTruth, Infimum, constants, feddeper_constants, ground_truth, infimum

from fedtheory.theory.falsify import Falsification, falsify
from fedtheory.theory.tightness import Tightness, tightness

from fedtheory.reporting.errata import errata

from fedtheory.theory import lemmas

from .theorem_checks import theorems, verify

__all__ = ["ground_truth", "GroundTruth", "infimum", "Infimum", "constants", "Constants", "feddeper_constants", "theorems", "lemmas", "verify",
           "tightness", "Tightness", "errata", "falsify", "Falsification"]
