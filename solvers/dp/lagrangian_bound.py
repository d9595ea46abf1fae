"""The Lagrangian (LP-dual) bound and greedy incumbents: an exact speed-up (docs/design.md §2).

Reduced-cost fixing from this bound is in :mod:`~elasticopt.solvers.dp.reduced_costs`.

Relaxing the capacity rows with multipliers λ_t >= 0 (one per GPU type t)
gives, for every λ, the upper bound ::

    L(λ) = Σ_t λ_t G_t + Σ_j max( 0 if j may idle, max_o u[j, o] - λ_{t(j,o)} k[j, o] )

With one type this is a one-dimensional convex piecewise-linear function;
with several, the multipliers are found by cyclic coordinate descent, each
coordinate by the same one-dimensional search (any λ >= 0 is a valid bound, so
an approximate minimum costs strength, never exactness).  The bound relaxes
the per-type totals only: placement is checked after the DP.

The best λ (the LP dual of the capacity row) is found by bisection on the
subgradient G - Σ_j k_j(λ).  Any allocation that gives job j option o is worth
at most ``L(λ) + r[j, o]`` with the reduced cost ``r[j, o] = (u - λk)[j, o] -
max_o' (u - λk)[j, o'] <= 0``; if that is below the value of a known feasible
allocation (the incumbent), option o cannot be in a better allocation and is
removed.  An incumbent's own options always survive, so the optimum of the
reduced table equals the optimum of the original.  Jobs left with one choice
are fixed and taken out: the DP runs on the remaining core only.

Exactness: any λ >= 0 gives a valid bound, so λ may come from a float search.
L(λ) and the reduced costs are float64 sums of n + K terms; every test keeps a
margin of 32x the worst-case rounding error of such sums ((n + K + 4) * 2**-48
times the sum of the magnitudes), which is a tiny fraction of one utility unit
for realistic sizes, so a greedy incumbent that meets an integral LP bound is
still recognised as optimal.
"""

from __future__ import annotations

import numpy as np

from elasticopt.models.table import OptionTable

__all__ = ["LagArrays", "fits", "improve", "lagrangian_bound", "margin_of", "tie_rounding"]


class LagArrays:
    """Float arrays for fast evaluation of L(λ).

    Column 0 is idle (u = k = 0 where allowed, -inf where not), columns 1..K the
    options (invalid ones at -inf), so one argmax picks each job's Lagrangian
    choice; on ties the lower column wins, idle first, as in the DPs.  ``lam``
    is a scalar with one GPU type, else a vector indexed by type.
    """

    def __init__(self, table: OptionTable) -> None:
        self.t = table
        n, K = table.gpus.shape
        self.width = K + 1
        self.u = np.empty((n, K + 1))
        self.u[:, 0] = np.where(table.idle_allowed, 0.0, -np.inf)
        self.u[:, 1:] = np.where(table.valid, table.utility, -np.inf)
        self.k = np.zeros((n, K + 1))
        self.k[:, 1:] = table.gpus
        self.ty = np.zeros((n, K + 1), dtype=np.int64)  # ty[j, c]: GPU type of column c (idle: 0, with k = 0)
        self.ty[:, 1:] = table.gpu_type
        self.multi = table.n_types > 1
        self.caps = np.asarray(table.capacities, dtype=np.float64)
        self.base = np.arange(n) * (K + 1)

    def price(self, lam) -> np.ndarray | float:
        """λ per option column (the scalar itself with one type)."""
        return np.asarray(lam, dtype=np.float64)[self.ty] if self.multi else float(lam)

    def scores(self, lam) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per job: best u - λk (0 for idle), its option (-1 idle), its GPUs."""
        s = self.u - self.price(lam) * self.k
        flat = self.base + np.argmax(s, axis=1)
        return s.ravel()[flat], flat - self.base - 1, self.k.ravel()[flat]

    def value(self, lam) -> tuple[float, np.ndarray, float]:
        best, ch, k = self.scores(lam)
        if self.multi:
            return float(np.dot(lam, self.caps)) + float(best.sum()), ch, float(k.sum())
        return lam * self.t.capacity + float(best.sum()), ch, float(k.sum())

    def value_by_type(self, lam: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Several types: L(λ), the Lagrangian choice and the GPUs of each type it takes (one compiled pass,
        :func:`elasticopt.solvers.dp.kernels.lagrangian_choice`)."""
        from elasticopt.solvers.dp.kernels import lagrangian_choice

        total, ch, used = lagrangian_choice(self.u, self.k, self.ty, lam, self.caps.size)
        return float(np.dot(lam, self.caps)) + total, ch, used

    def option_scores(self, lam) -> np.ndarray:
        """u - λk of every option (columns 1..K), -inf where invalid."""
        return self.u[:, 1:] - (self.price(lam)[:, 1:] if self.multi else lam) * self.k[:, 1:]


