"""Local steps on forward-backward envelopes and proximal local steps (pFedFBE, FedMiD, FedDualAvg)."""
import numpy as np
from numba import njit

from .trace import record
from .oracles import client_grad, client_hvp, prox_vec

HVP_NONE = 0       # cheap variant: g = lam Rm
HVP_EXACT = 1      # g = lam Rm - H Rm with the exact minibatch Hessian-vector product
HVP_FD = 2         # forward difference (grad(x + delta Rm) - grad(x)) / delta, delta = fd_eps / ||Rm||


@njit(cache=True)
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
    S = clients.shape[0]
    K = lrs.shape[0]
    d = x0.shape[0]
    first_bad = -1
    v = np.empty(d)
    rm = np.empty(d)
    hv = np.empty(d)
    g2 = np.empty(d)
    xp = np.empty(d)
    has_noise = noise.shape[0] > 0
    t = tau / lam
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        x = out[s]
        for j in range(d):
            x[j] = x0[j]
        record(path, s, 0, x)
        for k in range(K):
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx_g[s, k], x, l2, v)
            for j in range(d):
                vj = v[j]
                if has_noise:
                    vj += noise[s, k, j]
                xp[j] = x[j] - vj / lam
            prox_vec(xp, t, reg, groups, m1, m2, rm)
            record(path_prox, s, k, rm)
            nrm = 0.0
            for j in range(d):
                rm[j] = x[j] - rm[j]
                nrm += rm[j] * rm[j]
            if hvp_mode == HVP_EXACT:
                client_hvp(sparse, A, data, indices, indptr, b, kind, start, end, idx_h[s, k], x, rm, l2, hv)
            elif hvp_mode == HVP_FD and nrm > 0.0:
                delta = fd_eps / np.sqrt(nrm)
                for j in range(d):
                    xp[j] = x[j] + delta * rm[j]
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx_h[s, k], xp, l2, g2)
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx_h[s, k], x, l2, hv)
                for j in range(d):
                    hv[j] = (g2[j] - hv[j]) / delta
            else:
                for j in range(d):
                    hv[j] = 0.0
            lr = lrs[k]
            check = 0.0
            for j in range(d):
                x[j] -= lr * (lam * rm[j] - hv[j])
                check += x[j]
            record(path, s, k + 1, x)
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad


@njit(cache=True)
def prox_local_sgd(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, noise, lrs, l2, x0,
                   tau, dual, t0_thresh, reg, groups, m1, m2, out_x, out_z):
    """Proximal local SGD for h of ``prox_vec`` (weight tau), every sampled client from x0.

    Primal (FedMiD, ``dual`` False):  x <- soft(x - eta_k g(x), eta_k tau).
    Dual (FedDualAvg, ``dual`` True): z_0 = x0 (the dual vector); x_k = soft(z_k, (t0_thresh +
    sum_{j<k} eta_j) tau); z_{k+1} = z_k - eta_k g(x_k). ``out_z`` receives z_K, ``out_x`` x_K.
    """
    S = clients.shape[0]
    K = lrs.shape[0]
    d = x0.shape[0]
    first_bad = -1
    g = np.empty(d)
    xk = np.empty(d)
    has_noise = noise.shape[0] > 0
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        x = out_x[s]
        z = out_z[s]
        for j in range(d):
            x[j] = x0[j]
            z[j] = x0[j]
        acc = t0_thresh
        for k in range(K):
            lr = lrs[k]
            if dual:
                prox_vec(z, acc * tau, reg, groups, m1, m2, xk)
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], xk, l2, g)
                check = 0.0
                for j in range(d):
                    gj = g[j] + (noise[s, k, j] if has_noise else 0.0)
                    z[j] -= lr * gj
                    check += z[j]
                acc += lr
                prox_vec(z, acc * tau, reg, groups, m1, m2, x)
            else:
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], x, l2, g)
                for j in range(d):
                    gj = g[j] + (noise[s, k, j] if has_noise else 0.0)
                    xk[j] = x[j] - lr * gj
                prox_vec(xk, lr * tau, reg, groups, m1, m2, x)
                check = 0.0
                for j in range(d):
                    check += x[j]
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad


@njit(cache=True)
def anchored_prox_sgd(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, noise, lrs, l2, X0,
                      anchor, mu, tau, reg, groups, m1, m2, out):
    """K proximal steps with a pull to ``anchor``: y_0 = X0[s],
    y <- prox_{eta_k tau h}(y - eta_k (g(y; B) + mu (y - anchor))) (Ditto's personal model, FedProx
    with a composite h). Returns -1 or s * K + k of the first non-finite iterate."""
    S = clients.shape[0]
    K = lrs.shape[0]
    d = X0.shape[1]
    first_bad = -1
    g = np.empty(d)
    u = np.empty(d)
    has_noise = noise.shape[0] > 0
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        y = out[s]
        for j in range(d):
            y[j] = X0[s, j]
        for k in range(K):
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], y, l2, g)
            lr = lrs[k]
            for j in range(d):
                gj = g[j] + (noise[s, k, j] if has_noise else 0.0)
                u[j] = y[j] - lr * (gj + mu * (y[j] - anchor[j]))
            prox_vec(u, lr * tau, reg, groups, m1, m2, y)
            check = 0.0
            for j in range(d):
                check += y[j]
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad


@njit(cache=True)
def pfedme_local(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, noise, lrs, l2, x0,
                 lam_p, eta_p, inner, wd, tau, reg, groups, m1, m2, out_w, out_theta):
    """pFedMe's local rounds (T Dinh et al. 2020, with a prox for h): w_0 = theta_0 = x0; for each step k
    with one minibatch, ``inner`` times theta <- prox_{eta_p tau h}(theta - eta_p (g(theta; B) + lam_p
    (theta - w) + wd theta)), then w <- w - eta_k lam_p (w - theta). theta is warm-started across k."""
    S = clients.shape[0]
    K = lrs.shape[0]
    d = x0.shape[0]
    first_bad = -1
    g = np.empty(d)
    u = np.empty(d)
    has_noise = noise.shape[0] > 0
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        w = out_w[s]
        th = out_theta[s]
        for j in range(d):
            w[j] = x0[j]
            th[j] = x0[j]
        for k in range(K):
            for _ in range(inner):
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], th, l2, g)
                for j in range(d):
                    gj = g[j] + (noise[s, k, j] if has_noise else 0.0)
                    u[j] = th[j] - eta_p * (gj + lam_p * (th[j] - w[j]) + wd * th[j])
                prox_vec(u, eta_p * tau, reg, groups, m1, m2, th)
            lr = lrs[k]
            check = 0.0
            for j in range(d):
                w[j] -= lr * lam_p * (w[j] - th[j])
                check += w[j] + th[j]
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad
