"""Benchmark: the dp's max-plus kernel against a one-core C reference, side by side.

    python benchmarks/bench_kernel.py [--jobs 1000] [--gpus 1024] [--options 8] [--repeats 9] [--cc cc]
                                      [--utility-shift 0]

The C reference is the plain DP written as a C programmer would (forward pass
with an int8 argmax row per job, then the backtrack), compiled here with
``cc -O3 -march=native`` into a temporary directory and called through ctypes
on the same arrays as the dp backend's kernel (the jax scan of
``solvers/dp/jax_kernels.py``, fixing off so the whole table is scanned).  Both return
the optimum; the script checks they agree.  Prints the median seconds of each
(calls interleaved, round after round; p10 and minimum beside them), int64 max-plus operations per second
(n x K x (G + 1)) and the ratio C / jax (>= 1: the jax kernel is at least as
fast as the C reference).  The dp picks its kernel's value type per table
(``solvers/dp/value_type.py``: packed int32 or int64); the unpacked int64
kernel (compare-and-select argmax, the fall-back and the kernel before the
packing) runs side by side on the same table, interleaved too, and must agree;
so does the same kernel scanning the jobs in the greedy chunk plan (the plan
before chunks were priced by their dispatch cost, ``chunk_plan``).
Without a C compiler it says so and exits 2.
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

C_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#define NEG (-(1LL << 62))
/* gpus, util: [n][K] (invalid options: gpus > G); idle[n]; choice[n] out. Returns F[G]. */
int64_t dp(int n, int K, int G, const int64_t *gpus, const int64_t *util, const uint8_t *idle,
           int8_t *args, int64_t *choice) {
    int64_t *F = malloc(sizeof(int64_t) * (G + 1)), *B = malloc(sizeof(int64_t) * (G + 1));
    for (int p = 0; p <= G; p++) F[p] = 0;
    for (int j = 0; j < n; j++) {
        int8_t *a = args + (int64_t)j * (G + 1);
        for (int p = 0; p <= G; p++) { B[p] = idle[j] ? F[p] : NEG; a[p] = -1; }
        for (int o = 0; o < K; o++) {
            int64_t k = gpus[j * K + o], u = util[j * K + o];
            if (k > G) continue;
            for (int p = (int)k; p <= G; p++) {
                int64_t c = F[p - k] + u;
                if (c > B[p]) { B[p] = c; a[p] = (int8_t)o; }
            }
        }
        int64_t *t = F; F = B; B = t;
    }
    int64_t best = F[G];
    int64_t p = G;
    for (int j = n - 1; j >= 0; j--) {
        int8_t o = args[(int64_t)j * (G + 1) + p];
        choice[j] = o;
        if (o >= 0) p -= gpus[j * K + o];
    }
    free(F); free(B);
    return best;
}
"""


