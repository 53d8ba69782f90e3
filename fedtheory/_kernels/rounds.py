"""Compiled round machinery: the problem and round records and the local primitives (a round's draws: :mod:`.sampling`).

The algorithms' compiled rules (``local`` and ``server`` in each algorithm file, see
``docs/add-your-own-algorithm.md``) are plain functions in the NumPy subset Numba compiles. They
receive

* ``pk``, a :data:`Pack`: the problem's kernel arrays, its weights and constants;
* ``rd``, a :data:`Round`: one round's participants, their weights, minibatch rows, noise,
  step sizes and coin, and the run's released-code options;
* ``hp``, the algorithm's hyperparameters (a named tuple), and ``st``, its state (a named tuple).

The local primitives below (``local_sgd``, ``local_sam``, ...) wrap the kernels of this package
for one round; every primitive returns the local models and ``bad``: -1, or ``s * K + k`` for
the first client slot s and local step k whose iterate became non-finite.

:mod:`.sampling` draws a round's participants, minibatch rows and noise from the run's client and
data streams, and its coin from the third: the per-round path of the runner each round, the fused
segment of :mod:`fedtheory._kernels.drivers` for its rounds before the call (and the coins in it),
so one seed gives one trajectory on either path.
"""
from collections import namedtuple

import numpy as np
from numba import njit, objmode, types
from numba.extending import overload, register_jitable

from .fbe import fbe_local_steps, pfedme_local, prox_local_sgd
from .local_steps import DIR_PLAIN, DIR_SAM, DIR_VR, corrected_local_sgd, feddeper_local
from .oracles import client_grad, loop_kernel, prox_vec
from .sampling import minibatch_rows
from .sps import sps_local_steps
from ..exceptions import InvalidParameterError

#: The problem as the compiled rules see it (``FederatedProblem.compiled_pack()``); ``kind`` is the
#: datafit's static form (``oracles.kernel_form``: compiled per datafit kernel and storage).
Pack = namedtuple("Pack", "sparse A data indices indptr b kind ptr l2 reg_weight reg groups m1 m2 sizes w noise dim")

#: One round (``round`` is 0-based; ``cw`` the objective weights w_i of the participants; ``lrs`` the
#: K step sizes; ``u`` the round's coin; ``wd``/``clip`` the run's decay and clipping, 0 for none;
#: ``path_*`` (S, K + 1, d) buffers of traced local paths, or (0, 0, 0); ``replace`` whether the
#: run draws minibatch rows with replacement, ``run(batch_replacement=...)``).
Round = namedtuple("Round", "round clients weights cw idx noise lrs u wd clip K S t0 "
                            "path_local path_personal path_prox replace")



@njit(cache=True)
def empty2():
    """An empty (0, 0) array: "no correction" / "no anchor" for the primitives."""
    return np.zeros((0, 0))


@njit(cache=True)
def empty3():
    """An empty (0, 0, 0) array: no noise, no traced path."""
    return np.zeros((0, 0, 0))


@njit(cache=True)
def empty1():
    """An empty (0,) array."""
    return np.zeros(0)


@njit(cache=True)
def nan_paths(S, K1, d):
    """An (S, K1, d) array of NaN: the local paths of a traced round before they are recorded."""
    return np.full((S, K1, d), np.nan)


@njit(cache=True)
def trace_paths(buf, off, j, S, K1, d):
    """The (S, K1, d) local paths of traced round j, NaN until recorded: a view of ``buf`` from
    ``off[j]`` when ``buf`` holds the call's traced rounds, else (``buf`` empty) an array of its own."""
    if buf.shape[0] == 0:
        return nan_paths(S, K1, d)
    p = buf[off[j]:off[j] + S * K1 * d].reshape((S, K1, d))
    p[:] = np.nan
    return p


@njit(cache=True)
def row(x):
    """``x`` (d,) as a (1, d) array (a start or an anchor shared by every participant)."""
    return np.ascontiguousarray(x).reshape(1, x.shape[0])


