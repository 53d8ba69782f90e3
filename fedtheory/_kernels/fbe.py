"""Local steps on forward-backward envelopes and proximal local steps (pFedFBE, FedMiD, FedDualAvg,
Ditto, pFedProx, pFedMe), compiled with Numba; h = tau h0 is the problem's regularizer (``prox_vec``)."""
import numpy as np

from .oracles import OP_GRAD, OP_HVP, client_grad, client_oracle, loop_kernel, prox_vec
from .paths import record
from .vec import add_into, copy_into, count_nonfinite, end_step, nonfinite

HVP_NONE = 0       # cheap variant: g = lam Rm
HVP_EXACT = 1      # g = lam Rm - H Rm with the exact minibatch Hessian-vector product
HVP_FD = 2         # forward difference (grad(x + delta Rm) - grad(x)) / delta, delta = fd_eps / ||Rm||


@loop_kernel
def fbe_local_steps(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx_g, idx_h, noise,
                    lrs, l2, x0, lam, tau, hvp_mode, fd_eps, reg, groups, m1, m2, out, path, path_prox):
    """K pFedFBE local steps (Algorithm 1, eq. 9) for every sampled client (h of ``prox_vec``).

        v  = grad f~(x; B_g) + noise;   th = prox_{h/lam}(x - v/lam);   Rm = x - th
        Hv = H(x; B_H) Rm (exact), (grad f~(x + d Rm; B_H) - grad f~(x; B_H))/d (forward
             difference, d = fd_eps/||Rm||), or 0 (cheap)
        x <- x - eta_k (lam Rm - Hv)

    ``idx_g``/``idx_h`` are the (S, K, B) rows of the two minibatches (B = 0: full client data).
    ``path`` records x_k (k = 0..K) and ``path_prox`` th_k (k = 0..K-1) when not empty (traces).
    Returns -1 or s * K + k of the first non-finite iterate.
    """
    S, K, d = clients.shape[0], lrs.shape[0], x0.shape[0]
    first_bad = np.int64(-1)
    v, rm, hv, g2, xp = np.empty(d), np.empty(d), np.empty(d), np.empty(d), np.empty(d)
    has_noise = noise.shape[0] > 0
    t = tau / lam
    for s in range(S):
        start, end = client_ptr[clients[s]], client_ptr[clients[s] + 1]
        x = out[s]
        copy_into(x, x0)
        record(path, s, 0, x)
        for k in range(K):
            # the datafit is called from one site (oracles.client_oracle): e = 0 the gradient v at x;
            # e = 1 the exact H Rm into hv, or the forward point's gradient into g2; e = 2 the gradient at
            # x on the Hessian minibatch into hv (forward differences)
            n_eval = 1
            for e in range(3):
                if e >= n_eval:
                    break
                op, pt, rws, dst = OP_GRAD, x, idx_g[s, k], v
                if e == 1:
                    rws = idx_h[s, k]
                    if hvp_mode == HVP_EXACT:
                        op, dst = OP_HVP, hv
                    else:
                        pt, dst = xp, g2
                elif e == 2:
                    rws, dst = idx_h[s, k], hv
                client_oracle(sparse, A, data, indices, indptr, b, kind, op, start, end, rws, pt, rm, l2, dst)
                if e > 0:
                    continue
                if has_noise:
                    add_into(v, noise[s, k], 1.0)
                for j in range(d):
                    xp[j] = x[j] - v[j] / lam
                prox_vec(xp, t, reg, groups, m1, m2, rm)
                record(path_prox, s, k, rm)
                nrm = 0.0
                for j in range(d):
                    rm[j] = x[j] - rm[j]
                    nrm += rm[j] * rm[j]
                if hvp_mode == HVP_EXACT:
                    n_eval = 2
                elif hvp_mode == HVP_FD and nrm > 0.0:
                    delta = fd_eps / np.sqrt(nrm)
                    for j in range(d):
                        xp[j] = x[j] + delta * rm[j]
                    n_eval = 3
                else:
                    for j in range(d):
                        hv[j] = 0.0
            if n_eval == 3:
                for j in range(d):
                    hv[j] = (g2[j] - hv[j]) / delta
            lr = lrs[k]
            nbad = np.int64(0)
            for j in range(d):
                x[j] -= lr * (lam * rm[j] - hv[j])
                nbad += nonfinite(x[j])
            first_bad, stop = end_step(path, s, k, K, x, nbad, first_bad)
            if stop:
                break
    return first_bad


