"""Experiment sweeps: a TOML spec of simulations run in parallel, resumable, with a tidy table and plots.

::

    spec = load_spec("validation/specs/paper_comparison.toml")
    run_sweep(spec, "results/paper", workers=2)        # or address="HOST:PORT" for Ray
    write_report(spec, "results/paper")                # results.csv, summary.*, plots/

See docs/sweeps.md; the command line is ``elasticopt sweep SPEC``.
"""

from elasticopt.sweep.cells import TIMING_COLUMNS, run_cell
from elasticopt.sweep.report import compare, summarise, t_interval, write_report
from elasticopt.sweep.runner import SweepRun, check_cells, pending_cells, run_sweep
from elasticopt.sweep.spec import Cell, SweepSpec, load_spec, parse_spec

__all__ = ["Cell", "SweepSpec", "load_spec", "parse_spec", "run_cell", "TIMING_COLUMNS", "SweepRun", "run_sweep",
           "pending_cells", "check_cells", "write_report", "summarise", "compare", "t_interval"]