# The functions below that take the pack ``pk`` but not its datafit are inlined, or inlined wrappers of
# functions over its arrays: a pack's type names its datafit (``Pack.kind``), and a function of ``pk``
# is compiled once per datafit.
@njit(cache=True, inline="always")
def make_round(pk, rnd, clients, weights, idx, noise, lrs, u, wd, clip, t0, path_local, path_personal, path_prox,
               replace):
    """The :data:`Round` record of one round."""
    return Round(rnd, clients, weights, pk.w[clients], idx, noise, lrs, u, wd, clip, lrs.shape[0],
                 clients.shape[0], t0, path_local, path_personal, path_prox, replace)


@njit(cache=True)
def all_finite(x):
    """Whether every entry of ``x`` is finite (entry by entry: a sum could overflow)."""
    for v in x.ravel():
        if not np.isfinite(v):
            return False
    return True


# --------------------------------------------------------------------------- local primitives
@njit(cache=True)
def local_sgd(pk, rd, X0, anchors, gscale, mu, corr):
    """K local SGD steps for every participant (``corrected_local_sgd`` with the plain direction):

    y_{k+1} = y_k - eta_k (gscale (g(y_k) + noise_k) + mu (y_k - anchor_s) + corr_s), y_0 = X0[s]

    ``X0`` and ``anchors`` have one row (shared) or S rows; ``anchors`` (0, d) means no prox term;
    ``corr`` (S, d) or ``empty2()``. Returns ``(Y, bad)``.
    """
    Y = np.empty((rd.S, pk.dim))
    bad = corrected_local_sgd(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr, rd.clients,
                              rd.idx, rd.noise, rd.lrs, pk.l2, X0, anchors, gscale, mu, corr, DIR_PLAIN, 0.0, 0.0,
                              False, 0.0, rd.wd, rd.clip, Y, rd.path_local)
    return Y, bad


@njit(cache=True)
def local_sam(pk, rd, X0, anchors, mu, corr, alpha, rho, normalized, eps):
    """FedSpeed's quasi-gradient steps (``DIR_SAM``): gt = (1 - alpha) g(y) + alpha g(y + r g(y)),
    r = rho or rho / (||g(y)|| + eps); y_{k+1} = y_k - eta_k (gt + mu (y_k - anchor) + corr_s)."""
    Y = np.empty((rd.S, pk.dim))
    bad = corrected_local_sgd(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr, rd.clients,
                              rd.idx, rd.noise, rd.lrs, pk.l2, X0, anchors, 1.0, mu, corr, DIR_SAM, alpha, rho,
                              normalized, eps, rd.wd, rd.clip, Y, rd.path_local)
    return Y, bad


@njit(cache=True)
def local_vr(pk, rd, x0, gscale, corr):
    """Mime's steps: y <- y - eta_k (gscale (g(y; B) - g(x0; B)) + corr_s), the same minibatch."""
    Y = np.empty((rd.S, pk.dim))
    bad = corrected_local_sgd(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr, rd.clients,
                              rd.idx, rd.noise, rd.lrs, pk.l2, row(x0), np.zeros((0, pk.dim)), gscale, 0.0, corr,
                              DIR_VR, 0.0, 0.0, False, 0.0, rd.wd, rd.clip, Y, rd.path_local)
    return Y, bad


@njit(cache=True)
def _independent_stream(ptr, sizes, noise_level, clients, idx, noise, rng, replace):
    S, K, B = idx.shape
    idx2 = idx
    if B:
        u = rng.random((S, K, B))
        idx2 = minibatch_rows(u, ptr[:-1][clients], sizes[clients], replace, np.empty((S, K, B), dtype=np.int64))
    noise2 = noise
    if noise.shape[0] > 0:
        noise2 = noise_level * rng.standard_normal(noise.shape)
    return idx2, noise2


@njit(cache=True, inline="always")
def independent_stream(pk, rd, rng):
    """A second set of minibatch rows and noise, independent of ``rd.idx``/``rd.noise``, from the
    auxiliary stream ``rng`` (two-minibatch methods), drawn as the run draws ``rd.idx`` (with or
    without replacement, ``rd.replace``); exact gradients keep the empty rows."""
    return _independent_stream(pk.ptr, pk.sizes, pk.noise, rd.clients, rd.idx, rd.noise, rng, rd.replace)


