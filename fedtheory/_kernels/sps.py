"""Local steps with stochastic Polyak step sizes (FedSPS family), compiled with Numba."""
import numpy as np
from numba import njit

from .oracles import client_value_grad, loop_kernel
from .paths import record
from .vec import copy_into, end_step, nonfinite

MODE_SPS = 0          # FedSPS: min{(F - l)/(c ||g||^2), gamma_b}
MODE_DEC = 1          # FedDecSPS: min{(F - l)/||g||^2, P_i} / c_t, then P_i <- c_t gamma
MODE_SMOOTH = 2       # FedSPS with the SPS code's smoothed cap: cap = factor_i * gamma_prev_i
MODE_SMOOTH_LIT = 3   # literal smoothed cap: cap_i <- factor_i * cap_i every step
MODE_FIXED = 4        # FedSPS-Global: a given gamma for every step


@loop_kernel
def sps_local_steps(sparse, A, data, indices, indptr, b, kind, client_ptr, clients, idx, noise, l2, x0,
                    mode, c, gamma_b, ell, c0, t0, c_round, K_round, gamma_fixed, factor, state,
                    eps, out, gammas, capped, last_val, last_gg, path):
    """K local SGD steps with a stochastic Polyak step size for every sampled client.

    For client ``clients[s]`` and local step k (global counter t = t0 + k), with the same
    minibatch ``idx[s, k]`` for the value F and the gradient g (plus ``noise[s, k]`` on g):

        ratio = (F - ell[s]) / (||g||^2 + eps), clipped at 0;  ||g|| = 0 gives the cap
        MODE_SPS:        gamma = min(ratio / c, gamma_b)
        MODE_DEC:        c_t = c0 sqrt(t + 1) (t // K_round if ``c_round``);
                         gamma = min(ratio, state[s]) / c_t;  state[s] <- c_t gamma
        MODE_SMOOTH:     gamma = min(ratio / c, factor[s] state[s]);  state[s] <- gamma
        MODE_SMOOTH_LIT: state[s] <- factor[s] state[s];  gamma = min(ratio / c, state[s])
        MODE_FIXED:      gamma = gamma_fixed (at the cap when gamma_fixed >= gamma_b)
        y <- y - gamma g

    ``gammas[s, k]`` receives the step size and ``capped[s, k]`` 1 when the cap bound.
    ``last_val[s]`` and ``last_gg[s]`` hold F and ||g||^2 of the last step (FedSPS-Global).
    ``path`` (S, K + 1, d), or (0, 0, 0), receives y_0..y_K (traces).
    Returns -1, or s * K + k of the first non-finite iterate.
    """
    S, K, d = clients.shape[0], idx.shape[1], x0.shape[0]
    first_bad = np.int64(-1)
    g = np.empty(d)
    has_noise = noise.shape[0] > 0
    for s in range(S):
        start, end = client_ptr[clients[s]], client_ptr[clients[s] + 1]
        y = out[s]
        copy_into(y, x0)
        record(path, s, 0, y)
        for k in range(K):
            val = client_value_grad(sparse, A, data, indices, indptr, b, kind, start, end, idx[s, k], y, l2, g)
            gg = 0.0
            for j in range(d):
                if has_noise:
                    g[j] += noise[s, k, j]
                gg += g[j] * g[j]
            num = val - ell[s]
            if num < 0.0:
                num = 0.0
            inf_ratio = gg + eps == 0.0
            ratio = 0.0 if inf_ratio else num / (gg + eps)
            if mode == MODE_DEC:
                tt = (t0 + k) // K_round if c_round else t0 + k
                ct = c0 * np.sqrt(tt + 1.0)
                gam, cap_hit = _capped(ratio, state[s], inf_ratio)
                gam = gam / ct
                state[s] = ct * gam
            elif mode == MODE_FIXED:
                gam = gamma_fixed
                cap_hit = 1 if gam >= gamma_b * (1.0 - 1e-12) else 0
            else:
                cap = gamma_b if mode == MODE_SPS else (factor[s] * state[s] if mode == MODE_SMOOTH else state[s])
                gam, cap_hit = _capped(ratio / c, cap, inf_ratio)
                if mode == MODE_SMOOTH:
                    state[s] = gam
                elif mode == MODE_SMOOTH_LIT:       # gamma_{b,t} used at step t (gamma_{b,0} = 1), then
                    state[s] = factor[s] * state[s]   # gamma_{b,t+1} = 2^{|B|/m_i} gamma_{b,t}
            gammas[s, k] = gam
            capped[s, k] = cap_hit
            last_val[s] = val
            last_gg[s] = gg
            nbad = np.int64(0)
            for j in range(d):
                y[j] -= gam * g[j]
                nbad += nonfinite(y[j])
            first_bad, stop = end_step(path, s, k, K, y, nbad, first_bad)
            if stop:
                break
    return first_bad


@njit(cache=True)
def _capped(step, cap, inf_ratio):
    """(min(step, cap), 1 when the cap binds); an infinite ratio (||g|| = 0) takes the cap."""
    if not inf_ratio and step < cap:
        return step, 0
    return cap, 1
