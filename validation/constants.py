"""Problem constants (moved to :mod:`fedtheory.truth.problem_constants`; re-exported under the old name)."""
from fedtheory.truth.problem_constants import *  # noqa: F401,F403
from fedtheory.truth.problem_constants import Constants, constants, feddeper_constants  # noqa: F401
from fedtheory.truth.problem_constants import gradient_diversity  # noqa: F401
