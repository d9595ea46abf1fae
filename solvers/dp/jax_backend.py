"""``dp``: the paper's dynamic program, jax-vectorised (docs/design.md §3).

The recurrence is the one of :mod:`elasticopt.solvers.dp.numpy_backend`; the
compiled kernels and the chunk plans are in :mod:`~elasticopt.solvers.dp.jax_kernels`.  One
``lax.scan`` runs over the jobs; each step takes, for each of the K options, a
shifted copy of F with ``lax.dynamic_slice`` (not a gather: 10-30x faster on
CPU) and keeps the running max of packed ``value * W + option code``: one max
per option yields the best value and its argmax row (int8) at once
(:mod:`~elasticopt.solvers.dp.value_type`; a compare-and-select argmax made
XLA compute the max chain twice, once per output).  A reverse ``lax.scan``
walks the argmax table back from p = G.

The packed values are int32 where :func:`~elasticopt.solvers.dp.value_type.value_type`
proves from the table that none can overflow (exact bounds, decided per call
before the kernel is chosen; twice the SIMD lanes), int64 otherwise, inside a
``jax.enable_x64`` context; an unpacked int64 kernel with a compare-and-select
argmax remains for widths too large to pack.  Jobs are scanned in chunks of fixed sizes (1024, 512, 64,
8; the plan of least cost counting ~50 us a chunk call against the padded jobs' work, ``chunk_plan``)
with F carried from chunk to chunk, options are padded to a bucket, the GPU
axis to a bucket of the problem's full cluster size, and G is a traced
argument: one compiled kernel pair per (chunk, options bucket, cluster bucket)
serves every problem, so a scheduler re-solving at every event does not
recompile.

With several GPU types the state is the flattened vector of per-type GPU
counts (prod_t (G_t + 1) states, row-major): an option of type t with k GPUs
reads F at the flat offset k * stride_t, masked where the type's coordinate is
below k (``coords[t, p]``); the backward scan subtracts the same offset.
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from collections.abc import Mapping
from typing import Any

import numpy as np

from elasticopt.solvers.dp.reduced_costs import Fixing, Proof, quick_proof_multi, reduced_cost_fixing
from elasticopt.models.table import OptionTable
from elasticopt.solvers.base import Backend, Capabilities, Outcome
from elasticopt.solvers.dp.jax_kernels import (  # noqa: F401  (CHUNKS, DISPATCH_OPS, CLOCK_OPS, timed_plan: tests)
    CHUNKS, CLOCK_OPS, DISPATCH_OPS, GROUP_CHUNK, MULTI_MIN_STATES, MULTI_STEPS, ONE_CHUNK_OPS, TIMED_OUT, _kernels,
    _kernels_multi, _scan, bucket, chunk_plan, timed_plan, width_segments, zeros)
from elasticopt.solvers.dp.kernel_cache import note as note_kernel
from elasticopt.solvers.dp.packed import backtrack, kernel_values
from elasticopt.solvers.dp.value_type import ValueType, value_type
from elasticopt.solvers.dp.windowed import window_dp
from elasticopt.solvers.common import MAX_CELLS, MAX_CELLS_RULE, NEG, dp_outcome, state_shape, too_large
from elasticopt.solvers.dp.type_split import clip_capacities as _clip, rows_table, split_dp, type_groups
from elasticopt.solvers.registry import register
from elasticopt.solvers.solution import Reason, Status

__all__ = ["JaxDP", "bucket"]


def _timed_out(table: OptionTable, model: dict[str, Any]) -> Outcome:
    """LIMIT at the time limit: the incumbent and the Lagrangian bound of fixing, where it ran."""
    fix: Fixing | None = model.get("fix")
    stats: dict[str, Any] = {"operations": 0, "dp_jobs": model["core"].n_jobs if "core" in model else table.n_jobs}
    if fix is None:
        return Outcome(Status.LIMIT, message="dp: time limit reached before the DP ended (no incumbent without "
                       "fixing)", stats=stats, reason=Reason.TIME_LIMIT)
    stats.update(fixed_jobs=int(table.n_jobs - fix.core.n_jobs), options_removed=fix.options_removed,
                 lagrangian_bound=fix.bound, incumbent=fix.incumbent_value)
    return Outcome(Status.LIMIT, choice=fix.incumbent, bound=fix.bound, stats=stats, reason=Reason.TIME_LIMIT,
                   message=(f"dp: time limit reached before the DP ended; the Lagrangian incumbent "
                            f"({fix.incumbent_value}, bound {fix.bound})"))




#: The restricted table of the several-types incumbent is solved without fixing up to this many jobs x states.
INNER_PLAIN_CELLS = 1 << 24


@register
class JaxDP(Backend):
    """The DP as one compiled jax kernel per shape bucket."""

    name = "dp"
    exact = True
    requires = ("jax",)
    description = "dynamic program, jax-compiled (the paper's algorithm)"
    #: several types (one flattened state), exact over the totals, placed afterwards; bounded by max_cells and by
    #: time_limit_s (the clock is read between job chunks and inside the windowed DP; stopped, it returns the
    #: Lagrangian incumbent and bound where fixing ran)
    capabilities = Capabilities(gpu_types=True, placement="checked", time_limit=True, incumbent=True,
                                warm_start=False)

    default_options = {"fixing": True, "window": True, "split": True, "max_cells": MAX_CELLS}
    option_rules = {"max_cells": MAX_CELLS_RULE}

    def _solve_inner(self, table: OptionTable, options: Mapping[str, Any], deadline: float | None) -> np.ndarray | None:
        """The dp's optimal choice per row of ``table`` (no incumbent of the restricted table), None if none.

        Where the one-type DPs over every job are small (<= :data:`INNER_PLAIN_CELLS` jobs x states) they run
        without fixing: cheaper than a second Lagrangian search."""
        small = table.n_jobs * (int(np.max(table.capacities, initial=0)) + 1) <= INNER_PLAIN_CELLS
        options = {**options, "fixing": options["fixing"] and not small}
        prepared = self._prepare(table, options, deadline, inner=True)
        raw = self._run(prepared, deadline)
        if raw is TIMED_OUT:
            return None
        out = self.extract(table, prepared, (prepared, raw))
        return None if out.status is not Status.OPTIMAL or out.choice is None else np.asarray(out.choice)

    def _prepare_split(self, core: OptionTable, table: OptionTable, max_cells: int) -> dict[str, Any] | None:
        """Several types: the coupled jobs' multi-type DP and one one-type DP per type (type_split); None where
        a job that must run has no option (the plain DP decides it).  Jobs with no option idle."""
        x, groups, none = type_groups(core)
        if not core.idle_allowed[none].all():
            return None
        xt = _clip(rows_table(core, x))
        big = too_large(xt, max_cells)
        caps = np.asarray(core.capacities)
        cells = sum(g.size * (int(c) + 1) for g, c in zip(groups, caps))
        if big is None and cells + x.size * int(np.prod(state_shape(xt), dtype=np.float64)) > max_cells:
            big = too_large(core, max_cells)  # (the groups' cells added: refuse as for the whole core)
        if big is not None:
            return {"skip": True, "limit": big}
        # one compiled shape for every group, before and after fixing: the table's largest type and the most
        # options of one type a job has (a little padding, far less than a compile per shape)
        length_for = int(np.max(table.capacities))
        per_type = [int((table.valid & (table.gpu_type == t)).sum(axis=1).max(initial=0)) for t in range(table.n_types)]
        return {"skip": False, "split": (x, groups, xt, (length_for, max(per_type, default=1)))}

    def build(self, table: OptionTable, options: Mapping[str, Any]) -> OptionTable:
        # the Lagrangian bound and reduced-cost fixing are part of solving (they often prove the optimum
        # alone): they run in run(), so that the solve time reports them
        return table

    def _prepare(self, table: OptionTable, options: Mapping[str, Any], deadline: float | None = None,
                 inner: bool = False) -> dict[str, Any]:
        if options["fixing"] and table.n_jobs:  # several types: the bound alone often proves the optimum
            proof = quick_proof_multi(table)
            if proof is not None:
                return {"proof": proof, "skip": True}
        # several types: the restricted table's optimum as the incumbent (solved by this dp, without that step)
        solve = None if inner else functools.partial(self._solve_inner, options=options, deadline=deadline)
        fix = reduced_cost_fixing(table, quick=False, solve=solve) if options["fixing"] and table.n_jobs else None
        core = fix.core if fix is not None else table
        # the greedy incumbent already meets the Lagrangian bound: it is optimal, no DP needed
        if fix is not None and fix.incumbent_value >= fix.bound:
            return {"fix": fix, "core": core, "skip": True}
        if deadline is not None and time.perf_counter() > deadline:  # (fixing's incumbent solve took the time)
            return {"fix": fix, "core": core, "skip": False, "timed_out": True}
        if table.n_types > 1:
            if options["split"]:
                split = self._prepare_split(core, table, int(options["max_cells"]))
                if split is not None:
                    split.update(fix=fix, core=core)
                    return split
            core = _clip(core)
            big = too_large(core, int(options["max_cells"]))
            if big is not None:
                return {"fix": fix, "core": core, "skip": True, "limit": big}
            model = self._arrays_multi(core)
            model.update(fix=fix, core=core, skip=False)
            return model
        if options["window"] and fix is not None and fix.lam_den is not None and core.n_jobs:
            # only the states that may beat the incumbent (dp_window); the plain DP where that does not pay
            return {"fix": fix, "core": core, "skip": False, "length_for": int(table.stats.get("capacity", table.capacity)),
                    "window": (fix.lam_num, fix.lam_den, fix.incumbent_value - fix.fixed_utility,
                               int(options["max_cells"]))}
        # pad the GPU axis for the problem's full cluster, so that capacity clipping and fixing
        # (which vary from one scheduling decision to the next) never change the compiled shape
        model = self._arrays(core, int(table.stats.get("capacity", table.capacity)))
        model.update(fix=fix, core=core, skip=False)
        return model

    @staticmethod
    def _arrays(table: OptionTable, length_for: int, vt: ValueType | None = None, width_for: int = 1,
                one_chunk: bool = False) -> dict[str, Any]:
        """The padded arrays of the one-type kernels; ``vt`` (tests) overrides :func:`value_type`; the width is
        padded for at least ``width_for`` options, and with ``one_chunk`` the jobs to whole chunks of the largest
        size where such a chunk is at most :data:`ONE_CHUNK_OPS` (one compiled shape for the type split's
        groups: fewer compiles than the padding costs)."""
        n, K = table.gpus.shape
        G = table.capacity
        width, length = bucket(max(K, width_for, 1), 1, 4), bucket(max(G, length_for) + 1, 8, 16)
        big = GROUP_CHUNK
        one_chunk = one_chunk and big * width * length <= ONE_CHUNK_OPS
        valid = table.valid & (table.gpus <= G)  # an option above the capacity can never be chosen
        segments = None if one_chunk else width_segments(valid.sum(axis=1), width, length)
        arg_dtype = "int8" if width <= 127 else "int16"
        vt = vt or value_type(table.utility, table.gpus, valid, table.idle_allowed, length - 1, width,
                              ("int64",) if one_chunk else ("int32", "int64"))  # (one_chunk: one value type too)
        if segments:  # (None: one width for all)
            return JaxDP._segmented(table, valid, segments, width, length, arg_dtype, vt)
        plan = [big] * max(1, -(-n // big)) if one_chunk else chunk_plan(n, width * length)
        n_pad = sum(plan)
        gpus = np.full((n_pad, width), length, dtype=np.int64)  # invalid options shift past the pad: unreachable
        util = np.full((n_pad, width), NEG, dtype=np.int64)
        idle = np.ones(n_pad, dtype=bool)  # padding jobs stay idle
        gpus[:n, :K] = np.where(valid, table.gpus, length)
        util[:n, :K] = np.where(valid, table.utility, NEG)
        idle[:n] = table.idle_allowed
        util, gpus = kernel_values(util, vt, (gpus,))  # invalid options: the pad (shift = length) plus -inf
        return {"gpus": gpus, "util": util, "idle": idle, "G": G, "plan": plan, "width": width,
                "length": length, "dtype": arg_dtype, "value_type": vt}

    @staticmethod
    def _segmented(table: OptionTable, valid: np.ndarray, segments: list[tuple[int, np.ndarray]], width: int,
                   length: int, arg_dtype: str, vt: ValueType) -> dict[str, Any]:
        """The one-type arrays with the jobs grouped by option count (:func:`width_segments`): each job's valid
        options packed left, the groups one after another (each padded to its own chunk plan), and per chunk
        its kernel width.  ``rows[r]``: the job of padded row r (-1 for padding); ``cols[j, c]``: the table
        column of job j's packed column c (the walk back maps the choice through both)."""
        n, K = table.gpus.shape
        cols = np.argsort(~valid, axis=1, kind="stable")  # cols[j, c]: valid columns first, in table order
        packed_valid = np.take_along_axis(valid, cols, axis=1)
        plan: list[int] = []
        widths: list[int] = []
        rows_of: list[np.ndarray] = []
        for w, rows in segments:
            p = chunk_plan(rows.size, w * length)
            plan += p
            widths += [w] * len(p)
            rows_of.append(np.concatenate([rows, np.full(sum(p) - rows.size, -1, dtype=np.int64)]))
        rows = np.concatenate(rows_of)
        real = rows >= 0
        n_pad, kw = rows.size, min(K, width)
        gpus = np.full((n_pad, width), length, dtype=np.int64)
        util = np.full((n_pad, width), NEG, dtype=np.int64)
        idle = np.ones(n_pad, dtype=bool)
        src = rows[real]
        pv = packed_valid[src, :kw]
        gpus[real, :kw] = np.where(pv, np.take_along_axis(table.gpus[src], cols[src], axis=1)[:, :kw], length)
        util[real, :kw] = np.where(pv, np.take_along_axis(table.utility[src], cols[src], axis=1)[:, :kw], NEG)
        idle[real] = table.idle_allowed[src]
        util, gpus = kernel_values(util, vt, (gpus,))
        return {"gpus": gpus, "util": util, "idle": idle, "G": table.capacity, "plan": plan, "widths": widths,
                "rows": rows, "cols": cols, "n_jobs": n, "width": width, "length": length, "dtype": arg_dtype,
                "value_type": vt}

    @staticmethod
    def _arrays_multi(table: OptionTable, vt: ValueType | None = None, small_chunks: bool = False) -> dict[str, Any]:
        """The padded arrays of the multi-type kernels; ``vt`` (tests) overrides :func:`value_type`;
        ``small_chunks``: the jobs in chunks of the smallest size only (the type split's coupled jobs: one
        compiled kernel pair per state count and width)."""
        n, K = table.gpus.shape
        dims = [int(c) + 1 for c in table.capacities]
        strides = np.ones(len(dims), dtype=np.int64)
        for t in range(len(dims) - 2, -1, -1):
            strides[t] = strides[t + 1] * dims[t + 1]
        S = int(np.prod(dims))
        # powers of two for the state count and the width (padding < 2x each): the state count changes with
        # every decision's capacities and each new shape is a kernel compile (~0.1-0.3 s), far more than
        # the padded states and options cost
        width, length = bucket(max(K, 1), 4, MULTI_STEPS), bucket(S, MULTI_MIN_STATES, MULTI_STEPS)
        plan = [CHUNKS[-1]] * max(1, -(-n // CHUNKS[-1])) if small_chunks else chunk_plan(n, width * length)
        n_pad = sum(plan)
        coords = np.full((len(dims), length), -1, dtype=np.int64)  # coords[t, p]: GPUs of type t at flat state p
        flat = np.arange(S)
        for t in range(len(dims)):
            coords[t, :S] = (flat // strides[t]) % dims[t]
        valid = table.valid & (table.gpus < np.asarray(dims)[table.gpu_type])
        shift = np.full((n_pad, width), length, dtype=np.int64)  # invalid options read the NEG pad
        kk = np.full((n_pad, width), 1 << 30, dtype=np.int64)  # and never pass the coordinate mask
        ty = np.zeros((n_pad, width), dtype=np.int64)
        util = np.full((n_pad, width), NEG, dtype=np.int64)
        idle = np.ones(n_pad, dtype=bool)
        shift[:n, :K] = np.where(valid, table.gpus * strides[table.gpu_type], length)
        kk[:n, :K] = np.where(valid, table.gpus, 1 << 30)
        ty[:n, :K] = table.gpu_type
        util[:n, :K] = np.where(valid, table.utility, NEG)
        idle[:n] = table.idle_allowed
        arg_dtype = "int8" if width <= 127 else "int16"
        # a flat state counts at most sum_t (dims_t - 1) GPUs
        # packed int64 only: one kernel per shape, as the shapes change with every decision's capacities
        vt = vt or value_type(table.utility, table.gpus, valid, table.idle_allowed, sum(dims) - len(dims), width,
                              ("int64",))
        util, coords, shift, kk, ty = kernel_values(util, vt, (coords, shift, kk, ty))
        return {"multi": True, "coords": coords, "shift": shift, "k": kk, "ty": ty, "util": util, "idle": idle,
                "top": S - 1, "plan": plan, "width": width, "length": length, "dtype": arg_dtype,
                "n_types": len(dims), "value_type": vt}

    def _run_multi(self, model: dict[str, Any], deadline: float | None = None) -> Any:
        fwd = self._forward_multi(model, deadline)
        if fwd is TIMED_OUT:
            return TIMED_OUT
        values, back = fwd
        return int(values[model["top"]]), back(model["top"])

    def _forward_multi(self, model: dict[str, Any], deadline: float | None = None) -> Any:
        """The multi-type forward scan: (F over the flat states, decoded; ``back(p)``: the choice from state p)."""
        import jax

        width, length, dtype, T = model["width"], model["length"], model["dtype"], model["n_types"]
        shift, kk, ty, util, idle = model["shift"], model["k"], model["ty"], model["util"], model["idle"]
        vt = model["value_type"]
        with jax.enable_x64(True):
            import jax.numpy as jnp

            coords = jnp.asarray(model["coords"])  # read by every chunk: on the device once
            F = zeros(length, vt.dtype)
            plan = timed_plan(model["plan"], width * length, deadline)

            def step(c: int, s: int, F: Any) -> Any:
                sl = slice(s, s + c)
                key, args = (c, width, length, T, dtype, vt), (F, coords, shift[sl], kk[sl], ty[sl], util[sl], idle[sl])
                note_kernel("multi", key, args)  # the kernel cache's index of shapes met (kernel_cache.py)
                return _kernels_multi(*key)(*args)

            scanned = _scan(plan, F, step, deadline)
            if scanned is TIMED_OUT:
                return TIMED_OUT
            F, starts, args, tail = scanned
            values = vt.values(np.asarray(F))

        def back(p: int) -> np.ndarray:
            return backtrack(vt, plan, starts, args, tail, shift, p)

        return values, back

    def _forward(self, model: dict[str, Any], deadline: float | None = None) -> Any:
        """The one-type forward scan: (F[0..length), decoded; ``back(p)``: the choice from state p)."""
        import jax

        width, length, dtype = model["width"], model["length"], model["dtype"]
        gpus, util, idle, vt = model["gpus"], model["util"], model["idle"], model["value_type"]
        with jax.enable_x64(True):
            F = zeros(length, vt.dtype)  # F[p]: best utility of the jobs so far on <= p GPUs
            plan = timed_plan(model["plan"], width * length, deadline)
            widths = model.get("widths")  # per chunk of model["plan"] (grouped by option count), or one width
            firsts = np.cumsum([0] + model["plan"][:-1]) if widths else None

            def step(c: int, s: int, F: Any) -> Any:
                w = widths[int(np.searchsorted(firsts, s, side="right")) - 1] if widths else width
                key, args = (c, w, length, dtype, vt), (F, gpus[s : s + c, :w], util[s : s + c, :w], idle[s : s + c])
                note_kernel("one", key, args)
                return _kernels(*key)(*args)

            scanned = _scan(plan, F, step, deadline)
            if scanned is TIMED_OUT:
                return TIMED_OUT
            F, starts, args, tail = scanned
            values = vt.values(np.asarray(F))

        def back(p: int) -> np.ndarray:
            choice = backtrack(vt, plan, starts, args, tail, gpus, p)
            if not widths:
                return choice
            rows, cols = model["rows"], model["cols"]  # back to the table's job order and columns
            out = np.full(model["n_jobs"], -1, dtype=np.int64)
            real = rows >= 0
            ch = choice[real]
            ok = (ch >= 0) & (ch < cols.shape[1])  # (out of range only on an infeasible table's walk)
            out[rows[real]] = np.where(ok, cols[rows[real], np.clip(ch, 0, cols.shape[1] - 1)], -1)
            return out

        return values, back

    def _run_split(self, model: dict[str, Any], deadline: float | None) -> Any:
        """The type split (:func:`~elasticopt.solvers.dp.type_split.split_dp`) on this dp's kernels."""
        x, groups, xt, (length_for, width_for) = model["split"]

        def one(sub: OptionTable) -> Any:
            out = self._forward(self._arrays(sub, max(length_for, sub.capacity), width_for=width_for, one_chunk=True),
                                deadline)
            return None if out is TIMED_OUT else out

        def multi(t: OptionTable) -> Any:
            out = self._forward_multi(self._arrays_multi(t, small_chunks=True), deadline)
            return None if out is TIMED_OUT else out

        out = split_dp(model["core"], x, groups, xt, one, multi)
        if out is None:
            return TIMED_OUT
        best, choice, model["split_cells"] = out
        return best, choice

    def run(self, model: OptionTable, time_limit_s: float | None, options: Mapping[str, Any]) -> Any:
        deadline = None if time_limit_s is None else time.perf_counter() + time_limit_s
        prepared = self._prepare(model, options, deadline)
        if deadline is not None and not prepared["skip"] and time.perf_counter() > deadline:
            return prepared, TIMED_OUT
        return prepared, self._run(prepared, deadline)

    def _run(self, model: dict[str, Any], deadline: float | None = None) -> Any:
        if model["skip"]:
            return model.get("limit")
        if model.get("timed_out"):
            return TIMED_OUT
        if model.get("split"):
            return self._run_split(model, deadline)
        if model.get("window"):
            num, den, beat, max_cells = model["window"]
            core = model["core"]
            # cells past a quarter of the plain DP's would not pay: fall back to it
            limit = min(max_cells, core.n_jobs * (core.width + 1) * (core.capacity + 1) // 4)
            status, best, choice, cells = window_dp(core, num, den, beat, limit, deadline)
            model["window_cells"] = cells
            if status == "time":
                return TIMED_OUT
            if status == "none":
                return None  # no allocation beats the incumbent: it is optimal
            if status == "found":
                return best, choice
            model.update(self._arrays(core, model["length_for"]))  # "skip": the plain DP
            model["window_cells"] = None
        if model.get("multi"):
            return self._run_multi(model, deadline)
        fwd = self._forward(model, deadline)
        if fwd is TIMED_OUT:
            return TIMED_OUT
        values, back = fwd
        return int(values[model["G"]]), back(model["G"])

    def extract(self, table: OptionTable, model: OptionTable, raw: Any) -> Outcome:
        model, raw = raw  # the prepared arrays (fixing included) and the DP's result
        if isinstance(raw, Outcome):
            return raw
        if raw is TIMED_OUT:
            return _timed_out(table, model)
        proof: Proof | None = model.get("proof")
        if proof is not None:  # every job fixed by the bound: optimal, no DP
            return Outcome(Status.OPTIMAL, choice=proof.choice, bound=proof.value, stats={
                "operations": 0, "dp_jobs": 0, "dp_capacity": int(proof.left.sum()), "fixed_jobs": table.n_jobs,
                "options_removed": proof.options_removed, "lagrangian_bound": proof.bound,
                "incumbent": proof.value})
        fix: Fixing | None = model["fix"]
        core: OptionTable = model["core"]
        ops = int(core.valid.sum()) * int(np.prod(state_shape(core), dtype=np.int64)) if raw is not None else 0
        cells = model.get("window_cells")
        if cells is not None:  # the windowed DP: its states times the options that read them
            ops = int(cells) * max(core.width, 1)
        if model.get("split_cells") is not None:  # the split DP: its jobs times their states, times the options
            ops = int(model["split_cells"]) * max(core.width, 1)
        stats: dict[str, Any] = {"operations": ops, "dp_jobs": core.n_jobs, "dp_capacity": core.capacity}
        if model.get("split"):
            stats["coupled_jobs"] = int(model["split"][0].size)
        if "window_cells" in model:
            stats["window_states"] = cells
        if fix is not None:
            stats.update(
                fixed_jobs=int(table.n_jobs - core.n_jobs),
                options_removed=fix.options_removed,
                lagrangian_bound=fix.bound,
                incumbent=fix.incumbent_value,
            )
        if raw is None:  # incumbent proven optimal by the bound
            return Outcome(Status.OPTIMAL, choice=fix.incumbent, bound=fix.incumbent_value, stats=stats)
        best, choice = raw
        out = dp_outcome(core, best, choice[: core.n_jobs].astype(np.int64), ops)
        if fix is None or out.choice is None:
            return replace(out, stats=stats)
        full = fix.fixed_choice.copy()
        cc = out.choice
        full[fix.core_rows] = np.where(cc >= 0, fix.core_cols[np.arange(cc.size), np.maximum(cc, 0)], -1)
        return Outcome(Status.OPTIMAL, choice=full, bound=int(best) + fix.fixed_utility, stats=stats)
