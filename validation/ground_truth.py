"""Ground truth (moved to :mod:`fedtheory.truth.optimum`; re-exported under the old name)."""
from fedtheory.truth.optimum import *  # noqa: F401,F403
from fedtheory.truth.optimum import GroundTruth, ground_truth  # noqa: F401
