r"""The two kinds of components of a problem: a :class:`Datafit` (the smooth client objectives f_i)
and a :class:`Regularizer` (the non-smooth part h), after skglm's datafit/penalty split.

A :class:`~fedtheory.problem.FederatedProblem` is data + datafit + regularizer:

.. math::

    F(x) = \sum_{i=1}^n w_i f_i(x) + h(x), \qquad
    f_i(x) = \phi(A_i, b_i; x) + \frac{\ell_2}{2}\|x\|^2, \qquad h(x) = \tau\, h_0(x).

The datafit owns :math:`\phi` (its value, gradient, Hessian, on NumPy arrays, torch tensors and as
a CVXPY expression), the ridge weight :math:`\ell_2`, its constants and the id of its Numba
kernel; the regularizer owns :math:`h_0`, its weight :math:`\tau`, its proximal operator (NumPy,
torch, Numba id) and its CVXPY expression. The problem only stacks the client data and adds
things up: no code outside the components asks which datafit or regularizer a problem has.

A component is one small class, registered by name (:mod:`fedtheory.components.catalog`); the
component suite (:mod:`fedtheory.components.suite`, run by ``tests/test_components.py`` on every
registered pair) checks that its Numba, NumPy, torch and CVXPY forms agree.
"""
from __future__ import annotations

import inspect
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from ..exceptions import DataError



def _check_nonneg(owner, pname, v):
    try:
        ok = bool(np.isfinite(v) and v >= 0)
    except TypeError:
        ok = False
    if not ok:
        raise DataError(f"{owner}: {pname!r} must be a finite float >= 0, got {v!r}.")
    return float(v)


class Component:
    """What datafits and regularizers share: a registered name, parameters, a kernel id."""

    #: Registered name (``"least_squares"``, ``"l1"``, ...).
    name: ClassVar[str] = "component"
    #: Id of the component's Numba kernel in :mod:`fedtheory._kernels` (None: no native kernel; the
    #: kernels then call the NumPy code of the component through the registry, slowly).
    code: ClassVar[int | None] = None

    @classmethod
    def native_code(cls):
        """The kernel id the Numba kernels run this component with: ``code`` when the class itself
        declares it, else None (the NumPy fallback). A subclass of a component with a kernel, say a
        ``Logistic`` with its own ``loss``, inherits ``code`` but not the kernel's mathematics, so
        it runs its own NumPy code until it declares ``code`` itself (a kernel of its own).

        Examples
        --------
        >>> from fedtheory.components import Logistic
        >>> class Tempered(Logistic):
        ...     name = "tempered"
        >>> Logistic.native_code(), Tempered.native_code()
        (1, None)
        """
        return cls.__dict__.get("code")

    def params(self):
        """The constructor's parameters and their values (used by ``repr``, equality and hashing)."""
        sig = inspect.signature(type(self).__init__).parameters.values()
        names = [p.name for p in sig if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        missing = [p for p in names if not hasattr(self, p)]
        if missing:
            raise TypeError(f"{type(self).__name__}: the constructor's parameter(s) {missing} must be stored as "
                                 f"attributes of the same name (self.{missing[0]} = {missing[0]}): repr, equality and "
                                 "the problem's hash (the ground truth's cache key) read them from there.")
        return {p: getattr(self, p) for p in names}

    def key(self):
        """A string that identifies the component and its parameters (part of the problem's hash)."""
        return f"{self.name}|" + "|".join(f"{k}={_key_value(v)}" for k, v in self.params().items())

    def __eq__(self, other):
        return type(self) is type(other) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        try:
            args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        except TypeError:                     # a parameter stored under another name (params says which)
            args = "<parameters not stored under their names>"
        return f"{type(self).__name__}({args})"


def _key_value(v):
    if isinstance(v, np.ndarray):
        import hashlib
        return hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]
    return repr(v)


