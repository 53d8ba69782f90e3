"""Ground truth, problem constants and theorem checks (docs/how-a-theorem-is-checked.md).

The library owns them (:mod:`fedtheory.truth`, :mod:`fedtheory.theory`); this package re-exports
them under their public names. ``validation.ground_truth`` and ``validation.constants`` are the
functions; the modules that define them stay importable under their old dotted names
(``from validation.constants import gradient_diversity``) without shadowing the functions.
"""
import sys as _sys

from fedtheory.truth import Constants, GroundTruth, Infimum, constants, feddeper_constants, ground_truth, infimum
from fedtheory.truth import optimum as _optimum, problem_constants as _problem_constants

from fedtheory.theory.falsify import Falsification, falsify
from fedtheory.theory.tightness import Tightness, tightness

from fedtheory.errata import errata

from fedtheory.theory import lemmas

from .theorem_checks import theorems, verify

_sys.modules.setdefault(__name__ + ".ground_truth", _optimum)
_sys.modules.setdefault(__name__ + ".constants", _problem_constants)

__all__ = ["ground_truth", "GroundTruth", "infimum", "Infimum", "constants", "Constants", "feddeper_constants", "theorems", "lemmas", "verify",
           "tightness", "Tightness", "errata", "falsify", "Falsification"]