def build_reference(cc: str, workdir: Path) -> ctypes.CDLL:
    src = workdir / "dp_ref.c"
    lib = workdir / "dp_ref.so"
    src.write_text(C_SOURCE)
    subprocess.run([cc, "-O3", "-march=native", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    dll = ctypes.CDLL(str(lib))
    dll.dp.restype = ctypes.c_int64
    dll.dp.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 5
    return dll


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--options", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--utility-shift", type=int, default=0,
                    help="divide the utilities by 2**N (floor): smaller values, so that the packed int32 kernel "
                         "applies (the speedup objective at G=1024 needs N >= 6)")
    ap.add_argument("--cc", default="cc", help="C compiler (default: cc)")
    args = ap.parse_args(argv)
    cc = shutil.which(args.cc)
    if cc is None:
        print(f"no C compiler {args.cc!r} on PATH: the C reference cannot be built", file=sys.stderr)
        return 2

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_dp import random_problem

    from elasticopt.models import compile_problem
    from elasticopt.solvers.dp.jax_backend import JaxDP, chunk_plan
    from elasticopt.solvers.dp.value_type import ARGMAX64

    table = compile_problem(random_problem(args.jobs, args.gpus, args.options, args.seed))
    if args.utility_shift:
        table = replace(table, utility=np.where(table.valid, table.utility >> args.utility_shift, table.utility))
    be = JaxDP()
    opts = dict(be.default_options, fixing=False, window=False)
    model = be._prepare(table, opts)  # the arrays the jax kernel scans (padded shapes)
    unpacked = dict(model, **be._arrays(table, int(table.stats.get("capacity", table.capacity)), ARGMAX64))
    greedy = dict(model, plan=chunk_plan(table.n_jobs))  # the same arrays, scanned in the greedy chunk plan
    n, K, G = table.n_jobs, table.width, table.capacity
    gpus = np.ascontiguousarray(np.where(table.valid & (table.gpus <= G), table.gpus, G + 1), dtype=np.int64)
    util = np.ascontiguousarray(np.where(table.valid, table.utility, 0), dtype=np.int64)
    idle = np.ascontiguousarray(table.idle_allowed, dtype=np.uint8)
    arg_buf = np.empty(n * (G + 1), dtype=np.int8)
    choice = np.empty(n, dtype=np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        dll = build_reference(cc, Path(tmp))

        def c_call() -> int:
            return int(dll.dp(n, K, G, gpus.ctypes.data, util.ctypes.data, idle.ctypes.data,
                              arg_buf.ctypes.data, choice.ctypes.data))

        def jax_call() -> int:
            best, _ = be._run(model)
            return int(best)

        def unpacked_call() -> int:
            best, _ = be._run(unpacked)
            return int(best)

        def greedy_call() -> int:
            best, _ = be._run(greedy)
            return int(best)

        ref, got, old, gre = c_call(), jax_call(), unpacked_call(), greedy_call()  # warm-up, agreement check
        if not ref == got == old == gre:
            print(f"MISMATCH: C reference {ref}, jax kernel {got}, unpacked int64 kernel {old}, greedy plan {gre}",
                  file=sys.stderr)
            return 1
        vt = model["value_type"]
        name = f"dp jax kernel (packed {vt.dtype}{', reset' if vt.reset else ''})"
        calls = {"C reference (cc -O3, 1 core)": c_call, name: jax_call, "dp jax, unpacked int64 (before)": unpacked_call,
                 f"dp jax, greedy chunks {len(greedy['plan'])} (before)": greedy_call}
        times: dict[str, list[float]] = {key: [] for key in calls}
        for _ in range(args.repeats):
            for key, fn in calls.items():
                t = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - t)
    ops = n * K * (G + 1)
    print(f"n={n} K={K} G={G}: {ops:.3g} max-plus operations per solve, optimum {ref} (all agree)")
    med = {name: statistics.median(ts) for name, ts in times.items()}
    p10 = {name: sorted(ts)[len(ts) // 10] for name, ts in times.items()}
    for label, m in med.items():
        print(f"  {label:36s} median {m * 1e3:8.2f} ms   {ops / m:.3g} ops/s   (p10 {p10[label] * 1e3:.2f} ms, "
              f"min {min(times[label]) * 1e3:.2f} ms)")
    c, j = med["C reference (cc -O3, 1 core)"], med[name]
    print(f"  unpacked int64 / jax = {med['dp jax, unpacked int64 (before)'] / j:.2f}  (the packing's speed-up)")
    g = med[f"dp jax, greedy chunks {len(greedy['plan'])} (before)"]
    print(f"  greedy plan / jax = {g / j:.2f}  (the priced chunk plan's speed-up: {len(model['plan'])} chunks "
          f"instead of {len(greedy['plan'])}); C / greedy = {c / g:.2f}")
    print(f"  C / jax = {c / j:.2f}  (>= 1: the jax kernel at or above the C reference; at p10 "
          f"{p10['C reference (cc -O3, 1 core)'] / p10[name]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
