"""Concrete federated problem families (docs/how-a-problem-is-built.md).

Every factory returns a :class:`fedtheory.problem.FederatedProblem` representing
F(x) = sum_i w_i f_i(x) + h(x).

========================  =====================================================
``least_squares``         1/(2 m_i) ||A_i x - b_i||^2 + l2/2 ||x||^2
``lasso``                 least squares + l1 ||x||_1
``group_lasso``           least squares + tau sum_g ||x_g||_2
``matrix_completion``     least squares on <X, W> + tau ||W||_* (pFedFBE's setting)
``logistic``              logistic loss with labels in {-1, +1}
``quadratic``             1/2 x^T Q_i x - c_i^T x with exactly known L, mu, heterogeneity
``explicit_quadratic``    1/2 x^T Q_i x - c_i^T x from given matrices (a paper's exact example)
``federated_lasso``       pFedFBE's lasso settings (I) and (II) with known per-client signals
``libsvm``                logistic regression on a LIBSVM data set, partitioned
``breast_cancer``         logistic regression on scikit-learn's breast cancer data
``digits``                one-vs-rest logistic regression on scikit-learn's digits
``vision``                image data (MNIST, CIFAR-10/100, digits) and ``image_problem`` (torch)
========================  =====================================================
"""
from .regression import group_lasso, lasso, least_squares
from .low_rank import matrix_completion
from .classification import logistic
from .synthetic import quadratic
from .explicit import explicit_quadratic
from .lasso_settings import federated_lasso
from .datasets import breast_cancer, digits, libsvm, load_libsvm, LIBSVM_DATASETS
from .partition import partition_indices, PARTITIONS
from . import vision

__all__ = ["least_squares", "lasso", "group_lasso", "matrix_completion", "logistic", "quadratic", "explicit_quadratic", "federated_lasso", "libsvm", "breast_cancer",
           "digits", "load_libsvm", "partition_indices", "PARTITIONS", "LIBSVM_DATASETS",
           "available", "factories", "vision"]


def available():
    """List the names of the problem factories.

    Returns
    -------
    list of str
        The factories of this package (a configuration's ``factory`` accepts them).
    """
    return ["least_squares", "lasso", "group_lasso", "matrix_completion", "logistic", "quadratic", "explicit_quadratic", "federated_lasso", "libsvm", "breast_cancer", "digits"]


def factories():
    """The factories of this package by the names configurations and the command line use.

    fedtheory finds them through the package's entry point (group ``fedtheory.problems`` in
    ``setup.cfg``): the library does not import this package, which builds on it.

    Returns
    -------
    dict
        ``{name: factory}``: every name of :func:`available`, then ``"vision.image_problem"``.

    Examples
    --------
    >>> import problems
    >>> problems.factories()["quadratic"] is problems.quadratic
    True
    """
    table = {name: globals()[name] for name in available()}
    table["vision.image_problem"] = vision.image_problem
    return table