@njit(cache=True)
def local_feddeper(pk, rd, x0, V0, rho, coupling, idx_v, noise_v):
    """FedDeper's alternating y/v local steps (``feddeper_local``); returns ``(Y, V, bad)``."""
    Y, V = np.empty((rd.S, pk.dim)), np.empty((rd.S, pk.dim))
    bad = feddeper_local(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr, rd.clients,
                         rd.idx, idx_v, rd.noise, noise_v, rd.lrs, pk.l2, x0, np.ascontiguousarray(V0), rho,
                         coupling, Y, V, rd.path_local, rd.path_personal)
    return Y, V, bad


@njit(cache=True)
def local_sps(pk, rd, x0, mode, c, gamma_b, ell, c0, c_round, gamma_fixed, factor, st, eps):
    """K steps with a stochastic Polyak step size (``sps_local_steps``); ``st`` (S,) is updated in
    place. Returns ``(Y, G, C, last_val, last_gg, bad)``."""
    S, K = rd.S, rd.K
    Y, G, C = np.empty((S, pk.dim)), np.empty((S, K)), np.zeros((S, K), dtype=np.int64)
    lv, lg = np.empty(S), np.empty(S)
    bad = sps_local_steps(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr, rd.clients, rd.idx,
                          rd.noise, pk.l2, x0, mode, c, gamma_b, np.ascontiguousarray(ell), c0, rd.round * K,
                          c_round, K, gamma_fixed, np.ascontiguousarray(factor), st, eps, Y, G, C, lv, lg,
                          rd.path_local)
    return Y, G, C, lv, lg, bad


@njit(cache=True)
def local_prox_sgd(pk, rd, X0, anchors, mu, dual, t0_thresh):
    """Proximal local SGD (``prox_local_sgd``: FedMiD, FedDualAvg, anchored prox steps); returns
    ``(X, Z, bad)``, the primal and dual local iterates."""
    X, Z = np.empty((rd.S, pk.dim)), np.empty((rd.S, pk.dim))
    bad = prox_local_sgd(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr, rd.clients, rd.idx,
                         rd.noise, rd.lrs, pk.l2, np.ascontiguousarray(X0), np.ascontiguousarray(anchors), mu,
                         pk.reg_weight, dual, t0_thresh, pk.reg, pk.groups, pk.m1, pk.m2, X, Z)
    return X, Z, bad


@njit(cache=True)
def local_pfedme(pk, rd, x0, lam_p, eta_p, inner, wd):
    """pFedMe's local rounds (``pfedme_local``); returns ``(W, Theta, bad)``."""
    W, Th = np.empty((rd.S, pk.dim)), np.empty((rd.S, pk.dim))
    bad = pfedme_local(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr, rd.clients, rd.idx,
                       rd.noise, rd.lrs, pk.l2, x0, lam_p, eta_p, inner, wd, pk.reg_weight, pk.reg, pk.groups, pk.m1,
                       pk.m2, W, Th)
    return W, Th, bad


@njit(cache=True)
def local_fbe(pk, rd, x0, lam, hvp_mode, fd_eps, idx_h):
    """pFedFBE's local steps (``fbe_local_steps``) with Hessian rows ``idx_h``; returns ``(Y, bad)``."""
    Y = np.empty((rd.S, pk.dim))
    bad = fbe_local_steps(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr, rd.clients, rd.idx,
                          np.ascontiguousarray(idx_h), rd.noise, rd.lrs, pk.l2, x0, lam, pk.reg_weight, hvp_mode,
                          fd_eps, pk.reg, pk.groups, pk.m1, pk.m2, Y, rd.path_local, rd.path_prox)
    return Y, bad


@loop_kernel
def full_grads(pk, rd, x):
    """Exact client gradients grad f_i(x) of the participants, shape (S, d)."""
    G = np.empty((rd.S, pk.dim))
    rows = np.zeros(0, dtype=np.int64)
    for s in range(rd.S):
        i = rd.clients[s]
        client_grad(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr[i], pk.ptr[i + 1], rows,
                    x, pk.l2, G[s])
    return G


@njit(cache=True)
def prox(pk, u, t):
    """prox of t h at u for the problem's regularizer h = reg_weight h0 (``prox_vec``)."""
    out = np.empty_like(u)
    prox_vec(u, t * pk.reg_weight, pk.reg, pk.groups, pk.m1, pk.m2, out)
    return out


