"""``elasticopt export FILE --format lp|mps -o OUT``: the MILP for outside solvers.

Writes the Pyomo model of the instance's option table (docs/design.md §3, backend
``pyomo``) as a CPLEX-LP or MPS file that glpk, cbc, SCIP, Gurobi, CPLEX or
HiGHS can read.  Variables are ``x(job,gpus,batch)`` (1 iff the job runs that
option); the objective is the integer utility, so any solver's optimum must
equal ``elasticopt solve FILE``'s integer objective.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from elasticopt.errors import SolverUnavailableError
from elasticopt.models import compile_problem, load_instance, reduce_table

__all__ = ["register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``export`` subcommand."""
    p = sub.add_parser(
        "export",
        help="write an instance's MILP as an LP or MPS file",
        description="Write the 0/1 MILP of an instance (one binary per job option, one choice row per job, "
        "a capacity row, integer utilities) for outside solvers. Needs pyomo (pip install 'elasticopt[pyomo]').",
    )
    p.add_argument("file", help="instance file (format elasticopt-instance/1 or /2)")
    p.add_argument("--format", choices=("lp", "mps"), default=None, help="file format (default: from the -o suffix, else lp)")
    p.add_argument("-o", "--output", required=True, help="file to write (written atomically)")
    p.add_argument("--no-reduce", action="store_true", help="export every option (skip the exact reductions)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``elasticopt export``; returns 0 on success."""
    from elasticopt.solvers.pyomo_model import PyomoMILP, write_model

    if "pyomo" in PyomoMILP.missing_modules():
        raise SolverUnavailableError("export", ["pyomo"], "pyomo")
    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower().lstrip(".")
        fmt = suffix if suffix in ("lp", "mps") else "lp"
    problem = load_instance(args.file)
    table = compile_problem(problem)
    if not args.no_reduce:
        table = reduce_table(table)
    dest = write_model(table, args.output, fmt)
    print(
        f"wrote {dest} ({fmt.upper()}): {table.n_options} binaries, {table.n_jobs} jobs, capacity {table.capacity}; "
        f"objective in units of 1/{table.scale * table.tie_scale}"
    )
    return 0
