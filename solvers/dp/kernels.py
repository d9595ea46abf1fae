"""Compiled loops of the dp's bounds and its backtrack (numba; docs/design.md §3).

The quick optimality proof of several GPU types, the Lagrangian choice at
given multipliers and the walk back through the forward scan's argmax rows,
as plain loops compiled on first use (cached on disk).
Each states the reference it must agree with (tests/test_kernels.py compares
them on random inputs).  Float sums are sequential: the Lagrangian margin of
:mod:`~elasticopt.solvers.dp.lagrangian_bound` holds for any summation order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["quick_proof_multi", "lagrangian_choice", "walk_rows"]


@njit(cache=True, nogil=True)
def quick_proof_multi(valid, gpus, gpu_type, utility, idle_allowed, capacities, capacity):
    """The quick optimality proof of several GPU types (:func:`elasticopt.solvers.dp.reduced_costs.quick_proof_multi`).

    λ_t = max(0, the best utility per GPU of type t); the Lagrangian choice at
    λ (per job the column of the largest u - λ_t k, idle first on ties); if it
    fits every type, the bound ``floor(L(λ) + margin)`` (``margin_of``'s margin,
    ``capacity`` the table's total) and a greedy fill of
    the options tied with idle (largest first while their type has room).

    Returns
    -------
    (status, bound, choice, value, left, options)
        status 1: ``choice`` (option per job, -1 idle) is worth ``value`` >=
        ``bound``, proven optimal, and leaves ``left[t]`` GPUs of type t free;
        0: not proven (the other fields meaningless).  ``options``: the
        number of valid options.
    """
    n, K = valid.shape
    T = capacities.size
    lam = np.zeros(T)
    for j in range(n):
        for o in range(K):
            if valid[j, o] and gpus[j, o] > 0:
                r = utility[j, o] / gpus[j, o]
                if r > lam[gpu_type[j, o]]:
                    lam[gpu_type[j, o]] = r
    choice = np.full(n, -1, dtype=np.int64)
    used = np.zeros(T, dtype=np.int64)
    total = 0.0
    for t in range(T):
        total += lam[t] * capacities[t]
    mag_u = 0.0  # sum over jobs of the largest |u| of a valid option
    mag_k = 0.0  # sum over jobs of the largest k of a valid option
    for j in range(n):
        best = 0.0 if idle_allowed[j] else -np.inf
        arg = -1
        top_u, top_k = 0.0, 0.0
        for o in range(K):
            if valid[j, o]:
                s = utility[j, o] - lam[gpu_type[j, o]] * gpus[j, o]
                if s > best:
                    best, arg = s, o
                top_u = max(top_u, abs(float(utility[j, o])))
                top_k = max(top_k, float(gpus[j, o]))
        if best == -np.inf:
            return 0, 0, choice, 0, used, 0  # a job that must run has no option
        choice[j] = arg
        if arg >= 0:
            used[gpu_type[j, arg]] += gpus[j, arg]
        total += best
        mag_u += top_u
        mag_k += top_k
    for t in range(T):
        if used[t] > capacities[t]:
            return 0, 0, choice, 0, used, 0
    lam_max = 0.0
    for t in range(T):
        lam_max = max(lam_max, lam[t])
    margin = (n + K + 4) * 2.0**-48 * (mag_u + lam_max * (capacity + mag_k)) + 1e-9
    bound = int(np.floor(total + margin))
    # options of idle jobs scoring like idle (within 1e-9 relative), largest k first, stable in (row, column)
    m = 0
    n_valid = 0
    for j in range(n):
        for o in range(K):
            if valid[j, o]:
                n_valid += 1
                if choice[j] < 0:
                    m += 1
    cand_r = np.empty(m, dtype=np.int64)
    cand_c = np.empty(m, dtype=np.int64)
    cand_k = np.empty(m, dtype=np.int64)
    m = 0
    for j in range(n):
        if choice[j] < 0:
            for o in range(K):
                if valid[j, o]:
                    s = utility[j, o] - lam[gpu_type[j, o]] * gpus[j, o]
                    if s >= -1e-9 * max(1.0, abs(float(utility[j, o]))):
                        cand_r[m], cand_c[m], cand_k[m] = j, o, gpus[j, o]
                        m += 1
    order = np.argsort(-cand_k[:m], kind="mergesort")
    left = capacities - used
    free = 0
    for t in range(T):
        free += left[t]
    taken = np.zeros(n, dtype=np.bool_)
    for q in range(m):
        if free <= 0:
            break
        i = order[q]
        r, c, k = cand_r[i], cand_c[i], cand_k[i]
        ty = gpu_type[r, c]
        if taken[r] or k > left[ty]:
            continue
        choice[r] = c
        taken[r] = True
        left[ty] -= k
        free -= k
    value = 0
    for j in range(n):
        if choice[j] >= 0:
            value += utility[j, choice[j]]
    return (1 if value >= bound else 0), bound, choice, value, left, n_valid


@njit(cache=True, nogil=True)
def lagrangian_choice(u, k, ty, lam, n_types):
    """The Lagrangian choice at multipliers ``lam`` (several GPU types), as ``LagArrays.scores`` makes it.

    ``u[j, c]``, ``k[j, c]``, ``ty[j, c]``: utility (float, -inf where the
    column does not exist), GPUs and type of column c of job j (column 0 is
    idle).  Per job the column of the largest ``u - lam[ty] k`` (the first
    among equals).

    Returns
    -------
    (total, choice, used)
        The sum over jobs of their best scores, the chosen option per job
        (column - 1: -1 idle) and the GPUs of each type the choice takes.
    """
    n, C = u.shape
    choice = np.empty(n, dtype=np.int64)
    used = np.zeros(n_types, dtype=np.int64)
    total = 0.0
    for j in range(n):
        best = u[j, 0] - lam[ty[j, 0]] * k[j, 0]
        arg = 0
        for c in range(1, C):
            s = u[j, c] - lam[ty[j, c]] * k[j, c]
            if s > best:
                best, arg = s, c
        choice[j] = arg - 1
        if arg > 0:
            used[ty[j, arg]] += int(k[j, arg])
        total += best
    return total, choice, used


@njit(cache=True, nogil=True)
def walk_rows(rows, steps, p, W, choice):
    """Walk back through one chunk's argmax rows from state ``p``; returns the state before the chunk.

    ``rows[t, q]``: the entry the forward scan wrote for row t at state q, the option itself (``W == 0``, the
    unpacked kernel; -1 idle) or a packed value truncated to the row type whose low bits hold the code
    (``W`` the packing's width: ``W - 1`` idle, ``W - 2 - o`` option o; :func:`~.packed.row_option`).
    ``steps[t, o]``: how far option o of row t's job moves the state.  Writes ``choice[t]`` (the option, -1
    idle) for every row, last first.  An option outside ``steps`` (only on an infeasible walk) counts as idle
    and the state is clamped to the rows, so a bad walk reads no memory outside them.  The reference is the
    jax scan it replaced (``lax.scan`` over the rows, reverse; tests/test_dp_backtrack.py).
    """
    T, L = rows.shape
    K = steps.shape[1]
    for t in range(T - 1, -1, -1):
        q = min(max(p, 0), L - 1)
        x = np.int64(rows[t, q])
        if W:
            code = x & (W - 1)
            o = -1 if code == W - 1 else W - 2 - code
        else:
            o = x
        choice[t] = o
        if 0 <= o < K:
            p -= steps[t, o]
    return p
