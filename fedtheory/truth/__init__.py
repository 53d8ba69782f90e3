"""Ground truth and problem constants, owned by the library (``validation`` re-exports them).

* :func:`ground_truth`: the certified optimum x*, F*, each client's f_i*, with a polish to ~1e-12
  and a cache (see :mod:`fedtheory.truth.optimum`);
* :func:`infimum`: the certified inf F where no minimiser exists (separable logistic data without
  ridge; see :mod:`fedtheory.truth.recession`);
* :func:`constants`: L, L_max, mu and each paper's heterogeneity measure, computed from the data
  (see :mod:`fedtheory.truth.problem_constants`).

May import the foundations (``fedtheory.problem``, ``fedtheory.constants``,
``fedtheory.exceptions``, ``fedtheory._argcheck``, ``fedtheory._progress``) and the components;
never the run engine, the theory or the reporting layer.
"""
from .problem_constants import Constants, constants, feddeper_constants
from .optimum import ground_truth
from .record import GroundTruth
from .recession import Infimum, infimum

__all__ = ["ground_truth", "GroundTruth", "infimum", "Infimum", "constants", "Constants", "feddeper_constants"]
