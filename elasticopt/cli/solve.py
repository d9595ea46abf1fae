"""``elasticopt solve FILE``: solve an instance file and show the allocation.

Exit codes: 0 solved (OPTIMAL/FEASIBLE, or LIMIT with an allocation),
1 infeasible or no solution, 2 bad input, 3 proven optima disagree
(``--solver all``), 4 internal error (:data:`elasticopt.cli.EXIT_CODES`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from elasticopt._io import atomic_write_text
from elasticopt.errors import InstanceError, ValidationError
from elasticopt.models import OptionTable, Problem, compile_problem, load_instance, reduce_table
from elasticopt.models.instance import needs_format_2
from elasticopt.solvers import Solution, Status, exact_solvers, get_backend, verify
from elasticopt.solvers.api import solve
from elasticopt.solvers.base import CLI_TIME_LIMIT, checked_time_limit
from elasticopt.solvers.options import parse_solver_arg

__all__ = ["register", "run", "solve_all", "agreement", "load_problem_file"]

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``solve`` subcommand."""
    p = sub.add_parser(
        "solve",
        help="solve an instance file",
        description="Solve an instance file (elasticopt-instance/1 or /2): pick (GPU type, GPUs, batch, nodes) or "
        "idle for every job. Exit codes: 0 solved, 1 infeasible / no solution, 2 bad input, 3 exact solvers "
        "disagree, 4 internal error.",
    )
    p.add_argument("file", help="instance file (format elasticopt-instance/1 or /2, see docs/design.md §7), or a "
                   "request a host sent to 'elasticopt serve' (elasticopt-request/1, docs/integrations.md §1), "
                   "translated onto the model as the service does; its solver and time limit are this command's")
    p.add_argument(
        "--solver",
        default="dp",
        help="backend name (default: dp), NAME:key=value,... to set its options (e.g. cpsat:num_workers=2, "
        "dp:fixing=false), or 'all' to run every installed exact backend and compare",
    )
    p.add_argument("--time-limit-s", type=float, default=None, help="time limit per backend run, seconds")
    p.add_argument("--no-reduce", action="store_true", help="skip the exact reductions (docs/design.md §2)")
    p.add_argument("--json", action="store_true", help="print the solution(s) as JSON instead of tables")
    p.add_argument("-o", "--output", default=None, help="also write the solution(s) as JSON to this file")
    p.add_argument("--timings", action="store_true",
                   help="print the seconds spent loading, compiling, reducing and solving (stderr; with --json "
                   "also under 'timings')")
    p.set_defaults(func=run)


#: The service's request format, which ``elasticopt solve`` also reads (a captured request, replayed).
REQUEST_FORMAT = "elasticopt-request/1"


def load_problem_file(path: str) -> Problem:
    """The problem of an instance file or of a service request file (``elasticopt-request/1``).

    A request is checked and translated as ``elasticopt serve`` does (:mod:`elasticopt.service.translate`), so
    a host's request, captured, can be solved and compared with ``--solver all``; jobs it leaves out (no option
    they may use) are named in a warning.  A request's errors name the file and the JSON path, as an
    instance's do.

    Raises
    ------
    InstanceError
        A file that is neither a valid instance nor a valid request.
    """
    try:
        return load_instance(path)
    except InstanceError:
        from elasticopt.models.jsontext import read_bytes
        from elasticopt.service.protocol import ServiceError, parse_request_screened, validate_request

        try:  # a request? (only then its own checks word the errors)
            doc, screened = parse_request_screened(read_bytes(path, "instance file"))
        except ServiceError:
            doc = None
        if not (isinstance(doc, dict) and doc.get("format") == REQUEST_FORMAT):
            raise
    from elasticopt.service.translate import translate

    if "base" in doc:
        raise InstanceError(str(path), "base", "a whole request (its 'jobs', no 'base')", doc["base"],
                            "a session's changes ('base', 'upsert', 'remove') build on a state only the service that "
                            "answered the session holds; solve the session's whole request (its first, or the "
                            "service's --record replayed by 'elasticopt serve --stdio < FILE')")
    try:
        tr = translate(validate_request(doc), screened)
    except ServiceError as exc:
        raise InstanceError(str(path), exc.path or "(root)", exc.expected or str(exc), exc.found) from None
    if tr.left_out:
        log.warning("%s: %d job(s) left idle without being solved (no option they may use): %s", path,
                    len(tr.left_out), ", ".join(map(str, list(tr.left_out)[:10])))
    return tr.problem


def solve_all(problem: Problem | OptionTable, *, time_limit_s: float | None, reduce: bool) -> list[Solution]:
    """Every installed exact backend on the same compiled table."""
    table = problem if isinstance(problem, OptionTable) else compile_problem(problem)
    if reduce:
        table = reduce_table(table)
    return [get_backend(name).solve(table, time_limit_s=time_limit_s) for name in exact_solvers()]