# =============================================================================== datafits
class Datafit(Component):
    r"""Smooth client objective :math:`f_i(x) = \phi(A_i, b_i; x) + \frac{\ell_2}{2}\|x\|^2`.

    A subclass implements the loss part :math:`\phi` on one block of rows ``(A, t)`` (the rows of a
    client, or of a minibatch): :meth:`block_value`, :meth:`block_grad`, :meth:`block_hvp`,
    :meth:`block_hessian` (NumPy), :meth:`torch_block` (torch), :meth:`cvxpy_block` (CVXPY), plus
    :meth:`example` (data for the component suite). Everything else (the ridge, the client and
    global oracles, the client weights) is done here once.

    Parameters
    ----------
    l2 : float, default 0
        Ridge weight inside every f_i (part of the smooth objective and of its constants).
    """

    #: Rows are samples: minibatches select rows (False: a client's rows form one block, e.g. Q_i).
    has_samples: ClassVar[bool] = True
    #: The Hessian of the loss part does not depend on x (least squares, quadratic).
    constant_hessian: ClassVar[bool] = False
    #: The per-row targets are labels in {-1, +1}.
    binary_targets: ClassVar[bool] = False
    #: Capability: every sample loss is differentiable with a Lipschitz gradient (L-smooth).
    smooth: ClassVar[bool] = True
    #: Capability: a lower bound on every sample (and minibatch) loss, ridge included (None: unknown).
    sample_loss_floor: ClassVar[float | None] = None
    #: Capability: sup of the per-sample loss's second derivative per unit of ||a||^2 (margin datafits:
    #: sup_z l''(z, t), 1/4 for logistic, 1 for least squares); None: unknown. The smoothness constants
    #: (:meth:`smoothness`, :meth:`sample_smoothness`) are certified from it.
    curvature_bound: ClassVar[float | None] = None
    #: Capability: sup_z |l'(z, t)| of the per-sample loss (1 for logistic; None: unbounded or unknown).
    #: Bounds the gradient heterogeneity (each client gradient lies in a ball, :meth:`gradient_radius`).
    slope_bound: ClassVar[float | None] = None
    #: Capability: the loss is exactly 1/2 (a^T x - t)^2 per sample (ground truth then solves the
    #: smooth problem by QR and certifies a lasso by its duality gap).
    squared_residual: ClassVar[bool] = False

    def __init__(self, l2=0.0):
        self.l2 = _check_nonneg(self.name, "l2", l2)

    # ------------------------------------------------------------------ data checks
    def check_client(self, A, t, i, caller):
        """Raise DataError when client ``i``'s rows ``A`` and targets ``t`` do not fit the datafit."""
        if self.binary_targets:
            bad = np.setdiff1d(np.unique(t), [-1.0, 1.0])
            if bad.size:
                raise DataError(f"{caller}: client {i} has labels outside {{-1, +1}}: "
                                f"found {bad[:5].tolist()}. Map the classes to -1/+1 first.")

    def check_data(self, data, caller):
        """Raise DataError when the stacked ``data`` (:class:`~fedtheory.problem.ClientData`) do not fit."""
        for i in range(data.n_clients):
            self.check_client(*data.block(i), i, caller)

    def hash_token(self):
        """The datafit's part of the problem's hash (kernel id and l2 for the built-in datafits)."""
        if self.native_code() is not None and set(self.params()) == {"l2"}:
            return f"{self.native_code()}|{self.l2!r}"
        return self.key()

    # ------------------------------------------------------------------ the loss part on a block of rows
    def block_value(self, A, t, x):  # pragma: no cover - abstract
        """Loss part phi(A, t; x) of one block (a client's rows, or a minibatch: a mean over rows)."""
        raise NotImplementedError

    def block_grad(self, A, t, x):  # pragma: no cover - abstract
        """Gradient of :meth:`block_value` in x."""
        raise NotImplementedError

    def block_hvp(self, A, t, x, v):
        """Hessian of :meth:`block_value` at x times v (default: the dense Hessian times v)."""
        return self.block_hessian(A, t, x) @ v

    def block_hessian(self, A, t, x):  # pragma: no cover - abstract
        """Dense Hessian of :meth:`block_value` at x, shape (d, d)."""
        raise NotImplementedError

    def torch_block(self, A, t, y):  # pragma: no cover - abstract
        """:meth:`block_value` on torch tensors (differentiated by autograd)."""
        raise NotImplementedError

    def cvxpy_block(self, A, t, x):  # pragma: no cover - abstract
        """:meth:`block_value` as a CVXPY expression of the variable x."""
        raise NotImplementedError

    # ------------------------------------------------------------------ weighted sums over clients
    def loss_value(self, data, x):
        """sum_i w_i phi(A_i, b_i; x) (the smooth value without the ridge)."""
        return sum(data.weights[i] * self.block_value(*data.block(i), x) for i in range(data.n_clients))

    def loss_grad(self, data, x):
        """Gradient of :meth:`loss_value`."""
        return sum(data.weights[i] * self.block_grad(*data.block(i), x) for i in range(data.n_clients))

    def loss_hessian(self, data, x):
        """Hessian of :meth:`loss_value`."""
        return sum(data.weights[i] * self.block_hessian(*data.block(i), x) for i in range(data.n_clients))

    def cvxpy_loss(self, data, x):
        """:meth:`loss_value` as a CVXPY expression."""
        import cvxpy as cp
        return cp.sum([data.weights[i] * self.cvxpy_block(*data.block(i), x) for i in range(data.n_clients)])

    def evaluation_sums(self, data):
        """Weighted sums of the data that evaluate sum_i w_i f_i in one pass instead of one per client,
        or None (the default: the evaluation goes over every client's rows). The quadratic's
        (sum_i w_i Q_i, sum_i w_i c_i); the compiled evaluation of a run uses them too
        (:func:`fedtheory._kernels.evaluation.quadratic_metrics`)."""
        return None

    def loss_value_grad(self, data, x):
        """(:meth:`loss_value`, :meth:`loss_grad`); margin datafits share one pass over the data."""
        return self.loss_value(data, x), self.loss_grad(data, x)

    # ------------------------------------------------------------------ smooth objective (ridge added here)
    def value(self, data, x):
        """sum_i w_i f_i(x)."""
        return float(self.loss_value(data, x) + 0.5 * self.l2 * x @ x)

    def value_grad(self, data, x):
        """(sum_i w_i f_i(x), its gradient), the evaluation's fused pass."""
        v, g = self.loss_value_grad(data, x)
        return float(v + 0.5 * self.l2 * x @ x), g + self.l2 * x

    def grad(self, data, x):
        """sum_i w_i grad f_i(x)."""
        return self.loss_grad(data, x) + self.l2 * x

    def hessian(self, data, x):
        """sum_i w_i Hessian f_i(x), dense (d, d)."""
        return self.loss_hessian(data, x) + self.l2 * np.eye(data.dim)

    def client_value(self, data, i, x, rows=None):
        """f_i(x), or the minibatch value on the absolute rows ``rows``."""
        return float(self.block_value(*data.block(i, self._rows(rows)), x) + 0.5 * self.l2 * x @ x)

    def client_grad(self, data, i, x, rows=None):
        """grad f_i(x), or the minibatch gradient on ``rows``."""
        return self.block_grad(*data.block(i, self._rows(rows)), x) + self.l2 * x

    def client_hvp(self, data, i, x, v, rows=None):
        """Hessian of f_i (or of the minibatch objective on ``rows``) at x times v."""
        return self.block_hvp(*data.block(i, self._rows(rows)), x, v) + self.l2 * v

    def client_hessian(self, data, i, x):
        """Dense Hessian of f_i at x."""
        return self.block_hessian(*data.block(i), x) + self.l2 * np.eye(data.dim)

    def torch_value(self, A, t, y):
        """f on a block of rows as a torch scalar: phi + l2/2 ||y||^2 (the ridge node is created
        first: autograd accumulates the gradient contributions in reverse creation order)."""
        ridge = 0.5 * self.l2 * (y @ y)
        return self.torch_block(A, t, y) + ridge

    def cvxpy_value(self, data, x):
        """sum_i w_i f_i(x) as a CVXPY expression."""
        import cvxpy as cp
        expr = self.cvxpy_loss(data, x)
        return expr + 0.5 * self.l2 * cp.sum_squares(x) if self.l2 else expr

    def _rows(self, rows):
        return None if rows is None or not self.has_samples else np.asarray(rows, dtype=np.int64)

    # ------------------------------------------------------------------ capabilities used by ground truth
    def has_cvxpy(self):
        """Whether the datafit provides its CVXPY form (:meth:`cvxpy_block` or :meth:`cvxpy_loss`)."""
        return _overrides(self, Datafit, ("cvxpy_block", "cvxpy_loss"))

    def cvxpy_objective(self, data, x):
        """sum_i w_i f_i(x) as a CVXPY expression of the variable x (ridge included): the datafit's
        part of the ground truth's CVXPY problem. Raises NotImplementedError without a CVXPY form."""
        if not self.has_cvxpy():
            raise NotImplementedError(f"the datafit {self.name!r} has no CVXPY form (cvxpy_block)")
        return self.cvxpy_value(data, x)

    def infimum_attained(self, problem):
        """Whether min_x sum_i w_i f_i(x) is attained (without a regularizer); True by default. The
        logistic loss overrides it: separable data without ridge approach the infimum 0 at infinity."""
        return True

    def infimum(self, problem):
        """The infimum of the loss part where :meth:`infimum_attained` is False and the datafit knows
        it exactly, else None (the ground truth then certifies no client optimum value)."""
        return None

    def recession_rows(self, problem):
        """Where :meth:`infimum_attained` is False: a boolean mask over the rows of ``problem.M``
        of those whose loss a direction of recession drives to its floor (the rows then leave the
        infimum, :func:`fedtheory.truth.infimum`); None when the datafit does not know them."""
        return None

    # ------------------------------------------------------------------ constants
    def _missing_curvature(self, what):
        if self.curvature_bound is not None and not isinstance(self, MarginDatafit):
            return DataError(f"{what}: the datafit {self.name!r} declares a 'curvature_bound', which certifies "
                             "the smoothness of a margin datafit (a loss of a_r^T x per row, subclass "
                             "MarginDatafit) only; a datafit of another form certifies it with "
                             "'constant_hessian' (an explicit Hessian), else its smoothness constant is unknown.")
        return DataError(f"{what}: the datafit {self.name!r} declares neither 'constant_hessian' nor a "
                         "'curvature_bound' (sup of the loss's second derivative per unit of ||a||^2), so "
                         "its smoothness constant cannot be certified; set 'curvature_bound' on the class.")

    def _bound_hessian(self, data, i=None):
        """A matrix B with Hessian <= B everywhere (Loewner order), ridge excluded: the Hessian itself
        for a constant Hessian, curvature_bound * sum_r omega_r a_r a_r^T for a margin datafit with a
        curvature bound; None when neither is declared."""
        z = np.zeros(data.dim)
        if self.constant_hessian:
            return self.loss_hessian(data, z) if i is None else self.block_hessian(*data.block(i), z)
        c = self.curvature_bound
        if c is None or not isinstance(self, MarginDatafit):
            return None
        if i is None:
            M, w = data.M, data.row_w * float(c)
        else:
            M, _ = data.block(i)
            w = np.full(M.shape[0], float(c) / M.shape[0])
        if sp.issparse(M):
            return np.asarray((M.T @ sp.diags(w) @ M).toarray())
        return (M * w[:, None]).T @ M

    def smoothness(self, data, i=None):
        """L = sup_x lambda_max of the Hessian of sum_i w_i f_i (of f_i with ``i``), from the
        capabilities: exact for a constant Hessian; for a margin datafit with a ``curvature_bound`` c,
        c lambda_max(sum_r omega_r a_r a_r^T) + l2, a certified upper bound that is exact when every
        sample reaches its curvature bound at one common x (logistic at x = 0, least squares everywhere).

        Raises
        ------
        DataError
            When the datafit declares neither ``constant_hessian`` nor ``curvature_bound``.

        Examples
        --------
        >>> import numpy as np
        >>> from fedtheory.components import Logistic
        >>> from fedtheory.problem import ClientData
        >>> d = ClientData(np.array([[2.0, 0.0], [0.0, 1.0]]), np.array([1.0, -1.0]), np.array([0, 2]))
        >>> Logistic(l2=0.5).smoothness(d)        # 1/4 * lambda_max(diag(4, 1) / 2) + 0.5
        1.0
        """
        B = self._bound_hessian(data, i)
        if B is None:
            raise self._missing_curvature("smoothness")
        return float(np.linalg.eigvalsh(B + self.l2 * np.eye(data.dim))[-1])

    def sample_smoothness(self, data):
        """Largest smoothness constant of one sample's loss (plus l2): curvature_bound * max_r ||a_r||^2
        for samples, the largest client L_i for a datafit without samples (a client is one sample).

        Raises
        ------
        DataError
            When no constant Hessian or curvature bound is declared.

        Examples
        --------
        >>> import numpy as np
        >>> from fedtheory.components import LeastSquares
        >>> from fedtheory.problem import ClientData
        >>> d = ClientData(np.array([[3.0, 4.0], [0.0, 1.0]]), np.array([1.0, -1.0]), np.array([0, 2]))
        >>> LeastSquares(l2=0.5).sample_smoothness(d)
        25.5
        """
        if not self.has_samples:
            return max(self.smoothness(data, i) for i in range(data.n_clients))
        if self.curvature_bound is None:
            raise self._missing_curvature("sample_smoothness")
        return float(self.curvature_bound) * float(row_norms_sq(data.M).max()) + self.l2

    def client_strong_convexity(self, data, i):
        """inf_x lambda_min of the Hessian of f_i: its smallest eigenvalue for a constant Hessian, else l2."""
        if self.constant_hessian:
            return max(float(np.linalg.eigvalsh(self.block_hessian(*data.block(i), np.zeros(data.dim)))[0]),
                       0.0) + self.l2
        return self.l2

    def client_quadratic(self, data, i):
        """(H_i, c_i, k_i) with phi_i(x) = x^T H_i x / 2 - c_i^T x + k_i (the ridge excluded), for a datafit
        with a constant Hessian; None otherwise. Without samples (explicit quadratics) these are the
        client's data, exact; with samples they are formed from the rows (cancellation near the optimum).

        Examples
        --------
        >>> import numpy as np
        >>> from fedtheory.components import Quadratic
        >>> from fedtheory.problem import ClientData
        >>> d = ClientData(2 * np.eye(2), np.array([1.0, 0.0]), np.array([0, 2]))
        >>> H, c, k = Quadratic().client_quadratic(d, 0)
        >>> H.tolist(), c.tolist(), k
        ([[2.0, 0.0], [0.0, 2.0]], [1.0, 0.0], 0.0)
        """
        if not self.constant_hessian:
            return None
        A, t = data.block(i)
        z = np.zeros(data.dim)
        return self.block_hessian(A, t, z), -self.block_grad(A, t, z), float(self.block_value(A, t, z))

    def gradient_radius(self, data, i):
        """R with ||grad phi_i(x)|| <= R for every x (the ridge excluded): slope_bound times client i's
        largest row norm; None without a slope bound."""
        if self.slope_bound is None or not self.has_samples:
            return None
        return float(self.slope_bound) * float(np.sqrt(row_norms_sq(data.block(i)[0]).max()))

    def strong_convexity(self, problem):
        """mu = inf_x lambda_min of the Hessian of sum_i w_i f_i: the smallest eigenvalue of the
        constant Hessian when it is constant, else the ridge l2 (a lower bound that is exact when
        the loss curvature can vanish, as the logistic one does at infinity)."""
        if self.constant_hessian:
            return max(float(np.linalg.eigvalsh(problem.hessian(np.zeros(problem.dim)))[0]), 0.0)
        return self.l2

    # ------------------------------------------------------------------ the component suite
    @classmethod
    def example(cls, rng, n_clients, dim, sparse=False):
        """``(datafit, A, b)``: an instance and per-client lists of rows and targets on which the
        component suite checks the datafit (``sparse``: CSR rows, for datafits with samples)."""
        A, b = [], []
        for i in range(n_clients):
            a = rng.normal(size=(5 + i, dim))
            if sparse:
                a = sp.csr_matrix(a * (rng.random(a.shape) < 0.5))
            A.append(a)
            t = rng.normal(size=a.shape[0])
            b.append(np.where(t > 0, 1.0, -1.0) if cls.binary_targets else t)
        return cls(l2=0.1), A, b


