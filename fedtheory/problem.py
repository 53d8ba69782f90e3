r"""The federated problem: stacked client data, NumPy oracles and the kernel data pack.

A :class:`FederatedProblem` represents

.. math::

    F(x) = \sum_{i=1}^n w_i f_i(x) + h(x),

with client objectives of one of three smooth kinds

* least squares, :math:`f_i(x) = \frac{1}{2 m_i}\|A_i x - b_i\|^2 + \frac{\ell_2}{2}\|x\|^2`;
* logistic, :math:`f_i(x) = \frac{1}{m_i}\sum_j \log(1 + e^{-y_{ij} a_{ij}^\top x})
  + \frac{\ell_2}{2}\|x\|^2`;
* explicit quadratic, :math:`f_i(x) = \frac12 x^\top Q_i x - c_i^\top x + \frac{\ell_2}{2}\|x\|^2`;

and :math:`h(x) = \ell_1 \|x\|_1` (zero by default). Client data are stacked in one dense
array or one CSR matrix with ``client_ptr`` offsets, which is what the Numba kernels read.
The concrete factories live in the top-level :mod:`problems` package.
"""
from __future__ import annotations

import hashlib

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ._kernels.oracles import KIND_LEAST_SQUARES, KIND_LOGISTIC, KIND_QUADRATIC
from .exceptions import DataError

KIND_NAMES = {KIND_LEAST_SQUARES: "least_squares", KIND_LOGISTIC: "logistic",
              KIND_QUADRATIC: "quadratic"}


def _as_client_arrays(A, b, caller, labels):
    """Validate per-client lists and return (stacked matrix, stacked targets, ptr)."""
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
        if t.ndim != 1 or t.shape[0] != a.shape[0]:
            raise DataError(f"{caller}: client {i}: design matrix has {a.shape[0]} rows but "
                            f"the target vector has shape {t.shape}.")
        if not np.all(np.isfinite(vals)):
            raise DataError(f"{caller}: client {i}: design matrix contains NaN or inf.")
        if not np.all(np.isfinite(t)):
            raise DataError(f"{caller}: client {i}: targets contain NaN or inf.")
        if labels:
            bad = np.setdiff1d(np.unique(t), [-1.0, 1.0])
            if bad.size:
                raise DataError(f"{caller}: client {i} has labels outside {{-1, +1}}: "
                                f"found {bad[:5].tolist()}. Map the classes to -1/+1 first.")
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


def _check_weights(weights, n, caller):
    if weights is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise DataError(f"{caller}: 'weights' must be {n} non-negative finite numbers "
                        f"with a positive sum; got {weights!r}.")
    return w / w.sum()


