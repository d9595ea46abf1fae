"""The Lagrangian bound in exact integer arithmetic (docs/design.md §2).

For any rational multipliers λ_t = num_t / den >= 0 the bound of
:mod:`~elasticopt.models.lagrangian` times ``den`` is an integer::

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

from elasticopt.models.table import OptionTable

__all__ = ["ExactBound", "exact_bound", "exact_value"]

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