@register_jitable
def averaged_step(x, weights, Y, server_lr):
    """Server step of the FedAvg family: x + eta_g sum_i omega_i (y_i - x) (plain Python when called
    from Python, on NumPy arrays or torch tensors; compiled inside a compiled rule)."""
    return x + server_lr * (weights @ Y - weights.sum() * x)


@register_jitable
def participant_total(weights):
    """sum_{j in S} omega_j, the total weight of a round's participants, for a server average
    normalised by it (plain Python when called from Python, on NumPy arrays or torch tensors;
    compiled inside a compiled rule).

    Raises ValueError when it is 0 (every participant has objective weight w_i = 0): the
    normalised average (Mime's c and momentum, FedSPS-Global's step) is then undefined, and its
    0/0 would end the run as "diverged".
    """
    total = weights.sum()
    if total == 0:
        raise ValueError("every participant of this round has objective weight w_i = 0, so the "
                         "algorithm's server average normalised by sum_j w_j is undefined (0/0): give "
                         "every client a positive weight, or sample so that each round has a client of "
                         "positive weight")
    return total


# --------------------------------------------------------------------------- the participants' rows of a state
def set_rows(a, rows, v):
    """``a[rows] = v`` in place, and returns ``a``: the participants' rows (entries, for a 1-D ``a``)
    of a per-client state written back by a server rule.

    Called from Python (the python and torch backends) it is that NumPy (or torch) assignment.
    Compiled, it is a loop: Numba's fancy-index assignment also compiles its shape-mismatch message,
    about 2.8 s of a cold first run of every rule that used it. A client listed twice (sampling with
    replacement, replicated) gets its last row, as in NumPy.

    Parameters
    ----------
    a : ndarray of shape (n,) or (n, d)
        The per-client state.
    rows : ndarray of int, shape (S,)
        The rows to write (``rd.clients``).
    v : ndarray of shape (S,) or (S, d), a d-vector (every row, 2-D ``a``), or a scalar
        The new rows (broadcast as NumPy does).

    Returns
    -------
    ndarray
        ``a``, written in place.

    Examples
    --------
    >>> import numpy as np
    >>> set_rows(np.zeros((3, 2)), np.array([2, 0]), np.array([[1.0, 2.0], [3.0, 4.0]])).tolist()
    [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]]
    """
    a[rows] = v
    return a


def add_rows(a, rows, v):
    """``a[rows] += v`` in place, and returns ``a`` (see :func:`set_rows`; a client listed twice gets
    its old row plus its last row of ``v``, as in NumPy).

    Parameters
    ----------
    a : ndarray of shape (n,) or (n, d)
        The per-client state.
    rows : ndarray of int, shape (S,)
        The rows to update (``rd.clients``).
    v : ndarray of shape (S,) or (S, d), a d-vector (every row, 2-D ``a``), or a scalar
        What is added (broadcast as NumPy does).

    Returns
    -------
    ndarray
        ``a``, updated in place.

    Examples
    --------
    >>> import numpy as np
    >>> add_rows(np.ones((2, 2)), np.array([1, 1]), np.array([[1.0, 1.0], [2.0, 2.0]])).tolist()
    [[1.0, 1.0], [3.0, 3.0]]
    """
    a[rows] += v
    return a


@register_jitable
def _rows_mismatch():
    raise ValueError("set_rows/add_rows: the values have not one row per entry of rows, of the state's width")


def _is_scalar(v):
    return isinstance(v, (types.Number, types.Boolean))


