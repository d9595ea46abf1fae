"""``greedy``: marginal gain, a few GPUs at a time (Optimus-style). Not exact.

1. Every job that may not idle gets its smallest option (fewest GPUs, best
   utility among those); if these do not fit, the result is INFEASIBLE where
   the must-run minimums exceed all GPUs (a proof), else LIMIT without an
   allocation (with several types a better choice of types may fit).
2. Then, while GPUs are free, each job's next move is scored by its marginal
   gain per extra GPU, ``(u_new - u_now) / (k_new - k_now)`` over the options
   with more GPUs that still fit (an idle job starts from u = 0, k = 0; a
   same-k option with a higher utility counts as an infinite gain).  The best
   positive move is applied; the loop stops when no move gains.

On a cluster where the per-type totals do not imply placement (fragmented
nodes, packed options of sizes that do not divide the node:
:func:`~elasticopt.models.table_placement.types_needing_placement`), a step is
taken only if the allocation after it still places on the nodes
(:func:`~elasticopt.models.table_placement.place_choice`); a step that does not
place is set aside and the next best is tried.

The result is FEASIBLE (never OPTIMAL): it can be far from the optimum, e.g.
when a job with the best per-GPU gain blocks two slightly worse ones.  Under
a time limit the moves stop at it: LIMIT (``Reason.TIME_LIMIT``) with the
allocation reached, feasible and placed like every step's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from elasticopt.models.table_placement import place_choice, types_needing_placement
from elasticopt.models.table import OptionTable
from elasticopt.solvers.base import Backend, Capabilities, Outcome
from elasticopt.solvers.registry import register
from elasticopt.solvers.solution import Reason, Status

__all__ = ["Greedy", "greedy_choice"]


def greedy_choice(table: OptionTable) -> np.ndarray | None:
    """The greedy allocation (option index per job, -1 idle); None if the must-run jobs cannot fit.

    GPUs are counted per type: a move to an option of another type frees the
    job's GPUs of the old type and needs all of the new option's GPUs free.
    Where the totals do not imply placement, every step is checked by placing
    the allocation after it (a step that does not place is skipped).
    """
    return _greedy(table, None)[0]


def _greedy(table: OptionTable, deadline: float | None) -> tuple[np.ndarray | None, bool]:
    """:func:`greedy_choice`, its moves stopped at ``deadline`` (``time.perf_counter()`` seconds).

    Returns the allocation and whether the deadline stopped it: every step keeps the
    allocation feasible (and placed), so the one reached then is returned.
    """
    n = table.n_jobs
    valid = table.valid
    k = np.where(valid, table.gpus, 0).astype(np.int64)
    u = table.utility.astype(np.float64)
    ty = table.gpu_type
    free = np.array(table.capacities, dtype=np.int64)
    choice = np.full(n, -1, dtype=np.int64)
    k_now = np.zeros(n, dtype=np.int64)
    t_now = np.full(n, -1, dtype=np.int64)
    u_now = np.zeros(n, dtype=np.float64)
    check = np.zeros(table.n_types, dtype=bool)  # check[t]: placing on type t's nodes must be tried
    check[types_needing_placement(table)] = True

    def places(j: int, o: int) -> bool:
        if not check[ty[j, o]]:
            return True
        trial = choice.copy()
        trial[j] = o
        return place_choice(table, trial)[0] == "placed"

    # 1. jobs that may not idle: smallest k, best utility among those (that fit and place, where one does)
    for j in np.flatnonzero(~table.idle_allowed):
        opts = np.flatnonzero(valid[j])
        if opts.size == 0:
            return None, False
        kmin = k[j, opts].min()
        cand = opts[k[j, opts] == kmin]
        cand = cand[free[ty[j, cand]] >= kmin] if (free[ty[j, cand]] >= kmin).any() else cand
        cand = cand[np.argsort(-table.utility[j, cand], kind="stable")]
        o = next((int(c) for c in cand if places(j, int(c))), int(cand[0]))
        choice[j], k_now[j], u_now[j], t_now[j] = o, kmin, table.utility[j, o], ty[j, o]
        free[ty[j, o]] -= kmin
    if (free < 0).any():
        return None, False
    # 2. best marginal gain per extra GPU, until nothing gains
    banned = np.zeros(valid.shape, dtype=bool)  # banned[j, o]: moving job j to option o did not place
    while True:
        if deadline is not None and time.perf_counter() > deadline:
            return choice, True
        same = ty == t_now[:, None]
        dk = np.where(same, k - k_now[:, None], k)  # dk[j, o]: GPUs of o's type job j needs to move to option o
        du = u - u_now[:, None]  # du[j, o]: utility it gains
        ok = valid & ~banned & (dk >= 0) & (dk <= free[ty]) & (du > 0)
        if not ok.any():
            break
        score = np.where(ok, np.where(dk > 0, du / np.maximum(dk, 1), np.inf), -np.inf)
        flat = int(np.argmax(score))
        j, o = divmod(flat, table.width)
        if not places(j, o):
            banned[j, o] = True
            continue
        if t_now[j] >= 0 and t_now[j] != ty[j, o]:
            free[t_now[j]] += k_now[j]
        free[ty[j, o]] -= int(dk[j, o])
        choice[j], k_now[j], u_now[j], t_now[j] = o, k[j, o], u[j, o], ty[j, o]
        if (free < 0).any():  # cannot happen: moves fit by construction
            raise AssertionError("greedy overfilled the cluster")
    return choice, False


@register
class Greedy(Backend):
    """Marginal-gain heuristic on the option table (fast, not exact)."""

    name = "greedy"
    exact = False
    requires = ("numpy",)
    description = "marginal gain per GPU (Optimus-style heuristic, not exact)"
    capabilities = Capabilities(gpu_types=True, placement="heuristic", time_limit=True, incumbent=True)

    def build(self, table: OptionTable, options: Mapping[str, Any]) -> OptionTable:
        return table

    def run(self, model: OptionTable, time_limit_s: float | None, options: Mapping[str, Any]) -> Any:
        return _greedy(model, None if time_limit_s is None else time.perf_counter() + time_limit_s)

    def extract(self, table: OptionTable, model: OptionTable, raw: Any) -> Outcome:
        raw, stopped = raw
        if raw is None:
            must = ~table.idle_allowed
            if int(table.min_gpus()[must].sum()) > table.capacity:  # proven: the must-run minimums exceed the GPUs
                return Outcome(Status.INFEASIBLE)
            # the smallest options did not fit per type: a heuristic cannot prove that none do
            return Outcome(Status.LIMIT, message="greedy found no allocation in which every job that must run "
                           "fits its GPU type; that does not prove there is none: solve with an exact backend",
                           reason=Reason.NO_START)
        if stopped:
            return Outcome(Status.LIMIT, choice=raw, reason=Reason.TIME_LIMIT,
                           message="greedy stopped at the time limit: the allocation its moves had reached")
        return Outcome(Status.FEASIBLE, choice=raw, message="heuristic: optimality not proven")
