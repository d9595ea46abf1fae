"""Solver benchmarking API (implementation in :mod:`elasticopt.benchmarking`).

Run registered backends and user solver objects over instance files and
generated families, with warm-up, repeats and a time limit; every result is
verified and cross-checked against the best known objective::

    from elasticopt.bench import family_instances, run_benchmark, summarize, write_results

    result = run_benchmark(["dp", "milp", "cpsat"],
                           family_instances(["paper"], jobs=[1000], gpus=[1024]), repeats=5)
    for s in summarize(result):
        print(s.solver, s.median_total_s, s.ratio_to_dp)
    write_results(result, "bench-results")   # rows.csv, results.json, time_vs_n.png, time_vs_G.png
"""

from elasticopt.benchmarking import *  # noqa: F401,F403
from elasticopt.benchmarking import __all__  # noqa: F401