def agreement(solutions: list[Solution]) -> tuple[bool, str]:
    """Whether the proven optima agree (integer objectives / infeasibility)."""
    proven = [s for s in solutions if s.status in (Status.OPTIMAL, Status.INFEASIBLE)]
    if not proven:
        return True, "no backend proved optimality"
    keys = {(s.status, s.objective) for s in proven}
    if len(keys) == 1:
        s = proven[0]
        what = "INFEASIBLE" if s.status is Status.INFEASIBLE else f"objective {s.objective}"
        return True, f"all {len(proven)} proven results agree: {what}"
    detail = ", ".join(f"{s.solver}={s.status.value}/{s.objective}" for s in proven)
    return False, f"PROVEN OPTIMA DISAGREE: {detail}"


#: Allocation tables longer than this are printed as plain aligned text: rich lays a table out at
#: ~2 ms a row (66 s of a 100,000-job ``elasticopt solve``), plain text at a few microseconds.
RICH_MAX_ROWS = 2000

#: Columns of the allocation table; "type" and "nodes" only for problems format 1 cannot say (GPU types,
#: nodes with GPUs taken, node-aware throughputs: format 2).
_ALLOC_COLUMNS = ("job", "state", "current", "type", "GPUs", "batch", "nodes", "samples/s", "value")


def _ranges(ix: Any) -> str:
    """GPU indices as compact ranges: ``0-3,6``."""
    runs: list[list[int]] = []
    for i in sorted(ix):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in runs)


def _nodes_cell(nodes: Any) -> str:
    """A job's placement ``{node: GPU indices}`` as ``a100/0[0-7] a100/1[0-3]``."""
    if not nodes:
        return "-"
    return " ".join(f"{n}[{_ranges(ix)}]" for n, ix in sorted(nodes.items()) if ix) or "-"


def _option_index(table: OptionTable) -> dict[tuple[int, str, int, int, bool], int]:
    """(job row, type name, k, b, packed) -> option column of ``table``."""
    rows, cols = np.nonzero(table.valid)
    types = table.types
    return {
        (int(j), types[int(t)], int(k), int(b), bool(p)): int(o)
        for j, o, t, k, b, p in zip(rows, cols, table.gpu_type[rows, cols], table.gpus[rows, cols],
                                    table.batch[rows, cols], table.packed[rows, cols])
    }


def _allocation_columns(problem: Problem, sol: Solution) -> tuple[str, ...]:
    typed = needs_format_2(problem)
    return tuple(c for c in _ALLOC_COLUMNS if typed or c not in ("type", "nodes"))


def _allocation_rows(problem: Problem, sol: Solution, table: OptionTable) -> list[tuple[str, ...]]:
    """One row of text cells per job, in the order of :func:`_allocation_columns`.

    ``table`` is the problem's unreduced compiled table: samples/s and value are read from the option the
    solution chose there (GPU type, k, b, packed), so every model (one pool, GPU types, nodes) prints alike.
    """
    cols = _allocation_columns(problem, sol)
    index = _option_index(table)
    default_type = problem.cluster.types[0]
    rows = []
    for j, job in enumerate(problem.jobs):
        a = sol.allocation.get(job.id)
        run = job.running
        cur = "-"
        if run is not None:
            cur = f"{run.gpus}x{run.batch}" + (f" {run.gpu_type}" if run.gpu_type and "type" in cols else "")
        cells = {"job": job.id, "state": "running" if run else "queued", "current": cur}
        if a is None:
            cells.update({"type": "-", "GPUs": "0", "batch": "-", "nodes": "-", "samples/s": "-", "value": "0"})
        else:
            k, b = a
            t = sol.gpu_types.get(job.id, default_type)
            o = index.get((j, t, k, b, bool(sol.packed.get(job.id, False))))
            sps = float(table.samples_per_s[j, o]) if o is not None else float("nan")
            val = float(table.value[j, o]) if o is not None else float("nan")
            packed = " packed" if sol.packed.get(job.id) else ""
            cells.update({"type": t + packed, "GPUs": str(k), "batch": str(b),
                          "nodes": _nodes_cell(sol.placement.get(job.id)), "samples/s": f"{sps:,.1f}",
                          "value": f"{val:.4f}"})
        rows.append(tuple(cells[c] for c in cols))
    return rows