def _overrides(obj, base, names):
    """Whether type(obj) defines one of ``names`` below ``base``."""
    return any(getattr(type(obj), n, None) is not getattr(base, n, None) for n in names)


def row_norms_sq(M):
    """Squared Euclidean norm of every row of a dense or CSR matrix.

    Parameters
    ----------
    M : ndarray or scipy.sparse.csr_matrix
        The rows.

    Returns
    -------
    ndarray of shape (m,)
        ||a_j||^2 of every row.
    """
    if sp.issparse(M):
        return np.asarray(M.multiply(M).sum(axis=1)).ravel()
    M = np.asarray(M)
    return np.einsum("ij,ij->i", M, M)


class MarginDatafit(Datafit):
    r"""A datafit of the margins: :math:`\phi(A, t; x) = \frac1m \sum_r \ell(a_r^\top x, t_r)`.

    A subclass gives the per-sample loss :math:`\ell(z, t)` and its first two derivatives in z on
    NumPy arrays (:meth:`loss`, :meth:`dloss`, :meth:`d2loss`), on torch tensors
    (:meth:`torch_loss`) and in CVXPY (:meth:`cvxpy_loss_rows`); the Numba kernel is the datafit's
    scalar ``*_terms`` function in :mod:`fedtheory._kernels.datafits` (shared dense and CSR row loops).

    Parameters
    ----------
    l2 : float, default 0
        Ridge weight inside every f_i (part of the smooth objective and of its constants).
    """

    #: sup_z l''(z, t): the sample smoothness constant is this times max_r ||a_r||^2 (plus l2);
    #: None (the default): unknown, so no smoothness constant is certified for the datafit.
    curvature_bound: ClassVar[float | None] = None

    def loss(self, z, t):  # pragma: no cover - abstract
        """Per-sample loss l(z, t), elementwise over arrays of margins z and targets t."""
        raise NotImplementedError

    def dloss(self, z, t):  # pragma: no cover - abstract
        """Its derivative in the margin, l'(z, t), elementwise."""
        raise NotImplementedError

    def d2loss(self, z, t):  # pragma: no cover - abstract
        """Its second derivative in the margin, l''(z, t) >= 0, elementwise."""
        raise NotImplementedError

    def max_curvature(self, z, t, radius):
        """An upper bound on l''(u, t) over |u - z| <= radius, elementwise (used by the ground
        truth's rounding-error bounds, :mod:`fedtheory.truth.certificate`). Default: the global
        :attr:`curvature_bound`; a datafit whose curvature vanishes somewhere may return less.

        Examples
        --------
        >>> import numpy as np
        >>> from fedtheory.components import LeastSquares
        >>> LeastSquares().max_curvature(np.array([0.0, 50.0]), np.array([1.0, 1.0]), 1.0)
        array([1., 1.])
        """
        c = self.curvature_bound
        return np.full(np.shape(z), np.inf if c is None else float(c))

    def torch_loss(self, z, t):  # pragma: no cover - abstract
        """l(z, t) elementwise on torch tensors (autograd differentiates it)."""
        raise NotImplementedError

    def cvxpy_loss_rows(self, z, t, w):  # pragma: no cover - abstract
        """sum_r w_r l(z_r, t_r) as a CVXPY expression (w >= 0 the row weights)."""
        raise NotImplementedError

    def has_cvxpy(self):
        """Whether the datafit provides its CVXPY form (:meth:`cvxpy_loss_rows`, or a block form of its own)."""
        return _overrides(self, MarginDatafit, ("cvxpy_loss_rows", "cvxpy_block", "cvxpy_loss"))

    # blocks: means over the rows
    def block_value(self, A, t, x):
        return np.mean(self.loss(A @ x, t))

    def block_grad(self, A, t, x):
        return A.T @ self.dloss(A @ x, t) / A.shape[0]

    def block_hvp(self, A, t, x, v):
        return A.T @ (self.d2loss(A @ x, t) * (A @ v)) / A.shape[0]

    def block_hessian(self, A, t, x):
        D = self.d2loss(A @ x, t) / A.shape[0]
        return (A.T @ sp.diags(D) @ A).toarray() if sp.issparse(A) else (A * D[:, None]).T @ A

    def torch_block(self, A, t, y):
        return self.torch_loss(A @ y, t).mean()

    def cvxpy_block(self, A, t, x):
        return self.cvxpy_loss_rows(A @ x, t, np.full(A.shape[0], 1.0 / A.shape[0]))

    # all clients at once, with per-row weights omega_r = w_i / m_i; the weighted sum by NumPy's
    # pairwise summation, not a BLAS dot: OpenBLAS splits a long dot between its threads, so F(x)
    # changed in the last bits with the thread count (a sweep's -j 1 and -j 2 stored different F)
    def loss_value(self, data, x):
        return np.add.reduce(data.row_w * self.loss(data.M @ x, data.b))

    def loss_grad(self, data, x):
        return data.M.T @ (data.row_w * self.dloss(data.M @ x, data.b))

    def loss_value_grad(self, data, x):
        z = data.M @ x                             # one product with the data for both
        return np.add.reduce(data.row_w * self.loss(z, data.b)), data.M.T @ (data.row_w * self.dloss(z, data.b))

    def loss_hessian(self, data, x):
        D = data.row_w * self.d2loss(data.M @ x, data.b)
        if data.sparse:
            return (data.M.T @ sp.diags(D) @ data.M).toarray()
        return (data.M * D[:, None]).T @ data.M

    def cvxpy_loss(self, data, x):
        return self.cvxpy_loss_rows(data.M @ x, data.b, data.row_w)


