"""Local update loops of the sampled clients of one round, compiled with Numba."""
import numpy as np
from numba import njit

from .trace import record
from .oracles import client_grad


@njit(cache=True)
def corrected_local_sgd(sparse, A, data, indices, indptr, b, kind, client_ptr,
                        clients, idx, noise, lrs, l2, x0, gscale, mu, anchor, corr, out, path):
    """Run K corrected local SGD steps for every sampled client of a round.

    For client ``clients[s]`` and step k = 0..K-1, starting from y_0 = x0:

        y_{k+1} = y_k - lrs[k] * ( gscale * (g(y_k; idx[s, k]) + noise[s, k])
                                   + mu * (y_k - anchor) + corr[s] )

    ``idx`` has shape (S, K, B) of absolute minibatch rows, or (S, K, 0) for exact
    client gradients; ``noise`` has shape (S, K, d) or (0, 0, 0) for none; ``corr``
    has shape (S, d) or (0, 0) for none. The final y_K is written into ``out[s]``;
    ``path`` of shape (S, K + 1, d), or (0, 0, 0), receives y_0..y_K (traces, :mod:`.trace`).
    FedAvg, FedProx, SCAFFOLD, FedDyn, FedCM and LFD are all instances.

    Returns -1 when every local iterate stayed finite, else ``s * K + k`` for the first
    client slot s and local step k whose iterate became non-finite (that client stops there).
    """
    S = clients.shape[0]
    K = lrs.shape[0]
    d = x0.shape[0]
    first_bad = -1
    g = np.empty(d)
    has_noise = noise.shape[0] > 0
    has_corr = corr.shape[0] > 0
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        y = out[s]
        for j in range(d):
            y[j] = x0[j]
        record(path, s, 0, y)
        for k in range(K):
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], y, l2, g)
            lr = lrs[k]
            check = 0.0
            for j in range(d):
                gj = g[j]
                if has_noise:
                    gj += noise[s, k, j]
                step = gscale * gj + mu * (y[j] - anchor[j])
                if has_corr:
                    step += corr[s, j]
                y[j] -= lr * step
                check += y[j]
            record(path, s, k + 1, y)
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad


@njit(cache=True)
def perturbed_local_sgd(sparse, A, data, indices, indptr, b, kind, client_ptr,
                        clients, idx, noise, lrs, l2, x0, alpha, rho, normalized, eps,
                        mu, anchor, corr, out, path):
    """K local steps with a SAM-type quasi-gradient (FedSpeed, Alg. 1 lines 7-11).

    For client ``clients[s]`` and step k, with the minibatch ``idx[s, k]`` and the noise
    sample ``noise[s, k]`` shared by both gradients:

        g1 = g(y_k) + noise
        r  = rho / (||g1|| + eps) if normalized else rho
        g2 = g(y_k + r g1) + noise                      (ascent point, same minibatch)
        gt = (1 - alpha) g1 + alpha g2
        y_{k+1} = y_k - lrs[k] * ( gt + mu (y_k - anchor) + corr[s] )

    When ``alpha * rho == 0`` the second gradient is not computed and gt = g1. Output and
    return value as in :func:`corrected_local_sgd`.
    """
    S = clients.shape[0]
    K = lrs.shape[0]
    d = x0.shape[0]
    first_bad = -1
    g = np.empty(d)
    g2 = np.empty(d)
    xb = np.empty(d)
    has_noise = noise.shape[0] > 0
    has_corr = corr.shape[0] > 0
    perturb = alpha != 0.0 and rho != 0.0
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        y = out[s]
        for j in range(d):
            y[j] = x0[j]
        record(path, s, 0, y)
        for k in range(K):
            rows = idx[s, k]
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, y, l2, g)
            if has_noise:
                for j in range(d):
                    g[j] += noise[s, k, j]
            if perturb:
                r = rho
                if normalized:
                    nrm = 0.0
                    for j in range(d):
                        nrm += g[j] * g[j]
                    r = rho / (np.sqrt(nrm) + eps)
                for j in range(d):
                    xb[j] = y[j] + r * g[j]
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, rows, xb, l2, g2)
                if has_noise:
                    for j in range(d):
                        g2[j] += noise[s, k, j]
                for j in range(d):
                    g[j] = (1.0 - alpha) * g[j] + alpha * g2[j]
            lr = lrs[k]
            check = 0.0
            for j in range(d):
                step = g[j] + mu * (y[j] - anchor[j])
                if has_corr:
                    step += corr[s, j]
                y[j] -= lr * step
                check += y[j]
            record(path, s, k + 1, y)
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad


