"""The dp's jax kernels, one job's step and the backtrack, in the value type of :mod:`.value_type`.

:func:`job_step` is the body shared by the one-type and the multi-type forward
scans of :mod:`~elasticopt.solvers.dp.jax_backend` (docs/design.md §3):
packed ``value * W + code`` maxima (one add and one max per option) or, for
widths too large to pack, the unpacked int64 compare-and-select argmax.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from elasticopt.solvers.common import NEG
from elasticopt.solvers.dp.value_type import ValueType

__all__ = ["job_step", "row_option", "kernel_values", "backtrack"]


def job_step(vt: ValueType, width: int, length: int, arg_dtype: str):
    """One job of the forward scan and the scan's end: ``step(carry, shifted, idle) -> (carry', row)``,
    ``finish(carry, rows) -> (carry, rows, tail)``.

    ``shifted(Fpad, o, neg)`` is option o's candidate row read from ``Fpad`` (``Fpad[length + p] = F[p]``, in
    the kernel's units) or ``neg`` where the option cannot be taken.  The unpacked kernel carries F and emits
    each job's argmax row.  The packed kernels carry the packed maxima themselves (value and code: written
    once; deriving F and the argmax row from one max in the same step made XLA compute the max chain twice,
    once per output) and emit the previous job's argmax row, the carry truncated to the row type (row t of a
    chunk is job t - 1's; its low ``S`` bits are the option code, which :func:`row_option` decodes at the one
    state the backtrack reads: one convert per state instead of four operations, 7% of a 512-job chunk at
    K = 8, G = 1024); ``finish`` decodes the last job's, ``tail``, from the final carry (:func:`backtrack`).
    """
    import jax.numpy as jnp

    adt = jnp.dtype(arg_dtype)
    vdt = jnp.dtype(vt.dtype)
    if not vt.shift_bits:  # the unpacked int64 kernel: running max and an argmax row
        neg = jnp.int64(NEG)

        def step(F, shifted, idle):
            Fpad = jnp.concatenate([jnp.full(length, neg, dtype=vdt), F])
            best = jnp.where(idle, F, neg)
            arg = jnp.full(length, -1, dtype=adt)  # arg[p]: chosen option at state p (-1 = idle)
            for o in range(width):  # unrolled: K shifted slices
                cand = shifted(Fpad, o, neg)
                better = cand > best
                best = jnp.where(better, cand, best)
                arg = jnp.where(better, jnp.asarray(o, dtype=adt), arg)
            return best, arg

        return step, lambda F, args: (F, args, None)
    W = 1 << vt.shift_bits
    negp = vdt.type(vt.neg * W)  # the packed -inf (code 0)
    below = vdt.type(vt.infeasible_below * W)

    option = row_option(vt)

    def decode(P):  # the whole row decoded (the last job's, once per scan)
        return option(P).astype(adt)

    def step(P, shifted, idle):
        FW = P & ~(W - 1)  # F * W: the previous job's code cleared
        Fpad = jnp.concatenate([jnp.full(length, negp, dtype=vdt), FW])
        best = jnp.where(idle, FW + (W - 1), negp + (W - 1))
        for o in range(width):  # unrolled: K shifted slices, the packed utility u * W + (W - 2 - o) added
            best = jnp.maximum(best, shifted(Fpad, o, negp))
        if vt.reset:  # infeasible values back to -inf: they cannot grow into the feasible range
            best = jnp.where(best < below, negp, best)
        return best, P.astype(adt)  # the code in the low bits, truncated; decoded where the backtrack reads

    def finish(P, rows):
        return P, rows, decode(P)

    return step, finish


def row_option(vt: ValueType):
    """``option(x)``: the option (-1 idle) coded in a packed value or argmax row entry ``x``; the identity for
    the unpacked kernel, whose rows hold options.  The packed kernels' rows hold the packed value truncated to
    int8 / int16 (two's complement), whose low ``S`` bits keep the code (``W - 1`` idle, ``W - 2 - o`` option
    o; ``W <= 128`` with int8 rows, ``<= 256`` with int16)."""
    import jax.numpy as jnp

    if not vt.shift_bits:
        return lambda x: x.astype(jnp.int32)
    W = 1 << vt.shift_bits

    def option(x):
        code = x.astype(jnp.int32) & (W - 1)
        return jnp.where(code == W - 1, -1, (W - 2) - code)

    return option


def kernel_values(util: np.ndarray, vt: ValueType, arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The utilities in the kernel's units (packed with each option's code; invalid ones -inf) and ``arrays``
    in its integer type."""
    if vt.shift_bits:
        W = 1 << vt.shift_bits
        code = (W - 2) - np.arange(util.shape[1], dtype=np.int64)
        util = np.where(util == NEG, vt.neg * W, util * W + code)
    return (util.astype(vt.numpy),) + tuple(a.astype(vt.numpy) for a in arrays)


def backtrack(vt: ValueType, plan: list[int], starts: list[int], rows: list[Any], tail: Any, steps: np.ndarray,
               top: int) -> np.ndarray:
    """The option per job, walked back from state ``top`` through each chunk's argmax rows.

    ``steps[j, o]``: how far option o of job j moves the state (its GPUs, or its flat offset).  The packed
    kernels' rows are shifted by one job (row t of a chunk is job t - 1's; the last job's is ``tail``):
    the last job is taken first, then each chunk's rows are walked with job t - 1's steps at row t.  The walk
    is a compiled loop on the host (:func:`~.kernels.walk_rows`, on the rows' zero-copy views): one state
    per job, where a jitted reverse scan paid XLA's per-iteration cost (0.17 ms of a 1.5 ms solve at
    n = 1000, G = 1024).
    """
    from elasticopt.solvers.dp.kernels import walk_rows

    n = starts[-1] + plan[-1]
    choice = np.empty(n, dtype=np.int64)
    p = int(top)
    W = 1 << vt.shift_bits if vt.shift_bits else 0
    steps = np.ascontiguousarray(steps, dtype=np.int64)
    if W:
        o = int(np.asarray(tail)[p])
        choice[n - 1] = o
        p -= int(steps[n - 1, o]) if 0 <= o < steps.shape[1] else 0  # (out of range only where infeasible)
        steps = np.concatenate([np.zeros((1, steps.shape[1]), dtype=steps.dtype), steps[:-1]])  # job -1: none
    out = np.empty(max(plan), dtype=np.int64)
    for c, s0, a in zip(reversed(plan), reversed(starts), reversed(rows)):
        a = np.asarray(a)
        p = walk_rows(a, steps[s0 : s0 + c], p, W, out[: a.shape[0]])
        ch = out[:c]
        if not W:
            choice[s0 : s0 + c] = ch
        elif s0:
            choice[s0 - 1 : s0 + c - 1] = ch
        else:
            choice[: c - 1] = ch[1:]  # row 0 of the first chunk: no job
    return choice
