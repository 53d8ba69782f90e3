r"""The torch round context: every local-update primitive of :class:`RoundContext` on tensors.

Each method has the signature and the update rule of its NumPy/Numba counterpart in
:class:`fedtheory.algorithms.context.RoundContext` (the docstrings there give the math; the kernels
of :mod:`fedtheory._kernels` are the reference). The sampled clients, the minibatch rows and the
noise are the runner's NumPy arrays, so the three backends follow one trajectory. Local models
are written into one preallocated (S, d) tensor per message; per-client state stays in the
algorithm's preallocated (n, d) tensors.

Divergence is detected as in the kernels: the first (client slot, local step) whose iterate is
not finite is reported as ``fail = (s, k)``; the finiteness flags of a client's steps stay on the
device and are read once per client.
"""
from __future__ import annotations

import numpy as np
import torch

from ..._kernels.fbe import HVP_EXACT, HVP_FD
from ..._kernels.sps import MODE_DEC, MODE_SMOOTH, MODE_SMOOTH_LIT, MODE_SPS
from ...algorithms.context import RoundContext


def _row_of(A):
    """Client slot s -> its row of ``A``: A itself when it is one vector (shared), else A[s]."""
    return (lambda s: A) if A.dim() == 1 else (lambda s: A[s])


class TorchRoundContext(RoundContext):
    """:class:`RoundContext` whose ``problem`` is a :class:`~.oracles.TorchOracles` and whose
    ``weights`` are a tensor; the primitives return tensors.

    Parameters
    ----------
    oracles : TorchOracles
        The problem's torch oracles (kept as ``problem``).
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
    """

    def __init__(self, oracles, rnd, clients, weights, idx, noise, lrs, u=0.0, rng=None, weight_decay=0.0,
                 clip_norm=None):
        super().__init__(oracles, rnd, clients, oracles.tensor(weights), idx, noise, lrs, u, rng, weight_decay,
                         clip_norm)
        self._noise_t = None
        self._idx_t = None

    # ----------------------------------------------------------------- helpers
    def _noise(self, noise=None):
        """The round's noise (or another (S, K, d) noise array) as a tensor, None without noise."""
        if noise is None:
            if self._noise_t is None and self.noise.shape[0] > 0:
                self._noise_t = self.problem.tensor(self.noise)
            return self._noise_t
        return self.problem.tensor(noise) if noise.shape[0] > 0 else None

    def _index(self, idx=None):
        """Minibatch rows (S, K, B) as a long tensor on the device (the round's own: moved once),
        or None for exact gradients."""
        if idx is None or idx is self.idx:
            if self._idx_t is None and self.idx.shape[2] > 0:
                self._idx_t = torch.as_tensor(self.idx, device=self.problem.device)
            return self._idx_t
        return torch.as_tensor(idx, device=self.problem.device) if idx.shape[2] > 0 else None

    def _g(self, s, k, y, idx=None, noise=None):
        """Stochastic gradient of sampled client s at local step k: rows ``idx`` (an :meth:`_index`
        tensor; None for the round's own) plus ``noise[s, k]``."""
        idx = self._index() if idx is None else idx
        g = self.problem.grad(int(self.clients[s]), y, None if idx is None else idx[s, k])
        return g if noise is None else g + noise[s, k]

    def _row(self, a, s):
        """Row s of an (S, d) correction (tensor or NumPy), or None."""
        if a is None:
            return None
        return a[s] if torch.is_tensor(a) else self.problem.tensor(np.asarray(a[s]))

    def _vec(self, a):
        return a if torch.is_tensor(a) else self.problem.tensor(np.asarray(a))

    def _clients(self, n_out, client):
        """Run ``client(s) -> (outputs, flags)`` for every sampled client slot s.

        ``outputs`` are ``n_out`` d-vectors, written into preallocated (S, d) tensors; ``flags``
        holds one 0-d finiteness tensor per local step, read once per client to find the first
        non-finite (slot, step). Returns the tensors and that failure (or None).
        """
        p = self.problem
        outs = [torch.empty((self.S, p.dim), dtype=p.dtype, device=p.device) for _ in range(n_out)]
        fail = None
        for s in range(self.S):
            res, flags = client(s)
            for out, r in zip(outs, res):
                out[s] = r
            if fail is None and flags:
                ok = torch.stack(flags).cpu().numpy()
                if not ok.all():
                    fail = (s, int(np.flatnonzero(~ok)[0]))
        return (*outs, fail)

    def _has_options(self):
        """Whether the run uses weight decay or clipping (the released codes' options)."""
        return self.weight_decay != 0.0 or self.clip_norm is not None

    @staticmethod
    def _norm(u):
        """||u|| of a tensor as a float (:meth:`RoundContext.released_step` applies the
        released codes' options to tensors with it)."""
        return float(torch.linalg.vector_norm(u))

    # ----------------------------------------------------------------- primitives
    def _sgd_loop(self, starts, gscale, mu, anchors, corr):
        noise = self._noise()
        opts = self._has_options()

        def client(s):
            y = starts(s).clone()
            anchor = anchors(s)
            c = self._row(corr, s)
            flags = []
            self.record("local", s, 0, y)
            for k in range(self.K):
                g = self._g(s, k, y, noise=noise)           # a fresh tensor: updated in place
                lr = float(self.lrs[k])
                if mu == 0.0 and c is None and not opts:
                    y.add_(g, alpha=-lr * gscale)
                else:
                    if gscale != 1.0:
                        g.mul_(gscale)
                    if mu != 0.0:
                        g.add_(y - anchor, alpha=mu)
                    if c is not None:
                        g.add_(c)
                    if opts:
                        g = self.released_step(g, y, mu)
                    y.add_(g, alpha=-lr)
                self.record("local", s, k + 1, y)
                flags.append(torch.isfinite(y).all())
            return (y,), flags
        return self._clients(1, client)

    def local_sgd(self, x0, gscale=1.0, mu=0.0, anchor=None, corr=None):
        X0 = self._vec(x0)
        start = _row_of(X0)
        return self._sgd_loop(start, float(gscale), float(mu), start if anchor is None else _row_of(self._vec(anchor)),
                              corr)

    def local_sam(self, x0, alpha, rho, normalized=False, mu=0.0, anchor=None, corr=None, eps=1e-7):
        anchor = x0 if anchor is None else self._vec(anchor)
        noise = self._noise()
        perturb = alpha != 0.0 and rho != 0.0
        opts = self._has_options()

        def client(s):
            y = x0.clone()
            c = self._row(corr, s)
            flags = []
            self.record("local", s, 0, y)
            for k in range(self.K):
                g = self._g(s, k, y, noise=noise)
                if perturb:
                    r = rho / (float(torch.linalg.vector_norm(g)) + eps) if normalized else rho
                    g2 = self._g(s, k, y + r * g, noise=noise)            # same minibatch and noise
                    g = (1.0 - alpha) * g + alpha * g2
                if mu != 0.0:
                    g = g + mu * (y - anchor)
                if c is not None:
                    g = g + c
                if opts:
                    g = self.released_step(g, y, mu)
                y.add_(g, alpha=-float(self.lrs[k]))
                self.record("local", s, k + 1, y)
                flags.append(torch.isfinite(y).all())
            return (y,), flags
        return self._clients(1, client)

    def local_vr(self, x0, gscale, corr):
        def client(s):
            y = x0.clone()
            c = self._row(corr, s)
            flags = []
            self.record("local", s, 0, y)
            for k in range(self.K):
                d = self._g(s, k, y) - self._g(s, k, x0)                # noise cancels (same sample)
                y = y - float(self.lrs[k]) * self.released_step(gscale * d + c, y)
                self.record("local", s, k + 1, y)
                flags.append(torch.isfinite(y).all())
            return (y,), flags
        return self._clients(1, client)

    def local_feddeper(self, x0, V0, rho, coupling, idx_v, noise_v):
        V0 = self._vec(V0)
        noise, nv, iv = self._noise(), self._noise(noise_v), self._index(idx_v)

        def client(s):
            y, v = x0.clone(), V0[s].clone()
            flags = []
            self.record("local", s, 0, y)
            self.record("personal", s, 0, v)
            for k in range(self.K):
                gy = self._g(s, k, y, noise=noise)
                gv = self._g(s, k, v, idx=iv, noise=nv)
                lr = float(self.lrs[k])
                vn = v - lr * gv
                w = v if coupling == 0 else (vn if coupling == 1 else V0[s])
                y = y - lr * gy - rho * (w + y - 2.0 * x0)
                v = vn
                self.record("local", s, k + 1, y)
                self.record("personal", s, k + 1, v)
                flags.append(torch.isfinite(y).all() & torch.isfinite(v).all())
            return (y, v), flags
        return self._clients(2, client)

    def local_sps(self, x0, mode, c, gamma_b, ell, c0, c_round, gamma_fixed, factor, st, eps):
        S, K = self.S, self.K
        G, C = np.empty((S, K)), np.zeros((S, K), dtype=np.int64)
        lv, lg = np.empty(S), np.empty(S)
        noise, idx = self._noise(), self._index()
        t0 = self.round * K

        def client(s):
            y = x0.clone()
            flags = []
            self.record("local", s, 0, y)
            for k in range(K):
                val, g = self.problem.value_grad(int(self.clients[s]), y, None if idx is None else idx[s, k])
                if noise is not None:
                    g = g + noise[s, k]
                val, gg = float(val), float(g @ g)
                num = max(val - float(ell[s]), 0.0)
                inf_ratio = gg + eps == 0.0
                ratio = 0.0 if inf_ratio else num / (gg + eps)
                if mode == MODE_SPS:
                    gam, hit = (gamma_b, 1) if inf_ratio or ratio / c >= gamma_b else (ratio / c, 0)
                elif mode == MODE_DEC:
                    tt = (t0 + k) // K if c_round else t0 + k
                    ct = c0 * np.sqrt(tt + 1.0)
                    m, hit = (st[s], 1) if inf_ratio or ratio >= st[s] else (ratio, 0)
                    gam = m / ct
                    st[s] = ct * gam
                elif mode in (MODE_SMOOTH, MODE_SMOOTH_LIT):
                    # sps_code: cap = 2^{B/m} gamma_{t-1}; literal: cap gamma_{b,t} (gamma_{b,0} = 1) at step t,
                    # then gamma_{b,t+1} = 2^{B/m} gamma_{b,t}, as the compiled kernel (sps_local_steps)
                    cap = factor[s] * st[s] if mode == MODE_SMOOTH else st[s]
                    gam, hit = (cap, 1) if inf_ratio or ratio / c >= cap else (ratio / c, 0)
                    st[s] = gam if mode == MODE_SMOOTH else factor[s] * st[s]
                else:
                    gam = gamma_fixed
                    hit = 1 if gam >= gamma_b * (1.0 - 1e-12) else 0
                G[s, k], C[s, k], lv[s], lg[s] = gam, hit, val, gg
                y.add_(g, alpha=-gam)
                self.record("local", s, k + 1, y)
                flags.append(torch.isfinite(y).all())
            return (y,), flags
        Y, fail = self._clients(1, client)
        return Y, G, C, lv, lg, fail

    def local_prox_sgd(self, x0, anchor=None, mu=0.0, dual=False, t0_thresh=0.0):
        p = self.problem
        start = _row_of(self._vec(x0))
        anchor_of = None if anchor is None else _row_of(self._vec(anchor))
        noise = self._noise()
        tau = p.reg_weight

        def client(s):
            pull = None if anchor_of is None else anchor_of(s)
            x, z = start(s).clone(), start(s).clone()
            acc = float(t0_thresh)
            flags = []
            for k in range(self.K):
                lr = float(self.lrs[k])
                if dual:
                    z = z - lr * self._g(s, k, p.prox_t(z, acc * tau), noise=noise)
                    acc += lr
                    x = p.prox_t(z, acc * tau)
                    flags.append(torch.isfinite(z).all())
                elif pull is None:
                    x = p.prox_t(x - lr * self._g(s, k, x, noise=noise), lr * tau)
                    flags.append(torch.isfinite(x).all())
                else:
                    x = p.prox_t(x - lr * (self._g(s, k, x, noise=noise) + mu * (x - pull)), lr * tau)
                    flags.append(torch.isfinite(x).all())
            return (x, z), flags
        return self._clients(2, client)

    def local_pfedme(self, x0, lam_p, eta_p, inner, wd):
        p = self.problem
        noise = self._noise()

        def client(s):
            w, th = x0.clone(), x0.clone()
            flags = []
            for k in range(self.K):
                for _ in range(inner):
                    g = self._g(s, k, th, noise=noise)
                    th = p.prox_t(th - eta_p * (g + lam_p * (th - w) + wd * th), eta_p * p.reg_weight)
                w = w - float(self.lrs[k]) * lam_p * (w - th)
                flags.append(torch.isfinite(w).all() & torch.isfinite(th).all())
            return (w, th), flags
        return self._clients(2, client)

    def local_fbe(self, x0, lam, hvp_mode, fd_eps, idx_h):
        p = self.problem
        noise, ih = self._noise(), self._index(idx_h)
        t = p.reg_weight / lam

        def client(s):
            x = x0.clone()
            i = int(self.clients[s])
            flags = []
            self.record("local", s, 0, x)
            for k in range(self.K):
                th = p.prox_t(x - self._g(s, k, x, noise=noise) / lam, t)
                self.record("prox_point", s, k, th)
                rm = x - th
                rows_h = None if ih is None else ih[s, k]
                nrm = float(rm @ rm)
                if hvp_mode == HVP_EXACT:
                    hv = p.hvp(i, x, rm, rows_h)
                elif hvp_mode == HVP_FD and nrm > 0.0:
                    delta = fd_eps / np.sqrt(nrm)
                    hv = (p.grad(i, x + delta * rm, rows_h) - p.grad(i, x, rows_h)) / delta
                else:
                    hv = torch.zeros_like(x)
                x = x - float(self.lrs[k]) * (lam * rm - hv)
                self.record("local", s, k + 1, x)
                flags.append(torch.isfinite(x).all())
            return (x,), flags
        return self._clients(1, client)

    def full_grads(self, x):
        return torch.stack([self.problem.client_grad(int(i), x) for i in self.clients])

    # twins' oracles (used by a few algorithms outside the primitives, e.g. FedSPS-Global (c))
    def value(self, s, k, y):
        idx = self._index()
        return float(self.problem.value_grad(int(self.clients[s]), y, None if idx is None else idx[s, k])[0])

    def grad(self, s, k, y):
        return self._g(s, k, y, noise=self._noise())
