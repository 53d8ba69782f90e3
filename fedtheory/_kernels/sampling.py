"""A round's draws: its participants and their aggregation weights, the minibatch rows and the noise
(shared by every path and backend: :func:`draw_round_arrays` is the one draw of a round; the
compiled rounds receive those of many rounds at once from :func:`draw_rounds`).
"""
import numpy as np
from numba import njit

# sampling modes of a round's participants
FULL, UNIFORM, WITH_REPLACEMENT, BERNOULLI = 0, 1, 2, 3


#: Largest client size for which Floyd's draw marks taken rows in a table of m flags (zeroed once per
#: call, O(1) per test); a larger client compares with the rows drawn so far (O(B) per test).
MARK_LIMIT = 1 << 16


@njit(cache=True)
def minibatch_rows(u, starts, sizes, replace, out):
    """Fill ``out[s, k, :]`` with B row indices of client s from uniforms ``u`` (S, K, B).

    With replacement each row is ``start + floor(u * m)``. Without replacement Floyd's
    algorithm draws a uniformly random B-subset of the m rows from the same B uniforms
    (for t = m - B .. m - 1: pick floor(u (t + 1)), or t itself if already taken). Whether a row is
    taken is read from a table of flags (set, then cleared after each draw) when every client has
    at most :data:`MARK_LIMIT` rows, else by comparing with the rows drawn so far: the same rows.
    """
    S, K, B = u.shape
    big = 0
    for s in range(S):
        big = max(big, sizes[s])
        if not replace and B > sizes[s]:      # Floyd's draw would index before the client's rows
            raise ValueError("minibatch_rows: a minibatch without replacement larger than a client's rows")
    use_mark = not replace and big <= MARK_LIMIT
    mark = np.zeros(big if use_mark else 0, dtype=np.bool_)
    for s in range(S):
        m = sizes[s]
        st = starts[s]
        for k in range(K):
            o = out[s, k]
            if replace:
                for t in range(B):
                    o[t] = st + min(int(u[s, k, t] * m), m - 1)
            elif use_mark:
                for t in range(B):
                    j = m - B + t
                    c = min(int(u[s, k, t] * (j + 1)), j)
                    if mark[c]:
                        c = j
                    mark[c] = True
                    o[t] = st + c
                for t in range(B):
                    mark[o[t] - st] = False
            else:
                for t in range(B):
                    j = m - B + t
                    c = st + min(int(u[s, k, t] * (j + 1)), j)
                    taken = False
                    for p in range(t):          # no early exit: the compiler vectorises the test
                        taken |= o[p] == c
                    o[t] = st + j if taken else c
    return out


@njit(cache=True)
def sample_clients(u, n, out):
    """Sorted uniformly random S-subset of range(n) from S uniforms (Floyd's algorithm).

    Writes the S client indices into ``out`` in increasing order and returns it.
    """
    S = u.shape[0]
    for t in range(S):
        j = n - S + t
        c = min(int(u[t] * (j + 1)), j)
        taken = False
        for p in range(t):
            taken |= out[p] == c
        out[t] = j if taken else c
    sort_small(out)
    return out


@njit(cache=True)
def sort_small(a):
    """Sort the integers ``a`` in place by insertion (a round's participants: a few; cheaper to
    compile than ``np.sort``)."""
    for t in range(1, a.shape[0]):
        v = a[t]
        p = t - 1
        while p >= 0 and a[p] > v:
            a[p + 1] = a[p]
            p -= 1
        a[p + 1] = v


