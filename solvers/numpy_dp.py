"""``numpy-dp``: the paper's dynamic program in plain numpy, the readable reference.

F_j(p) = best utility of jobs 0..j-1 using at most p GPUs::

    F_0(p) = 0
    F_j(p) = max( F_{j-1}(p)            if job j may be idle,
                  max_o F_{j-1}(p - k_o) + u_o   over j's options with k_o <= p )

Optimum F_n(G); the allocation is recovered by walking the argmax table back.
O(n * G * K) time, O(n * G) int8 memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from elasticopt.models.table import OptionTable
from elasticopt.solvers.base import Backend, Outcome
from elasticopt.solvers.common import INFEASIBLE_BELOW, NEG, dp_outcome
from elasticopt.solvers.registry import register

__all__ = ["NumpyDP", "NEG", "INFEASIBLE_BELOW"]

@register
class NumpyDP(Backend):
    """Reference DP over jobs, vectorised over the GPU count p."""

    name = "numpy-dp"
    exact = True
    requires = ("numpy",)
    description = "dynamic program in numpy (readable reference)"

    def build(self, table: OptionTable, options: Mapping[str, Any]) -> OptionTable:
        return table

    def run(self, model: OptionTable, time_limit_s: float | None, options: Mapping[str, Any]) -> Any:
        t = model
        G = t.capacity
        n = t.n_jobs
        F = np.zeros(G + 1, dtype=np.int64)  # F[p]: best utility so far using at most p GPUs
        adt = np.int8 if t.width <= 127 else np.int16
        arg = np.empty((n, G + 1), dtype=adt)  # arg[j, p]: option of job j at state p (-1 = idle)
        for j in range(n):
            best = F.copy() if t.idle_allowed[j] else np.full(G + 1, NEG, dtype=np.int64)
            a = np.full(G + 1, -1, dtype=adt)
            for o in np.flatnonzero(t.valid[j]):
                k, u = int(t.gpus[j, o]), int(t.utility[j, o])
                if k > G:
                    continue
                cand = np.full(G + 1, NEG, dtype=np.int64)
                cand[k:] = F[: G + 1 - k] + u
                better = cand > best
                best = np.where(better, cand, best)
                a[better] = o
            F = best
            arg[j] = a
        return F, arg

    def extract(self, table: OptionTable, model: OptionTable, raw: Any) -> Outcome:
        F, arg = raw
        G = table.capacity
        ops = int(table.valid.sum()) * (G + 1)
        if int(F[G]) < INFEASIBLE_BELOW:
            return dp_outcome(table, int(F[G]), None, ops)
        choice = np.full(table.n_jobs, -1, dtype=np.int64)
        p = G
        for j in range(table.n_jobs - 1, -1, -1):
            o = int(arg[j, p])
            choice[j] = o
            if o >= 0:
                p -= int(table.gpus[j, o])
        return dp_outcome(table, int(F[G]), choice, ops)