@overload(set_rows)
def _set_rows_compiled(a, rows, v):
    scalar = _is_scalar(v)
    if a.ndim == 1 and not scalar:
        def set1(a, rows, v):
            if v.shape[0] != rows.shape[0]:
                _rows_mismatch()
            for q in range(rows.shape[0]):
                a[rows[q]] = v[q]
            return a
        return set1
    if a.ndim == 1:
        def set_scalar(a, rows, v):
            for q in range(rows.shape[0]):
                a[rows[q]] = v
            return a
        return set_scalar
    if scalar:                          # every listed row filled with the number
        def set2_scalar(a, rows, v):
            for q in range(rows.shape[0]):
                i = rows[q]
                for j in range(a.shape[1]):
                    a[i, j] = v
            return a
        return set2_scalar
    if v.ndim == 1:                     # every listed row set to the one d-vector (NumPy's broadcast)
        def set2_row(a, rows, v):
            d = a.shape[1]
            if v.shape[0] != d:
                _rows_mismatch()
            for q in range(rows.shape[0]):
                i = rows[q]
                for j in range(d):
                    a[i, j] = v[j]
            return a
        return set2_row

    def set2(a, rows, v):
        d = a.shape[1]
        if v.shape[0] != rows.shape[0] or v.shape[1] != d:
            _rows_mismatch()
        for q in range(rows.shape[0]):
            i = rows[q]
            for j in range(d):
                a[i, j] = v[q, j]
        return a
    return set2


@overload(add_rows)
def _add_rows_compiled(a, rows, v):
    # every old row is read first, then written through set_rows: a repeated row takes its last sum
    scalar = _is_scalar(v)
    if a.ndim == 1:
        if scalar:
            def add1_scalar(a, rows, v):
                S = rows.shape[0]
                new = np.empty(S, a.dtype)
                for q in range(S):
                    new[q] = a[rows[q]] + v
                return set_rows(a, rows, new)
            return add1_scalar

        def add1_vec(a, rows, v):
            S = rows.shape[0]
            if v.shape[0] != S:
                _rows_mismatch()
            new = np.empty(S, a.dtype)
            for q in range(S):
                new[q] = a[rows[q]] + v[q]
            return set_rows(a, rows, new)
        return add1_vec
    if scalar:
        def add2_scalar(a, rows, v):
            S, d = rows.shape[0], a.shape[1]
            new = np.empty((S, d), a.dtype)
            for q in range(S):
                i = rows[q]
                for j in range(d):
                    new[q, j] = a[i, j] + v
            return set_rows(a, rows, new)
        return add2_scalar
    if v.ndim == 1:
        def add2_row(a, rows, v):
            S, d = rows.shape[0], a.shape[1]
            if v.shape[0] != d:
                _rows_mismatch()
            new = np.empty((S, d), a.dtype)
            for q in range(S):
                i = rows[q]
                for j in range(d):
                    new[q, j] = a[i, j] + v[j]
            return set_rows(a, rows, new)
        return add2_row

    def add2(a, rows, v):
        S, d = rows.shape[0], a.shape[1]
        if v.shape[0] != S or v.shape[1] != d:
            _rows_mismatch()
        new = np.empty((S, d), a.dtype)
        for q in range(S):
            i = rows[q]
            for j in range(d):
                new[q, j] = a[i, j] + v[q, j]
        return set_rows(a, rows, new)
    return add2


# --------------------------------------------------------------------------- evaluation from a segment
_EVALUATORS = {}         # token -> the running job's evaluation (fedtheory.runs.runner)
_TRACERS = {}            # token -> the running job's trace recorder
_INTERRUPTS = {}         # token -> whether the running job received Ctrl-C


def trace_hook(token, r, x_start, clients, weights, lrs, idx, noise, p_loc, p_per, p_prox, m, st, completed):
    """Called by a compiled segment, in object mode, after a traced round r: the runner records it
    (the model before the round, the round's participants, weights, step sizes, minibatch rows and
    noise, its local paths (None without participants), the messages ``m`` (None without
    participants) and the state after the server update; ``completed`` False: a local iterate
    diverged, ``st`` is the state before the round)."""
    _TRACERS[token](r, x_start, clients, weights, lrs, idx, noise, p_loc, p_per, p_prox, m, st, completed)


def interrupt_hook(token):
    """Called by a compiled segment, in object mode, every ``POLL_WORK`` per-sample gradients: runs
    Python's pending signal handlers (none runs while compiled code does) and returns 1 when the
    run received Ctrl-C meanwhile (the segment then ends after its round), else 0."""
    return int(_INTERRUPTS[token]())


#: A compiled segment looks for Ctrl-C after about this many per-sample gradients (a few
#: milliseconds of rounds on a large problem; on a small one, its window of rounds ends first)
POLL_WORK = 10_000_000


