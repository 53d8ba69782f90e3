"""Local update loops of the sampled clients of one round, compiled with Numba.

Every loop runs, for each sampled client slot s, K local steps from a start point, calls the
problem's gradient kernel (:func:`.oracles.client_grad`, whatever the datafit) and returns -1 when
every local iterate stayed finite, else ``s * K + k`` for the first client slot s and local step k
whose iterate became non-finite (that client stops there). The local paths are recorded for
traces (:mod:`.trace`) when ``path`` is not empty.
"""
import numpy as np
from numba import njit

from .oracles import client_grad, loop_kernel
from .paths import record
from .vec import add_into, copy_into, end_step, nonfinite, sum_sq

DIR_PLAIN = 0      # d_k = g(y_k; B_k) + noise
DIR_SAM = 1        # d_k = (1 - alpha) g(y_k) + alpha g(y_k + r g(y_k)) (both with the noise; FedSpeed)
DIR_VR = 2         # d_k = g(y_k; B_k) - g(y_0; B_k), the same minibatch, no noise (Mime)


@loop_kernel
def corrected_local_sgd(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, noise, lrs, l2, X0,
                        anchors, gscale, mu, corr, direction, alpha, rho, normalized, eps, wd, clip, out, path):
    """K corrected local SGD steps for every sampled client.

    For client ``clients[s]`` and step k = 0..K-1, from y_0 = X0[s] (X0[0] when X0 has one row):

        y_{k+1} = y_k - lrs[k] * ( gscale * d_k + mu * (y_k - anchors[s]) + corr[s] )

    with the direction d_k of ``direction`` (minibatch ``idx[s, k]``, noise ``noise[s, k]``):

        DIR_PLAIN: d_k = g(y_k) + noise
        DIR_SAM:   g1 = g(y_k) + noise; r = rho / (||g1|| + eps) if ``normalized`` else rho;
                   g2 = g(y_k + r g1) + noise (the same minibatch); d_k = (1 - alpha) g1 + alpha g2
                   (g2 is not computed when alpha * rho == 0)
        DIR_VR:    d_k = g(y_k) - g(y_0) on the same minibatch (the noise cancels)

    The released codes' options (``fedtheory.run(weight_decay=..., clip_norm=...)``; wd = 0 and
    clip = 0 (none) leave the step above unchanged): ``wd * y_k`` is added to the step (decoupled
    weight decay, ``torch.optim.SGD(weight_decay=wd)``; it enters neither d_k nor the SAM ascent).
    With clip > 0 the vector the released codes backpropagate, u_k = gscale d_k + corr[s] - mu
    anchors[s] (the prox pull mu y_k is their optimizer's weight decay), is rescaled as
    ``torch.nn.utils.clip_grad_norm_`` does, c = clip / (||u_k|| + 1e-6), and when c < 1 the step
    is ``c u_k + (mu + wd) y_k``; when c >= 1 the step is the unclipped one, bit for bit.

    ``idx`` has shape (S, K, B) of absolute minibatch rows, or (S, K, 0) for exact client
    gradients; ``noise`` (S, K, d) or (0, 0, 0) for none; ``anchors`` one row (shared), S rows, or
    (0, d) for no proximal term; ``corr`` (S, d) or (0, 0) for none. y_K is written into ``out[s]``
    and, when ``path`` is not empty, y_0..y_K into ``path[s]``. FedAvg, FedProx, SCAFFOLD, FedDyn,
    FedCM, LFD, FedADMM, FedPD, NFSGD (DIR_PLAIN), FedSpeed (DIR_SAM) and Mime (DIR_VR) are instances.
    Returns -1 or s * K + k of the first non-finite iterate.
    """
    S, K, d = clients.shape[0], lrs.shape[0], X0.shape[1]
    first_bad = np.int64(-1)        # an int64, not a literal: one specialisation of end_step
    g, g2, xb = np.empty(d), np.empty(d), np.empty(d)
    has_noise = noise.shape[0] > 0 and direction != DIR_VR
    # mu = 0 adds the exact zero mu (y - anchor): no prox term (only the sign of a zero could differ)
    has_anchor, has_corr = anchors.shape[0] > 0 and mu != 0.0, corr.shape[0] > 0
    perturb = direction == DIR_SAM and alpha != 0.0 and rho != 0.0
    has_wd, clipping = wd != 0.0, clip > 0.0
    plain = not (has_anchor or has_corr or has_wd) and gscale == 1.0      # y -= eta g: the same bits
    for s in range(S):
        start, end = client_ptr[clients[s]], client_ptr[clients[s] + 1]
        x0 = X0[s if X0.shape[0] > 1 else 0]
        anchor = anchors[s if anchors.shape[0] > 1 else 0] if has_anchor else x0
        y = out[s]
        copy_into(y, x0)
        record(path, s, 0, y)
        for k in range(K):
            for e in range(2 if direction == DIR_VR or perturb else 1):      # the step's gradient evaluations
                if e == 1 and perturb:
                    r = rho / (np.sqrt(sum_sq(g)) + eps) if normalized else rho
                    for j in range(d):
                        xb[j] = y[j] + r * g[j]
                pt = y if e == 0 else (x0 if direction == DIR_VR else xb)
                buf = g if e == 0 else g2
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], pt, l2, buf)
                if has_noise:
                    add_into(buf, noise[s, k], 1.0)
            if direction == DIR_VR:
                add_into(g, g2, -1.0)
            elif perturb:
                for j in range(d):
                    g[j] = (1.0 - alpha) * g[j] + alpha * g2[j]
            lr = lrs[k]
            nbad = np.int64(0)
            c = 1.0
            if clipping:                # u_k into g2 (free once d_k is formed) and its clip coefficient
                c = clip_coefficient(g, gscale, mu, anchor, has_anchor, corr[s] if has_corr else g, has_corr, clip,
                                     g2)
            if c < 1.0:                 # clipped u_k (the released codes' order): y -= lr (c u + (mu + wd) y)
                pull = (mu if has_anchor else 0.0) + wd
                for j in range(d):
                    y[j] -= lr * (c * g2[j] + pull * y[j])
                    nbad += nonfinite(y[j])
            elif plain:                 # local SGD: the step below with nothing added, in a tight loop
                for j in range(d):
                    y[j] -= lr * g[j]
                    nbad += nonfinite(y[j])
            else:                       # the paper's step (plus the decay wd y_k when it is set)
                for j in range(d):
                    step = gscale * g[j]
                    if has_anchor:
                        step += mu * (y[j] - anchor[j])
                    if has_corr:
                        step += corr[s, j]
                    if has_wd:
                        step += wd * y[j]
                    y[j] -= lr * step
                    nbad += nonfinite(y[j])
            first_bad, stop = end_step(path, s, k, K, y, nbad, first_bad)
            if stop:
                break
    return first_bad


