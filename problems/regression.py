"""Least squares and lasso."""
from fedtheory.components import L1, GroupL2, LeastSquares
from fedtheory.problem import FederatedProblem


def least_squares(A, b, l2=0.0, weights=None, noise=0.0):
    r"""Federated least squares.

    .. math:: f_i(x) = \frac{1}{2 m_i}\|A_i x - b_i\|^2 + \frac{\ell_2}{2}\|x\|^2,
              \qquad F = \sum_i w_i f_i.

    Parameters
    ----------
    A : list of (m_i, d) ndarray or CSR matrices
        One design matrix per client.
    b : list of (m_i,) ndarray
        One target vector per client.
    l2 : float, default 0
        Ridge weight inside every client objective.
    weights : array of shape (n,), optional
        Client weights (uniform by default).
    noise : float, default 0
        Std of additive Gaussian gradient noise per coordinate added by the runner.

    Returns
    -------
    FederatedProblem
        The least-squares problem, one client per design matrix.

    Examples
    --------
    >>> import numpy as np, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.least_squares([rng.normal(size=(20, 3)) for _ in range(4)],
    ...                            [rng.normal(size=20) for _ in range(4)])
    >>> p.n_clients, p.dim
    (4, 3)
    """
    return FederatedProblem.from_clients(A, b, LeastSquares(l2=l2), None, weights=weights, noise=noise,
                                         name="least_squares", caller="problems.least_squares")


def lasso(A, b, l1, l2=0.0, weights=None, noise=0.0):
    r"""Federated lasso: least squares clients plus :math:`h(x) = \ell_1 \|x\|_1`.

    .. math:: F(x) = \sum_i \frac{w_i}{2 m_i}\|A_i x - b_i\|^2 + \frac{\ell_2}{2}\|x\|^2
              + \ell_1 \|x\|_1 .

    Parameters
    ----------
    A : list of (m_i, d) ndarray or CSR matrices
        One design matrix per client.
    b : list of (m_i,) ndarray
        One target vector per client.
    l1 : float
        Weight of h, > 0.
    l2 : float, default 0
        Ridge weight inside every client objective.
    weights : array of shape (n,), optional
        Client weights (uniform by default).
    noise : float, default 0
        Std of additive Gaussian gradient noise per coordinate added by the runner.

    Returns
    -------
    FederatedProblem
        A composite problem (``is_composite`` is True).

    Examples
    --------
    >>> import numpy as np, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.lasso([rng.normal(size=(20, 3))], [rng.normal(size=20)], l1=0.1)
    >>> p.is_composite
    True
    """
    return FederatedProblem.from_clients(A, b, LeastSquares(l2=l2), L1(weight=l1), weights=weights, noise=noise,
                                         name="lasso", caller="problems.lasso")


def group_lasso(A, b, l1, groups, l2=0.0, weights=None, noise=0.0):
    r"""Federated group lasso: least squares clients plus :math:`h(x) = \tau\sum_g \|x_g\|_2`.

    Parameters
    ----------
    A : list of (m_i, d) ndarray or CSR matrices
        One design matrix per client.
    b : list of (m_i,) ndarray
        One target vector per client.
    l1 : float
        Weight tau of h, > 0.
    groups : array_like of int, shape (d,)
        A group id per coordinate (ids 0, 1, ...; -1 marks an unpenalized coordinate such as an
        intercept).
    l2 : float, default 0
        Ridge weight inside every client objective.
    weights : array of shape (n,), optional
        Client weights (uniform by default).
    noise : float, default 0
        Std of additive Gaussian gradient noise per coordinate added by the runner.

    Returns
    -------
    FederatedProblem
        A composite problem (``is_composite`` is True).

    Examples
    --------
    >>> import numpy as np, problems
    >>> rng = np.random.default_rng(0)
    >>> p = problems.group_lasso([rng.normal(size=(20, 4))], [rng.normal(size=20)], l1=0.1, groups=[0, 0, 1, 1])
    >>> p.reg, round(p.h_value(np.array([3.0, 4.0, 0.0, 0.0])), 12)
    ('group', 0.5)
    """
    return FederatedProblem.from_clients(A, b, LeastSquares(l2=l2), GroupL2(weight=l1, groups=groups),
                                         weights=weights, noise=noise, name="group_lasso",
                                         caller="problems.group_lasso")
