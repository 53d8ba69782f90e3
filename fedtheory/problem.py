r"""The federated problem: client data + a datafit + a regularizer.

A :class:`FederatedProblem` represents

.. math::

    F(x) = \sum_{i=1}^n w_i f_i(x) + h(x),

where the **data** (:class:`ClientData`) are the clients' rows stacked in one dense array or one
CSR matrix with ``client_ptr`` offsets (what the Numba kernels read) and the client weights
:math:`w_i`; the **datafit** (:class:`fedtheory.components.Datafit`) defines the smooth
:math:`f_i` (least squares, logistic, explicit quadratic, each with a ridge
:math:`\frac{\ell_2}{2}\|x\|^2`); the **regularizer** (:class:`fedtheory.components.Regularizer`)
defines :math:`h` (none, l2, l1, group, nuclear). The problem validates and stacks the data,
hashes everything, packs the arrays for the kernels and adds the components' answers up; the
math of each piece lives in its component (:mod:`fedtheory.components`). The concrete factories
live in the top-level :mod:`problems` package.
"""
from __future__ import annotations

import hashlib

import numpy as np
import scipy.sparse as sp

from . import components
from .components.weights import client_weights
from .components.catalog import kernel_id
from .exceptions import DataError
from ._kernels.oracles import kernel_form
from ._kernels.rounds import Pack


def _as_client_arrays(A, b, caller, datafit=None):
    """Validate per-client lists and return (stacked matrix, stacked targets, ptr).

    ``datafit`` (a :class:`~fedtheory.components.Datafit`) checks each client's targets (labels).
    """
    if isinstance(A, (np.ndarray, sp.spmatrix, sp.sparray)) or not hasattr(A, "__len__"):
        raise DataError(f"{caller}: 'A' must be a list with one design matrix per client, "
                        f"got {type(A).__name__}.")
    if not hasattr(b, "__len__"):
        raise DataError(f"{caller}: the targets must be a list with one vector per client.")
    if len(A) == 0:
        raise DataError(f"{caller}: no clients were given (empty list).")
    if len(A) != len(b):
        raise DataError(f"{caller}: got {len(A)} design matrices but {len(b)} target vectors; "
                        "one of each is needed per client.")
    sparse = any(sp.issparse(a) for a in A)
    dims = set()
    blocks, targets, sizes = [], [], []
    for i, (a, t) in enumerate(zip(A, b)):
        for what, arr in (("design matrix", a), ("targets", t)):
            dtype = arr.dtype if hasattr(arr, "dtype") else np.asarray(arr).dtype
            real = np.issubdtype(dtype, np.bool_) or (np.issubdtype(dtype, np.number)
                                                      and not np.issubdtype(dtype, np.complexfloating))
            if not real:                # a cast would drop an imaginary part, or fail deep inside NumPy
                raise DataError(f"{caller}: client {i}: the {what} must be real numbers; got dtype {dtype}.")
        if sp.issparse(a):
            a = sp.csr_matrix(a, dtype=np.float64)
            if a.ndim != 2:
                raise DataError(f"{caller}: client {i}: design matrix must be 2-D.")
            vals = a.data
        else:
            a = np.asarray(a, dtype=np.float64)
            if a.ndim != 2:
                raise DataError(f"{caller}: client {i}: design matrix must be 2-D, "
                                f"got shape {a.shape}.")
            vals = a
        t = np.asarray(t, dtype=np.float64)
        if a.shape[0] == 0:
            raise DataError(f"{caller}: client {i} is empty (0 samples); every client needs "
                            "at least one sample.")
        if a.shape[1] == 0:
            raise DataError(f"{caller}: client {i}: the design matrix has 0 columns; the model needs "
                            "at least one coordinate.")
        if t.ndim != 1 or t.shape[0] != a.shape[0]:
            raise DataError(f"{caller}: client {i}: design matrix has {a.shape[0]} rows but "
                            f"the target vector has shape {t.shape}.")
        if not np.all(np.isfinite(vals)):
            raise DataError(f"{caller}: client {i}: design matrix contains NaN or inf.")
        if not np.all(np.isfinite(t)):
            raise DataError(f"{caller}: client {i}: targets contain NaN or inf.")
        if datafit is not None:
            datafit.check_client(a, t, i, caller)
        dims.add(a.shape[1])
        blocks.append(a)
        targets.append(t)
        sizes.append(a.shape[0])
    if len(dims) != 1:
        raise DataError(f"{caller}: clients have different numbers of features {sorted(dims)}; "
                        "all design matrices must have the same number of columns.")
    if sparse:
        M = sp.vstack([sp.csr_matrix(a) for a in blocks], format="csr")
        M.sort_indices()
    else:
        M = np.ascontiguousarray(np.vstack(blocks))
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return M, np.concatenate(targets), ptr