def capabilities(problem):
    """What the problem's components declare about the objective F = sum_i w_i f_i + h, asked by
    theorem applicability (never the kind of problem).

    Parameters
    ----------
    problem : FederatedProblem
        The problem.

    Returns
    -------
    dict
        ``smooth``: the datafit is smooth and h is zero or smooth; ``strongly_convex``: the
        datafit's strong convexity is positive or h is a strongly convex penalty with positive
        weight; ``composite``: h is not zero; ``certified_smoothness``: the datafit declares a
        constant Hessian or a curvature bound, so L is known (:meth:`Datafit.smoothness`);
        ``bounded_slopes``: it declares a slope bound (bounded sample gradients);
        ``constant_hessian``, ``samples``: as the datafit declares them.

    Examples
    --------
    >>> import numpy as np
    >>> from fedtheory.components import LeastSquares, L1, L2, capabilities
    >>> from fedtheory.problem import FederatedProblem
    >>> A, b = [np.eye(2), np.eye(2)], [np.ones(2), -np.ones(2)]
    >>> capabilities(FederatedProblem.from_clients(A, b, LeastSquares(), L1(weight=0.1)))["smooth"]
    False
    >>> capabilities(FederatedProblem.from_clients(A, b, LeastSquares(), L2(weight=0.1)))
    {'smooth': True, 'strongly_convex': True, 'composite': True, 'certified_smoothness': True, \
'bounded_slopes': False, 'constant_hessian': True, 'samples': True}
    """
    fit, reg = problem.datafit, problem.regularizer
    h_smooth = reg.is_zero or bool(getattr(reg, "smooth", False))
    h_sc = (not reg.is_zero) and bool(getattr(reg, "strongly_convex", False))
    return {"smooth": bool(getattr(fit, "smooth", True)) and h_smooth,
            "strongly_convex": h_sc or fit.strong_convexity(problem) > 0,
            "composite": not reg.is_zero,
            "certified_smoothness": bool(fit.constant_hessian or fit.curvature_bound is not None),
            "bounded_slopes": fit.slope_bound is not None,
            "constant_hessian": bool(fit.constant_hessian),
            "samples": bool(fit.has_samples)}