class FederatedProblem:
    """A federated objective F(x) = sum_i w_i f_i(x) + h(x) with stacked client data.

    Use the factories of :mod:`problems` rather than this constructor.

    Parameters
    ----------
    kind : {0, 1, 2}
        Smooth datafit: least squares, logistic or explicit quadratic.
    M : ndarray of shape (m, d) or scipy CSR matrix
        Stacked client rows (for the quadratic: the stacked Q_i).
    b : ndarray of shape (m,)
        Stacked targets, labels, or the stacked c_i of the quadratic.
    client_ptr : ndarray of shape (n + 1,)
        Row offsets: client i owns rows ``client_ptr[i]:client_ptr[i+1]``.
    weights : ndarray of shape (n,), optional
        Client weights w_i (normalised to sum 1); uniform 1/n by default.
    l2, l1 : float
        Ridge weight inside every f_i and the weight tau of h.
    reg : {"l1", "group", "nuclear"}
        h = tau ||x||_1, tau sum_g ||x_g||_2 (``groups``: a group id per coordinate, -1 for an
        unpenalized coordinate) or tau ||X||_* with X = x.reshape(``mat_shape``) (row-major).
    noise : float
        Standard deviation of additive Gaussian noise per gradient coordinate that the
        runner adds to every local gradient (sigma^2 = d * noise^2).
    name : str
        Name of the problem family, used in messages and cache keys.
    info : dict
        Extra facts declared by the factory (e.g. the exact constants of a quadratic).
    """

    def __init__(self, kind, M, b, client_ptr, weights=None, l2=0.0, l1=0.0, noise=0.0,
                 name="problem", info=None, reg="l1", groups=None, mat_shape=None):
        self.kind = int(kind)
        self.sparse = sp.issparse(M)
        self.M = M
        self.b = np.ascontiguousarray(b, dtype=np.float64)
        self.client_ptr = np.ascontiguousarray(client_ptr, dtype=np.int64)
        self.n_clients = len(self.client_ptr) - 1
        self.dim = int(M.shape[1])
        self.weights = _check_weights(weights, self.n_clients, name)
        for pname, v in (("l2", l2), ("l1", l1), ("noise", noise)):
            if not (np.isfinite(v) and v >= 0):
                raise DataError(f"{name}: {pname!r} must be a finite float >= 0, got {v!r}.")
        self.l2, self.l1, self.noise = float(l2), float(l1), float(noise)
        if reg not in ("l1", "group", "nuclear"):
            raise DataError(f"{name}: 'reg' must be 'l1', 'group' or 'nuclear', got {reg!r}.")
        self.reg = reg
        self.groups = None
        self.mat_shape = None
        if reg == "group":
            g = np.asarray(groups, dtype=np.int64) if groups is not None else None
            if g is None or g.shape != (self.dim,):
                raise DataError(f"{name}: reg='group' needs 'groups', one group id per coordinate "
                                f"(length {self.dim}); got {None if g is None else g.shape}.")
            self.groups = np.ascontiguousarray(g)
        if reg == "nuclear":
            if mat_shape is None or int(np.prod(mat_shape)) != self.dim:
                raise DataError(f"{name}: reg='nuclear' needs 'mat_shape' (m1, m2) with m1 * m2 = {self.dim}; "
                                f"got {mat_shape!r}.")
            self.mat_shape = (int(mat_shape[0]), int(mat_shape[1]))
        self.name = name
        self.info = dict(info or {})
        self.client_sizes = np.diff(self.client_ptr)
        if self.kind == KIND_QUADRATIC and np.any(self.client_sizes != self.dim):
            raise DataError(f"{name}: each quadratic client needs a {self.dim}x{self.dim} Q_i.")
        # per-row weight: F_smooth = sum_rows omega_r * loss_r + l2/2 ||x||^2
        self._row_w = np.repeat(self.weights / self.client_sizes, self.client_sizes)
        self._pack = None
        self._key = None

    # ------------------------------------------------------------------ basics
    @property
    def is_composite(self):
        """True when h is not zero (the problem has a non-smooth part)."""
        return self.l1 > 0

    @property
    def kind_name(self):
        return KIND_NAMES[self.kind]

    def client_rows(self, i):
        """Row slice ``(start, end)`` of client ``i`` in the stacked data."""
        self._check_client(i)
        return int(self.client_ptr[i]), int(self.client_ptr[i + 1])

    def client_matrix(self, i):
        """Design matrix of client ``i`` (a view for dense data)."""
        s, e = self.client_rows(i)
        return self.M[s:e]

    def client_data(self, i):
        """Return ``(A_i, b_i)`` of client ``i`` (for the quadratic: ``(Q_i, c_i)``)."""
        s, e = self.client_rows(i)
        return self.M[s:e], self.b[s:e]

    def _check_client(self, i):
        if not (isinstance(i, (int, np.integer)) and 0 <= i < self.n_clients):
            raise IndexError(f"client index must be an int in [0, {self.n_clients - 1}], got {i!r}.")

    def _check_x(self, x, name="x"):
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.dim,):
            raise ValueError(f"{name!r} must have shape ({self.dim},), got {x.shape}.")
        return x

    def kernel_pack(self):
        """Arrays for the Numba kernels: (sparse, A, data, indices, indptr, b, kind, ptr)."""
        if self._pack is None:
            if self.sparse:
                A = np.zeros((0, 0))
                data = np.ascontiguousarray(self.M.data, dtype=np.float64)
                indices = np.ascontiguousarray(self.M.indices, dtype=np.int64)
                indptr = np.ascontiguousarray(self.M.indptr, dtype=np.int64)
            else:
                A = np.ascontiguousarray(self.M, dtype=np.float64)
                data = np.zeros(0)
                indices = np.zeros(0, dtype=np.int64)
                indptr = np.zeros(0, dtype=np.int64)
            self._pack = (self.sparse, A, data, indices, indptr, self.b, self.kind, self.client_ptr)
        return self._pack

    def data_hash(self):
        """SHA-256 of everything that defines the objective (used as a cache key)."""
        if self._key is None:
            h = hashlib.sha256()
            h.update(f"{self.kind}|{self.l2!r}|{self.l1!r}|{self.dim}|{self.sparse}".encode())
            if self.reg != "l1":
                h.update(f"|{self.reg}|{self.mat_shape}".encode())
                if self.groups is not None:
                    h.update(self.groups.tobytes())
            if self.sparse:
                for arr in (self.M.data, self.M.indices.astype(np.int64), self.M.indptr.astype(np.int64)):
                    h.update(np.ascontiguousarray(arr).tobytes())
            else:
                h.update(np.ascontiguousarray(self.M).tobytes())
            for arr in (self.b, self.client_ptr, self.weights):
                h.update(np.ascontiguousarray(arr).tobytes())
            self._key = h.hexdigest()
        return self._key

    # --------------------------------------------------------------- per-row losses
    def _loss(self, z, t):
        if self.kind == KIND_LEAST_SQUARES:
            return 0.5 * (z - t) ** 2
        return np.logaddexp(0.0, -t * z)

    def _dloss(self, z, t):
        if self.kind == KIND_LEAST_SQUARES:
            return z - t
        return -t * expit(-t * z)

    def _d2loss(self, z, t):
        if self.kind == KIND_LEAST_SQUARES:
            return np.ones_like(z)
        s = expit(t * z)
        return s * (1.0 - s)

    def _quad_blocks(self):
        return np.asarray(self.M).reshape(self.n_clients, self.dim, self.dim), \
            self.b.reshape(self.n_clients, self.dim)

    # --------------------------------------------------------------- global oracles
    def smooth_value(self, x):
        """Value of the smooth part sum_i w_i f_i(x)."""
        x = self._check_x(x)
        if self.kind == KIND_QUADRATIC:
            Q, c = self._quad_blocks()
            per = 0.5 * np.einsum("j,ijk,k->i", x, Q, x) - c @ x
            return float(self.weights @ per + 0.5 * self.l2 * x @ x)
        z = self.M @ x
        return float(self._row_w @ self._loss(z, self.b) + 0.5 * self.l2 * x @ x)

    def h_value(self, x):
        """Value of the non-smooth part h(x) (tau ||x||_1, tau sum_g ||x_g|| or tau ||X||_*)."""
        x = np.asarray(x, dtype=np.float64)
        if self.l1 == 0:
            return 0.0
        if self.reg == "l1":
            return self.l1 * float(np.abs(x).sum())
        if self.reg == "group":
            return self.l1 * float(sum(np.linalg.norm(x[self.groups == g]) for g in np.unique(self.groups) if g >= 0))
        return self.l1 * float(np.linalg.svd(x.reshape(self.mat_shape), compute_uv=False).sum())

    def reg_pack(self):
        """(reg code 0/1/2, group ids (d,) or empty, m1, m2) for the proximal kernels."""
        code = {"l1": 0, "group": 1, "nuclear": 2}[self.reg]
        groups = self.groups if self.groups is not None else np.zeros(0, dtype=np.int64)
        m1, m2 = self.mat_shape if self.mat_shape is not None else (0, 0)
        return code, groups, m1, m2

    def value(self, x):
        """F(x) = sum_i w_i f_i(x) + h(x)."""
        return self.smooth_value(x) + self.h_value(x)

    def grad(self, x):
        """Gradient of the smooth part, sum_i w_i grad f_i(x)."""
        x = self._check_x(x)
        if self.kind == KIND_QUADRATIC:
            Q, c = self._quad_blocks()
            return np.einsum("i,ijk,k->j", self.weights, Q, x) - self.weights @ c + self.l2 * x
        z = self.M @ x
        return self.M.T @ (self._row_w * self._dloss(z, self.b)) + self.l2 * x

    def hessian(self, x):
        """Dense Hessian of the smooth part at x, shape (d, d)."""
        x = self._check_x(x)
        if self.kind == KIND_QUADRATIC:
            Q, _ = self._quad_blocks()
            return np.einsum("i,ijk->jk", self.weights, Q) + self.l2 * np.eye(self.dim)
        z = self.M @ x
        D = self._row_w * self._d2loss(z, self.b)
        if self.sparse:
            H = (self.M.T @ sp.diags(D) @ self.M).toarray()
        else:
            H = (self.M * D[:, None]).T @ self.M
        return H + self.l2 * np.eye(self.dim)

    def prox(self, x, step):
        """Proximal operator of step * h: soft thresholding (l1), block soft thresholding (group)
        or singular-value thresholding (nuclear) at t = step * tau."""
        x = np.asarray(x, dtype=np.float64)
        if self.l1 == 0:
            return x.copy()
        t = step * self.l1
        if self.reg == "l1":
            return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)
        if self.reg == "group":
            out = x.copy()
            for g in np.unique(self.groups):
                if g < 0:
                    continue
                m = self.groups == g
                nrm = np.linalg.norm(x[m])
                out[m] = 0.0 if nrm <= t else x[m] * (1 - t / nrm)
            return out
        U, sv, Vt = np.linalg.svd(x.reshape(self.mat_shape), full_matrices=False)
        return ((U * np.maximum(sv - t, 0.0)) @ Vt).ravel()

    def gradient_mapping_sq(self, x, step):
        """||G_step(x)||^2 with G = (x - prox_{step h}(x - step grad))/step (= ||grad||^2 if h=0)."""
        g = self.grad(x)
        if self.l1 == 0:
            return float(g @ g)
        G = (x - self.prox(x - step * g, step)) / step
        return float(G @ G)

    # --------------------------------------------------------------- client oracles
    def client_value(self, i, x, rows=None):
        """f_i(x), the smooth objective of client ``i``; with ``rows`` (absolute row indices)
        the minibatch value F_i(x, B), the mean loss over those rows plus the ridge term."""
        x = self._check_x(x)
        A, t = self.client_data(i)
        if self.kind == KIND_QUADRATIC:
            return float(0.5 * x @ (A @ x) - t @ x + 0.5 * self.l2 * x @ x)
        if rows is not None:
            rows = np.asarray(rows, dtype=np.int64)
            A, t = self.M[rows], self.b[rows]
        return float(np.mean(self._loss(A @ x, t)) + 0.5 * self.l2 * x @ x)

    def client_grad(self, i, x, rows=None):
        """Gradient of f_i at x; with ``rows`` (absolute row indices) a minibatch mean.

        For the quadratic ``rows`` must be None (it has no samples).
        """
        x = self._check_x(x)
        if self.kind == KIND_QUADRATIC:
            A, t = self.client_data(i)
            return A @ x - t + self.l2 * x
        if rows is None:
            A, t = self.client_data(i)
        else:
            rows = np.asarray(rows, dtype=np.int64)
            A, t = self.M[rows], self.b[rows]
        return A.T @ self._dloss(A @ x, t) / A.shape[0] + self.l2 * x

    def client_hessian_vector(self, i, x, v, rows=None):
        """Hessian-vector product of f_i at x along v; with ``rows`` the minibatch Hessian."""
        x = self._check_x(x)
        v = np.asarray(v, dtype=np.float64)
        if self.kind == KIND_QUADRATIC:
            Q, _ = self.client_data(i)
            return Q @ v + self.l2 * v
        if rows is None:
            A, t = self.client_data(i)
        else:
            rows = np.asarray(rows, dtype=np.int64)
            A, t = self.M[rows], self.b[rows]
        D = self._d2loss(A @ x, t)
        return A.T @ (D * (A @ v)) / A.shape[0] + self.l2 * v

    def client_hessian(self, i, x):
        """Dense Hessian of f_i at x."""
        x = self._check_x(x)
        A, t = self.client_data(i)
        if self.kind == KIND_QUADRATIC:
            H = np.asarray(A, dtype=np.float64)
        else:
            D = self._d2loss(A @ x, t) / A.shape[0]
            H = (A.T @ sp.diags(D) @ A).toarray() if self.sparse else (A * D[:, None]).T @ A
        return H + self.l2 * np.eye(self.dim)

    def __repr__(self):
        fmt = "CSR" if self.sparse else "dense"
        return (f"FederatedProblem(name={self.name!r}, kind={self.kind_name}, n_clients={self.n_clients}, "
                f"dim={self.dim}, rows={self.M.shape[0]}, {fmt}, l2={self.l2}, l1={self.l1}, "
                f"noise={self.noise})")
