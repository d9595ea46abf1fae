"""``elasticopt bench``: benchmark solvers on generated families and instance files.

Examples::

    elasticopt bench --family paper --jobs 1000 --gpus 1024 --repeats 5
    elasticopt bench --solver dp milp cpsat:num_workers=8 --family uniform ladder \\
        --jobs 200 1000 --gpus 256 1024 --seeds 0 1 2 --out results/
    elasticopt bench --instances 'instances/*.json' --time-limit-s 30

``--jobs`` and ``--gpus`` are **paired** element by element (a single value
pairs with every value of the other list); ``--cross`` runs every job count
with every GPU count.  Exit codes: 0 every result verified and consistent;
1 some solve ended in ERROR; 2 bad input; 3 proven optima disagree, or a
result failed verification or contradicts a proven optimum; 130
interrupted (the partial results are written).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from elasticopt.benchmarking import (
    REFERENCE_OPS_PER_S,
    BenchEvent,
    BenchResult,
    count_solves,
    family_instances,
    file_instances,
    resolve_solvers,
    run_benchmark,
    summarize,
    write_results,
)
from elasticopt.solvers.options import parse_option_value
from elasticopt.errors import ValidationError

__all__ = ["register", "run", "summary_table"]

#: Per-instance lines printed after the summary (all of them are in results.json).
MAX_INSTANCE_LINES = 20


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``bench`` subcommand."""
    p = sub.add_parser(
        "bench",
        help="benchmark solvers: times, agreement of optima, CSV/JSON/plots",
        description="Benchmark solvers on generated families and instance files.\n\n"
        "Every solver gets the same compiled table, one warm-up solve (warmup_s: jax compiles there), then\n"
        "--repeats timed solves; every result is verified and cross-checked against the best proven optimum.\n"
        "Flags taking values accept several and may be repeated. --jobs and --gpus are PAIRED element by\n"
        "element (a single value pairs with all); --cross runs every job count with every GPU count.\n\n"
        "exit codes: 0 consistent, 1 a solve ended in ERROR, 2 bad input,\n"
        "            3 proven optima disagree / a result failed verification or contradicts a proven optimum,\n"
        "            130 interrupted (partial results written).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  elasticopt bench --family paper --jobs 1000 --gpus 1024 --repeats 5\n"
        "  elasticopt bench --solver dp milp cpsat:num_workers=8 --family uniform --jobs 200 1000 "
        "--gpus 256 1024 --seeds 0 1 2\n  elasticopt bench --instances 'instances/*.json' --time-limit-s 30",
    )
    p.add_argument("--solver", action="extend", nargs="+", default=None, metavar="NAME",
                   help="backend name, NAME:key=value,... for options, or 'all' (default: every installed backend)")
    p.add_argument("--family", action="extend", nargs="+", default=None, metavar="F",
                   help="generator family (see 'elasticopt generate --help')")
    p.add_argument("--jobs", action="extend", nargs="+", type=int, default=None, metavar="N", help="job counts")
    p.add_argument("--gpus", action="extend", nargs="+", type=int, default=None, metavar="G", help="cluster sizes")
    p.add_argument("--cross", action="store_true",
                   help="cross --jobs with --gpus (default: pair them element by element)")
    p.add_argument("--seeds", action="extend", nargs="+", type=int, default=None, metavar="S",
                   help="generator seeds (default: 0)")
    p.add_argument("--family-option", action="extend", nargs="+", default=None, metavar="KEY=VALUE",
                   help="generator keyword, e.g. options=20 (mck), running_fraction=0.5, gpus_per_node=4")
    p.add_argument("--instances", action="extend", nargs="+", default=None, metavar="GLOB",
                   help="instance files or glob patterns (quote them)")
    p.add_argument("--repeats", type=int, default=3, help="timed solves per solver and instance (default 3)")
    p.add_argument("--time-limit-s", type=float, default=60.0,
                   help="time limit per solve, seconds (default 60; 0 for none)")
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed first solve (warmup_s)")
    p.add_argument("--no-reduce", action="store_true", help="skip the exact reductions (docs/design.md §2)")
    p.add_argument("--order", choices=["interleaved", "grouped"], default="interleaved",
                   help="interleaved (default): repeat r of every solver before repeat r+1, so machine drift hits "
                   "all alike and each solve starts with caches the others left cold; grouped: each solver's "
                   "repeats back to back (warm caches, as in a scheduler running only its solver)")
    p.add_argument("--out", default="bench-results", metavar="DIR",
                   help="folder for rows.csv, results.json and the plots (default: bench-results)")
    p.add_argument("--no-plots", action="store_true", help="do not write the PNG plots")
    p.set_defaults(func=run)
    return p


def _family_options(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items or []:
        key, eq, val = it.partition("=")
        if not eq or not key:
            raise ValidationError("--family-option", "KEY=VALUE", it)
        out[key.replace("-", "_")] = parse_option_value(val)
    return out


def _specs(args: argparse.Namespace) -> list:
    specs = []
    if args.family or args.jobs or args.gpus:
        if not (args.family and args.jobs and args.gpus):
            raise ValidationError("--family/--jobs/--gpus", "all three for generated instances",
                                  f"family={args.family} jobs={args.jobs} gpus={args.gpus}")
        specs += family_instances(args.family, args.jobs, args.gpus, args.seeds or [0], cross=args.cross,
                                  **_family_options(args.family_option))
    if args.instances:
        specs += file_instances(args.instances)
    if not specs:
        raise ValidationError("instances", "--family F --jobs N --gpus G, or --instances GLOB", "neither",
                              "e.g. elasticopt bench --family paper --jobs 1000 --gpus 1024")
    return specs


def _t(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1e3:.2f} ms" if x < 1 else f"{x:.2f} s"


def _ratio(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}x" if x >= 10 else (f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x")


