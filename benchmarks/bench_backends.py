"""Every installed backend on the same instance: median warm solve time and ratio to ``dp``.

Usage (defaults: the paper family, n=1000 jobs, G=1024 GPUs)::

    python benchmarks/bench_backends.py
    python benchmarks/bench_backends.py --family mck-strongly --jobs 200 --gpus 256
    python benchmarks/bench_backends.py --instance instances/paper-medium.json --json

The instance is compiled and reduced once; each backend solves that same
table once to warm up (jax compiles, libraries import), then ``--repeats``
times.  Reported: median build, solve and total (build + solve) seconds, the
status and integer objective (exact backends must agree), and the ratio of
each total to ``dp``'s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from rich.console import Console
from rich.table import Table

from elasticopt.models import compile_problem, load_instance, reduce_table
from elasticopt.solvers import available_solvers, get_backend


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", default="paper", help="generator family (elasticopt.generate), default paper")
    p.add_argument("--jobs", type=int, default=1000, help="number of jobs n (default 1000)")
    p.add_argument("--gpus", type=int, default=1024, help="cluster GPUs G (default 1024)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--instance", default=None, help="an instance file instead of a generated problem")
    p.add_argument("--solvers", default=None, help="comma-separated backends (default: every installed one)")
    p.add_argument("--repeats", type=int, default=5, help="timed solves per backend after one warm-up (default 5)")
    p.add_argument("--time-limit-s", type=float, default=120.0, help="time limit per solve (default 120)")
    p.add_argument("--no-reduce", action="store_true", help="skip the exact reductions")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    return p.parse_args(argv)


def bench(table, solvers: list[str], repeats: int, time_limit_s: float) -> list[dict]:
    """Median timings of each backend on ``table``."""
    rows = []
    for name in solvers:
        backend = get_backend(name)
        backend.solve(table, time_limit_s=time_limit_s)  # warm-up
        builds, solves, totals = [], [], []
        sol = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            sol = backend.solve(table, time_limit_s=time_limit_s)
            totals.append(time.perf_counter() - t0)
            builds.append(sol.build_s)
            solves.append(sol.solve_s)
        rows.append({
            "solver": name,
            "exact": backend.exact,
            "status": sol.status.name,
            "objective": sol.objective,
            "build_s": statistics.median(builds),
            "solve_s": statistics.median(solves),
            "total_s": statistics.median(totals),
        })
    ref = next((r["total_s"] for r in rows if r["solver"] == "dp"), None)
    for r in rows:
        r["ratio_to_dp"] = (r["total_s"] / ref) if ref else None
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    if args.instance:
        problem, what = load_instance(args.instance), args.instance
    else:
        from elasticopt.generate import generate_instance

        problem = generate_instance(args.family, args.jobs, args.gpus, args.seed)
        what = f"{args.family} n={args.jobs} G={args.gpus} seed={args.seed}"
    table = compile_problem(problem)
    before = table.n_options
    if not args.no_reduce:
        table = reduce_table(table)
    prep_s = time.perf_counter() - t0
    solvers = args.solvers.split(",") if args.solvers else available_solvers()
    rows = bench(table, solvers, args.repeats, args.time_limit_s)
    exact = {r["objective"] for r in rows if r["exact"] and r["status"] == "OPTIMAL"}
    info = {
        "instance": what,
        "jobs": table.n_jobs,
        "capacity": table.capacity,
        "options_before": before,
        "options": table.n_options,
        "options_per_job": table.n_options / max(1, table.n_jobs),
        "compile_reduce_s": prep_s,
        "repeats": args.repeats,
        "exact_agree": len(exact) <= 1,
        "results": rows,
    }
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        console = Console(width=120)
        console.print(
            f"{what}: {table.n_jobs} jobs, G={table.capacity}, {table.n_options} options after reductions "
            f"({before} before, {info['options_per_job']:.1f} per job); compile+reduce {prep_s:.3f} s; "
            f"median of {args.repeats} warm solves",
            highlight=False,
        )
        t = Table()
        for col in ("solver", "status", "objective", "build s", "solve s", "total s", "x dp"):
            t.add_column(col, justify="left" if col in ("solver", "status") else "right")
        for r in rows:
            t.add_row(
                r["solver"], r["status"], str(r["objective"]), f"{r['build_s']:.4f}", f"{r['solve_s']:.4f}",
                f"{r['total_s']:.4f}", "-" if r["ratio_to_dp"] is None else f"{r['ratio_to_dp']:.1f}",
            )
        console.print(t)
        console.print("exact backends agree" if info["exact_agree"] else "[bold red]EXACT BACKENDS DISAGREE", highlight=False)
    return 0 if info["exact_agree"] else 3


if __name__ == "__main__":
    sys.exit(main())