def _derived(component, attr, doc):
    """A read-only attribute of the problem that is ``attr`` of its ``component`` (None when absent)."""
    return property(lambda self: getattr(getattr(self, component), attr, None), doc=doc)


def _index_dtype(nnz, n_cols):
    """uint32 for the CSR index arrays of a matrix with ``nnz`` stored entries and ``n_cols`` columns
    when every index and offset fits it, else int64 (never uint64: Numba turns uint64 plus int64
    into float64)."""
    return np.uint32 if max(nnz, n_cols - 1) <= np.iinfo(np.uint32).max else np.int64


class ClientData:
    """Stacked client rows and targets, client offsets and client weights.

    Parameters
    ----------
    M : ndarray of shape (m, d) or scipy CSR matrix
        Stacked client rows (for the quadratic: the stacked Q_i).
    b : ndarray of shape (m,)
        Stacked targets, labels, or the stacked c_i of the quadratic.
    client_ptr : ndarray of shape (n + 1,)
        Row offsets: client i owns rows ``client_ptr[i]:client_ptr[i+1]``.
    weights : ndarray of shape (n,), optional
        Client weights w_i (normalised to sum 1); uniform 1/n by default.
    name : str
        Used in error messages.
    """

    def __init__(self, M, b, client_ptr, weights=None, name="problem"):
        self.sparse = sp.issparse(M)
        self.M = M
        self.b = np.ascontiguousarray(b, dtype=np.float64)
        self.client_ptr = np.ascontiguousarray(client_ptr, dtype=np.int64)
        self.n_clients = len(self.client_ptr) - 1
        self.dim = int(M.shape[1])
        self.weights = client_weights(weights, self.n_clients, name)
        self.client_sizes = np.diff(self.client_ptr)
        # per-row weight: sum_i w_i mean_{r in client i} loss_r = sum_rows row_w[r] * loss_r
        self.row_w = np.repeat(self.weights / self.client_sizes, self.client_sizes)

    def client_rows(self, i):
        """Row slice ``(start, end)`` of client ``i``."""
        if not (isinstance(i, (int, np.integer)) and 0 <= i < self.n_clients):
            raise IndexError(f"client index must be an int in [0, {self.n_clients - 1}], got {i!r}.")
        return int(self.client_ptr[i]), int(self.client_ptr[i + 1])

    def block(self, i, rows=None):
        """``(A, t)``: client ``i``'s rows and targets, or the absolute rows ``rows`` of a minibatch."""
        s, e = self.client_rows(i)
        if rows is None:
            return self.M[s:e], self.b[s:e]
        return self.M[rows], self.b[rows]

    def kernel_arrays(self):
        """(sparse, A, data, indices, indptr): dense rows or CSR arrays, the other pair empty.

        The CSR column indices and row offsets are unsigned 32-bit integers (int64 for a matrix
        with more than 2**32 - 1 stored entries): Numba indexes with an unsigned index without the
        negative-index wraparound it adds to every signed one, which made the a9a minibatch
        gradient 1.5x faster (``benchmarks/RESULTS.md``). A binary matrix (every stored value
        exactly 1.0, as a9a's one-hot features) is passed with an empty ``data``: the kernels then
        skip the products by 1.0 (exact, so no result changes) and the loads of the values.
        """
        if self.sparse:
            it = _index_dtype(self.M.nnz, self.M.shape[1])
            data = np.ascontiguousarray(self.M.data, dtype=np.float64)
            if self.M.nnz and np.all(data == 1.0):
                data = np.zeros(0)          # binary: the kernels add x_j instead of 1.0 * x_j
            return (True, np.zeros((0, 0)), data,
                    np.ascontiguousarray(self.M.indices, dtype=it), np.ascontiguousarray(self.M.indptr, dtype=it))
        return (False, np.ascontiguousarray(self.M, dtype=np.float64), np.zeros(0), np.zeros(0, dtype=np.uint32),
                np.zeros(0, dtype=np.uint32))

    def hash_update(self, h):
        """Feed the rows, targets, offsets and weights to the hash ``h``."""
        if self.sparse:
            for arr in (self.M.data, self.M.indices.astype(np.int64), self.M.indptr.astype(np.int64)):
                h.update(np.ascontiguousarray(arr).tobytes())
        else:
            h.update(np.ascontiguousarray(self.M).tobytes())
        for arr in (self.b, self.client_ptr, self.weights):
            h.update(np.ascontiguousarray(arr).tobytes())


