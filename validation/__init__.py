"""Ground truth, problem constants and theorem checks (API.md "Ground truth and theory")."""
from fedtheory.truth import Constants, constants, feddeper_constants
from fedtheory.truth import GroundTruth, ground_truth
from .theorems import theorems, verify

__all__ = ["ground_truth", "GroundTruth", "constants", "Constants", "feddeper_constants", "theorems", "verify"]