def _gpus_of(table: OptionTable, choice: np.ndarray) -> int:
    rows = np.flatnonzero(choice >= 0)
    return int(table.gpus[rows, choice[rows]].sum())


def fits(table: OptionTable, choice: np.ndarray) -> bool:
    return bool((table.gpus_by_type(choice) <= table.capacities).all())


def _multi_bound(table: OptionTable, lag: "LagArrays", sweeps: int = 4, iterations: int = 40) -> tuple[float, np.ndarray, np.ndarray]:
    """Coordinate descent on L(λ) over the per-type multipliers (several GPU types).

    Each coordinate λ_t is minimised with the others fixed by cutting planes
    (:func:`_line_min`) on the slope G_t - K_t(λ) (K_t: GPUs of type t the
    Lagrangian choice takes); bisection before: 40 evaluations per coordinate.

    Returns
    -------
    (bound, λ, choice)
        The smallest L found, its multipliers, and the Lagrangian choice at the
        last λ whose choice fitted every type (or the final one if none did).
    """
    T = table.n_types
    caps = np.asarray(table.capacities)
    lam = np.zeros(T)
    best_v, ch, used = lag.value_by_type(lam)
    best_lam, fit_ch = lam.copy(), (ch if (used <= caps).all() else None)
    top = float(np.abs(table.utility).max(initial=0)) + 1.0
    for _ in range(sweeps):
        moved = False
        for t in range(T):
            def kt(x: float) -> tuple[float, np.ndarray, np.ndarray]:
                trial = lam.copy()
                trial[t] = x
                return lag.value_by_type(trial)
            v0, c0, u0 = kt(lam[t])
            k0 = int(u0[t])
            if k0 <= caps[t] and lam[t] == 0.0:
                continue  # slope >= 0 at 0: λ_t = 0 is optimal for this coordinate
            lo, hi = (lam[t], top) if k0 > caps[t] else (0.0, lam[t])
            x, v, hi, c, uc = _line_min(kt, lo, hi, caps[t], t, iterations)
            if v < best_v - 1e-12 * max(1.0, abs(best_v)):
                moved = True
            if v < best_v:
                best_v, best_lam = v, lam.copy()
                best_lam[t] = x
            lam[t] = hi
            if (uc <= caps).all():
                fit_ch = c
        if not moved:
            break
    v, c, uc = lag.value_by_type(best_lam)
    if (uc <= caps).all():
        fit_ch = c
    elif fit_ch is None:  # every coordinate at the right end of its search: the choice fits each type there
        _, c2, u2 = lag.value_by_type(lam)
        if (u2 <= caps).all():
            fit_ch = c2
    return best_v, best_lam, (fit_ch if fit_ch is not None else c)


