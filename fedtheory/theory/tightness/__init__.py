"""How loose is a bound: the exact worst case of a theorem's method over its function class, by
performance estimation (PEP), beside the theorem's bound (docs/tightness.md).

One module per job: :mod:`~.pepit_adapter` (what a theorem module writes its PEP with),
:mod:`~.solve` (solving a PEP, bracketing its worst case, branch and bound), :mod:`~.api`
(:func:`tightness`, :class:`Tightness`, :func:`lr_threshold`), :mod:`~.instances` (problems of the
class, the extracted worst case) and :mod:`~.report` (``fedtheory verify --tightness``). This
package re-exports their public names (a name is replaced, e.g. by a test, in the module that
uses it).

>>> from fedtheory.theory.tightness import pep_size
>>> pep_size(local_steps=2, rounds=1, n_clients=2)[0]       # points of the PEP: n (K R + 2)
8
"""
from .api import (MAX_CONSTRAINTS, Tightness, covered, form_of, lr_threshold, pep_size,  # noqa: F401
                  tightness)
from .instances import class_quadratics, normalised_x0, worst_case_instance  # noqa: F401
from .pepit_adapter import (EXTRA, SOLVERS, TIGHTNESS_CASES, NotExpressible, PEPForm, PEPSolveError,  # noqa: F401
                            PolyakSteps, average, require_pepit, shared_minimiser_clients, tightness_case)
from .report import TIGHTNESS_COLUMNS, contraction_curve, curves, figure, tightness_rows, uncovered  # noqa: F401
from .solve import Solve, branch_and_bound, solve_pep, worst_case  # noqa: F401