class FederatedProblem:
    """A federated objective F(x) = sum_i w_i f_i(x) + h(x): client data + datafit + regularizer.

    Use the factories of :mod:`problems`, or :meth:`from_clients` with components.

    Parameters
    ----------
    datafit : Datafit, str or int
        The smooth datafit: a :class:`fedtheory.components.Datafit`, a registered name
        (``"least_squares"``, ``"logistic"``, ``"quadratic"``) or a kernel id (``problem.datafit_id``).
    M : ndarray of shape (m, d) or scipy CSR matrix
        Stacked client rows (see :class:`ClientData`).
    b : ndarray of shape (m,)
        Stacked targets (see :class:`ClientData`).
    client_ptr : ndarray of shape (n + 1,)
        Row offsets of the clients (see :class:`ClientData`).
    weights : ndarray of shape (n,), optional
        Client weights w_i (see :class:`ClientData`).
    l2, l1 : float
        Ridge weight of a datafit given by name, and the weight tau of a regularizer given by name.
    noise : float
        Standard deviation of additive Gaussian noise per gradient coordinate that the
        runner adds to every local gradient (sigma^2 = d * noise^2).
    name : str
        Name of the problem family, used in messages and cache keys.
    info : dict
        Extra facts declared by the factory (e.g. the exact constants of a quadratic).
    reg : Regularizer or str, default "l1"
        The regularizer: a :class:`fedtheory.components.Regularizer` or a registered name
        (``"none"``, ``"l2"``, ``"l1"``, ``"group"``, ``"nuclear"``) built with ``l1`` and, for
        ``"group"``, ``groups`` (a group id per coordinate, -1 for an unpenalized coordinate) or,
        for ``"nuclear"``, ``mat_shape`` (X = x.reshape(mat_shape), row-major).
    groups : array_like of int, optional
        Group id per coordinate of a ``"group"`` regularizer given by name.
    mat_shape : (int, int), optional
        Matrix shape of a ``"nuclear"`` regularizer given by name.

    Attributes
    ----------
    n_clients : int
        Number of clients n.
    dim : int
        Dimension d of the model.
    weights : ndarray of shape (n,)
        Client weights w_i (they sum to 1).
    client_sizes : ndarray of shape (n,)
        Number of rows m_i of each client.
    noise : float
        Standard deviation of the runner's additive gradient noise per coordinate.
    name : str
        Name of the problem family.
    info : dict
        Facts declared by the factory.
    datafit : Datafit
        The smooth part's component.
    regularizer : Regularizer
        The non-smooth part's component.
    """

    def __init__(self, datafit, M, b, client_ptr, weights=None, l2=0.0, l1=0.0, noise=0.0,
                 name="problem", info=None, reg="l1", groups=None, mat_shape=None):
        for pname, v in (("l2", l2), ("l1", l1), ("noise", noise)):
            if not (np.isfinite(v) and v >= 0):
                raise DataError(f"{name}: {pname!r} must be a finite float >= 0, got {v!r}.")
        data = ClientData(M, b, client_ptr, weights, name)
        self._assemble(data, components.make_datafit(datafit, l2=l2),
                       components.make_regularizer(reg, weight=l1, groups=groups, mat_shape=mat_shape),
                       noise, name, info)

    @classmethod
    def from_components(cls, data, datafit, regularizer=None, noise=0.0, name="problem", info=None):
        """A problem from a :class:`ClientData`, a datafit and a regularizer (None: h = 0).

        Parameters
        ----------
        data : ClientData
            The stacked client data.
        datafit : Datafit or str
            The smooth part (a registered name is accepted).
        regularizer : Regularizer or str, optional
            The non-smooth part; None: h = 0.
        noise : float, default 0
            Standard deviation of the runner's additive gradient noise per coordinate.
        name : str, default "problem"
            Name of the problem family, used in messages and cache keys.
        info : dict, optional
            Extra facts (e.g. exact constants).

        Returns
        -------
        FederatedProblem
            The problem.
        """
        self = cls.__new__(cls)
        if not (np.isfinite(noise) and noise >= 0):
            raise DataError(f"{name}: 'noise' must be a finite float >= 0, got {noise!r}.")
        self._assemble(data, components.make_datafit(datafit),
                       components.make_regularizer("none" if regularizer is None else regularizer),
                       noise, name, info)
        return self

    @classmethod
    def from_clients(cls, A, b, datafit, regularizer=None, weights=None, noise=0.0, name=None, info=None,
                     caller=None):
        """Build a problem from per-client rows and targets, a datafit and a regularizer.

        ``A`` and ``b`` are validated (shapes, NaN/inf, empty clients, the datafit's targets); a
        regularizer None means h = 0.

        Parameters
        ----------
        A : list of (m_i, d) ndarray or CSR matrices
            One block of rows per client.
        b : list of (m_i,) ndarray
            One target vector per client.
        datafit : Datafit or str
            The smooth part (a registered name is accepted).
        regularizer : Regularizer or str, optional
            The non-smooth part; None: h = 0.
        weights : array of shape (n,), optional
            Client weights (uniform by default).
        noise : float, default 0
            Standard deviation of the runner's additive gradient noise per coordinate.
        name : str, optional
            Name of the problem family (default: the datafit's name).
        info : dict, optional
            Extra facts (e.g. exact constants).
        caller : str, optional
            The name data errors cite (a factory passes ``"problems.<name>"``).

        Returns
        -------
        FederatedProblem
            The problem.

        Examples
        --------
        >>> import numpy as np
        >>> from fedtheory.components import LeastSquares, GroupL2
        >>> rng = np.random.default_rng(0)
        >>> p = FederatedProblem.from_clients([rng.normal(size=(8, 4))] * 2, [rng.normal(size=8)] * 2,
        ...                                   LeastSquares(l2=0.1), GroupL2(0.2, groups=[0, 0, 1, 1]))
        >>> p.n_clients, p.dim, p.reg, p.name
        (2, 4, 'group', 'least_squares')
        """
        datafit = components.make_datafit(datafit)
        name = name or datafit.name
        M, t, ptr = _as_client_arrays(A, b, caller or name, datafit)
        return cls.from_components(ClientData(M, t, ptr, weights, name), datafit, regularizer, noise, name, info)

    def _assemble(self, data, datafit, regularizer, noise, name, info):
        self.data, self.datafit, self.regularizer = data, datafit, regularizer
        self.noise = float(noise)
        self.name = name
        self.info = dict(info or {})
        # the data, as attributes (the same arrays)
        self.sparse, self.M, self.b, self.client_ptr = data.sparse, data.M, data.b, data.client_ptr
        self.n_clients, self.dim, self.weights, self.client_sizes = data.n_clients, data.dim, data.weights, \
            data.client_sizes
        regularizer.check(self.dim, name)
        datafit.check_data(data, name)
        self._pack = self._reg_pack = self._key = self._cpack = None
        self._kernel_keep = ()

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_pack=None, _reg_pack=None, _cpack=None, _kernel_keep=())      # kernel ids lent by the registry are per process
        state.pop("_per_problem", None)     # (constants kept by fedtheory.constants.per_problem: made again)
        return state

    # ------------------------------------------------------------------ derived from the components
    @property
    def datafit_id(self):
        """Kernel id of the datafit, an int (``KIND_*`` of :mod:`fedtheory._kernels.oracles` for the
        built-ins); ``kind_name`` is its name."""
        code = self.datafit.native_code()
        return code if code is not None else self.kernel_pack()[6][0]

    @property
    def kind(self):
        """Former name of :attr:`datafit_id` (an int, not a kind of problem), kept so that existing
        code runs; use ``datafit_id``."""
        return self.datafit_id

    kind_name = _derived("datafit", "name", "Name of the datafit.")
    l2 = _derived("datafit", "l2", "Ridge weight inside every f_i.")
    reg_weight = _derived("regularizer", "weight", "Weight tau of the regularizer h, whichever it is (0 for a "
                                                   "smooth problem).")
    l1 = _derived("regularizer", "weight", "The lasso's name of :attr:`reg_weight`, kept: the weight tau of h "
                                           "whichever regularizer it is (l1, group, nuclear, ...).")
    reg = _derived("regularizer", "name", "Name of the regularizer.")
    groups = _derived("regularizer", "groups", "Group ids of a group regularizer (None otherwise).")
    mat_shape = _derived("regularizer", "shape", "Matrix shape of a nuclear-norm regularizer (None otherwise).")

    @property
    def is_composite(self):
        """True when h is not zero (the problem has a non-smooth part)."""
        return not self.regularizer.is_zero

    @property
    def _row_w(self):
        return self.data.row_w

    # ------------------------------------------------------------------ data
    def client_rows(self, i):
        """Row slice ``(start, end)`` of client ``i`` in the stacked data."""
        return self.data.client_rows(i)

    def client_matrix(self, i):
        """Design matrix of client ``i`` (a view for dense data)."""
        return self.data.block(i)[0]

    def client_data(self, i):
        """Return ``(A_i, b_i)`` of client ``i`` (for the quadratic: ``(Q_i, c_i)``)."""
        return self.data.block(i)

    def _check_x(self, x, name="x"):
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.dim,):
            raise ValueError(f"{name!r} must have shape ({self.dim},), got {x.shape}.")
        return x

    def kernel_pack(self):
        """Arrays for the Numba kernels: (sparse, A, data, indices, indptr, b, kind, ptr); ``kind`` is
        the datafit's kernel id in its static form (``fedtheory._kernels.oracles.kernel_form``)."""
        if self._pack is None:
            kind, keep = kernel_id(self.datafit, self.data)
            self._kernel_keep += (keep,)
            arrays = self.data.kernel_arrays()
            self._pack = (*arrays, self.b, kernel_form(kind, arrays[0]), self.client_ptr)
        return self._pack

    def compiled_pack(self):
        """The problem as the compiled rules see it: a :data:`fedtheory._kernels.rounds.Pack` of the
        kernel arrays (the datafit's id in its static form, ``kernel_form``), l2, the regularizer's weight and kernel arguments, the client
        sizes and weights, the noise level and the dimension (built once)."""
        if self._cpack is None:
            sparse, A, data, indices, indptr, b, kind, ptr = self.kernel_pack()
            code, groups, m1, m2 = self.reg_pack()
            self._cpack = Pack(bool(sparse), A, data, indices, indptr, b, kind, ptr, float(self.l2),
                               float(self.reg_weight), code, groups, int(m1), int(m2),
                               np.ascontiguousarray(self.client_sizes, dtype=np.int64),
                               np.ascontiguousarray(self.weights, dtype=np.float64), float(self.noise), int(self.dim))
        return self._cpack

    def reg_pack(self):
        """(reg kernel id, group ids (d,) or empty, m1, m2) for the proximal kernels."""
        if self._reg_pack is None:
            code, keep = kernel_id(self.regularizer)
            self._kernel_keep += (keep,)
            self._reg_pack = (code, *self.regularizer.kernel_args())
        return self._reg_pack

    def data_hash(self):
        """SHA-256 of everything that defines the objective (used as a cache key)."""
        if self._key is None:
            h = hashlib.sha256()
            h.update(f"{self.datafit.hash_token()}|{self.reg_weight!r}|{self.dim}|{self.sparse}".encode())
            h.update(self.regularizer.hash_extra())
            self.data.hash_update(h)
            self._key = h.hexdigest()
        return self._key

    # --------------------------------------------------------------- global oracles
    def smooth_value(self, x):
        """Value of the smooth part sum_i w_i f_i(x).

        Parameters
        ----------
        x : ndarray of shape (d,)
            The point.

        Returns
        -------
        float
            The value.
        """
        return self.datafit.value(self.data, self._check_x(x))

    def h_value(self, x):
        """Value of the non-smooth part h(x).

        Parameters
        ----------
        x : ndarray of shape (d,)
            The point.

        Returns
        -------
        float
            The value (0 for a smooth problem).
        """
        return self.regularizer.value(x)

    def value(self, x):
        """F(x) = sum_i w_i f_i(x) + h(x).

        Parameters
        ----------
        x : ndarray of shape (d,)
            The point.

        Returns
        -------
        float
            The value.
        """
        return self.smooth_value(x) + self.h_value(x)

    def grad(self, x):
        """Gradient of the smooth part, sum_i w_i grad f_i(x).

        Parameters
        ----------
        x : ndarray of shape (d,)
            The point.

        Returns
        -------
        ndarray of shape (d,)
            The gradient.
        """
        return self.datafit.grad(self.data, self._check_x(x))

    def hessian(self, x):
        """Dense Hessian of the smooth part at x, shape (d, d)."""
        return self.datafit.hessian(self.data, self._check_x(x))

    def prox(self, x, step):
        """Proximal operator of step * h (the regularizer's prox at threshold step * tau).

        Parameters
        ----------
        x : ndarray of shape (d,)
            The point.
        step : float
            Step size > 0.

        Returns
        -------
        ndarray of shape (d,)
            prox_{step h}(x) (x itself for a smooth problem).
        """
        return self.regularizer.prox(x, step)

    def value_and_gradient_mapping_sq(self, x, step):
        """(F(x), ||G_step(x)||^2) with one pass over the data for the smooth value and gradient
        (the runner's evaluation)."""
        x = self._check_x(x)
        v, g = self.datafit.value_grad(self.data, x)
        F = v + self.h_value(x)
        if not self.is_composite:
            return F, float(g @ g)
        G = (x - self.prox(x - step * g, step)) / step
        return F, float(G @ G)

    def gradient_mapping_sq(self, x, step):
        """||G_step(x)||^2 with G = (x - prox_{step h}(x - step grad))/step (= ||grad||^2 if h=0).

        Parameters
        ----------
        x : ndarray of shape (d,)
            The point.
        step : float
            Step size > 0.

        Returns
        -------
        float
            The squared norm of the gradient mapping.
        """
        g = self.grad(x)
        if not self.is_composite:
            return float(g @ g)
        G = (x - self.prox(x - step * g, step)) / step
        return float(G @ G)

    # --------------------------------------------------------------- client oracles
    def client_value(self, i, x, rows=None):
        """Smooth objective f_i(x) of client ``i``, or its minibatch value.

        With ``rows`` (absolute row indices) the minibatch value F_i(x, B), the mean loss over those
        rows plus the ridge term (a datafit without samples, the quadratic, ignores ``rows``).

        Parameters
        ----------
        i : int
            Client index, 0 <= i < n_clients.
        x : ndarray of shape (d,)
            The point.
        rows : array of int, optional
            Absolute row indices of a minibatch (None: all the client's rows; a datafit without
            samples, the quadratic, ignores them).

        Returns
        -------
        float
            The value.
        """
        return self.datafit.client_value(self.data, i, self._check_x(x), rows)

    def client_grad(self, i, x, rows=None):
        """Gradient of f_i at x, or its minibatch mean.

        With ``rows`` (absolute row indices) the mean over those rows (ignored by the quadratic,
        which has no samples).

        Parameters
        ----------
        i : int
            Client index, 0 <= i < n_clients.
        x : ndarray of shape (d,)
            The point.
        rows : array of int, optional
            Absolute row indices of a minibatch (None: all the client's rows; a datafit without
            samples, the quadratic, ignores them).

        Returns
        -------
        ndarray of shape (d,)
            The gradient.
        """
        return self.datafit.client_grad(self.data, i, self._check_x(x), rows)

    def client_hessian_vector(self, i, x, v, rows=None):
        """Hessian-vector product of f_i at x along v; with ``rows`` the minibatch Hessian."""
        return self.datafit.client_hvp(self.data, i, self._check_x(x), np.asarray(v, dtype=np.float64), rows)

    def client_hessian(self, i, x):
        """Dense Hessian of f_i at x."""
        return self.datafit.client_hessian(self.data, i, self._check_x(x))

    def __repr__(self):
        fmt = "CSR" if self.sparse else "dense"
        return (f"FederatedProblem(name={self.name!r}, kind={self.kind_name}, n_clients={self.n_clients}, "
                f"dim={self.dim}, rows={self.M.shape[0]}, {fmt}, l2={self.l2}, l1={self.l1}, "
                f"reg={self.reg}, noise={self.noise})")
