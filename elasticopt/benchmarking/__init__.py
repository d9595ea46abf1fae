"""Solver benchmarking: run solvers over instances, cross-check, report.

The same runs as ``elasticopt bench``, from Python::

    from elasticopt.benchmarking import family_instances, run_benchmark, summarize, write_results

    specs = family_instances(["paper"], jobs=[200, 1000], gpus=[256, 1024], seeds=[0, 1])
    result = run_benchmark(["dp", "milp", my_solver], specs, repeats=5, time_limit_s=60)
    assert result.ok, result.disagreements
    write_results(result, "bench-results")

Per solver, the measures solver benchmarks are read by (shifted geometric
means, solved counts, performance profiles; :mod:`~elasticopt.benchmarking.measures`)::

    for s in solver_summaries(result, shift_s=0.01):
        print(s.solver, s.solved, s.instances, s.sgm_total_s)
    profile = performance_profile(result)          # profile.csv(), plotting.plot_performance_profile
    specs = get_suite("reference").instances(seeds=[0])   # the published suite, or a subset

``my_solver`` is any object with a ``name`` and ``solve(table, *,
time_limit_s=None) -> Solution`` (e.g. an unregistered
:class:`~elasticopt.solvers.Backend` subclass instance).
"""

from elasticopt.benchmarking.crosscheck import BenchRun, Verdict, cross_check
from elasticopt.benchmarking.difficulty import LPRelaxation, lp_gap, lp_relaxation
from elasticopt.benchmarking.instances import InstanceSpec, family_instances, file_instances, size_pairs
from elasticopt.benchmarking.markdown import markdown_report
from elasticopt.benchmarking.measures import (
    DEFAULT_SHIFT_S,
    InstanceTime,
    PerformanceProfile,
    SolverSummary,
    instance_times,
    performance_profile,
    shifted_geometric_mean,
    solver_summaries,
)
from elasticopt.benchmarking.report import SummaryRow, plot_times, rows_csv, summarize, write_results
from elasticopt.benchmarking.rows import ROW_FIELDS, BenchResult, BenchRow, InstanceRecord
from elasticopt.benchmarking.runner import (
    REFERENCE_OPS_PER_S,
    BenchEvent,
    count_solves,
    environment,
    run_benchmark,
)
from elasticopt.benchmarking.solvers import SolverSpec, parse_solver_arg, resolve_solvers
from elasticopt.benchmarking.suites import SUITES, Suite, get_suite

__all__ = [
    "DEFAULT_SHIFT_S",
    "InstanceTime",
    "LPRelaxation",
    "PerformanceProfile",
    "SUITES",
    "SolverSummary",
    "Suite",
    "get_suite",
    "instance_times",
    "lp_gap",
    "lp_relaxation",
    "markdown_report",
    "performance_profile",
    "shifted_geometric_mean",
    "solver_summaries",
    "REFERENCE_OPS_PER_S",
    "ROW_FIELDS",
    "BenchEvent",
    "BenchResult",
    "BenchRow",
    "InstanceRecord",
    "InstanceSpec",
    "BenchRun",
    "SolverSpec",
    "SummaryRow",
    "Verdict",
    "count_solves",
    "cross_check",
    "environment",
    "family_instances",
    "file_instances",
    "parse_solver_arg",
    "plot_times",
    "resolve_solvers",
    "rows_csv",
    "run_benchmark",
    "size_pairs",
    "summarize",
    "write_results",
]