@njit(cache=True)
def draw_participants(mode, rng, n, S, cdf, participation):
    """The participants of a round as drawn (duplicates kept), from the run's client stream.

    FULL: every client; UNIFORM: Floyd's algorithm on S uniforms (sorted); WITH_REPLACEMENT: S
    i.i.d. draws by the cumulative probabilities ``cdf`` (NumPy's ``Generator.choice`` with ``p``:
    S uniforms searched in the normalised cdf), sorted; BERNOULLI: each client with probability
    ``participation`` (n uniforms).
    """
    if mode == FULL:
        out = np.empty(n, dtype=np.int64)
        for i in range(n):
            out[i] = i
        return out
    if mode == UNIFORM:
        return sample_clients(rng.random(S), n, np.empty(S, dtype=np.int64))
    if mode == WITH_REPLACEMENT:
        u = rng.random(S)
        out = np.empty(S, dtype=np.int64)
        for s in range(S):
            out[s] = _search_right(cdf, u[s])
        sort_small(out)
        return out
    u = rng.random(n)
    c = 0
    for i in range(n):
        c += u[i] < participation
    out = np.empty(c, dtype=np.int64)
    c = 0
    for i in range(n):
        if u[i] < participation:
            out[c] = i
            c += 1
    return out


# Plain loops in place of np.sort, np.searchsorted, np.unique and np.flatnonzero: the same results,
# and Numba's generic implementations of those took about 2 s of every cold first run to compile.
@njit(cache=True)
def _search_right(a, v):
    """``np.searchsorted(a, v, side="right")``: the number of entries of the sorted ``a`` that are <= v."""
    lo, hi = 0, a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def count_distinct(a):
    """The number of distinct entries of the integers ``a``."""
    srt = a.copy()
    sort_small(srt)
    return _distinct_sorted(srt)


@njit(cache=True)
def _distinct_sorted(srt):
    """The number of distinct entries of the sorted ``srt``."""
    k = 0
    for i in range(srt.shape[0]):
        k += i == 0 or srt[i] != srt[i - 1]
    return k


@njit(cache=True)
def weigh(mode, drawn, w, S, replicate):
    """(clients, aggregation weights) of the drawn participants (see ``fedtheory.run``): uniform
    w_i n / S; with replacement 1/S per draw, or a client drawn m times once with weight m / S;
    every client in order under full participation w; otherwise w_i / sum of the participants' w,
    and 0 for every participant when that sum is 0 (clients of weight 0 only: the global model of
    the averaging methods does not move, as in a round without participants)."""
    n = w.shape[0]
    c = drawn.shape[0]
    if mode == UNIFORM:
        return drawn, w[drawn] * (n / S)
    if mode == WITH_REPLACEMENT:
        if replicate:
            return drawn, np.full(S, 1.0 / S)
        srt = drawn.copy()
        sort_small(srt)
        k = _distinct_sorted(srt)
        u = np.empty(k, dtype=np.int64)
        counts = np.zeros(k)
        j = -1
        for i in range(c):
            if i == 0 or srt[i] != srt[i - 1]:
                j += 1
                u[j] = srt[i]
            counts[j] += 1.0
        return u, counts / S
    if mode == FULL and c == n:
        every = True
        for i in range(c):
            if drawn[i] != i:
                every = False
                break
        if every:
            return drawn, w.copy()
    if c == 0:
        return drawn, np.zeros(0)
    wc = w[drawn]
    total = wc.sum()
    if total == 0.0:                # every participant has w_i = 0: no weight to aggregate (not 0/0)
        return drawn, wc
    return drawn, wc / total


@njit(cache=True)
def draw_data(ptr, sizes, noise_level, dim, rng, clients, K, B, replace, out):
    """Minibatch rows (S, K, B), written into ``out`` (uniforms then rows; nothing for exact
    gradients, B = 0), and noise (S, K, d) scaled by the problem's noise level ((0, 0, 0) without
    noise)."""
    Sr = clients.shape[0]
    idx = out
    if B > 0:
        u = rng.random((Sr, K, B))
        idx = minibatch_rows(u, ptr[:-1][clients], sizes[clients], replace, out)
    if noise_level > 0:
        noise = noise_level * rng.standard_normal((Sr, K, dim))
    else:
        noise = np.zeros((0, 0, 0))
    return idx, noise


