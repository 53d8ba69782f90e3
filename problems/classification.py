"""Logistic regression."""
from fedtheory.components import Logistic
from fedtheory.problem import FederatedProblem


def logistic(A, y, l2=0.0, weights=None, noise=0.0, name="logistic"):
    r"""Federated l2-regularised logistic regression with labels in {-1, +1}.

    .. math:: f_i(x) = \frac{1}{m_i}\sum_{j=1}^{m_i} \log\bigl(1 + e^{-y_{ij} a_{ij}^\top x}\bigr)
              + \frac{\ell_2}{2}\|x\|^2 .

    Parameters
    ----------
    A : list of (m_i, d) ndarray or CSR matrices
        One design matrix per client.
    y : list of (m_i,) arrays with values in {-1, +1}
        Labels; any other value raises a ValueError naming the client.
    l2 : float, default 0
        Ridge weight (the strong convexity constant mu of every f_i).
    weights : array of shape (n,), optional
        Client weights (uniform by default).
    noise : float, default 0
        Std of additive Gaussian gradient noise per coordinate added by the runner.
    name : str, default "logistic"
        Name of the problem (the data-set factories pass their own; error messages cite
        ``problems.<name>``).

    Returns
    -------
    FederatedProblem
        The logistic-regression problem, one client per design matrix.

    Examples
    --------
    >>> import numpy as np, problems
    >>> rng = np.random.default_rng(0)
    >>> A = [rng.normal(size=(30, 4)) for _ in range(3)]
    >>> y = [np.sign(a @ np.ones(4)) for a in A]
    >>> problems.logistic(A, y, l2=0.1).kind_name
    'logistic'
    """
    return FederatedProblem.from_clients(A, y, Logistic(l2=l2), None, weights=weights, noise=noise, name=name,
                                         caller=f"problems.{name}")
