"""The round context of the per-round path: what one round of local work needs (the sampled clients,
their weights, minibatch rows and noise, the step sizes) and the local-update primitives that the
algorithms' NumPy twins and per-round glue call (:class:`RoundContext`; the torch backend's
subclass runs them on tensors). The FedAvg family's server step (:func:`averaged_step`) is here too.
"""
from __future__ import annotations

import numpy as np

from .._kernels.fbe import fbe_local_steps, pfedme_local, prox_local_sgd
from .._kernels.local_steps import corrected_local_sgd, DIR_PLAIN, DIR_SAM, DIR_VR, feddeper_local
from .._kernels.sps import sps_local_steps
from .._kernels.rounds import Round
from .._kernels.sampling import minibatch_rows
from ..runs.arrays import to_numpy

_EMPTY2 = np.zeros((0, 0))
_EMPTY3 = np.zeros((0, 0, 0))


def averaged_step(x, weights, Y, server_lr):
    """Server step of the FedAvg family: x + eta_g sum_i omega_i (y_i - x).

    Parameters
    ----------
    x : ndarray of shape (d,)
        The server model.
    weights : ndarray of shape (S,)
        The aggregation weights omega_i.
    Y : ndarray of shape (S, d)
        The clients' models.
    server_lr : float
        eta_g.

    Returns
    -------
    ndarray of shape (d,)
        The new server model.
    """
    return x + server_lr * (weights @ Y - weights.sum() * x)


def _rows(a):
    """A primitive's start or anchor as rows: one vector (d,) becomes (1, d), shared by every client;
    (S, d) is one row per sampled client."""
    return a[None] if np.ndim(a) == 1 else a