@njit(cache=True)
def draw_clients(w, mode, rng_c, S, cdf, participation, replicate, has_schedule, scheduled):
    """A round's participants as drawn (``scheduled`` when ``has_schedule``, else from ``rng_c`` by
    ``mode``), and the clients and aggregation weights they give (:func:`weigh`):
    ``(drawn, clients, weights)``."""
    if has_schedule:
        drawn = scheduled.copy()
    else:
        drawn = draw_participants(mode, rng_c, w.shape[0], S, cdf, participation)
    clients, weights = weigh(mode, drawn, w, S, replicate)
    return drawn, clients, weights


@njit(cache=True)
def draw_round_arrays(w, ptr, sizes, noise_level, dim, mode, rng_c, rng_d, rng_a, S, cdf, participation, replicate,
                      has_schedule, scheduled, K, B, replace):
    """One round's randomness from the problem's arrays (client weights ``w``, row offsets ``ptr``, client
    sizes, noise level, dimension), in the runner's stream order: the participants (``scheduled`` when
    ``has_schedule``, else drawn from ``rng_c`` by ``mode``), their weights, the minibatch rows and noise
    from ``rng_d``, then one uniform coin from ``rng_a``. The per-round path calls it each round; the
    compiled rounds take the same draws from :func:`draw_rounds`: every path draws the same.

    Returns ``(drawn, clients, weights, idx, noise, u)``.
    """
    drawn, clients, weights = draw_clients(w, mode, rng_c, S, cdf, participation, replicate, has_schedule, scheduled)
    idx, noise = draw_data(ptr, sizes, noise_level, dim, rng_d, clients, K, B, replace,
                           np.empty((clients.shape[0], K, B), dtype=np.int64))
    u = rng_a.random()
    return drawn, clients, weights, idx, noise, u


@njit(cache=True)
def _room(a, used, more):
    """``a`` with room for ``more`` entries after its first ``used`` (its capacity doubled as needed)."""
    if used + more <= a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0], used + more), dtype=a.dtype)
    b[:used] = a[:used]
    return b


