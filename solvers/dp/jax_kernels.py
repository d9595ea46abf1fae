"""The dp's compiled jax kernels and how jobs are chunked for them (docs/design.md §3).

:func:`_kernels` (one GPU type) and :func:`_kernels_multi` (several, on the flattened state) build the jitted
forward scan over one chunk of jobs, cached per shape and value type (the walk back is a compiled host loop,
:func:`~elasticopt.solvers.dp.kernels.walk_rows`); :func:`chunk_plan` picks
the chunk sizes (:data:`CHUNKS`) a job count is scanned in, :func:`timed_plan` splits them under a deadline
and :func:`_scan` runs the forward scan chunk by chunk.  The backend that prepares the arrays and walks the
choice back is :mod:`~elasticopt.solvers.dp.jax_backend`.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

from elasticopt.solvers.dp.packed import job_step
from elasticopt.solvers.dp.value_type import ARGMAX64, ValueType

__all__ = ["bucket", "CHUNKS", "GROUP_CHUNK", "DISPATCH_OPS", "chunk_plan", "ONE_CHUNK_OPS", "CLOCK_OPS", "timed_plan",
           "TIMED_OUT", "MULTI_STEPS", "MULTI_MIN_STATES", "COMPILE_OPS", "width_segments"]


def bucket(x: int, minimum: int = 8, steps: int = 16) -> int:
    """Round ``x`` up to the next bucket: 1/steps of the power of two below it.

    Keeps padding waste under ~1/steps while limiting the number of distinct
    compiled shapes to ``steps`` per octave.
    """
    x = max(int(x), minimum)
    top = 1 << (x - 1).bit_length()
    if top <= minimum * 2:
        return top
    grain = max(1, (top // 2) // steps)
    return -(-x // grain) * grain


#: Jobs are scanned in chunks of these sizes (largest first), so the compiled shapes do
#: not depend on the number of jobs: one kernel pair per (chunk, width, length) serves all n.
CHUNKS: tuple[int, ...] = (1024, 512, 64, 8)

#: Buckets per octave of the multi-type DP's state count and width (see ``_arrays_multi``).
MULTI_STEPS = 1
#: The fewest states a multi-type kernel is compiled for: smaller tables share it (a few microseconds more).
MULTI_MIN_STATES = 512


#: What one more chunk (a forward kernel call and its rows' walk back) costs, in max-plus operations: ~50 us of dispatch
#: at ~5e9 operations/s (measured with ``benchmarks/bench_kernel.py``: a chunk of 8 jobs at n=1000, K=8, G=1024
#: takes 63 us, 8 of them 10 us).
DISPATCH_OPS = 1 << 18


def chunk_plan(n: int, ops_per_job: int = 0) -> list[int]:
    """Chunk sizes covering ``n`` jobs, from :data:`CHUNKS`, the last padded.

    Without ``ops_per_job``: greedy (the fewest padded jobs).  With it, the plan of least estimated cost,
    ``chunks * DISPATCH_OPS + padded jobs * ops_per_job``, among those that take each size either as often
    as it fits in what is left or once more (then nothing is left): padding the last chunk to a larger size
    pays where a padded job costs less than the dispatches it saves (n = 1000 at K = 8, G = 1024: one chunk of
    1024 instead of 512 + 7 x 64 + 5 x 8; 2 x 512 measured 4 % slower, at the minimum, p10 and median of 150
    calls side by side, the extra dispatch).
    """
    def plans(rest: int, sizes: tuple[int, ...]) -> list[list[int]]:
        if rest <= 0:
            return [[]]
        c, more = sizes[0], sizes[1:]
        if not more:
            return [[c] * -(-rest // c)]
        whole = [c] * (rest // c)
        out = [whole + tail for tail in plans(rest - c * len(whole), more)]
        if rest % c:
            out.append(whole + [c])
        return out

    candidates = plans(n, CHUNKS)
    if ops_per_job > 0:
        plan = min(candidates, key=lambda p: (len(p) * DISPATCH_OPS + sum(p) * ops_per_job, sum(p)))
    else:
        plan = min(candidates, key=lambda p: (sum(p), len(p)))
    return plan or [CHUNKS[-1]]


#: What compiling one more kernel costs, in max-plus operations: 0.2-0.4 s at G = 10^6 (measured: a chunk of
#: 1024 jobs, 10 options, 1,015,808 states 0.39 s; 8 x 10 and 64 x 3 0.19-0.20 s) at ~5e9 operations/s.
COMPILE_OPS = 1 << 30


def width_segments(counts: np.ndarray, width: int, length: int) -> list[tuple[int, np.ndarray]] | None:
    """Jobs grouped by how many options they have, each group scanned at its own kernel width, or None where
    one width for all is cheaper.

    ``counts[j]``: job j's valid options (its columns packed left); ``width``: the table's kernel width.  The
    plain DP pads every job to ``width`` options; on a table whose jobs have from 1 to 15 options (ladder,
    n = 10^4, G = 10^6: 9,952 core jobs, 77,209 options, 159,232 padded) half its work reads invalid
    options.  The job order does not change the DP's optimum, so jobs may be scanned in any order, each group
    of jobs with at most w options at width w.  Candidate widths are the buckets of the counts; the grouping
    is the one of least estimated cost (a DP over the sorted candidates): per group its chunk plan's padded
    jobs x w x ``length`` + its chunks x :data:`DISPATCH_OPS` + its distinct chunk sizes x
    :data:`COMPILE_OPS` (a new kernel each).  Returns [(w, job indices)] ascending in w, or None where the
    best grouping costs more than 0.9 of one width for all (every table of a scheduling loop's size: one group
    saves less than a compile) or where one group would hold every job.
    """
    counts = np.asarray(counts, dtype=np.int64)

    def cost(n: int, w: int) -> int:
        if n == 0:
            return 0
        plan = chunk_plan(n, w * length)
        return sum(plan) * w * length + len(plan) * DISPATCH_OPS + len(set(plan)) * COMPILE_OPS

    one = cost(int(counts.size), width)
    # any grouping costs at least two compiles and every job's own options: where even that is not below 0.9 of
    # one width, stop here (every scheduling loop's table: this runs before each of its DPs)
    if counts.size == 0 or 2 * COMPILE_OPS + int(np.maximum(counts, 1).sum()) * length > 0.9 * one:
        return None
    u, inv = np.unique(counts, return_inverse=True)  # bucket each distinct count once
    b = np.minimum(np.array([bucket(max(int(c), 1), 1, 4) for c in u], dtype=np.int64)[inv], width)
    cand = sorted(set(b.tolist()) | {width})
    at = np.array([int(np.sum(b == w)) for w in cand], dtype=np.int64)  # jobs whose bucket is each candidate
    m = len(cand)
    best = [0] + [None] * m  # best[i]: least cost of the jobs in candidates < i, the last group topped at i - 1
    back = [0] * (m + 1)
    for i in range(1, m + 1):
        for k in range(i):  # the group topped at cand[i - 1] takes the candidates k .. i - 1
            c = best[k] + cost(int(at[k:i].sum()), cand[i - 1])
            if best[i] is None or c < best[i]:
                best[i], back[i] = c, k
    if best[m] > 0.9 * one:
        return None
    out: list[tuple[int, np.ndarray]] = []
    i = m
    while i > 0:
        k = back[i]
        rows = np.flatnonzero((b >= cand[k]) & (b <= cand[i - 1]))
        if rows.size:
            out.append((cand[i - 1], rows))
        i = k
    return out[::-1] if len(out) > 1 else None


#: The type split's groups are padded to whole chunks of ``GROUP_CHUNK`` jobs where one costs at most
#: ``ONE_CHUNK_OPS`` max-plus operations (~10 ms): one compiled kernel pair instead of one per chunk size.
GROUP_CHUNK = 512
ONE_CHUNK_OPS = 1 << 24

#: Under a time limit, a chunk does at most about this many max-plus operations (~50 ms) between two looks at
#: the clock, down to the smallest chunk.
CLOCK_OPS = 1 << 26


def timed_plan(plan: list[int], ops_per_job: int, deadline: float | None) -> list[int]:
    """``plan`` with its chunks split (into smaller sizes of :data:`CHUNKS`) so that one takes ~``CLOCK_OPS``.

    The padded job count is unchanged (every chunk size divides the larger ones), so the arrays built for
    ``plan`` serve; without a deadline ``plan`` itself.
    """
    if deadline is None:
        return plan
    cap = next((c for c in CHUNKS if c * ops_per_job <= CLOCK_OPS), CHUNKS[-1])
    out: list[int] = []
    for c in plan:
        out += [cap] * (c // cap) if c > cap else [c]
    return out


#: What ``_run`` returns when ``time_limit_s`` passed before the DP ended.
TIMED_OUT = object()


def _scan(plan: list[int], F: Any, step: Any, deadline: float | None) -> Any:
    """Run the forward scan chunk by chunk: ``step(c, s, F) -> (F, argmax rows, tail)`` for the c jobs from
    row s; returns (F, chunk starts, argmax rows per chunk, last tail), or TIMED_OUT past the deadline."""
    starts: list[int] = []
    args: list[Any] = []
    tail, s = None, 0
    for c in plan:
        F, a, tail = step(c, s, F)
        starts.append(s)
        args.append(a)
        s += c
        if _past(deadline, F):
            return TIMED_OUT
    return F, starts, args, tail


def _past(deadline: float | None, F: Any) -> bool:
    """Whether the clock passed ``deadline`` once the chunk that made ``F`` has run (jax runs asynchronously)."""
    if deadline is None:
        return False
    F.block_until_ready()
    return time.perf_counter() > deadline




@functools.lru_cache(maxsize=64)
def zeros(length: int, dtype: str) -> Any:
    """The scan's first carry, F = 0 on every state, on the device once per shape: 40 us a call to put it there
    (jax arrays are immutable and no kernel donates it; a host array would be a second cache entry, a compile,
    per kernel, as numpy and device arguments are keyed apart).  Called inside ``jax.enable_x64``."""
    import jax
    import numpy as np

    return jax.device_put(np.zeros(length, dtype=dtype))


@functools.lru_cache(maxsize=256)
def _kernels(chunk: int, width: int, length: int, arg_dtype: str, vt: ValueType = ARGMAX64):
    """The jitted forward scan over one chunk of jobs (cached per shape and value type)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    step, finish = job_step(vt, width, length, arg_dtype)

    def forward(F, x):
        g, u, idle = x  # g[o], u[o]: GPUs and utility of option o (packed); idle: may this job get 0 GPUs

        def shifted(Fpad, o, neg):
            # start length - k (k <= length by construction; jax would wrap a negative start)
            return lax.dynamic_slice(Fpad, (length - g[o],), (length,)) + u[o]

        return step(F, shifted, idle)

    def fwd(F, gpus, util, idle):
        return finish(*lax.scan(forward, F, (gpus, util, idle)))

    return jax.jit(fwd)


@functools.lru_cache(maxsize=256)
def _kernels_multi(chunk: int, width: int, length: int, n_types: int, arg_dtype: str, vt: ValueType = ARGMAX64):
    """The jitted forward scan over one chunk of jobs on a flattened multi-type state (cached per shape and value
    type)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    step, finish = job_step(vt, width, length, arg_dtype)

    def forward(carry, x):
        F, coords = carry
        shift, k, ty, u, idle = x  # per option: flat offset k*stride_t, GPUs k, type t, utility; may this job idle

        def shifted(Fpad, o, neg):
            cand = lax.dynamic_slice(Fpad, (length - shift[o],), (length,)) + u[o]
            ok = coords[ty[o]] >= k[o]  # the type's coordinate holds k GPUs: no wrap into another axis
            return jnp.where(ok, cand, neg)

        F, arg = step(F, shifted, idle)
        return (F, coords), arg

    def fwd(F, coords, shift, k, ty, util, idle):
        (F, _), rows = lax.scan(forward, (F, coords), (shift, k, ty, util, idle))
        return finish(F, rows)

    return jax.jit(fwd)