@loop_kernel
def prox_local_sgd(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, noise, lrs, l2, X0,
                   anchors, mu, tau, dual, t0_thresh, reg, groups, m1, m2, out_x, out_z):
    """Proximal local SGD for h = tau h0 of ``prox_vec``, every sampled client from X0[s] (X0[0] when
    X0 has one row), with the minibatch ``idx[s, k]`` and the noise ``noise[s, k]``.

    Primal (``dual`` False; FedMiD, Ditto, pFedProx, FedProx with a composite h):
        y <- prox_{eta_k tau h0}(y - eta_k (g(y) + noise + mu (y - anchors[s])))
    (no proximal term when ``anchors`` is empty, (0, d); one row: shared anchor).
    Dual (FedDualAvg): z_0 = X0[s] (the dual vector); x_k = prox_{(t0_thresh + sum_{j<k} eta_j) tau h0}(z_k);
    z_{k+1} = z_k - eta_k g(x_k). ``out_x`` receives the last primal point, ``out_z`` z_K (the start
    point in the primal mode). Returns -1 or s * K + k of the first non-finite iterate.
    """
    S, K, d = clients.shape[0], lrs.shape[0], X0.shape[1]
    first_bad = np.int64(-1)
    g, u, no_path = np.empty(d), np.empty(d), np.zeros((0, 0, 0))
    has_noise, has_anchor = noise.shape[0] > 0, anchors.shape[0] > 0
    for s in range(S):
        start, end = client_ptr[clients[s]], client_ptr[clients[s] + 1]
        x0 = X0[s if X0.shape[0] > 1 else 0]
        anchor = anchors[s if anchors.shape[0] > 1 else 0] if has_anchor else x0
        x, z = out_x[s], out_z[s]
        copy_into(x, x0)
        copy_into(z, x0)
        acc = t0_thresh
        for k in range(K):
            lr = lrs[k]
            y = z if dual else x                 # the point the step moves
            if dual:
                prox_vec(z, acc * tau, reg, groups, m1, m2, u)
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], u if dual else x, l2, g)
            for j in range(d):
                gj = g[j] + (noise[s, k, j] if has_noise else 0.0)
                if has_anchor:
                    gj += mu * (x[j] - anchor[j])
                u[j] = y[j] - lr * gj
            if dual:
                copy_into(z, u)
                acc += lr
            prox_vec(u, (acc if dual else lr) * tau, reg, groups, m1, m2, x)
            first_bad, stop = end_step(no_path, s, k, K, y, count_nonfinite(y), first_bad)
            if stop:
                break
    return first_bad


@loop_kernel
def pfedme_local(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, noise, lrs, l2, x0,
                 lam_p, eta_p, inner, wd, tau, reg, groups, m1, m2, out_w, out_theta):
    """pFedMe's local rounds (T Dinh et al. 2020, with a prox for h): w_0 = theta_0 = x0; for each step k
    with one minibatch, ``inner`` times theta <- prox_{eta_p tau h}(theta - eta_p (g(theta; B) + lam_p
    (theta - w) + wd theta)), then w <- w - eta_k lam_p (w - theta). theta is warm-started across k."""
    S, K, d = clients.shape[0], lrs.shape[0], x0.shape[0]
    first_bad = np.int64(-1)
    g, u, no_path = np.empty(d), np.empty(d), np.zeros((0, 0, 0))
    has_noise = noise.shape[0] > 0
    for s in range(S):
        start, end = client_ptr[clients[s]], client_ptr[clients[s] + 1]
        w, th = out_w[s], out_theta[s]
        copy_into(w, x0)
        copy_into(th, x0)
        for k in range(K):
            for _ in range(inner):
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], th, l2, g)
                for j in range(d):
                    gj = g[j] + (noise[s, k, j] if has_noise else 0.0)
                    u[j] = th[j] - eta_p * (gj + lam_p * (th[j] - w[j]) + wd * th[j])
                prox_vec(u, eta_p * tau, reg, groups, m1, m2, th)
            lr = lrs[k]
            nbad = np.int64(0)
            for j in range(d):
                w[j] -= lr * lam_p * (w[j] - th[j])
                nbad += nonfinite(w[j]) + nonfinite(th[j])
            first_bad, stop = end_step(no_path, s, k, K, w, nbad, first_bad)
            if stop:
                break
    return first_bad
