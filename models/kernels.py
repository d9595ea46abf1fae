"""Compiled loops of the compile-and-solve path (numba; docs/design.md §3).

Steps that are one pass over sorted options or over jobs, where numpy would
need dozens of whole-array calls (each a few microseconds on small arrays),
are written here as plain loops and compiled by numba on first use (cached on
disk).  Each kernel states the reference it must agree with; the tests compare
them on random inputs.  Integers are int64 throughout; float sums are
sequential.  The dp's own loops (the quick proof, the Lagrangian choice) are in
:mod:`elasticopt.solvers.dp.kernels`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["keep_index", "place_types", "check_choice", "layout", "gather_options", "current_mask", "value_totals", "group_max",
           "segment_lookup"]

#: Below every utility (the reductions' "none yet").
NEG = -(1 << 62)


@njit(cache=True, nogil=True)
def keep_index(rows, t, g, p, u, is_cur, idle_allowed, node_sizes, best_batch, dominance):
    """Indices (ascending) of the options the reductions keep (docs/design.md §2).

    Options are flat and sorted by (job row, type, k, packed, b): ``rows[i]``,
    ``t[i]``, ``g[i]``, ``p[i]``, ``u[i]`` are option i's job row, type, k,
    packing and utility; ``is_cur[i]`` whether it is its job's current option;
    ``idle_allowed[j]`` whether job j may idle; ``node_sizes[t]`` GPUs per node
    of type t (an empty array: no option counts as one node).

    1. ``best_batch``: per (job, type, k, packed) the option with the largest
       (utility, current), the first (smallest b) among equals.
    2. ``dominance``: option i is kept iff ``u[i]`` beats idle (0, where the job
       may idle) and every easier option of its (job, type) with fewer GPUs:
       unpacked with smaller k; for a packed option also unpacked with the same
       k, and packed with smaller k where k fits one node.
    """
    m = rows.size
    sel = np.empty(m, dtype=np.int64)  # sel[:n]: the options left after step 1
    n = 0
    if best_batch:
        i = 0
        while i < m:
            best, arg = 2 * u[i] + is_cur[i], i
            e = i + 1
            while e < m and rows[e] == rows[i] and t[e] == t[i] and g[e] == g[i] and p[e] == p[i]:
                key = 2 * u[e] + is_cur[e]
                if key > best:
                    best, arg = key, e
                e += 1
            sel[n] = arg
            n += 1
            i = e
    else:
        for i in range(m):
            sel[i] = i
        n = m
    if not dominance:
        return sel[:n].copy()
    out = np.empty(n, dtype=np.int64)
    kept = 0
    has_nodes = node_sizes.size > 0
    a = 0
    while a < n:  # one (job, type) group: sel[a:z]
        r, ty = rows[sel[a]], t[sel[a]]
        u_lt = NEG  # best unpacked utility with fewer GPUs (k' < k)
        p_lt = NEG  # best packed utility with fewer GPUs
        idle0 = 0 if idle_allowed[r] else NEG
        s = a
        while s < n and rows[sel[s]] == r and t[sel[s]] == ty:
            k = g[sel[s]]
            e = s
            run_u, run_p = NEG, NEG  # best unpacked / packed utility with exactly k GPUs
            while e < n and rows[sel[e]] == r and t[sel[e]] == ty and g[sel[e]] == k:
                x = sel[e]
                if p[x]:
                    run_p = max(run_p, u[x])
                else:
                    run_u = max(run_u, u[x])
                e += 1
            u_le = max(u_lt, run_u)
            one_node = has_nodes and k <= node_sizes[ty]
            for q in range(s, e):
                x = sel[q]
                if p[x]:
                    thr = max(u_le, p_lt) if one_node else u_le
                else:
                    thr = u_lt
                if u[x] > max(thr, idle0):
                    out[kept] = x
                    kept += 1
            u_lt = u_le
            p_lt = max(p_lt, run_p)
            s = e
        a = s
    return out[:kept].copy()


@njit(cache=True, nogil=True)
def _take(size, k, res_node, res_cnt):
    """:func:`elasticopt.models.packing.take` compiled: nodes used (their ``res_node``/``res_cnt``), -1 if k does not fit."""
    nn = size.size
    best = -1
    for n in range(nn):
        if size[n] >= k and (best < 0 or size[n] < size[best]):
            best = n
    if best >= 0:
        res_node[0], res_cnt[0] = best, k
        return 1
    # most free first, ties by index: a counting sort on the free sizes (0..max), stable, O(nodes + max)
    # instead of an argsort per job (on 25,000 nodes x 2,000 jobs the argsorts took 1.5 s)
    top = 0
    for n in range(nn):
        if size[n] > top:
            top = size[n]
    start = np.zeros(top + 2, dtype=np.int64)  # start[top - s]: first position of size s
    for n in range(nn):
        start[top - size[n] + 1] += 1
    for v in range(1, top + 2):
        start[v] += start[v - 1]
    order = np.empty(nn, dtype=np.int64)
    for n in range(nn):
        v = top - size[n]
        order[start[v]] = n
        start[v] += 1
    left, m = k, 0
    for pos in range(nn):
        n = order[pos]
        if size[n] == 0:
            break
        if size[n] >= left:  # the remainder fits a node: the fullest that does, lowest index on ties
            fit = -1
            for q in range(pos, nn):
                x = order[q]
                if size[x] >= left and (fit < 0 or size[x] < size[fit] or (size[x] == size[fit] and x < fit)):
                    fit = x
            res_node[m], res_cnt[m] = fit, left
            return m + 1
        res_node[m], res_cnt[m] = n, size[n]
        left -= size[n]
        m += 1
    return -1


@njit(cache=True, nogil=True)
def _bucket_add(bits, lo, s, n):
    """Put node n in the bucket of free size s (a bitset per size; ``lo[s]``: no set word below it)."""
    w = n >> 6
    bits[s, w] |= np.uint64(1) << np.uint64(n & 63)
    if w < lo[s]:
        lo[s] = w


@njit(cache=True, nogil=True)
def _bucket_drop(bits, s, n):
    bits[s, n >> 6] &= ~(np.uint64(1) << np.uint64(n & 63))


@njit(cache=True, nogil=True)
def _bucket_first(bits, lo, s):
    """The lowest node index of free size s, -1 if none."""
    W = bits.shape[1]
    w = lo[s]
    while w < W and bits[s, w] == 0:
        w += 1
    lo[s] = w
    if w == W:
        return -1
    x = bits[s, w]
    b = 0
    while (x >> np.uint64(b)) & np.uint64(1) == 0:
        b += 1
    return (w << 6) + b


@njit(cache=True, nogil=True)
def _take_buckets(bits, lo, size, top, k, res_node, res_cnt):
    """:func:`_take` on nodes kept in a bucket per free size: O(top + nodes taken) instead of O(nodes).

    The same nodes and counts as ``_take(size, k, ...)`` (``tests/test_kernels.py`` checks it): the
    smallest free size >= k, lowest index; else whole nodes most free first (ties by index) until the
    remainder fits a node not yet taken, the smallest size >= the remainder, lowest index.  Takes the
    GPUs: ``size`` and the buckets are updated (``_take`` leaves that to its caller).
    """
    left, m = k, 0
    while True:
        hi = -1  # the most free size with a node left
        for v in range(top, 0, -1):
            if _bucket_first(bits, lo, v) >= 0:
                hi = v
                break
        if hi < 0:
            # undo: the whole nodes taken go back (the caller sees -1, sizes as they were)
            for e in range(m):
                n = res_node[e]
                size[n] = res_cnt[e]
                _bucket_add(bits, lo, res_cnt[e], n)
            return -1
        if hi >= left:
            for v in range(left, hi + 1):
                fit = _bucket_first(bits, lo, v)
                if fit >= 0:
                    res_node[m], res_cnt[m] = fit, left
                    _bucket_drop(bits, v, fit)
                    size[fit] = v - left
                    if v > left:
                        _bucket_add(bits, lo, v - left, fit)
                    return m + 1
        n = _bucket_first(bits, lo, hi)
        res_node[m], res_cnt[m] = n, hi
        _bucket_drop(bits, hi, n)
        size[n] = 0
        left -= hi
        m += 1


@njit(cache=True, nogil=True)
def place_types(ks, packed, types, free, node_start, gpus_per_node):
    """:func:`elasticopt.models.placement.pack`'s greedy rule, from scratch, on every pool, as GPU segments.

    Jobs i (those that run, in row order) take ``ks[i]`` GPUs of type
    ``types[i]``, packed iff ``packed[i]``; type t's nodes are ``free[node_start[t]
    .. node_start[t + 1]]`` (free GPUs per node), g = ``gpus_per_node[t]``.
    Per type, packed jobs, largest first (ties by position), then unpacked
    jobs, largest first, take nodes by :func:`~elasticopt.models.packing.take`
    and the lowest free GPU indices of each node, in that order; the greedy
    fails on a type where a packed job would span more than ceil(k / g) nodes.

    Returns
    -------
    (placed, job, node, offset, count)
        ``placed[t]`` False where the greedy fails on type t (the exact
        search decides there); segment s gives job ``job[s]`` the free GPUs
        ``offset[s] .. offset[s] + count[s]`` (positions in the free list of
        node ``node[s]`` of its type): per type, packed jobs first, then
        unpacked ones, each in row order, nodes in index order.
    """
    T = gpus_per_node.size
    J = ks.size
    cap = 1  # every segment holds at least one GPU: at most sum(ks) of them
    for i in range(J):
        cap += ks[i]
    s_job = np.empty(cap, dtype=np.int64)
    s_node = np.empty(cap, dtype=np.int64)
    s_off = np.empty(cap, dtype=np.int64)
    s_cnt = np.empty(cap, dtype=np.int64)
    placed = np.zeros(T, dtype=np.bool_)
    s = 0
    for t in range(T):
        f = free[node_start[t]:node_start[t + 1]]
        g = gpus_per_node[t]
        nn = f.size
        pj = np.empty(J, dtype=np.int64)  # packed jobs of type t, then unpacked ones (row order)
        uj = np.empty(J, dtype=np.int64)
        P, U, need_all = 0, 0, 0
        for i in range(J):
            if types[i] == t:
                need_all += ks[i]
                if packed[i]:
                    pj[P] = i
                    P += 1
                else:
                    uj[U] = i
                    U += 1
        if need_all > f.sum() or P + U == 0:
            continue
        size = f.copy()
        top = 0
        for n in range(nn):
            top = max(top, size[n])
        # [s, w]: bit n & 63 of word w set iff node n = 64 w + (n & 63) has s free GPUs (s >= 1)
        bits = np.zeros((top + 1, (nn + 63) >> 6), dtype=np.uint64)
        lo = np.full(top + 1, (nn + 63) >> 6, dtype=np.int64)
        for n in range(nn):
            if size[n] > 0:
                _bucket_add(bits, lo, size[n], n)
        used = np.zeros(nn, dtype=np.int64)  # GPUs of node n given out so far (its free list's first ones)
        res_node = np.empty(nn + 1, dtype=np.int64)
        res_cnt = np.empty(nn + 1, dtype=np.int64)
        s0 = s
        ok = True
        for part in range(2):
            jobs = pj[:P] if part == 0 else uj[:U]
            for q in np.argsort(-ks[jobs], kind="mergesort"):
                i = jobs[q]
                k = ks[i]
                m = _take_buckets(bits, lo, size, top, k, res_node, res_cnt)  # sizes updated
                if m < 0 or (part == 0 and m > (k + g - 1) // g):
                    ok = False
                    break
                for e in range(m):
                    n, c = res_node[e], res_cnt[e]
                    s_job[s], s_node[s], s_off[s], s_cnt[s] = i, n, used[n], c
                    used[n] += c
                    s += 1
            if not ok:
                break
        if not ok:
            s = s0
            continue
        placed[t] = True
        key = np.empty(s - s0, dtype=np.int64)  # packed first, then row order, then node
        for e in range(s0, s):
            key[e - s0] = ((0 if packed[s_job[e]] else 1) * J + s_job[e]) * nn + s_node[e]
        perm = np.argsort(key) + s0
        s_job[s0:s] = s_job[perm]
        s_node[s0:s] = s_node[perm]
        s_off[s0:s] = s_off[perm]
        s_cnt[s0:s] = s_cnt[perm]
    return placed, s_job[:s], s_node[:s], s_off[:s], s_cnt[:s]


@njit(cache=True, nogil=True)
def check_choice(choice, valid, gpus, gpu_type, idle_allowed, capacities):
    """Why ``choice`` (option per job, -1 idle) is not a feasible allocation of the totals.

    Returns
    -------
    (code, where, used)
        ``used[t]``: GPUs of type t the choice takes; ``code`` 0 when feasible,
        1 job ``where`` idle but it may not be, 2 job ``where`` given an option
        that does not exist, 3 type ``where`` over its capacity (the first
        such job or type).
    """
    n, K = valid.shape
    used = np.zeros(capacities.size, dtype=np.int64)
    for j in range(n):
        c = choice[j]
        if c < 0:
            if not idle_allowed[j]:
                return 1, j, used
        elif c >= K or not valid[j, c]:
            return 2, j, used
        else:
            used[gpu_type[j, c]] += gpus[j, c]
    for t in range(capacities.size):
        if used[t] > capacities[t]:
            return 3, t, used
    return 0, -1, used


@njit(cache=True, nogil=True)
def layout(sel, n, n_types, job, gpus, batch, samples_per_s, gpu_type, packed, value, utility,
           is_cur):
    """Flat options ``sel`` (ascending; sorted by job) laid out as the ``[n, K]`` arrays of an option table.

    Returns
    -------
    (gpus, batch, samples_per_s, gpu_type, packed, value, utility, valid, current, most)
        Row j holds job j's selected options in order, K the most of any job;
        ``current[j]``: the column of its current option (-1 none);
        ``most[t]``: the sum over jobs of the most GPUs of type t one of its
        options uses (for clipping the capacities).
    """
    counts = np.zeros(n, dtype=np.int64)
    for i in sel:
        counts[job[i]] += 1
    K = 0
    for j in range(n):
        K = max(K, counts[j])
    g2 = np.zeros((n, K), dtype=np.int64)
    b2 = np.zeros((n, K), dtype=np.int64)
    s2 = np.zeros((n, K), dtype=np.float64)
    t2 = np.zeros((n, K), dtype=np.int64)
    p2 = np.zeros((n, K), dtype=np.bool_)
    v2 = np.zeros((n, K), dtype=np.float64)
    u2 = np.zeros((n, K), dtype=np.int64)
    ok = np.zeros((n, K), dtype=np.bool_)
    current = np.full(n, -1, dtype=np.int64)
    top = np.zeros((n, n_types), dtype=np.int64)  # top[j, t]: most GPUs of type t of job j's options
    col = np.zeros(n, dtype=np.int64)
    for i in sel:
        j = job[i]
        c = col[j]
        col[j] = c + 1
        g2[j, c], b2[j, c], s2[j, c], t2[j, c] = gpus[i], batch[i], samples_per_s[i], gpu_type[i]
        p2[j, c], v2[j, c], u2[j, c], ok[j, c] = packed[i], value[i], utility[i], True
        if is_cur[i]:
            current[j] = c
        top[j, gpu_type[i]] = max(top[j, gpu_type[i]], gpus[i])
    most = top.sum(axis=0)
    return g2, b2, s2, t2, p2, v2, u2, ok, current, most


@njit(cache=True, nogil=True)
def gather_options(pair_job, pair_type, pair_start, pair_size, gpus, batch, packed, samples_per_s):
    """Every (job, type) pair's block of options, one after the other: the flat option rows.

    Pair i's options are entries ``pair_start[i] .. pair_start[i] + pair_size[i]``
    of the shared arrays; returns (job, gpus, batch, samples_per_s, gpu_type,
    packed) of the options, pair by pair.
    """
    m = 0
    for i in range(pair_size.size):
        m += pair_size[i]
    job = np.empty(m, dtype=np.int64)
    k = np.empty(m, dtype=np.int64)
    b = np.empty(m, dtype=np.int64)
    s = np.empty(m, dtype=np.float64)
    t = np.empty(m, dtype=np.int64)
    p = np.empty(m, dtype=np.bool_)
    o = 0
    for i in range(pair_size.size):
        a = pair_start[i]
        for e in range(a, a + pair_size[i]):
            job[o], k[o], b[o], s[o], t[o], p[o] = pair_job[i], gpus[e], batch[e], samples_per_s[e], pair_type[i], packed[e]
            o += 1
    return job, k, b, s, t, p


@njit(cache=True, nogil=True)
def current_mask(job, gpu_type, gpus, batch, packed, run_rows, cur, n):
    """``is_cur[i]``: option i is its job's current one; ``cur[q]`` = (type, k, b, packed) of the
    current option of running job ``run_rows[q]`` (n jobs in all); a packed current option that has no
    row matches its unpacked row (:func:`~elasticopt.models.objectives.current_key`)."""
    at = np.full(n, -1, dtype=np.int64)  # at[j]: row of cur for job j (-1: not running)
    for q in range(run_rows.size):
        at[run_rows[q]] = q
    out = np.zeros(job.size, dtype=np.bool_)
    found = np.zeros(run_rows.size, dtype=np.bool_)
    for i in range(job.size):
        q = at[job[i]]
        if q >= 0 and cur[q, 0] == gpu_type[i] and cur[q, 1] == gpus[i] and cur[q, 2] == batch[i] \
                and cur[q, 3] == packed[i]:
            out[i] = True
            found[q] = True
    # on its fewest nodes without a packed option at (type, k, b) (the profile lists none: packing is no
    # faster there), a job's current option is the unpacked one (objectives.current_key's rule)
    for i in range(job.size):
        q = at[job[i]]
        if q >= 0 and not found[q] and cur[q, 3] == 1 and packed[i] == 0 and cur[q, 0] == gpu_type[i] \
                and cur[q, 1] == gpus[i] and cur[q, 2] == batch[i]:
            out[i] = True
    return out


@njit(cache=True, nogil=True)
def value_totals(job, value, n):
    """Per job its number of offered options (finite ``value``) and its largest |v| among them (0 without).

    Returns (counts, top, offered): the sum of ``top`` sets the scale S;
    ``offered`` is the number of finite values.
    """
    counts = np.zeros(n, dtype=np.int64)
    top = np.zeros(n)
    offered = 0
    for i in range(job.size):
        v = value[i]
        if np.isfinite(v):
            j = job[i]
            counts[j] += 1
            top[j] = max(top[j], abs(v))
            offered += 1
    return counts, top, offered


@njit(cache=True, nogil=True)
def group_max(group, x, n):
    """``out[j]`` = max(0, max of ``x[i]`` over the i with ``group[i] == j``) (``np.maximum.at`` from zeros)."""
    out = np.zeros(n)
    for i in range(group.size):
        j = group[i]
        if x[i] > out[j]:
            out[j] = x[i]
    return out


@njit(cache=True, nogil=True)
def segment_lookup(row_job, row_code, start, end, codes, values):
    """``out[i]``: the value of code ``row_code[i]`` among job ``row_job[i]``'s codes, nan where it has none.

    Job j's codes are ``codes[start[j]:end[j]]``, ascending, with their ``values``; a binary search per row
    (the reference: a dict look-up per row, ``objectives._caller_values_by_row``)."""
    out = np.empty(row_job.size)
    for i in range(row_job.size):
        j = row_job[i]
        lo, hi, c = start[j], end[j], row_code[i]
        while lo < hi:
            mid = (lo + hi) // 2
            if codes[mid] < c:
                lo = mid + 1
            else:
                hi = mid
        out[i] = values[lo] if lo < end[j] and codes[lo] == c else np.nan
    return out
