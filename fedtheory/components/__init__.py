r"""Problem components: a problem is data + a datafit + a regularizer.

=================  ==================================================================  ===========
datafit            client objective f_i (plus the ridge l2/2 ||x||^2)                   class
=================  ==================================================================  ===========
``least_squares``  :math:`\frac{1}{2m_i}\|A_i x - b_i\|^2`                              LeastSquares
``logistic``       :math:`\frac{1}{m_i}\sum_j \log(1 + e^{-y_{ij} a_{ij}^\top x})`       Logistic
``quadratic``      :math:`\frac12 x^\top Q_i x - c_i^\top x`                            Quadratic
=================  ==================================================================  ===========

=================  ==================================================================  ===========
regularizer        h(x) (weight tau = ``problem.reg_weight``)                          class
=================  ==================================================================  ===========
``none``           0                                                                    NoRegularizer
``l2``             :math:`\frac{\tau}{2}\|x\|_2^2` (through its prox)                    L2
``l1``             :math:`\tau\|x\|_1`                                                   L1
``group``          :math:`\tau\sum_g\|x_g\|_2`                                           GroupL2
``nuclear``        :math:`\tau\|X\|_*`, X = x.reshape(m1, m2)                            Nuclear
=================  ==================================================================  ===========

Build a problem from components with :meth:`fedtheory.problem.FederatedProblem.from_clients`;
add a component with one class and :func:`register_datafit` / :func:`register_regularizer`
(``docs/how-a-problem-is-built.md``). The suite of :mod:`.checks` (``tests/test_components.py``) checks every
registered pair.

May import the foundations (``fedtheory.problem``, ``fedtheory.exceptions``, ``fedtheory._argcheck``) and
the kernels (the built-in components' Numba kernels); the torch oracles only where torch is used;
never the run engine, the theory or the reporting layer.

Examples
--------
>>> import numpy as np
>>> from fedtheory.components import Logistic, L1
>>> from fedtheory.problem import FederatedProblem
>>> rng = np.random.default_rng(0)
>>> A = [rng.normal(size=(10, 3)) for _ in range(2)]
>>> y = [np.where(a[:, 0] > 0, 1.0, -1.0) for a in A]
>>> p = FederatedProblem.from_clients(A, y, Logistic(l2=0.1), L1(weight=0.01), name="sparse_logistic")
>>> p.kind_name, p.reg, p.l2, p.l1, p.is_composite
('logistic', 'l1', 0.1, 0.01, True)
"""
from .base import Datafit, MarginDatafit, Regularizer, capabilities
from .catalog import (DATAFITS, REGULARIZERS, get_datafit, get_regularizer, make_datafit, make_regularizer,
                      register_datafit, register_regularizer)
from .least_squares import LeastSquares
from .logistic import Logistic
from .quadratic import Quadratic
from .none import NoRegularizer
from .l2 import L2
from .l1 import L1
from .group import GroupL2
from .nuclear import Nuclear

__all__ = ["Datafit", "MarginDatafit", "Regularizer", "capabilities", "DATAFITS", "REGULARIZERS", "get_datafit",
           "get_regularizer", "make_datafit", "make_regularizer", "register_datafit", "register_regularizer",
           "LeastSquares", "Logistic", "Quadratic", "NoRegularizer", "L2", "L1", "GroupL2", "Nuclear"]
