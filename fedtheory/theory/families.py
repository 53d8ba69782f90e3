"""The problem families of the theorems' own cases, built from the library's components.

Each function builds the same problem (the same data, name and exact constants) as the
:mod:`problems` factory of its name, which users call; the library does not import the top-level
``problems`` package (it builds on the library).
"""
from ..components import L1, LeastSquares, Quadratic
from ..components.quadratic import explicit_quadratic_clients, synthetic_quadratic
from ..problem import FederatedProblem


def quadratic(n_clients, dim, L=1.0, mu=0.1, heterogeneity=0.0, noise=0.0, seed=0, hessian="shared",
              shared_minimizer=False, weights=None):
    """``problems.quadratic`` (its parameters): a federated quadratic with exactly known constants.

    Parameters
    ----------
    n_clients, dim : int
        Number of clients and dimension.
    L, mu : float
        Largest and smallest eigenvalue of the average Hessian.
    heterogeneity : float
        The squared gradient dissimilarity at x*.
    noise : float
        Std of the additive Gaussian gradient noise per coordinate.
    seed : int
        Seed of the construction.
    hessian : {"shared", "distinct"}
        Identical or client-specific Hessians.
    shared_minimizer : bool
        Whether x* minimises every f_i.
    weights : array of shape (n,) or None
        Client weights (uniform for None).

    Returns
    -------
    FederatedProblem
        ``info`` holds the exact constants.
    """
    Q, C, w, info = synthetic_quadratic(n_clients, dim, L, mu, heterogeneity, noise, seed, hessian,
                                        shared_minimizer, weights, caller="quadratic")
    return FederatedProblem.from_clients(list(Q), list(C), Quadratic(), weights=w, noise=noise, name="quadratic",
                                         info=info, caller="quadratic")


def explicit_quadratic(Q, c, noise=0.0, weights=None, name="explicit_quadratic"):
    """``problems.explicit_quadratic``: a federated quadratic from given Hessians and linear terms.

    Parameters
    ----------
    Q : array (d, d) or (n, d, d)
        One shared Hessian, or one per client.
    c : array (n, d)
        Linear terms, one row per client.
    noise : float
        Std of the additive Gaussian gradient noise per coordinate.
    weights : array of shape (n,) or None
        Client weights (uniform for None).
    name : str
        The problem's name.

    Returns
    -------
    FederatedProblem
        ``info`` holds the exact constants.
    """
    Qa, C, w, info = explicit_quadratic_clients(Q, c, noise, weights, caller="explicit_quadratic")
    return FederatedProblem.from_clients(list(Qa), list(C), Quadratic(), weights=w, noise=noise, name=name,
                                         info=info, caller="explicit_quadratic")


def least_squares(A, b, l2=0.0):
    """``problems.least_squares``: federated least squares.

    Parameters
    ----------
    A : list of (m_i, d) ndarray
        One design matrix per client.
    b : list of (m_i,) ndarray
        One target vector per client.
    l2 : float
        Ridge weight inside every client objective.

    Returns
    -------
    FederatedProblem
        The least-squares problem.
    """
    return FederatedProblem.from_clients(A, b, LeastSquares(l2=l2), None, name="least_squares",
                                         caller="least_squares")


def lasso(A, b, l1, l2=0.0):
    """``problems.lasso``: federated least squares plus ``l1 ||x||_1``.

    Parameters
    ----------
    A : list of (m_i, d) ndarray
        One design matrix per client.
    b : list of (m_i,) ndarray
        One target vector per client.
    l1 : float
        Weight of the l1 norm, > 0.
    l2 : float
        Ridge weight inside every client objective.

    Returns
    -------
    FederatedProblem
        A composite problem.
    """
    return FederatedProblem.from_clients(A, b, LeastSquares(l2=l2), L1(weight=l1), name="lasso", caller="lasso")