def _line_min(kt, lo: float, hi: float, cap: float, t: int, iterations: int):
    """Minimise L along coordinate t over [lo, hi] by cutting planes (``kt(x)`` -> L, choice, GPUs per type).

    L is convex and piecewise linear in λ_t with subgradient ``cap - used_t`` at every point; the lines at
    ``lo`` (slope < 0) and ``hi`` (slope >= 0) meet at x, and where L(x) equals them x is a minimiser.
    Returns (λ_t, L) of the best point tried, and the smallest λ_t tried whose choice fits type t (``hi``:
    where a minimiser's tie-broken choice overfills, a point 1e-12 relative to its right), its choice and
    GPUs: the coordinate descent moves there, as it did to the end of its bisection before.
    """
    v_lo, _, u_lo = kt(lo)
    v_hi, c_hi, u_hi = kt(hi)
    s_lo, s_hi = cap - u_lo[t], cap - u_hi[t]
    x_best, v_best = (hi, v_hi) if v_hi <= v_lo else (lo, v_lo)
    for _ in range(iterations):
        if s_lo >= 0 or s_hi < 0:
            break  # lo is a minimiser, or even hi overfills (the end is the best there is)
        x = (v_hi - v_lo + s_lo * lo - s_hi * hi) / (s_lo - s_hi)
        if not lo < x < hi:
            x = 0.5 * (lo + hi)
            if not lo < x < hi:
                break
        v, c, u = kt(x)
        if v < v_best:
            x_best, v_best = x, v
        cut = v_lo + s_lo * (x - lo)  # both lines' value at x
        touch = v <= cut + 1e-12 * max(1.0, abs(cut))
        if touch and cap - u[t] < 0:  # a minimiser whose tie-broken choice overfills: just right of it
            x = x + 1e-12 * max(1.0, abs(x))
            if not x < hi:
                break
            v, c, u = kt(x)
        if cap - u[t] >= 0:
            hi, v_hi, c_hi, u_hi, s_hi = x, v, c, u, cap - u[t]
        else:
            lo, v_lo, s_lo = x, v, cap - u[t]
        if touch:
            break  # L touches its lower envelope: x minimises L on [lo, hi]
    return x_best, v_best, hi, c_hi, u_hi


def lagrangian_bound(
    table: OptionTable, iterations: int = 60, lag: "LagArrays | None" = None
) -> tuple[float, float, np.ndarray]:
    """Minimise L(λ) over λ >= 0 (float; see :func:`reduced_cost_fixing` for the exact use).

    L is convex and piecewise linear, so a one-dimensional cutting-plane method
    converges in a few steps: keep the linear piece at a λ whose choice
    overfills the capacity (slope < 0) and one whose choice fits (slope >= 0),
    and evaluate L where the two pieces cross; stop when L there equals the
    pieces (the minimum) or the bracket stops shrinking.  Bisection steps
    guarantee progress if the crossing lands on an end of the bracket.

    Returns
    -------
    (bound, λ, choice)
        The smallest L found, its multiplier, and the Lagrangian choice at the
        smallest λ tried whose choice fits the capacity (feasible unless the
        table is infeasible).
    """
    lag = lag if lag is not None else LagArrays(table)
    if lag.multi:
        return _multi_bound(table, lag)  # type: ignore[return-value]
    G = table.capacity
    v0, ch0, k0 = lag.value(0.0)
    if k0 <= G:
        return v0, 0.0, ch0
    lo, v_lo, k_lo = 0.0, v0, k0
    hi = float(np.abs(table.utility).max(initial=0)) + 1.0  # at hi every job takes its fewest GPUs
    v_hi, ch_hi, k_hi = lag.value(hi)
    if k_hi > G:  # even the fewest GPUs per job overfill: infeasible, the caller gives up
        return v_hi, hi, ch_hi
    best_v, best_lam = min((v_lo, lo), (v_hi, hi))
    for _ in range(iterations):
        slope_lo, slope_hi = G - k_lo, G - k_hi  # slope_lo < 0 <= slope_hi
        x = (v_hi - v_lo + slope_lo * lo - slope_hi * hi) / (slope_lo - slope_hi)
        if not lo < x < hi:
            x = 0.5 * (lo + hi)
            if not lo < x < hi:
                break
        v, ch, k = lag.value(x)
        if v < best_v:
            best_v, best_lam = v, x
        cut = v_lo + slope_lo * (x - lo)  # value of both pieces at the crossing
        if v <= cut + 1e-12 * max(1.0, abs(cut)):
            break  # L touches its lower envelope: x minimises L
        if k <= G:
            hi, v_hi, ch_hi, k_hi = x, v, ch, k
        else:
            lo, v_lo, k_lo = x, v, k
    return best_v, best_lam, ch_hi