@njit(cache=True)
def clip_coefficient(g, gscale, mu, anchor, has_anchor, corr, has_corr, clip, u):
    """``clip / (||u|| + 1e-6)`` for u = gscale g + corr - mu anchor, written into ``u`` (torch's
    ``clip_grad_norm_`` coefficient; the caller clips when it is < 1)."""
    acc = 0.0
    for j in range(g.shape[0]):
        uj = gscale * g[j]
        if has_anchor:
            uj -= mu * anchor[j]
        if has_corr:
            uj += corr[j]
        u[j] = uj
        acc += uj * uj
    return clip / (np.sqrt(acc) + 1e-6)


#: FedSpeed's SAM-type local steps are ``corrected_local_sgd`` with ``direction=DIR_SAM``.
perturbed_local_sgd = corrected_local_sgd


@loop_kernel
def feddeper_local(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, idx_v, noise, noise_v,
                   lrs, l2, x0, V0, rho, coupling, out_y, out_v, path_y, path_v):
    """FedDeper's alternating local steps (Algorithm 1, lines 5-9) for every sampled client.

    From y_0 = x0 and v_0 = V0[s], for k = 0..K-1 with the minibatch ``idx[s, k]`` for y and
    ``idx_v[s, k]`` for v (the same array for the paper's single minibatch):

        gy = g(y_k) + noise[s, k];  gv = g(v_k) + noise_v[s, k]
        v_{k+1} = v_k - eta_k gv                                    (line 8)
        y_{k+1} = y_k - eta_k gy - rho (w + y_k - 2 x0)              (line 7)

    with w = v_k (coupling 0, the paper's reading: docs/papers/feddeper.md, §2.3), v_{k+1} (1) or v_0 (2).
    Writes y_K into ``out_y[s]`` and v_K into ``out_v[s]`` (and y_0..y_K, v_0..v_K into ``path_y``,
    ``path_v`` when they are not empty); returns -1 or s * K + k of the first
    non-finite iterate.
    """
    S, K, d = clients.shape[0], lrs.shape[0], x0.shape[0]
    first_bad = np.int64(-1)
    gy, gv = np.empty(d), np.empty(d)
    has_noise = noise.shape[0] > 0
    for s in range(S):
        start, end = client_ptr[clients[s]], client_ptr[clients[s] + 1]
        y, v = out_y[s], out_v[s]
        copy_into(y, x0)
        copy_into(v, V0[s])
        record(path_y, s, 0, y)
        record(path_v, s, 0, v)
        for k in range(K):
            for e in range(2):          # gy = g(y_k), gv = g(v_k) from one call site (see oracles.client_oracle)
                client_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k] if e == 0 else idx_v[s, k],
                            y if e == 0 else v, l2, gy if e == 0 else gv)
            lr = lrs[k]
            nbad = np.int64(0)
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
                nbad += nonfinite(y[j]) + nonfinite(v[j])
            record(path_y, s, k + 1, y)
            first_bad, stop = end_step(path_v, s, k, K, v, nbad, first_bad)
            if stop:
                break
    return first_bad