def summary_table(result: BenchResult) -> Table:
    """The rich summary: medians per solver and size, ratio to dp, agreement."""
    t = Table(title="elasticopt bench: medians over seeds and repeats; total = whole solve call (build + run + "
                    "extract), solve = solver run; x dp = median total / dp's")
    cols = ("family", "n x G", "solver", "runs", "status", "total", "solve", "warm-up", "x dp",
            "optima", "DP ops/s (/1.5e9)")
    for c in cols:
        left = c in ("family", "n x G", "solver", "status", "optima")
        t.add_column(c, justify="left" if left else "right", no_wrap=c in ("family", "n x G", "solver"))
    for s in summarize(result):
        if s.disagree or s.unverified:
            agree = f"[bold red]{s.disagree} disagree, {s.unverified} unverified[/]"
        elif s.compared:
            agree = f"[green]{s.agree}/{s.compared} agree[/]"
            if s.max_gap_to_best:
                agree += f" (gap {s.max_gap_to_best:.2e})"
        else:
            agree = "-"
        ops = "-"
        if s.median_dp_ops_per_s is not None:
            ops = f"{s.median_dp_ops_per_s:.2e} ({s.median_dp_ops_fraction:.3f})"
        t.add_row(s.family, f"{s.n} x {s.G}", escape(s.solver), str(s.runs), s.statuses, _t(s.median_total_s),
                  _t(s.median_solve_s), _t(s.median_warmup_s), _ratio(s.ratio_to_dp), agree, ops)
    return t


def run(args: argparse.Namespace) -> int:
    """Run ``elasticopt bench``; see the module docstring for exit codes."""
    specs = _specs(args)
    solvers = resolve_solvers(args.solver)  # fail on unknown names before any work
    limit = args.time_limit_s if args.time_limit_s and args.time_limit_s > 0 else None
    console = Console(width=max(Console().width, 160))
    console.print(f"[bold]{len(specs)}[/] instance(s) x [bold]{len(solvers)}[/] solver(s) "
                  f"({escape(', '.join(s.label for s in solvers))}), {args.repeats} repeat(s)"
                  f"{'' if args.no_warmup else ' + warm-up'}, time limit {limit or 'none'} s", highlight=False)
    total = count_solves(len(specs), len(solvers), args.repeats, not args.no_warmup)
    # no refresh thread: the bar is redrawn between solves only, so it never competes with a timed solve
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False, auto_refresh=False) as bar:
        task = bar.add_task("starting", total=total)

        def on_event(ev: BenchEvent) -> None:
            if ev.phase == "instance":
                bar.update(task, description=f"{ev.instance}: compiled", refresh=True)
            elif ev.phase == "start":
                what = "warm-up" if ev.repeat == 0 else f"repeat {ev.repeat}/{args.repeats}"
                bar.update(task, description=f"{ev.instance} {ev.solver} {what}", refresh=True)
            else:
                bar.advance(task)
                bar.refresh()

        result = run_benchmark(solvers, specs, repeats=args.repeats, warmup=not args.no_warmup, order=args.order,
                               time_limit_s=limit, reduce=not args.no_reduce, progress=on_event)
    console.print(summary_table(result))
    shown = result.instances[:MAX_INSTANCE_LINES]
    for rec in shown:
        if rec.best_objective is None:
            best = "no proven optimum"
        elif rec.best_value is None:
            best = f"best proven objective: integer {rec.best_objective}"
        else:  # the objective value first, then the scaled integer the solvers compare
            best = f"best proven objective {rec.best_value:.6f} (integer {rec.best_objective})"
        console.print(f"{rec.name}: n={rec.n}, G={rec.G}, table {rec.options} options (of {rec.options_before}) "
                      f"x {rec.capacity + 1} capacities = {rec.dp_ops:.3g} DP ops, compile {_t(rec.compile_s)} "
                      f"+ reduce {_t(rec.reduce_s)}; {best}", highlight=False)
    if len(result.instances) > len(shown):
        console.print(f"... {len(result.instances) - len(shown)} more instance(s) in results.json", highlight=False)
    for line in result.disagreements:
        console.print(f"[bold red]DISAGREEMENT {escape(line)}[/]", highlight=False)
    for r in result.verification_failures:
        console.print(f"[bold red]VERIFY FAILED {escape(r.instance)} {escape(r.solver)} #{r.repeat}: {escape(str(r.verify_errors))}[/]",
                      highlight=False)
    for r in result.errors:
        console.print(f"[yellow]ERROR {escape(r.instance)} {escape(r.solver)} #{r.repeat}: {escape(r.message)}[/]", highlight=False)
    if args.out:
        paths = write_results(result, args.out, plots=not args.no_plots)
        console.print("wrote " + ", ".join(str(p) for p in paths), highlight=False)
    console.print(f"DP ops/s fraction is of the {REFERENCE_OPS_PER_S:.1e} int64 max-plus ops/s "
                  "one-core reference (docs/design.md §3).", highlight=False)
    if result.settings.get("interrupted"):
        console.print("[bold yellow]interrupted: the results above and the files are partial (exit 130)[/]")
        return 130
    if not result.ok:
        console.print("[bold red]RESULTS DISAGREE: see the lines above (exit 3)[/]")
        return 3
    if result.errors:
        return 1
    console.print("[green]all results verified; proven optima agree[/]")
    return 0