def tie_rounding(table: OptionTable, lag: LagArrays, lam: float) -> np.ndarray | None:
    """LP rounding at λ: each job on the fewest GPUs among its (near-)tied best choices,
    then jobs moved to their most GPUs among the ties while the capacity allows.

    Every tied choice has the same Lagrangian score, so each move adds λ per GPU;
    when the moves fill the capacity exactly the result meets the bound.  Near-ties
    (float tolerance) only affect how good the incumbent is, never exactness.
    """
    s = lag.u - lam * lag.k
    best = s.max(axis=1)
    tol = 1e-9 * np.maximum(1.0, np.abs(best))
    tied = s >= (best - tol)[:, None]
    kt = np.where(tied, lag.k, np.inf)
    low = np.argmin(kt, axis=1)
    high = np.argmax(np.where(tied, lag.k, -np.inf), axis=1)
    rows = np.arange(table.n_jobs)
    left = table.capacity - float(lag.k[rows, low].sum())
    delta = lag.k[rows, high] - lag.k[rows, low]
    col = low.copy()
    if left < 0:
        return None  # even the fewest GPUs among the ties overfill: no rounding from here
    move = np.flatnonzero(delta > 0)
    if left == 0 or move.size == 0:
        return col - 1  # column 0 is idle
    # big moves first while they fit, then the rest smallest first into what is left
    big = move[np.argsort(-delta[move], kind="stable")]
    fit = np.cumsum(delta[big]) <= left
    take = big[fit]
    left -= float(delta[take].sum())
    rest = big[~fit][::-1]  # ascending
    take2 = rest[np.cumsum(delta[rest]) <= left]
    col[take] = high[take]
    col[take2] = high[take2]
    return col - 1


def improve(table: OptionTable, choice: np.ndarray, rounds: int = 3) -> np.ndarray:
    """Greedy fill of leftover capacity: per job its best upgrade, by gain per extra GPU.

    Each round takes the upgrades in order of rate while the GPUs they add fit
    every type (a move to another type frees the GPUs of the old one only
    after the round, so a round never overfills).
    """
    choice = choice.copy()
    ar = np.arange(table.n_jobs)
    caps = np.asarray(table.capacities)
    for _ in range(rounds):
        left = caps - table.gpus_by_type(choice)
        if (left <= 0).all():
            break
        has = choice >= 0
        c0 = np.maximum(choice, 0)
        cur_u = np.where(has, table.utility[ar, c0], 0)
        cur_k = np.where(has, table.gpus[ar, c0], 0)
        cur_t = np.where(has, table.gpu_type[ar, c0], -1)
        gain = table.utility - cur_u[:, None]
        same = table.gpu_type == cur_t[:, None]
        extra = np.where(same, table.gpus - cur_k[:, None], table.gpus)  # GPUs the move adds to the new type
        ok = table.valid & (gain > 0) & (extra <= left[table.gpu_type])
        rate = np.where(ok, gain / np.maximum(extra, 0.5), -np.inf)
        best_o = np.argmax(rate, axis=1)
        jobs = np.flatnonzero(np.isfinite(rate[ar, best_o]))
        if jobs.size == 0:
            break
        jobs = jobs[np.argsort(-rate[jobs, best_o[jobs]], kind="stable")]
        need = np.maximum(extra[jobs, best_o[jobs]], 0)
        ty = table.gpu_type[jobs, best_o[jobs]]
        take_mask = np.zeros(jobs.size, dtype=bool)
        for t in range(table.n_types):
            sel = np.flatnonzero(ty == t)
            take_mask[sel[np.cumsum(need[sel]) <= left[t]]] = True
        take = jobs[take_mask]
        if take.size == 0:
            break
        choice[take] = best_o[take]
    return choice


def margin_of(table: OptionTable, lam: float) -> float:
    """Rounding margin of the float bound at λ.

    Every float op errs by <= 2**-53 relative; a sum of n + K terms whose
    magnitudes add up to at most ``mag`` errs by <= (n + K + 4) 2**-53 mag in
    any order; the margin is 32x that.
    """
    mag = float(np.abs(np.where(table.valid, table.utility, 0)).max(axis=1, initial=0).sum())
    lam = float(np.max(lam, initial=0.0))
    mag += lam * (table.capacity + float(np.where(table.valid, table.gpus, 0).max(axis=1, initial=0).sum()))
    return (table.n_jobs + table.width + 4) * 2.0**-48 * mag + 1e-9

