"""The dp's bounded DP: only the states that may still beat the incumbent (docs/design.md §3).

After reduced-cost fixing (:mod:`~elasticopt.solvers.dp.reduced_costs`) the core is a
one-type table with a known incumbent worth ``LB`` and an exact Lagrangian
multiplier λ = num / den (:mod:`~elasticopt.solvers.dp.integer_bound`).  The
plain DP fills ``F_j[p]`` (best utility of the first j core jobs on at most p
GPUs) for every p in 0..G.  A state p after j jobs can be on the path of an
allocation worth more than LB only if

    F_j[p] + U_j(G - p) >= LB + 1

where U_j(c) bounds what the jobs after j can add on c GPUs.  Two bounds are
used, both exact in integers (scaled by den):

* the Lagrangian tangent  ``λ c + Σ_{i>j} best_i(λ)``  (best_i: job i's best
  ``u - λ k``, 0 if it may idle), valid for every c;
* the capacity-free one  ``Σ_{i>j} max(u_i, 0 if i may idle)``;

and a state also needs room for the fewest GPUs of the later jobs that must
run.  The states passing the test after job j lie in a window
``[lo_j, hi_j]``; the next job's states are computed only over the window its
options can reach from it, so the work is ``Σ_j K_j (hi_j - lo_j + 1)``
instead of ``n K G``.  Dropping the other states is exact: a state failing the
test cannot lead to an allocation worth more than LB, and the incumbent itself
is returned when no state survives to the end (it is then optimal).  Memory
is one int8/int16 argmax row per job over its window.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit, objmode

from elasticopt.solvers.dp.integer_bound import exact_value
from elasticopt.models.table import OptionTable

__all__ = ["window_dp", "window_inputs"]

NEG = -(1 << 62)
#: Option reads between two looks at the clock (a look costs ~1 µs; 2^20 reads ~1 ms of work).
CLOCK_EVERY = 1 << 20
#: int64 headroom: the windowed test adds at most three den-scaled sums (see ``window_inputs``).
_SAFE = 1 << 62


@njit(cache=True)  # no nogil: the look at the clock holds the GIL for a moment
def _window_forward(gpus, util, valid, idle, cap, num, den, target, rest_lag, rest_max, rest_min, max_cells,
                    deadline):
    """Forward pass over the windows.

    ``rest_lag[j]`` / ``rest_max[j]`` / ``rest_min[j]``: the two bounds and the
    fewest GPUs of jobs j..n-1 (index n: 0).  Returns (best, p_best, los, his,
    arg) with ``arg`` the argmax rows laid end to end (job j's at
    ``offsets[j]``), or best = NEG if no state beats the target; ``cells`` past
    ``max_cells`` stops early with best = NEG - 1 (the caller falls back).
    """
    n, K = gpus.shape
    los = np.zeros(n + 1, dtype=np.int64)
    his = np.zeros(n + 1, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    # stage 0: F_0[p] = 0 on p GPUs; keep p while 0 + min(λ (cap - p) + rest, restmax) >= target
    lo, hi = 0, -1
    for p in range(cap - rest_min[0], -1, -1):
        ub = num * (cap - p) + rest_lag[0]
        if rest_max[0] < ub:
            ub = rest_max[0]
        if ub >= target:
            hi = p
            break
    if hi < 0:
        return NEG, 0, los, his, offsets, np.zeros(0, dtype=np.int8)
    F = np.zeros(hi - lo + 1, dtype=np.int64)
    los[0], his[0] = lo, hi
    total = 0
    since = 0  # option reads since the last look at the clock
    # first pass: widths are only known as we go; keep the argmax rows in a growing buffer
    buf = np.empty(1 << 16, dtype=np.int8)
    for j in range(n):
        kmin, kmax = 1 << 40, -1
        for o in range(K):
            if valid[j, o]:
                if gpus[j, o] < kmin:
                    kmin = gpus[j, o]
                if gpus[j, o] > kmax:
                    kmax = gpus[j, o]
        nlo = lo if idle[j] else lo + (kmin if kmax >= 0 else 0)
        nhi = hi + (kmax if kmax >= 0 else 0)
        top = cap - rest_min[j + 1]
        if nhi > top:
            nhi = top
        if nlo > nhi or (kmax < 0 and not idle[j]):
            return NEG, 0, los, his, offsets, np.zeros(0, dtype=np.int8)
        width = nhi - nlo + 1
        total += width * (K + 1)
        if total > max_cells:
            return NEG - 1, 0, los, his, offsets, np.zeros(0, dtype=np.int8)
        since += width * (K + 1)
        if since >= CLOCK_EVERY:
            since = 0
            with objmode(now="float64"):
                now = time.perf_counter()
            if now > deadline:
                return NEG - 2, 0, los, his, offsets, np.zeros(0, dtype=np.int8)
        G = np.full(width, NEG, dtype=np.int64)
        A = np.full(width, -1, dtype=np.int8)
        for q in range(width):
            p = nlo + q
            # idle: F_{j-1}[p] (p in the old window; "at most p GPUs" also reads F_{j-1}[p] for p past hi
            # only through the old window's top state, which is kept below)
            if idle[j]:
                s = p if p <= hi else hi
                if s >= lo:
                    G[q] = F[s - lo]
            for o in range(K):
                if not valid[j, o]:
                    continue
                s = p - gpus[j, o]
                if s < lo:
                    continue
                if s > hi:
                    s = hi  # at most p GPUs: the best state of the old window below p - k
                v = F[s - lo] + util[j, o]
                if v > G[q]:
                    G[q] = v
                    A[q] = o
        # at most p GPUs: carry the running maximum upwards (F is non-decreasing in p within the window)
        for q in range(1, width):
            if G[q - 1] > G[q]:
                G[q] = G[q - 1]
                A[q] = -2  # "same as the state below"
        # the states that may still beat the incumbent
        first, last = -1, -1
        for q in range(width):
            if G[q] <= NEG // 2:
                continue
            p = nlo + q
            ub = num * (cap - p) + rest_lag[j + 1]
            if rest_max[j + 1] < ub:
                ub = rest_max[j + 1]
            if den * G[q] + ub >= target:
                if first < 0:
                    first = q
                last = q
        if first < 0:
            return NEG, 0, los, his, offsets, np.zeros(0, dtype=np.int8)
        lo, hi = nlo + first, nlo + last
        F = G[first : last + 1].copy()
        row = A[first : last + 1]
        need = offsets[j] + row.size
        if need > buf.size:
            nb = np.empty(max(need, 2 * buf.size), dtype=np.int8)
            nb[: offsets[j]] = buf[: offsets[j]]
            buf = nb
        buf[offsets[j] : need] = row
        offsets[j + 1] = need
        los[j + 1], his[j + 1] = lo, hi
    best, pb = NEG, -1
    for q in range(hi - lo + 1):
        if F[q] > best:
            best, pb = F[q], lo + q
    return best, pb, los, his, offsets, buf[: offsets[n]].copy()


@njit(cache=True, nogil=True)
def _window_backward(gpus, p, los, his, offsets, arg):
    n = gpus.shape[0]
    choice = np.full(n, -1, dtype=np.int64)
    for j in range(n - 1, -1, -1):
        # state p after job j (window j+1); follow "same as below" links down to the deciding state
        q = p - los[j + 1]
        a = arg[offsets[j] + q]
        while a == -2:
            q -= 1
            p -= 1
            a = arg[offsets[j] + q]
        if a >= 0:
            choice[j] = a
            p -= gpus[j, a]
        # idle (a == -1): p unchanged, clipped into the previous window's range
        if p > his[j]:
            p = his[j]
    return choice


def window_inputs(core: OptionTable, num: int, den: int, target_value: int):
    """The bounds of the windowed test for ``core`` at λ = num / den, or None where int64 could overflow.

    ``target_value``: the value to reach (incumbent's core value + 1).
    """
    ev = exact_value(core, (num,), den)
    if ev is None:
        return None
    n = core.n_jobs
    umax = np.where(core.valid, core.utility, NEG).max(axis=1, initial=NEG)
    umax = np.where(core.idle_allowed, np.maximum(umax, 0), umax)
    kmin = np.where(core.valid, core.gpus, 1 << 40).min(axis=1, initial=1 << 40)
    kmin = np.where(core.idle_allowed, 0, kmin)
    mag = int(np.abs(umax).sum(dtype=object)) * den
    if 3 * mag + num * (core.capacity + int(core.gpus.max(initial=0)) * n) >= _SAFE:
        return None
    rest_lag = np.zeros(n + 1, dtype=np.int64)
    rest_lag[:n] = np.cumsum(ev.best[::-1])[::-1]
    rest_max = np.zeros(n + 1, dtype=np.int64)
    rest_max[:n] = np.cumsum((den * umax)[::-1])[::-1]
    rest_min = np.zeros(n + 1, dtype=np.int64)
    rest_min[:n] = np.cumsum(kmin[::-1])[::-1]
    return rest_lag, rest_max, rest_min, den * int(target_value)


def window_dp(core: OptionTable, num: int, den: int, beat: int, max_cells: int, deadline: float | None = None):
    """Best allocation of ``core`` worth more than ``beat``, over the surviving states only.

    Returns
    -------
    (status, best, choice, cells)
        status ``"found"`` (best > beat, choice per core row), ``"none"`` (no
        allocation beats ``beat``: the incumbent is optimal), or ``"skip"``
        (overflow risk or more than ``max_cells`` states: run the plain DP),
        or ``"time"`` (``time.perf_counter()`` passed ``deadline`` first).
    """
    if core.n_types != 1 or not core.width or num < 0 or den < 1:
        return "skip", None, None, 0
    inputs = window_inputs(core, int(num), int(den), int(beat) + 1)
    if inputs is None:
        return "skip", None, None, 0
    rest_lag, rest_max, rest_min, target = inputs
    best, pb, los, his, offsets, arg = _window_forward(
        np.ascontiguousarray(core.gpus), np.ascontiguousarray(core.utility), np.ascontiguousarray(core.valid),
        np.ascontiguousarray(core.idle_allowed), int(core.capacity), int(num), int(den), int(target),
        rest_lag, rest_max, rest_min, int(max_cells), np.inf if deadline is None else float(deadline))
    cells = int(offsets[-1])
    if best == NEG - 2:
        return "time", None, None, cells
    if best == NEG - 1:
        return "skip", None, None, cells
    if best == NEG or best <= beat:
        return "none", None, None, cells
    choice = _window_backward(np.ascontiguousarray(core.gpus), int(pb), los, his, offsets, arg)
    return "found", int(best), choice, cells