# =============================================================================== regularizers
class Regularizer(Component):
    r"""Non-smooth part :math:`h(x) = \tau\, h_0(x)` with a computable proximal operator.

    A subclass implements :meth:`h0` (NumPy), :meth:`prox_t` (the prox of :math:`t h_0`, NumPy),
    :meth:`torch_prox_t`, :meth:`cvxpy_h0` and :meth:`example`; weights, the zero case and the
    prox of step * h are handled here.

    Parameters
    ----------
    weight : float, default 0
        The weight tau >= 0 (``problem.reg_weight``); with 0 the problem is smooth.
    """

    #: Capability: h is differentiable with a Lipschitz gradient (a smooth objective stays smooth).
    smooth: ClassVar[bool] = False
    #: Capability: h0 is strongly convex (a positive weight makes the objective strongly convex).
    strongly_convex: ClassVar[bool] = False
    #: Capability: h0's modulus of strong convexity (1 for ||x||^2 / 2; 0 when not strongly convex):
    #: ground truth's certificate adds weight times it to the datafit's mu (the strong-convexity
    #: bracket on F*).
    convexity_modulus: ClassVar[float] = 0.0
    #: Capability: :meth:`prox_t` is exact (closed form or a finite algorithm): ground truth polishes a
    #: composite problem by accelerated proximal gradient with it.
    closed_form_prox: ClassVar[bool] = True
    #: Capability: h0 = ||x||_1, linear on every orthant: ground truth polishes by active-set Newton
    #: on the support with fixed signs, and certifies least squares + h by the lasso duality gap.
    sign_support: ClassVar[bool] = False

    def __init__(self, weight=0.0):
        self.weight = _check_nonneg(self.name, "weight", weight)

    def check(self, dim, caller):
        """Raise DataError when the regularizer cannot act on vectors of dimension ``dim``."""

    @property
    def is_zero(self):
        """h = 0 (the problem is smooth)."""
        return self.weight == 0

    def coercive(self):
        """Capability: h(x) -> inf as ||x|| -> inf (a norm of x with a positive weight). With it, F
        = f + h has a minimiser even where f alone has none (f >= its infimum, h grows); without
        it (the default, e.g. a group left unpenalised), ground truth does not decide attainment
        for a datafit without a minimiser and refuses."""
        return False

    def h0(self, x):  # pragma: no cover - abstract
        raise NotImplementedError

    def prox_t(self, u, t):  # pragma: no cover - abstract
        """prox of t * h0 at u (NumPy)."""
        raise NotImplementedError

    def torch_prox_t(self, u, t):  # pragma: no cover - abstract
        """:meth:`prox_t` on a torch tensor."""
        raise NotImplementedError

    def cvxpy_h0(self, x):  # pragma: no cover - abstract
        """h0 as a CVXPY expression."""
        raise NotImplementedError

    def value(self, x):
        """h(x) = tau h0(x) (0.0 when tau = 0)."""
        x = np.asarray(x, dtype=np.float64)
        if self.is_zero:
            return 0.0
        return self.weight * float(self.h0(x))

    def prox(self, x, step):
        """prox of step * h at x, i.e. of h0 at threshold t = step * tau (a copy when h = 0)."""
        x = np.asarray(x, dtype=np.float64)
        if self.is_zero:
            return x.copy()
        return self.prox_t(x, step * self.weight)

    def has_cvxpy(self):
        """Whether the regularizer provides its CVXPY form (:meth:`cvxpy_h0`); h = 0 always does."""
        return self.is_zero or type(self).cvxpy_h0 is not Regularizer.cvxpy_h0

    def cvxpy_objective(self, x):
        """h as a CVXPY expression, or None when h = 0 (the regularizer's part of the ground truth's
        CVXPY problem). Raises NotImplementedError without a CVXPY form."""
        if not self.has_cvxpy():
            raise NotImplementedError(f"the regularizer {self.name!r} has no CVXPY form (cvxpy_h0)")
        return self.cvxpy_value(x)

    def cvxpy_value(self, x):
        """h as a CVXPY expression (None when h = 0)."""
        return None if self.is_zero else self.weight * self.cvxpy_h0(x)

    def kernel_args(self):
        """(group ids (d,) or empty int64, m1, m2): the arrays the Numba prox kernels read."""
        return np.zeros(0, dtype=np.int64), 0, 0

    def hash_extra(self):
        """Extra bytes of the problem's hash that define h0 beyond its weight."""
        return f"|{self.key()}".encode()

    @classmethod
    def example(cls, rng, dim):
        """An instance acting on dimension ``dim`` for the component suite (None: ``dim`` does not fit)."""
        return cls(weight=0.3)