@njit(cache=True)
def draw_rounds(w, ptr, sizes, noise_level, dim, mode, rng_c, rng_d, S, cdf, participation, replicate, has_schedule,
                sched, sched_ptr, r0, Ks, B, replace):
    """The participants, weights, minibatch rows and noise of rounds ``r0 .. r0 + len(Ks) - 1`` (1-based;
    round ``r0 + j`` has ``Ks[j]`` local steps), drawn round after round as :func:`draw_round_arrays`
    draws them from ``rng_c`` and ``rng_d``, without its coin from ``rng_a`` (the compiled rounds draw
    it themselves, each round before its rules, which may draw from ``rng_a`` too): each stream gives
    what it gives to the per-round path, so both run the same.

    The compiled rounds receive them from here, not by calling the draw each round: a compiled
    function's callees are compiled again into it, and the draws were a quarter of every algorithm's
    rounds to compile.

    Parameters
    ----------
    w, ptr, sizes : ndarray
        The problem's client weights, row offsets and client sizes.
    noise_level : float
        The problem's gradient noise level (no noise drawn at 0).
    dim : int
        The dimension.
    mode, rng_c, rng_d, S, cdf, participation, replicate : object
        The run's sampling mode, its client and data streams and the sampler's arrays
        (:func:`draw_round_arrays`).
    has_schedule : bool
        Whether the participants are replayed from ``sched`` (round r's entry
        ``sched[sched_ptr[r - 1]:sched_ptr[r]]``).
    sched, sched_ptr : ndarray of int64
        The replayed schedule, flattened.
    r0 : int
        The first round (1-based).
    Ks : ndarray of int64
        The local steps of each round.
    B : int
        The minibatch size (0: exact gradients).
    replace : bool
        Minibatches with replacement.

    Returns
    -------
    tuple
        ``(drawn, drawn_ptr, clients, weights, client_ptr, idx, idx_ptr, noise, noise_ptr)``: round j's
        drawn participants are ``drawn[drawn_ptr[j]:drawn_ptr[j + 1]]``, its clients and their weights
        the same slice of ``clients`` and ``weights`` by ``client_ptr``, its rows (S_j, K_j, B) and
        noise (S_j, K_j, dim) the flattened slices by ``idx_ptr`` and ``noise_ptr`` (``noise`` empty
        without noise).
    """
    m = Ks.shape[0]
    drawn_ptr = np.zeros(m + 1, dtype=np.int64)
    client_ptr = np.zeros(m + 1, dtype=np.int64)
    idx_ptr = np.zeros(m + 1, dtype=np.int64)
    noise_ptr = np.zeros(m + 1, dtype=np.int64)
    per = max(S, 1)
    drawn_all = np.empty(m * per, dtype=np.int64)
    clients_all = np.empty(m * per, dtype=np.int64)
    weights_all = np.empty(m * per)
    idx_all = np.empty(m * per * max(Ks.max() if m > 0 else 0, 1) * B, dtype=np.int64)
    noise_all = np.empty(m * per * max(Ks.max() if m > 0 else 0, 1) * dim if noise_level > 0 else 0)
    # (the two commonest draws written in place, without a round's arrays, whose allocations were most of
    # a round's draw: every client under full participation, and noise alone from rng_d, each normal as
    # standard_normal draws it into an array, scaled as draw_data scales it)
    every = mode == FULL and not has_schedule
    for j in range(m):
        r = r0 + j
        K = Ks[j]
        if every:                       # draw_clients' FULL draw: every client in order, weighted by w
            nd = nc = w.shape[0]
            drawn_all = _room(drawn_all, drawn_ptr[j], nd)
            clients_all = _room(clients_all, client_ptr[j], nc)
            weights_all = _room(weights_all, client_ptr[j], nc)
            for i in range(nd):
                drawn_all[drawn_ptr[j] + i] = i
                clients_all[client_ptr[j] + i] = i
                weights_all[client_ptr[j] + i] = w[i]
            clients = clients_all[client_ptr[j]:client_ptr[j] + nc]
        else:
            entry = sched[sched_ptr[r - 1]:sched_ptr[r]] if has_schedule else sched[0:0]
            drawn, clients, weights = draw_clients(w, mode, rng_c, S, cdf, participation, replicate, has_schedule,
                                                   entry)
            nd, nc = drawn.shape[0], clients.shape[0]
            drawn_all = _room(drawn_all, drawn_ptr[j], nd)
            drawn_all[drawn_ptr[j]:drawn_ptr[j] + nd] = drawn
            clients_all = _room(clients_all, client_ptr[j], nc)
            weights_all = _room(weights_all, client_ptr[j], nc)
            clients_all[client_ptr[j]:client_ptr[j] + nc] = clients
            weights_all[client_ptr[j]:client_ptr[j] + nc] = weights
        drawn_ptr[j + 1] = drawn_ptr[j] + nd
        client_ptr[j + 1] = client_ptr[j] + nc
        ni = nc * K * B
        idx_all = _room(idx_all, idx_ptr[j], ni)
        if B == 0:                      # no rows: rng_d gives the noise alone (draw_data's, drawn in place)
            nn = nc * K * dim if noise_level > 0 else 0
            noise_all = _room(noise_all, noise_ptr[j], nn)
            for q in range(nn):
                noise_all[noise_ptr[j] + q] = noise_level * rng_d.standard_normal()
        else:
            _, noise = draw_data(ptr, sizes, noise_level, dim, rng_d, clients, K, B, replace,
                                 idx_all[idx_ptr[j]:idx_ptr[j] + ni].reshape((nc, K, B)))     # the rows in place
            nn = noise.size
            noise_all = _room(noise_all, noise_ptr[j], nn)
            noise_all[noise_ptr[j]:noise_ptr[j] + nn] = noise.ravel()
        idx_ptr[j + 1] = idx_ptr[j] + ni
        noise_ptr[j + 1] = noise_ptr[j] + nn
    return (drawn_all, drawn_ptr, clients_all, weights_all, client_ptr, idx_all, idx_ptr, noise_all, noise_ptr)