def _allocation_table(problem: Problem, sol: Solution, table: OptionTable) -> Table | str:
    """The allocation as a rich table, or as plain aligned text beyond ``RICH_MAX_ROWS`` jobs."""
    rows = _allocation_rows(problem, sol, table)
    cols = _allocation_columns(problem, sol)
    title = f"allocation ({sol.solver})"
    left = ("job", "state", "current", "type", "nodes")
    if len(rows) > RICH_MAX_ROWS:
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]

        def line(cells: tuple[str, ...]) -> str:
            return "  ".join(c.ljust(w) if col in left else c.rjust(w)
                             for c, w, col in zip(cells, widths, cols)).rstrip()

        return "\n".join([title, line(cols), *(line(r) for r in rows)])
    t = Table(title=title, show_lines=False)
    for col in cols:
        t.add_column(col, justify="left" if col in left else "right", overflow="fold")
    for r in rows:
        t.add_row(*r)
    return t


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _summary_table(problem: Problem, sols: list[Solution]) -> Table:
    t = Table(title=f"{len(problem.jobs)} jobs, {problem.cluster.gpus} GPUs, objective {problem.objective}")
    t.caption = (
        f"objective: the {problem.objective} objective; integer: the scaled integer the solvers optimise "
        f"(values x S, x B with a priority order; S={sols[0].scale}, B={sols[0].tie_scale}), bound likewise"
    )
    for col in ("solver", "status", "objective", "integer", "bound", "GPUs", "verified", "build s", "solve s"):
        t.add_column(col, justify="left" if col in ("solver", "status") else "right")
    for s in sols:
        rep = verify(problem, s)
        t.add_row(
            s.solver,
            s.status.name if s.status.name != "LIMIT" else f"LIMIT ({s.reason.value})",
            _fmt(s.objective_value),
            _fmt(s.objective),
            _fmt(s.bound),
            f"{s.gpus_used}/{problem.cluster.gpus}" if s.status.has_allocation else "-",
            "yes" if rep.ok else "NO: " + "; ".join(rep.errors),
            f"{s.build_s:.4f}",
            f"{s.solve_s:.4f}",
        )
    return t


def _compile(problem: Problem, file: str) -> OptionTable:
    """Compile ``problem``; a value the objective cannot hold is an error of the file (named)."""
    try:
        return compile_problem(problem)
    except InstanceError:
        raise
    except ValidationError as exc:
        raise InstanceError(file, exc.path, exc.expected, exc.found, exc.hint) from None


def run(args: argparse.Namespace) -> int:
    """Run ``elasticopt solve``; see the module docstring for exit codes."""
    name, options = ("all", {}) if args.solver == "all" else parse_solver_arg(args.solver)
    if name != "all":
        get_backend(name).check_options(options)  # a bad name or option fails before any work
    args.time_limit_s = checked_time_limit(args.time_limit_s, "--time-limit-s", **CLI_TIME_LIMIT)  # so does a bad limit
    t_load = time.perf_counter()
    problem = load_problem_file(args.file)
    load_s = time.perf_counter() - t_load
    log.info("%s: %d jobs, %d GPUs, objective %s", args.file, len(problem.jobs), problem.cluster.gpus,
             problem.objective)
    t0 = time.perf_counter()
    table = full_table = _compile(problem, args.file)
    compile_s = time.perf_counter() - t0
    log.info("compiled: %d options of %d jobs in %.3f s", table.n_options, table.n_jobs, compile_s)
    t1 = time.perf_counter()
    if not args.no_reduce:
        table = reduce_table(table)
    reduce_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    if args.solver == "all":
        sols = solve_all(table, time_limit_s=args.time_limit_s, reduce=False)
    else:
        sols = [solve(table, name, time_limit_s=args.time_limit_s, reduce=False, **options)]
    solve_s = time.perf_counter() - t2
    sols = [replace(s, stats={**s.stats, "compile_s": compile_s + reduce_s}) for s in sols]
    timings = {"load_s": load_s, "compile_s": compile_s, "reduce_s": reduce_s, "solve_s": solve_s}
    for s in sols:
        log.info("%s: %s, objective %s (integer %s) in %.3f s build + %.3f s solve", s.solver, s.status.name,
                 s.objective_value, s.objective, s.build_s, s.solve_s)
    agree, agree_msg = agreement(sols)
    doc: Any = [s.to_dict() for s in sols] if args.solver == "all" else sols[0].to_dict()
    if args.solver == "all":
        doc = {"solutions": doc, "agree": agree, "message": agree_msg}
    if args.timings:
        doc["timings"] = timings
        print("timings: " + ", ".join(f"{k[:-2]} {v:.3f} s" for k, v in timings.items()), file=sys.stderr)
    if args.output:
        atomic_write_text(args.output, json.dumps(doc, indent=2) + "\n")
    console = Console(width=max(Console().width, 130))
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        best = next((s for s in sols if s.status.has_allocation and s.objective is not None), None)
        if best is not None:
            alloc = _allocation_table(problem, best, full_table)
            if isinstance(alloc, str):  # a long table: plain text, written as is (no markup, no wrapping)
                sys.stdout.write(alloc + "\n")
            else:
                console.print(alloc)
        console.print(_summary_table(problem, sols))
        for s in sols:
            if s.message:  # messages that already start with the solver's name are not prefixed again
                msg = s.message.removeprefix(f"{s.solver}: ")
                console.print(f"[bold]{s.solver}[/]: {msg}", highlight=False)
        if args.solver == "all":
            console.print(("[green]" if agree else "[bold red]") + agree_msg, highlight=False)
    if not agree:
        return 3
    if any(s.status.has_allocation and s.objective is not None for s in sols):
        return 0
    return 1