class RoundContext:
    """What one round of local work needs: sampled clients, their randomness, step sizes.

    Parameters
    ----------
    problem : FederatedProblem
        The problem.
    rnd : int
        The round's index (0-based), kept as ``round``.
    clients, weights, idx, noise, lrs : array
        As the attributes of the same names.
    u : float, default 0
        The round's uniform coin.
    rng : numpy.random.Generator, optional
        The run's auxiliary stream.
    weight_decay : float, default 0
        The run's decoupled weight decay.
    clip_norm : float, optional
        The run's clipping threshold.

    Attributes
    ----------
    problem : FederatedProblem
    round : int
        Index r of the round (0-based).
    clients : int64 array (S,)
        Sampled clients (may repeat when duplicates are replicated).
    weights : float array (S,)
        Aggregation weights of the sampled clients (see :func:`fedtheory.run`).
    idx : int64 array (S, K, B)
        Absolute minibatch rows per client and local step; B = 0 for exact gradients.
    noise : float array (S, K, d) or (0, 0, 0)
        Additive gradient noise (already scaled by ``problem.noise``).
    lrs : float array (K,)
        Local step sizes eta_{t} of the K local steps of this round.
    u : float
        One uniform draw in [0, 1) per round from the run's auxiliary stream, for an
        algorithm's own coin flips (e.g. FedPD's "communicate this round?").
    rng : numpy.random.Generator or None
        The run's auxiliary stream, for an algorithm's extra randomness (e.g. FedDeper's
        independent minibatches for v); drawing from it affects only that algorithm's runs.
    weight_decay : float
        The run's decoupled weight decay wd (``run(weight_decay=...)``; 0: none).
    clip_norm : float or None
        The run's clipping threshold (``run(clip_norm=...)``; None: none). See
        :meth:`released_step` for both.
    """

    def __init__(self, problem, rnd, clients, weights, idx, noise, lrs, u=0.0, rng=None, weight_decay=0.0,
                 clip_norm=None):
        self.problem = problem
        self.round = rnd
        self.clients = clients
        self.weights = weights
        self.idx = idx
        self.noise = noise
        self.lrs = lrs
        self.u = u
        self.rng = rng
        self.weight_decay = float(weight_decay)
        self.clip_norm = clip_norm
        self.K = lrs.shape[0]
        self.S = clients.shape[0]
        self.t0 = 0                   # global step counter of the round's first local step (set by the runner)
        self.batch_replacement = False    # minibatch rows drawn with replacement (set by the runner)
        self.want = frozenset()       # local paths to record (set by the runner for trace=...)
        self.traced = {}              # name -> (S, K + 1, d) recorded local iterates

    # -- traces (run(..., trace=...)) -------------------------------------------------
    def path(self, name):
        """The (S, K + 1, d) buffer into which a kernel records the local path ``name``
        (NaN-filled; entries after a divergence stay NaN), or an empty (0, 0, 0) array when
        the run does not trace it."""
        if name not in self.want:
            return _EMPTY3
        buf = self.traced.get(name)
        if buf is None:
            buf = self.traced[name] = np.full((self.S, self.K + 1, self.problem.dim), np.nan)
        return buf

    def record(self, name, s, k, y):
        """Record iterate ``y`` of client slot ``s`` after local step ``k`` (0: the start) of the
        local path ``name`` (the NumPy twins and the torch context; kernels use :meth:`path`)."""
        if name in self.want:
            self.path(name)[s, k] = to_numpy(y)

    # -- Numba path -----------------------------------------------------------------
    def _local_sgd(self, X0, anchors, gscale=1.0, mu=0.0, corr=None, direction=DIR_PLAIN, alpha=0.0, rho=0.0,
                   normalized=False, eps=0.0):
        """The corrected local SGD kernel (``corrected_local_sgd``) for every sampled client: starts
        ``X0`` and proximal anchors ``anchors`` (one row: shared; (0, d): no proximal term)."""
        p = self.problem
        Y = np.empty((self.S, p.dim))
        X0, anchors = np.ascontiguousarray(X0), np.ascontiguousarray(anchors)
        bad = corrected_local_sgd(*p.kernel_pack(), self.clients, self.idx, self.noise, self.lrs, p.l2, X0, anchors,
                                  float(gscale), float(mu), _EMPTY2 if corr is None else np.ascontiguousarray(corr),
                                  int(direction), float(alpha), float(rho), bool(normalized), float(eps),
                                  self.weight_decay, float(self.clip_norm or 0.0), Y, self.path("local"))
        return Y, self._failure(bad)

    def _failure(self, bad):
        """A kernel's return value as None or (client slot s, local step k) of the first failure."""
        return None if bad < 0 else divmod(bad, self.K)

    def local_sgd(self, x0, gscale=1.0, mu=0.0, anchor=None, corr=None):
        """Run the corrected local SGD kernel for every sampled client.

        y_{k+1} = y_k - eta_k (gscale (g(y_k) + noise_k) + mu (y_k - anchor_s) + corr_s),
        from y_0 = x0 (one start for every client, shape (d,), or one row per sampled client,
        (S, d)); ``anchor`` is one vector or one row per client, by default the start. Returns
        ``(Y, fail)`` with Y of shape (S, d) and ``fail`` None, or ``(s, k)`` for the first client
        slot and local step whose iterate became non-finite (put it in the messages under "fail"
        so that the runner reports it).
        """
        X0 = _rows(x0)
        return self._local_sgd(X0, X0 if anchor is None else _rows(anchor), gscale, mu, corr)

    def round_record(self):
        """This round as the compiled rules' :data:`~fedtheory._kernels.rounds.Round` record (the
        context's own arrays: tensors for the torch context's weights). The traced local paths
        are the buffers of :meth:`path`."""
        return Round(self.round, self.clients, self.weights, self.problem.weights[self.clients], self.idx,
                     self.noise, self.lrs, self.u, self.weight_decay, float(self.clip_norm or 0.0), self.K, self.S,
                     self.t0, self.path("local"), self.path("personal"), self.path("prox_point"),
                     self.batch_replacement)

    def independent_stream(self):
        """A second set of minibatch rows (S, K, B) and noise (S, K, d), independent of ``idx`` and
        ``noise``, drawn from the run's auxiliary stream (two-minibatch methods: FedDeper, pFedFBE)
        as the run draws ``idx``: with or without replacement (``batch_replacement``). With exact
        gradients (B = 0) the rows are empty as well."""
        p = self.problem
        S, K, B = self.idx.shape
        idx2 = self.idx
        if B:
            u = self.rng.random((S, K, B))
            idx2 = minibatch_rows(u, p.client_ptr[:-1][self.clients], p.client_sizes[self.clients],
                                  self.batch_replacement, np.empty((S, K, B), dtype=np.int64))
        noise2 = self.noise
        if self.noise.shape[0] > 0:
            noise2 = p.noise * self.rng.standard_normal(self.noise.shape)
        return idx2, noise2

    def local_feddeper(self, x0, V0, rho, coupling, idx_v, noise_v):
        """FedDeper's alternating y/v local steps (see ``feddeper_local``); returns (Y, V, fail)."""
        p = self.problem
        Y, V = np.empty((self.S, p.dim)), np.empty((self.S, p.dim))
        bad = feddeper_local(*p.kernel_pack(), self.clients, self.idx, idx_v, self.noise, noise_v, self.lrs, p.l2,
                             x0, np.ascontiguousarray(V0), float(rho), int(coupling), Y, V,
                             self.path("local"), self.path("personal"))
        return Y, V, self._failure(bad)

    def local_vr(self, x0, gscale, corr):
        """Mime's local steps: y <- y - eta_k (gscale (g(y; B) - g(x0; B)) + corr_s) (same minibatch).

        Returns ``(Y, fail)`` as :meth:`local_sgd`.
        """
        return self._local_sgd(x0[None], _EMPTY2, gscale, corr=corr, direction=DIR_VR)

    def local_sam(self, x0, alpha, rho, normalized=False, mu=0.0, anchor=None, corr=None, eps=1e-7):
        """Local SGD with FedSpeed's quasi-gradient (``corrected_local_sgd`` with ``DIR_SAM``).

        gt = (1 - alpha) g(y) + alpha g(y + r g(y)) with r = rho, or rho / (||g(y)|| + eps)
        when ``normalized``; y_{k+1} = y_k - eta_k (gt + mu (y_k - anchor) + corr_s).
        Returns ``(Y, fail)`` as :meth:`local_sgd`.
        """
        return self._local_sgd(x0[None], (x0 if anchor is None else anchor)[None], 1.0, mu, corr, DIR_SAM, alpha, rho,
                               normalized, eps)

    def local_sps(self, x0, mode, c, gamma_b, ell, c0, c_round, gamma_fixed, factor, st, eps):
        """K local steps with a stochastic Polyak step size (see ``sps_local_steps``).

        ``ell``, ``factor`` and the per-client step-size memory ``st`` (updated in place) are
        NumPy arrays of the S sampled clients. Returns ``(Y, G, C, last_val, last_gg, fail)``:
        the local models, the (S, K) step sizes and cap indicators, F and ||g||^2 of each
        client's last step (NumPy), and the failure as in :meth:`local_sgd`.
        """
        p = self.problem
        S, K = self.S, self.K
        Y, G, C = np.empty((S, p.dim)), np.empty((S, K)), np.zeros((S, K), dtype=np.int64)
        lv, lg = np.empty(S), np.empty(S)
        bad = sps_local_steps(*p.kernel_pack(), self.clients, self.idx, self.noise, p.l2, x0, int(mode),
                              float(c), float(gamma_b), np.ascontiguousarray(ell), float(c0), int(self.round * K),
                              bool(c_round), int(K), float(gamma_fixed),
                              np.ascontiguousarray(factor, dtype=np.float64), st, float(eps), Y, G, C, lv, lg, self.path("local"))
        return Y, G, C, lv, lg, self._failure(bad)

    def local_prox_sgd(self, x0, anchor=None, mu=0.0, dual=False, t0_thresh=0.0):
        """Proximal local SGD for h of the problem (see ``prox_local_sgd``): FedMiD's primal steps
        (``dual`` False), pulled to ``anchor`` with weight ``mu`` when it is given (Ditto, pFedProx),
        or FedDualAvg's dual steps (``dual`` True, with the accumulated step ``t0_thresh``). ``x0``
        and ``anchor``: one vector, or one row per sampled client. Returns ``(X, Z, fail)``: the
        primal and the dual local iterates (Z the start in the primal mode)."""
        p = self.problem
        X, Z = np.empty((self.S, p.dim)), np.empty((self.S, p.dim))
        X0 = np.ascontiguousarray(_rows(x0))
        anchors = _EMPTY2 if anchor is None else np.ascontiguousarray(_rows(anchor))
        bad = prox_local_sgd(*p.kernel_pack(), self.clients, self.idx, self.noise, self.lrs, p.l2, X0, anchors,
                             float(mu), float(p.reg_weight), bool(dual), float(t0_thresh), *p.reg_pack(), X, Z)
        return X, Z, self._failure(bad)

    def local_pfedme(self, x0, lam_p, eta_p, inner, wd):
        """pFedMe's local rounds (see ``pfedme_local``). Returns ``(W, Theta, fail)``."""
        p = self.problem
        W, Th = np.empty((self.S, p.dim)), np.empty((self.S, p.dim))
        bad = pfedme_local(*p.kernel_pack(), self.clients, self.idx, self.noise, self.lrs, p.l2, x0,
                           float(lam_p), float(eta_p), int(inner), float(wd), float(p.reg_weight), *p.reg_pack(), W, Th)
        return W, Th, self._failure(bad)

    def local_fbe(self, x0, lam, hvp_mode, fd_eps, idx_h):
        """pFedFBE's local steps (see ``fbe_local_steps``) with Hessian minibatch rows ``idx_h``.
        Returns ``(Y, fail)``."""
        p = self.problem
        Y = np.empty((self.S, p.dim))
        bad = fbe_local_steps(*p.kernel_pack(), self.clients, self.idx, np.ascontiguousarray(idx_h), self.noise,
                              self.lrs, p.l2, x0, float(lam), float(p.reg_weight), int(hvp_mode), float(fd_eps),
                              *p.reg_pack(), Y, self.path("local"), self.path("prox_point"))
        return Y, self._failure(bad)

    def full_grads(self, x):
        """Exact client gradients grad f_i(x) of the sampled clients, shape (S, d)."""
        return np.array([self.problem.client_grad(int(i), x) for i in self.clients])

    # -- NumPy path (reference twins) -----------------------------------------------
    def released_step(self, d, y, mu=0.0):
        r"""The local step direction ``d`` at iterate ``y`` with the run's released-code options.

        ``d`` is the paper's direction, whose only term in ``y`` itself is a prox pull
        ``mu (y - anchor)`` (mu = 0 without one). Returns ``d`` itself when the run has neither
        weight decay nor clipping; else, as the released codes' ``clip_grad_norm_`` and
        ``torch.optim.SGD(weight_decay=mu + wd)``: with u = d - mu y (the gradient of their
        loss, which holds the linear part -mu anchor of the pull) and
        c = clip_norm / (||u|| + 1e-6), ``c u + (mu + wd) y`` when c < 1, else ``d + wd y``.
        The kernels (``corrected_local_sgd``) and the torch context apply the same rule.
        """
        wd, clip = self.weight_decay, self.clip_norm
        if clip is not None:
            u = d - mu * y if mu != 0.0 else d
            c = clip / (self._norm(u) + 1e-6)
            if c < 1.0:
                return c * u + (mu + wd) * y
        return d + wd * y if wd != 0.0 else d

    @staticmethod
    def _norm(u):
        """||u|| as a float (the torch context computes it on the device)."""
        return float(np.sqrt(u @ u))

    def value(self, s, k, y):
        """Minibatch value F_i(y; xi_k) of sampled client ``s`` at local step ``k`` (NumPy)."""
        rows = self.idx[s, k] if self.idx.shape[2] > 0 else None
        return self.problem.client_value(int(self.clients[s]), y, rows)

    def grad(self, s, k, y):
        """Stochastic gradient g(y; xi_k) of sampled client ``s`` at local step ``k`` (NumPy)."""
        rows = self.idx[s, k] if self.idx.shape[2] > 0 else None
        g = self.problem.client_grad(int(self.clients[s]), y, rows)
        if self.noise.shape[0] > 0:
            g = g + self.noise[s, k]
        return g