@njit(cache=True)
def multi_start_local_sgd(sparse, A, data, indices, indptr, b, kind, client_ptr,
                          clients, idx, noise, lrs, l2, X0, gscale, mu, corr, out, path):
    """K corrected local SGD steps, each client from its own start ``X0[s]``.

        y_0 = X0[s],  y_{k+1} = y_k - lrs[k] * ( gscale * (g(y_k; idx[s, k]) + noise[s, k])
                                               + mu * (y_k - X0[s]) + corr[s] )

    Decentralised local SGD (NFSGD) and FedPD after a silent round start every client from
    its own model. Shapes, output and return value as in :func:`corrected_local_sgd`.
    """
    S = clients.shape[0]
    K = lrs.shape[0]
    d = X0.shape[1]
    first_bad = -1
    g = np.empty(d)
    has_noise = noise.shape[0] > 0
    has_corr = corr.shape[0] > 0
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        y = out[s]
        for j in range(d):
            y[j] = X0[s, j]
        record(path, s, 0, y)
        for k in range(K):
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], y, l2, g)
            lr = lrs[k]
            check = 0.0
            for j in range(d):
                gj = g[j]
                if has_noise:
                    gj += noise[s, k, j]
                step = gscale * gj + mu * (y[j] - X0[s, j])
                if has_corr:
                    step += corr[s, j]
                y[j] -= lr * step
                check += y[j]
            record(path, s, k + 1, y)
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad


@njit(cache=True)
def anchored_local_sgd(sparse, A, data, indices, indptr, b, kind, client_ptr,
                       clients, idx, noise, lrs, l2, x0, gscale, corr, out, path):
    """K local steps with a variance-reduced direction (Mime):

        y_{k+1} = y_k - lrs[k] * ( gscale * (g(y_k; B) - g(x0; B) + corr[s]) ... )

    precisely: d = g(y_k; idx[s, k]) - g(x0; idx[s, k]) (the same minibatch and the same noise
    sample, which cancels), then y_{k+1} = y_k - lrs[k] * (gscale * d + corr[s]). With ``corr[s]``
    holding gscale * c + beta * s_mom the Mime update follows. Output and return as
    :func:`corrected_local_sgd`.
    """
    S = clients.shape[0]
    K = lrs.shape[0]
    d = x0.shape[0]
    first_bad = -1
    g = np.empty(d)
    g0 = np.empty(d)
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        y = out[s]
        for j in range(d):
            y[j] = x0[j]
        record(path, s, 0, y)
        for k in range(K):
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], y, l2, g)
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], x0, l2, g0)
            lr = lrs[k]
            check = 0.0
            for j in range(d):
                y[j] -= lr * (gscale * (g[j] - g0[j]) + corr[s, j])
                check += y[j]
            record(path, s, k + 1, y)
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad


@njit(cache=True)
def feddeper_local(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, idx_v, noise, noise_v,
                   lrs, l2, x0, V0, rho, coupling, out_y, out_v, path_y, path_v):
    """FedDeper's alternating local steps (Algorithm 1, lines 5-9) for every sampled client.

    From y_0 = x0 and v_0 = V0[s], for k = 0..K-1 with the minibatch ``idx[s, k]`` for y and
    ``idx_v[s, k]`` for v (the same array for the paper's single minibatch):

        gy = g(y_k) + noise[s, k];  gv = g(v_k) + noise_v[s, k]
        v_{k+1} = v_k - eta_k gv                                    (line 8)
        y_{k+1} = y_k - eta_k gy - rho (w + y_k - 2 x0)              (line 7)

    with w = v_k (coupling 0, the spec's reading), v_{k+1} (1) or v_0 (2).
    Writes y_K into ``out_y[s]`` and v_K into ``out_v[s]`` (and y_0..y_K, v_0..v_K into ``path_y``,
    ``path_v`` when they are not empty); returns -1 or s * K + k of the first
    non-finite iterate.
    """
    S = clients.shape[0]
    K = lrs.shape[0]
    d = x0.shape[0]
    first_bad = -1
    gy = np.empty(d)
    gv = np.empty(d)
    has_noise = noise.shape[0] > 0
    for s in range(S):
        i = clients[s]
        start = client_ptr[i]
        end = client_ptr[i + 1]
        y = out_y[s]
        v = out_v[s]
        for j in range(d):
            y[j] = x0[j]
            v[j] = V0[s, j]
        record(path_y, s, 0, y)
        record(path_v, s, 0, v)
        for k in range(K):
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], y, l2, gy)
            client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx_v[s, k], v, l2, gv)
            lr = lrs[k]
            check = 0.0
            for j in range(d):
                gyj = gy[j]
                gvj = gv[j]
                if has_noise:
                    gyj += noise[s, k, j]
                    gvj += noise_v[s, k, j]
                vk = v[j]
                vn = vk - lr * gvj
                w = vk if coupling == 0 else (vn if coupling == 1 else V0[s, j])
                y[j] = y[j] - lr * gyj - rho * (w + y[j] - 2.0 * x0[j])
                v[j] = vn
                check += y[j] + v[j]
            record(path_y, s, k + 1, y)
            record(path_v, s, k + 1, v)
            if not np.isfinite(check):
                if first_bad < 0:
                    first_bad = s * K + k
                break
    return first_bad
