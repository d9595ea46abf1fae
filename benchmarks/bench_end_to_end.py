"""Benchmark: the whole path from a Problem (or a file) to an allocation, side by side.

    python benchmarks/bench_end_to_end.py [--repeats 7] [--big-jobs 100000] [--skip-big]

Prints, measured in one run (warm: jax and the compiled loops compiled, every
library imported beforehand; medians over ``--repeats`` rounds in which every
measured call runs for at least 50 ms in turn, so that all of them see the same
machine):

1. ``paper`` family, n=1000, G=1024 (one pool): ``solve(problem, "dp")`` and
   ``solve(problem, "milp")`` end to end, the dp end-to-end / dp solve-step
   ratio (target <= 3x) and milp / dp end to end (target >= 30x), milp with
   its default options and, for comparison, with HiGHS's presolve off;
2. ``hetero`` family, Sia's 64 GPUs in 3 types, n=100: dp and milp end to end
   (target: milp / dp >= 30x; the step ratio is shown without a target: the
   Lagrangian bound proves this optimum, the step is 0.07 ms);
3. ``elasticopt solve`` on a 100,000-job file (``mck-uncorrelated``, 3 options
   each, G=1024) in a fresh process: wall seconds (target <= 10 s) and its
   load / compile / reduce / solve split, with ``--json`` and with the
   allocation printed as a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from elasticopt import solve
from elasticopt.generate import generate_instance
from elasticopt.models import compile_problem, reduce_table, save_instance
from elasticopt.models.reductions import compile_reduced
from elasticopt.solvers import get_backend


def _interleaved(fns: dict, rounds: int, block_s: float = 0.05) -> dict[str, float]:
    """Median seconds per call of each function, measured in interleaved blocks.

    Every round runs each function for at least ``block_s`` seconds (one call
    at least), one after the other, so that all of them see the same machine
    (clock speed, caches, other load) over the run: ratios of these medians
    are side by side.
    """
    for fn in fns.values():
        fn()  # warm-up: jax kernels, compiled loops, imports
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            end = time.perf_counter() + block_s
            while True:
                t0 = time.perf_counter()
                fn()
                t1 = time.perf_counter()
                times[k].append(t1 - t0)
                if t1 >= end:
                    break
    return {k: statistics.median(v) for k, v in times.items()}


def side_by_side(label: str, problem, repeats: int, step_target: bool = True) -> None:
    """dp and milp end to end, plus the dp solve step alone, on the same problem.

    ``step_target``: print the end-to-end / solve-step ratio against its target (<= 3x, the paper family's).
    """
    table = reduce_table(compile_problem(problem))
    dp = get_backend("dp")
    results = {s: solve(problem, s) for s in ("dp", "milp")}
    med = _interleaved({
        "dp": lambda: solve(problem, "dp"),
        "milp": lambda: solve(problem, "milp"),
        # HiGHS with presolve off: faster on some totals-only tables (docs/design.md §3), shown for a fair comparison
        "milp:presolve=off": lambda: solve(problem, "milp", presolve="off"),
        "one_pass": lambda: compile_reduced(problem),  # what solve() runs before the backend
        "compile": lambda: compile_problem(problem),
        "compile+reduce": lambda: reduce_table(compile_problem(problem)),
        "step": lambda: dp.solve(table),
    }, repeats)
    objs = {s: (r.status.name, r.objective) for s, r in results.items()}
    e2e, step = med, med["step"]
    print(f"{label}: {len(problem.jobs)} jobs, {problem.cluster.gpus} GPUs in {len(problem.cluster.types)} type(s)")
    print(f"  results           {objs}")
    print(f"  dp   end to end   {1e3 * e2e['dp']:8.3f} ms  (compile + reduce in one pass {1e3 * med['one_pass']:.3f} ms, "
          f"dp solve step {1e3 * step:.3f} ms)")
    print(f"  (as two steps: compile_problem {1e3 * med['compile']:.3f} ms, then reduce_table "
          f"{1e3 * (med['compile+reduce'] - med['compile']):.3f} ms)")
    print(f"  milp end to end   {1e3 * e2e['milp']:8.3f} ms  (default options; with presolve=off "
          f"{1e3 * e2e['milp:presolve=off']:.3f} ms: {e2e['milp:presolve=off'] / e2e['dp']:.1f}x the dp)")
    print(f"  milp / dp end to end = {e2e['milp'] / e2e['dp']:.1f}x (target >= 30x); "
          f"dp end to end / dp solve step = {e2e['dp'] / step:.2f}x" + (" (target <= 3x)" if step_target else ""))


def big_file(jobs: int) -> None:
    """``elasticopt solve`` on a big file in a fresh process, with its own split of the time."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"mck-{jobs}.json"
        t0 = time.perf_counter()
        save_instance(generate_instance("mck-uncorrelated", jobs, 1024, 1, options=3), path)
        print(f"{jobs}-job file ({path.stat().st_size / 1e6:.1f} MB) generated in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "elasticopt", "solve", str(path), "--json", "--timings"],
                             capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if out.returncode not in (0, 1):
            print(out.stderr)
            raise SystemExit(out.returncode)
        doc = json.loads(out.stdout)
        t = doc.get("timings", {})
        print(f"  elasticopt solve --json: {wall:.2f} s wall (target <= 10 s), status {doc['status']}; "
              + ", ".join(f"{k} {v:.2f} s" for k, v in t.items()))
        t0 = time.perf_counter()  # the same with the allocation printed as a table (plain text past 2,000 jobs)
        out = subprocess.run([sys.executable, "-m", "elasticopt", "solve", str(path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        if out.returncode not in (0, 1):
            print(out.stderr)
            raise SystemExit(out.returncode)
        print(f"  elasticopt solve (table output): {time.perf_counter() - t0:.2f} s wall (target <= 10 s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--big-jobs", type=int, default=100_000)
    ap.add_argument("--skip-big", action="store_true")
    a = ap.parse_args(argv)
    side_by_side("paper n=1000 G=1024", generate_instance("paper", 1000, 1024, 0), a.repeats)
    side_by_side("hetero (Sia) n=100 G=64", generate_instance("hetero", 100, 64, 0), a.repeats, step_target=False)
    if not a.skip_big:
        big_file(a.big_jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
