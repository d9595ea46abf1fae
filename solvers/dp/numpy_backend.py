"""``numpy-dp``: the paper's dynamic program in plain numpy, the readable reference.

F_j(p) = best utility of jobs 0..j-1 using at most p GPUs::

    F_0(p) = 0
    F_j(p) = max( F_{j-1}(p)            if job j may be idle,
                  max_o F_{j-1}(p - k_o) + u_o   over j's options with k_o <= p )

Optimum F_n(G); the allocation is recovered by walking the argmax table back.
O(n * G * K) time, O(n * G) int8 memory.

With several GPU types the state is the vector p = (p_1, ..., p_T) of GPUs
per type (prod_t (G_t + 1) states, flattened); an option of type t with k
GPUs shifts along axis t only.  The DP sees per-type totals: where packed
options make placement matter (:func:`~elasticopt.models.table_placement.types_needing_placement`)
its optimum is placed afterwards and proven only if that succeeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from elasticopt.models.table import OptionTable
from elasticopt.solvers.base import Backend, Capabilities, Outcome
from elasticopt.solvers.common import INFEASIBLE_BELOW, MAX_CELLS, MAX_CELLS_RULE, NEG, dp_outcome, state_shape, too_large
from elasticopt.solvers.registry import register

__all__ = ["NumpyDP"]


@register
class NumpyDP(Backend):
    """Reference DP over jobs, vectorised over the GPU count p."""

    name = "numpy-dp"
    exact = True
    requires = ("numpy",)
    description = "dynamic program in numpy (readable reference)"
    #: several types (one flattened state), exact over the totals, placed afterwards; bounded by max_cells
    capabilities = Capabilities(gpu_types=True, placement="checked", time_limit=False, incumbent=False,
                                warm_start=False)

    default_options = {"max_cells": MAX_CELLS}
    option_rules = {"max_cells": MAX_CELLS_RULE}

    def build(self, table: OptionTable, options: Mapping[str, Any]) -> OptionTable:
        return table

    def run(self, model: OptionTable, time_limit_s: float | None, options: Mapping[str, Any]) -> Any:
        t = model
        big = too_large(t, int(options["max_cells"]))
        if big is not None:
            return big
        dims = state_shape(t)
        n = t.n_jobs
        F = np.zeros(dims, dtype=np.int64)  # F[p_1, ..., p_T]: best utility so far using at most p_t GPUs of type t
        adt = np.int8 if t.width <= 127 else np.int16
        arg = np.empty((n,) + dims, dtype=adt)  # arg[j, p]: option of job j at state p (-1 = idle)
        for j in range(n):
            best = F.copy() if t.idle_allowed[j] else np.full(dims, NEG, dtype=np.int64)
            a = np.full(dims, -1, dtype=adt)
            for o in np.flatnonzero(t.valid[j]):
                k, u, ty = int(t.gpus[j, o]), int(t.utility[j, o]), int(t.gpu_type[j, o])
                if k >= dims[ty]:
                    continue
                cand = np.full(dims, NEG, dtype=np.int64)
                dst = [slice(None)] * len(dims)
                src = [slice(None)] * len(dims)
                dst[ty], src[ty] = slice(k, None), slice(0, dims[ty] - k)
                cand[tuple(dst)] = F[tuple(src)] + u
                better = cand > best
                best = np.where(better, cand, best)
                a[better] = o
            F = best
            arg[j] = a
        return F, arg

    def extract(self, table: OptionTable, model: OptionTable, raw: Any) -> Outcome:
        if isinstance(raw, Outcome):
            return raw
        F, arg = raw
        top = tuple(int(c) for c in table.capacities)
        ops = int(table.valid.sum()) * int(np.prod(state_shape(table), dtype=np.int64))
        if int(F[top]) < INFEASIBLE_BELOW:
            return dp_outcome(table, int(F[top]), None, ops)
        choice = np.full(table.n_jobs, -1, dtype=np.int64)
        p = list(top)
        for j in range(table.n_jobs - 1, -1, -1):
            o = int(arg[(j,) + tuple(p)])
            choice[j] = o
            if o >= 0:
                p[int(table.gpu_type[j, o])] -= int(table.gpus[j, o])
        return dp_outcome(table, int(F[top]), choice, ops)
