"""Benchmark: warm `dp` (jax) vs `numpy-dp` on the same random problem.

    python benchmarks/bench_dp.py [--jobs 1000] [--gpus 1024] [--options 8] [--repeats 7]

Prints the median solve time of each backend (model built, jax compiled
beforehand), the ratio numpy-dp / dp, the operations n*G*K and the achieved
operations per second. The issue's target: dp >= 10x faster than numpy-dp at
n=1000, G=1024, ~8 options per job.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem, Running, compile_problem
from elasticopt.solvers import get_backend


def random_problem(n: int, G: int, options: int, seed: int) -> Problem:
    """n jobs with ``options`` GPU counts each (powers of two and others), sublinear scaling."""
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(n):
        ks = sorted(rng.choice(np.arange(1, 65), size=options, replace=False).tolist())
        base = rng.uniform(50, 500)
        alpha = rng.uniform(0.5, 0.95)
        pts = {(int(k), int(32 * k)): float(base * k**alpha) for k in ks}
        running = Running(int(ks[0]), 32 * int(ks[0])) if rng.random() < 0.3 else None
        jobs.append(Job(f"j{i}", MeasuredThroughput(pts), 32, 32 * 64, 32, running=running))
    return Problem(Cluster(G), tuple(jobs), allow_preemption=True)


def time_backend(name: str, table, repeats: int, **options) -> tuple[float, int]:
    be = get_backend(name)
    sol = be.solve(table, **options)  # warm-up (jax compile)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        s = be.solve(table, **options)
        times.append(time.perf_counter() - t0)
        assert s.objective == sol.objective
    return statistics.median(times), sol.objective


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--options", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    table = compile_problem(random_problem(a.jobs, a.gpus, a.options, a.seed))
    ops = table.n_options * (table.capacity + 1)
    print(f"n={table.n_jobs} G={table.capacity} options={table.n_options} (K={table.width}) ops={ops:.3g}")
    t_np, obj_np = time_backend("numpy-dp", table, a.repeats)
    t_jx, obj_jx = time_backend("dp", table, a.repeats, fixing=False)
    t_fx, obj_fx = time_backend("dp", table, a.repeats, fixing=True)
    assert obj_np == obj_jx == obj_fx, (obj_np, obj_jx, obj_fx)
    print(f"numpy-dp                 median {t_np * 1e3:8.2f} ms  {ops / t_np:.3g} ops/s")
    print(f"dp (jax, plain DP)       median {t_jx * 1e3:8.2f} ms  {ops / t_jx:.3g} ops/s "
          f"= {ops / t_jx / 1.5e9:.2f} of the 1.5e9 ops/s C kernel")
    print(f"dp (jax, Lagrangian fix) median {t_fx * 1e3:8.2f} ms")
    print(f"ratio numpy-dp / dp = {t_np / t_jx:.1f}x plain, {t_np / t_fx:.1f}x with fixing (target >= 10x); "
          f"objectives equal: {obj_np}")


if __name__ == "__main__":
    main()