@njit(cache=True)
def interrupted(token):
    """:func:`interrupt_hook` from compiled code (object mode; compiled once for every algorithm)."""
    with objmode(hit="int64"):
        hit = interrupt_hook(token)
    return hit


def evaluate_hook(token, r, st):
    """Called by a compiled segment, in object mode, at a round due for evaluation: the runner's
    evaluation of round r with the state ``st``; returns 1 when the run stops there, else 0."""
    return int(_EVALUATORS[token](r, st))


# --------------------------------------------------------------------------- round costs (defaults)
# compiled inside each driver (their signatures hold the algorithm's own types), plain Python else
@register_jitable
def no_extra_grads(pk, rd, hp):
    """(oracle calls, per-sample gradients) a round spends outside the local steps: none."""
    return 0, 0


@register_jitable
def comm_per_participant(pk, rd, hp, st, n_participants, down, up):
    """(down, up) d-vectors of the round: the algorithm's ``comm`` per participant."""
    return n_participants * down, n_participants * up


@register_jitable
def no_extras(pk, hp, st):
    """An algorithm's own history columns computed in compiled code: none."""
    return np.empty(0)


# --------------------------------------------------------------------------- Ditto, pFedMe, pFedProx, pFedFBE, FedMiD, FedDualAvg
@register_jitable
def _pairwise_block(a, lo, n):
    """NumPy's pairwise-sum leaf over a[lo:lo + n] (n <= 128): in sequence below 8 entries, else 8
    accumulators combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - n % 8:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@register_jitable
def numpy_sum(a):
    """The sum of a 1-D float array added in NumPy's order, in plain Python and compiled alike.

    NumPy (``np.sum``, ``ndarray.sum``; ``np.mean`` is this sum / n) adds pairwise: leaves of at
    most 128 entries summed by :func:`_pairwise_block`, a longer range split at half its length
    rounded down to a multiple of 8, left + right. Numba's ``a.sum()`` adds in sequence, so the two
    differ in the last bits from 8 entries on. A server rule that keeps the arithmetic of a NumPy
    ``server_update`` (FedMiD's mean step size, FedDualAvg's accumulated threshold) sums with this.

    Parameters
    ----------
    a : ndarray of shape (n,)
        The float64 entries (the round's step sizes ``rd.lrs`` in the rules).

    Returns
    -------
    float
        ``a.sum()`` as NumPy computes it (-0.0 for n = 0).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.full(10, 0.1)
    >>> bool(numpy_sum(a) == a.sum()), bool(sum(a.tolist()) == a.sum())
    (True, False)
    """
    n = a.shape[0]
    if n <= 128:
        return _pairwise_block(a, 0, n)
    # the recursion of NumPy's pairwise sum, evaluated left, right, combine with explicit stacks
    los, ns, step = np.zeros(64, np.int64), np.zeros(64, np.int64), np.zeros(64, np.int64)
    vals = np.zeros(64)
    sp, vp = 1, 0
    ns[0] = n
    while sp > 0:
        t = sp - 1
        m = ns[t]
        if m <= 128:
            vals[vp] = _pairwise_block(a, los[t], m)
            vp += 1
            sp -= 1
            continue
        m2 = m // 2
        m2 -= m2 % 8
        if step[t] == 0:
            step[t] = 1
            los[sp], ns[sp], step[sp] = los[t], m2, 0
            sp += 1
        elif step[t] == 1:
            step[t] = 2
            los[sp], ns[sp], step[sp] = los[t] + m2, m - m2, 0
            sp += 1
        else:
            vals[vp - 2] = vals[vp - 2] + vals[vp - 1]
            vp -= 1
            sp -= 1
    return vals[0]


# --------------------------------------------------------------------------- FedAdam, FedAMS
@register_jitable
def adaptive_step(x, weights, Y, m, v, vhat, steps, lr, beta1, beta2, eps, bias_correction, amsgrad):
    """Adam (AMSGrad with ``amsgrad``) on the averaged update D = sum_i omega_i (y_i - x) (FedAdam, FedAMS):

    m <- b1 m + (1 - b1) D;  v <- b2 v + (1 - b2) D^2;  s = v, or s = max(vhat, v) with ``amsgrad``;
    r = steps + 1;  x <- x + lr/(1 - b1^r) m / (sqrt(s/(1 - b2^r)) + eps) with bias correction,
    x <- x + lr m / (sqrt(s) + eps) without. Returns ``(x, m, v, s, r)`` (s: the new vhat). ``vhat``
    is unused without ``amsgrad``. Plain Python (NumPy) when called from Python.
    """
    D = weights @ (Y - x)
    m_new = beta1 * m + (1 - beta1) * D
    v_new = beta2 * v + (1 - beta2) * D * D
    s = np.maximum(vhat, v_new) if amsgrad else v_new
    r = steps + 1
    if bias_correction:
        rf = float(r)                   # float ** float: C pow, as Python's float ** int
        step = lr / (1 - beta1 ** rf) * m_new / (np.sqrt(s / (1 - beta2 ** rf)) + eps)
    else:
        step = lr * m_new / (np.sqrt(s) + eps)
    return x + step, m_new, v_new, s, r


# --------------------------------------------------------------------------- Mime
@njit(cache=True)
def tile_row(x, S):
    """The (S, d) array whose every row is ``x`` (d,) (a copy: one correction shared by every participant)."""
    out = np.empty((S, x.shape[0]))
    for s in range(S):
        out[s] = x
    return out


# --------------------------------------------------------------------------- FedSPS family
# (fedsps, fedsps_dec, fedsps_global, fedsps_normalized)
@register_jitable
def sps_step(F, gg, ell, c, cap, eps=0.0):
    """The SPS step size of eq. (2) of FedSPS: min{max(F - ell, 0) / (c (||g||^2 + eps)), cap}, the cap
    when ||g||^2 + eps = 0 (plain Python when called from Python)."""
    if gg + eps == 0:
        return cap
    return min(max(F - ell, 0.0) / (c * (gg + eps)), cap)


@njit(cache=True, inline="always")
def sps_factor(pk, rd):
    """The smoothing factors 2^{|B| / m_i} of the participants (2 with exact gradients, |B| = m_i)."""
    m = pk.sizes[rd.clients].astype(np.float64)
    B = rd.idx.shape[2]
    if B:
        return 2.0 ** (B / m)
    return 2.0 ** (m / m)


@register_jitable
def sps_bookkeeping(memory, clients, new_memory, gammas, capped, steps_total, capped_total):
    """The FedSPS family's server bookkeeping: the participants' step-size memory written back in place,
    the round's (step sizes, cap indicators) for the history's statistics, and the running totals of
    steps and capped steps. Returns ``(memory, (gammas, capped), steps_total, capped_total)``."""
    set_rows(memory, clients, new_memory)
    return memory, (gammas, capped), steps_total + capped.size, capped_total + int(capped.sum())


@loop_kernel
def sps_last_grads(pk, rd, x0, gam):
    """FedSPS-Global's g_i at the last local iterate: the round replayed from ``x0`` with the fixed step
    ``gam`` (x <- x - gam g(x; xi_k), k < K - 1), then g(x_{K-1}; xi_{K-1}) (noise included), (S, d)."""
    S, K, d = rd.S, rd.K, pk.dim
    out = np.empty((S, d))
    g = np.empty(d)
    has_noise = rd.noise.shape[0] > 0
    for s in range(S):
        i = rd.clients[s]
        y = x0.copy()
        for k in range(K):
            client_grad(pk.sparse, pk.A, pk.data, pk.indices, pk.indptr, pk.b, pk.kind, pk.ptr[i], pk.ptr[i + 1],
                        rd.idx[s, k], y, pk.l2, g)
            if has_noise:
                g += rd.noise[s, k]
            if k == K - 1:
                out[s] = g
            else:
                y = y - gam * g
    return out


@register_jitable
def sps_normalized_nu(G, K, nu_literal):
    """FedSPS-normalized's nu_i = sum_k gamma_k^i of each client's (S, K) step sizes ``G`` (the first
    K - 1 with ``nu_literal``, which needs K >= 2); plain Python when called from Python."""
    if nu_literal:
        if K < 2:
            raise InvalidParameterError("nu_literal=True sums the first tau - 1 step sizes, so the "
                                        "'local_steps' parameter of run must be >= 2. Got 1 instead.")
        return G[:, :-1].sum(axis=1)
    return G.sum(axis=1)
