"""The Lagrangian bound in exact integer arithmetic (docs/design.md §2).

For any rational multipliers λ_t = num_t / den >= 0 the bound of
:mod:`~elasticopt.solvers.dp.lagrangian_bound` times ``den`` is an integer::

    den L(λ) = Σ_t num_t G_t + Σ_j max( 0 if j may idle, max_o den u[j, o] - num_t k[j, o] )

so it can be evaluated without rounding.  The float search finds a near-optimal
λ; rounding it to a nearby rational and evaluating there gives a bound that
is exact (no safety margin) and, where the LP optimum sits at a breakpoint
with a small denominator, as tight as the LP.  With integral utilities that
decides cases the float test cannot: strongly correlated and subset-sum
tables (u = S (k + c)), whose greedy incumbent fills the capacity exactly and
meets the bound only to within the float margin.

The reduced-cost test is exact too: an allocation that gives job j option o
is worth at most ``floor((den L + r[j, o]) / den)`` with the integer reduced
cost ``r[j, o] = den u - num k - best_j <= 0``; an option whose bound is below
``incumbent + 1`` cannot be in a strictly better allocation.

Integers stay in int64 where a worst-case magnitude check proves that no sum
can overflow; otherwise the candidate is skipped (the caller keeps the float
test, never a wrong one).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numba import njit

from elasticopt.models.table import OptionTable

__all__ = ["ExactBound", "exact_bound", "exact_value", "fill_slack"]

#: int64 sums are used only below this magnitude (2**62: headroom for one more addition).
_SAFE = 1 << 62
#: Denominators tried for the rational λ (1: integral λ, e.g. u = S (k + c); the rest: near breakpoints).
_DENOMINATORS = (1, 2, 4, 16, 64, 256)


@dataclass(frozen=True)
class ExactBound:
    """L(λ) at λ_t = ``num[t] / den``, exactly: ``scaled = den * L(λ)``.

    ``best[j]``: ``den`` times job j's best Lagrangian score (0 for idle);
    ``scores[j, o]``: ``den u - num k`` of option o (a large negative value where invalid).
    """

    num: tuple[int, ...]
    den: int
    scaled: int
    best: np.ndarray
    scores: np.ndarray

    @property
    def floor(self) -> int:
        """The integer upper bound ``floor(L(λ))``."""
        return self.scaled // self.den

    def keep(self, table: OptionTable, incumbent_value: int) -> tuple[np.ndarray, np.ndarray]:
        """Options (and idle choices) that may be in an allocation worth more than ``incumbent_value``.

        Exact: ``den L + r[j, o] >= den (incumbent + 1)`` with integer reduced costs.
        """
        need = self.den * (int(incumbent_value) + 1) - self.scaled  # r must be >= need (need <= 0 if useful)
        need = max(need, -(1 << 62))  # (reduced costs are > -2**62: int64-safe comparison)
        keep = table.valid & (self.scores - self.best[:, None] >= need)
        idle_keep = table.idle_allowed & (-self.best >= need)
        return keep, idle_keep


def _magnitudes(table: OptionTable) -> tuple[int, int]:
    """Σ_j max_o |u|, Σ_j max_o k over valid options (exact Python ints)."""
    u = np.where(table.valid, np.abs(table.utility), 0).max(axis=1, initial=0)
    k = np.where(table.valid, table.gpus, 0).max(axis=1, initial=0)
    return int(u.sum(dtype=object)), int(k.sum(dtype=object))


def exact_value(table: OptionTable, num: tuple[int, ...], den: int,
                magnitudes: tuple[int, int] | None = None) -> ExactBound | None:
    """``den * L(num / den)`` exactly, or None where int64 could overflow (or λ < 0).

    ``num`` has one entry per GPU type (``table.types`` order).
    """
    if den < 1 or len(num) != table.n_types or min(num, default=0) < 0:
        return None
    mu, mk = magnitudes if magnitudes is not None else _magnitudes(table)
    top = max(num, default=0)
    caps = [int(c) for c in table.capacities]
    # every partial sum is bounded by den Σ|u| + top (Σ k + Σ G): check it fits int64 with room
    if den * mu + top * (mk + sum(caps)) + den >= _SAFE:
        return None
    price = np.asarray(num, dtype=np.int64)[table.gpu_type] if table.n_types > 1 else np.int64(num[0])
    floor_val = -(_SAFE // 4)  # below any real score: invalid options never win
    scores = np.where(table.valid, den * table.utility - price * table.gpus, floor_val)
    best = scores.max(axis=1, initial=floor_val) if table.width else np.full(table.n_jobs, floor_val, np.int64)
    best = np.where(table.idle_allowed, np.maximum(best, 0), best)
    if (best <= floor_val).any():
        return None  # a job that must run has no option: infeasible, left to the caller
    scaled = sum(n * g for n, g in zip(num, caps)) + int(best.sum())
    return ExactBound(tuple(int(x) for x in num), int(den), int(scaled), best, scores)


def _candidates(lam: np.ndarray | float, n_types: int, kmax: int) -> list[tuple[tuple[int, ...], int]]:
    lam = np.atleast_1d(np.asarray(lam, dtype=np.float64))
    lam = np.where(np.isfinite(lam) & (lam > 0), lam, 0.0)
    out: list[tuple[tuple[int, ...], int]] = []
    if n_types == 1:
        x = float(lam[0])
        out.append(((int(np.floor(x)),), 1))
        out.append(((int(np.ceil(x)),), 1))
        f = Fraction(x).limit_denominator(max(1, kmax))  # breakpoints (u1 - u2) / (k1 - k2) have den <= kmax
        out.append(((f.numerator,), f.denominator))
    for d in _DENOMINATORS:
        out.append((tuple(int(round(v * d)) for v in lam), d))
    seen: set = set()
    uniq = []
    for c in out:
        if c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


def exact_bound(table: OptionTable, lam: np.ndarray | float) -> ExactBound | None:
    """The smallest exact bound among rationals near the float multipliers ``lam``.

    Returns None where no candidate can be evaluated in int64 (the caller keeps
    its float test).
    """
    if not table.n_jobs:
        return None
    mags = _magnitudes(table)
    kmax = int(table.gpus[table.valid].max(initial=1)) if table.width else 1
    best: ExactBound | None = None
    for num, den in _candidates(lam, table.n_types, kmax):
        ev = exact_value(table, num, den, mags)
        if ev is None:
            continue
        # compare scaled / den as fractions: a / d < b / e  <=>  a e < b d (Python ints)
        if best is None or ev.scaled * best.den < best.scaled * ev.den:
            best = ev
    return best


@njit(cache=True, nogil=True)
def _fill_kernel(gpus, tied, cur, reach_lo, slack):
    """Moves among tied options (one per job) whose GPUs add up to the most of ``slack`` (net change within
    ``[-reach_lo, slack]``); returns the new option per job (-1 idle, as ``cur``) and the GPUs added."""
    n, K = gpus.shape
    width = reach_lo + slack + 1  # net change d at index d + reach_lo
    ok = np.zeros(width, dtype=np.bool_)
    ok[reach_lo] = True
    back = np.full((n, width), -3, dtype=np.int8)  # -3: unreachable; -2: kept its option; o: moved to o (-1 idle)
    for j in range(n):
        ck = 0 if cur[j] < 0 else gpus[j, cur[j]]
        new = np.zeros(width, dtype=np.bool_)
        for d in range(width):
            if ok[d]:
                new[d] = True
                back[j, d] = -2
        for o in range(-1, K):
            if o == cur[j] or not tied[j, o + 1]:
                continue
            delta = (0 if o < 0 else gpus[j, o]) - ck
            for d in range(width):
                e = d + delta
                if ok[d] and 0 <= e < width and not new[e]:
                    new[e] = True
                    back[j, e] = o
        ok = new
    best = -1
    for d in range(width - 1, -1, -1):
        if ok[d]:
            best = d
            break
    out = cur.copy()
    d = best
    for j in range(n - 1, -1, -1):
        o = back[j, d]
        if o != -2:
            ck = 0 if cur[j] < 0 else gpus[j, cur[j]]
            out[j] = o
            d -= (0 if o < 0 else gpus[j, o]) - ck
    return out, best - reach_lo


def fill_slack(table: OptionTable, bound: ExactBound, choice: np.ndarray, reach: int = 64,
               max_slack: int = 4096) -> np.ndarray:
    """A better incumbent: the GPUs left free filled by moves among options tied at λ (one type).

    Options whose exact score ``den u - num k`` equals their job's best (idle
    included) are interchangeable for the bound; among them every extra GPU is
    worth λ, so the allocation that fills most of the free GPUs is the best
    one reachable by such moves.  A subset-sum over the moves' GPU changes
    (net change kept within ``[-reach, slack]``, ``slack`` capped at
    ``max_slack``) finds it exactly; a filled incumbent meets an integral bound.
    Returns ``choice`` itself where nothing improves.
    """
    if table.n_types != 1 or not table.width:
        return choice
    choice = np.asarray(choice, dtype=np.int64)
    used = int(table.gpus_by_type(choice).sum())
    slack = min(int(table.capacity) - used, max_slack)
    if slack <= 0:
        return choice
    tied = np.zeros((table.n_jobs, table.width + 1), dtype=bool)  # column 0: idle
    tied[:, 0] = table.idle_allowed & (bound.best == 0)
    tied[:, 1:] = table.valid & (bound.scores == bound.best[:, None])
    ar = np.arange(table.n_jobs)
    mine = tied[ar, choice + 1]  # only jobs on a tied choice move (the others keep their option)
    sub = np.flatnonzero(mine & (tied.sum(axis=1) > 1))
    if sub.size == 0:
        return choice
    new, added = _fill_kernel(np.ascontiguousarray(table.gpus[sub]), np.ascontiguousarray(tied[sub]),
                              np.ascontiguousarray(choice[sub]), int(min(reach, used)), slack)
    if added <= 0:
        return choice
    out = choice.copy()
    out[sub] = new
    return out
