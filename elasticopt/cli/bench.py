"""``elasticopt bench``: benchmark solvers on generated families and instance files.

Examples::

    elasticopt bench --family paper --jobs 1000 --gpus 1024 --repeats 5
    elasticopt bench --solver dp milp cpsat:num_workers=8 --family uniform ladder \\
        --jobs 200 1000 --gpus 256 1024 --seeds 0 1 2 --out results/
    elasticopt bench --instances 'instances/*.json' --time-limit-s 30
    elasticopt bench --suite reference --seeds 0 --time-limit-s 10 --markdown docs/benchmarks.md
    elasticopt bench --suite reference --shard 2/4 --out part2     # one of 4 machines; then:
    elasticopt bench --merge part1 part2 part3 part4 --suite reference --out all --markdown page.md

After the medians per size it prints, per solver, the solved count and the
shifted geometric mean of total time (unsolved at the limit), the times to
first incumbent and to the optimum found where backends report incumbents,
and the path of the performance-profile plot (:mod:`elasticopt.benchmarking.measures`).
``--suite NAME`` runs a named suite (:mod:`elasticopt.benchmarking.suites`);
``--family``/``--jobs``/``--gpus``/``--seeds`` then select a subset of it.
``--jobs`` and ``--gpus`` are **paired** element by element (a single value
pairs with every value of the other list); ``--cross`` runs every job count
with every GPU count.  Exit codes: 0 every result verified and consistent;
1 some solve ended in ERROR; 2 bad input; 3 proven optima disagree, or a
result failed verification or contradicts a proven optimum; 130
interrupted (the partial results are written).
"""

from __future__ import annotations

import argparse
import dataclasses
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
from elasticopt.benchmarking.measures import DEFAULT_SHIFT_S, solver_summaries
from elasticopt.benchmarking.suites import SUITES, get_suite
from elasticopt.solvers.base import checked_time_limit
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
        "--gpus 256 1024 --seeds 0 1 2\n  elasticopt bench --instances 'instances/*.json' --time-limit-s 30\n"
        "  elasticopt bench --suite reference --shard 2/4 --out part2        # one of 4 machines, then:\n"
        "  elasticopt bench --merge part1 part2 part3 part4 --suite reference --out all --markdown page.md",
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
    p.add_argument("--suite", choices=sorted(SUITES), default=None,
                   help="a named suite (instances, solvers, limit, shift); --family/--jobs/--gpus/--seeds select a "
                   "subset of it, --solver/--time-limit-s/--repeats override it")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed solves per solver and instance (default 3; a suite's own)")
    p.add_argument("--time-limit-s", type=float, default=None,
                   help="time limit per solve, seconds (default 60, a suite's own; 0 for none)")
    p.add_argument("--shift-s", type=float, default=None,
                   help=f"shift of the shifted geometric means, seconds (default {DEFAULT_SHIFT_S:g})")
    p.add_argument("--no-lp", action="store_true", help="do not solve each instance's LP relaxation (the LP gap)")
    p.add_argument("--markdown", default=None, metavar="FILE",
                   help="also write the results as a Markdown page (e.g. docs/benchmarks.md), with this command")
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed first solve (warmup_s)")
    p.add_argument("--no-reduce", action="store_true", help="skip the exact reductions (docs/design.md §2)")
    p.add_argument("--order", choices=["interleaved", "grouped"], default="interleaved",
                   help="interleaved (default): repeat r of every solver before repeat r+1, so machine drift hits "
                   "all alike and each solve starts with caches the others left cold; grouped: each solver's "
                   "repeats back to back (warm caches, as in a scheduler running only its solver)")
    p.add_argument("--out", default="bench-results", metavar="DIR",
                   help="folder for rows.csv, results.json and the plots (default: bench-results)")
    p.add_argument("--no-plots", action="store_true", help="do not write the PNG plots")
    p.add_argument("--shard", type=_shard_arg, default=None, metavar="K/N",
                   help="run only the K-th of N interleaved parts of the instances (instances K, K+N, K+2N, ... "
                   "in order), e.g. one part per machine; then --merge the parts' results")
    p.add_argument("--merge", action="extend", nargs="+", default=None, metavar="RESULTS",
                   help="solve nothing: merge earlier runs' results.json (files or --out folders; same solvers and "
                   "settings, distinct instances) into one benchmark, written to --out and --markdown, e.g. a suite "
                   "run one seed at a time; takes --suite, --shift-s, --out, --markdown, --no-plots, --replace")
    p.add_argument("--replace", action="store_true",
                   help="with --merge: an instance of a later run replaces the same instance of an earlier one (a "
                   "rerun of the instances a change affects, by every solver); the page names what each run replaced")
    p.set_defaults(func=run)
    return p


def _shard_arg(text: str) -> tuple[int, int]:
    """``K/N`` with 1 <= K <= N."""
    k, slash, n = text.partition("/")
    if slash and k.strip().isdigit() and n.strip().isdigit() and 1 <= int(k) <= int(n):
        return int(k), int(n)
    raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N (e.g. 2/4), found {text!r}")


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
    if args.family_option and (args.suite or not args.family):
        raise ValidationError("--family-option", "--family F beside it (the options go to that generator)",
                              " ".join(args.family_option),
                              f"suite {args.suite!r} generates with its own options; drop --family-option"
                              if args.suite else "instance files are solved as they are; drop --family-option, "
                              "or add --family F --jobs N --gpus G")
    if args.suite:
        specs = get_suite(args.suite).instances(families=args.family, jobs=args.jobs, gpus=args.gpus, seeds=args.seeds)
        return _part(args, specs + (file_instances(args.instances) if args.instances else []))
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
    return _part(args, specs)


def _part(args: argparse.Namespace, specs: list) -> list:
    """The instances of ``--shard K/N``: the K-th of every N, in order (each part mixes families and sizes)."""
    if not args.shard:
        return specs
    k, n = args.shard
    part = specs[k - 1 :: n]
    if not part:
        raise ValidationError("--shard", f"a part with instances (there are {len(specs)})", f"{k}/{n}",
                              f"use at most {len(specs)} parts")
    return part


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


def solver_table(result: BenchResult, shift_s: float) -> Table:
    """Per solver over all instances: solved count, shifted geometric means (total, first incumbent, optimum found)."""
    limit = result.settings.get("time_limit_s")
    t = Table(title=f"per solver over all instances: shifted geometric mean of total time, shift {shift_s * 1e3:g} ms, "
                    f"unsolved counted at {'the ' + format(limit, 'g') + ' s limit' if limit else 'the largest time'}")
    for c in ("solver", "solved", "sgm total", "x fastest", "sgm first incumbent", "sgm optimum found"):
        t.add_column(c, justify="left" if c == "solver" else "right")
    for s in solver_summaries(result, shift_s):
        t.add_row(escape(s.solver), f"{s.solved}/{s.instances}", _t(s.sgm_total_s), _ratio(s.sgm_ratio_to_best),
                  _t(s.sgm_first_incumbent_s), _t(s.sgm_optimum_found_s))
    return t


def _command(args: argparse.Namespace) -> str:
    """The command line of this run, canonical (what the Markdown page says regenerates it)."""
    import shlex

    parts = ["elasticopt", "bench"]
    if args.merge:
        parts += ["--merge"] + [str(m) for m in args.merge] + (["--replace"] if args.replace else [])
    if args.suite:
        parts += ["--suite", args.suite]
    for flag, vals in (("--solver", args.solver), ("--family", args.family), ("--jobs", args.jobs),
                       ("--gpus", args.gpus), ("--seeds", args.seeds), ("--family-option", args.family_option),
                       ("--instances", args.instances)):
        if vals:
            parts += [flag] + [str(v) for v in vals]
    if args.shard:
        parts += ["--shard", f"{args.shard[0]}/{args.shard[1]}"]
    for flag, val in (("--repeats", args.repeats), ("--time-limit-s", args.time_limit_s), ("--shift-s", args.shift_s),
                      ("--order", None if args.order == "interleaved" else args.order), ("--out", args.out),
                      ("--markdown", args.markdown)):
        if val is not None:
            parts += [flag, f"{val:g}" if isinstance(val, float) else str(val)]
    for flag, on in (("--cross", args.cross), ("--no-warmup", args.no_warmup), ("--no-reduce", args.no_reduce),
                     ("--no-lp", args.no_lp), ("--no-plots", args.no_plots)):
        if on:
            parts.append(flag)
    return shlex.join(parts)


#: What --merge cannot take: how to measure is in the merged files already.
_NOT_WITH_MERGE = ("solver", "family", "jobs", "gpus", "seeds", "family_option", "instances", "repeats",
                   "time_limit_s", "cross", "no_warmup", "no_reduce", "no_lp", "shard")


def _merged(args: argparse.Namespace, console: Console) -> BenchResult:
    """The benchmark of ``--merge`` (no solve): earlier runs' results in one."""
    from elasticopt.benchmarking.merge import load_result, merge_results

    given = [f"--{k.replace('_', '-')}" for k in _NOT_WITH_MERGE if getattr(args, k) not in (None, False, [])]
    if args.order != "interleaved":
        given.append("--order")
    if given:
        raise ValidationError("--merge", "only --suite, --shift-s, --out, --markdown, --no-plots and --replace "
                              "beside it (the merged files say how they were measured)", " ".join(given))
    result = merge_results([load_result(m) for m in args.merge], sources=list(args.merge), replace=args.replace)
    st = result.settings
    console.print(f"merged {len(args.merge)} run(s): {len(result.instances)} instance(s), {len(result.rows)} "
                  f"timed solve(s), time limit {st.get('time_limit_s') or 'none'} s", highlight=False)
    return result


def run(args: argparse.Namespace) -> int:
    """Run ``elasticopt bench``; see the module docstring for exit codes."""
    suite = get_suite(args.suite) if args.suite else None
    console = Console(width=max(Console().width, 160))
    if args.replace and not args.merge:
        raise ValidationError("--replace", "--merge RESULTS... beside it (it says how merged runs combine)",
                              "--replace alone", "add --merge with the runs to merge, or drop --replace")
    if args.merge:
        shift = args.shift_s if args.shift_s is not None else (suite.shift_s if suite else DEFAULT_SHIFT_S)
        result = _merged(args, console)
        return _report(args, console, result, suite, shift, [r.name for r in result.instances])
    specs = _specs(args)
    solver_arg = args.solver if args.solver or suite is None else suite.installed_solvers()
    solvers = resolve_solvers(solver_arg)  # fail on unknown names before any work
    if args.repeats is None:
        args.repeats = suite.repeats if suite else 3
    limit_arg = args.time_limit_s if args.time_limit_s is not None else (suite.time_limit_s if suite else 60.0)
    limit = None if limit_arg == 0 else checked_time_limit(  # 0: none (documented)
        limit_arg, "--time-limit-s", expected="a number of seconds > 0, or 0 for no limit", hint="0 (or inf) for none")
    shift = args.shift_s if args.shift_s is not None else (suite.shift_s if suite else DEFAULT_SHIFT_S)
    if not shift > 0:
        raise ValidationError("--shift-s", "a number of seconds > 0", args.shift_s)
    console.print(f"[bold]{len(specs)}[/] instance(s) x [bold]{len(solvers)}[/] solver(s) "
                  f"({escape(', '.join(s.label for s in solvers))}), {args.repeats} repeat(s)"
                  f"{'' if args.no_warmup else ' + warm-up'}, time limit {limit or 'none'} s", highlight=False)
    total = count_solves(len(specs), len(solvers), args.repeats, not args.no_warmup)
    # no refresh thread: the bar is redrawn between solves only, so it never competes with a timed solve
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False, auto_refresh=False) as bar:
        task = bar.add_task("starting", total=total)

        log = not console.is_terminal  # no live bar in a log file: one line per solve instead
        done = [0]

        def on_event(ev: BenchEvent) -> None:
            if log and ev.phase == "done":
                done[0] += 1
                what = "warm-up" if ev.repeat == 0 else f"repeat {ev.repeat}/{args.repeats}"
                console.print(f"[{done[0]}/{total}] {ev.instance} {ev.solver} {what}: {ev.status} "
                              f"{_t(ev.seconds)}", highlight=False, markup=False)
            if ev.phase == "instance":
                bar.update(task, description=f"{ev.instance}: compiled", refresh=True)
            elif ev.phase == "start":
                what = "warm-up" if ev.repeat == 0 else f"repeat {ev.repeat}/{args.repeats}"
                bar.update(task, description=f"{ev.instance} {ev.solver} {what}", refresh=True)
            else:
                bar.advance(task)
                bar.refresh()

        result = run_benchmark(solvers, specs, repeats=args.repeats, warmup=not args.no_warmup, order=args.order,
                               time_limit_s=limit, reduce=not args.no_reduce, progress=on_event,
                               lp_relaxation=not args.no_lp)
    # the command that measured these rows, kept in results.json (a merged page lists every run's)
    result = dataclasses.replace(result, settings={**result.settings, "command": _command(args)})
    return _report(args, console, result, suite, shift, [s.name for s in specs])


def _report(args: argparse.Namespace, console: Console, result: BenchResult, suite: Any, shift: float,
            ran_names: list[str]) -> int:
    """Print the tables, write the files and the page; the exit code."""
    if not shift > 0:
        raise ValidationError("--shift-s", "a number of seconds > 0", args.shift_s)
    console.print(summary_table(result))
    if result.rows:
        console.print(solver_table(result, shift))
    shown = result.instances[:MAX_INSTANCE_LINES]
    for rec in shown:
        if rec.best_objective is None:
            best = "no proven optimum"
        elif rec.best_value is None:
            best = f"best proven objective: integer {rec.best_objective}"
        else:  # the objective value first, then the scaled integer the solvers compare
            best = f"best proven objective {rec.best_value:.6f} (integer {rec.best_objective})"
        lp = "" if rec.lp_gap is None else f"; LP gap {rec.lp_gap:.2e}"
        console.print(f"{rec.name}: n={rec.n}, G={rec.G}, table {rec.options} options (of {rec.options_before}, "
                      f"{rec.options_removed} removed by the reductions) x {rec.capacity + 1} capacities = "
                      f"{rec.dp_ops:.3g} DP ops, compile {_t(rec.compile_s)} + reduce {_t(rec.reduce_s)}; {best}{lp}",
                      highlight=False)
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
        paths = write_results(result, args.out, plots=not args.no_plots, shift_s=shift)
        console.print("wrote " + ", ".join(str(p) for p in paths), highlight=False)
        prof = [p for p in paths if p.stem == "performance_profile" and p.suffix != ".csv"]
        if prof:
            console.print(f"performance profile: {prof[0]} (data: {prof[0].with_suffix('.csv')})", highlight=False)
    if args.markdown:
        from pathlib import Path

        from elasticopt._io import atomic_write_text
        from elasticopt.benchmarking.markdown import markdown_report

        ran = set(ran_names)
        not_run = [s.name for s in suite.instances() if s.name not in ran] if suite else []
        page = markdown_report(result, command=_command(args), shift_s=shift, suite=suite, not_run=not_run,
                               files_dir=args.out or None, page_path=args.markdown)
        console.print(f"wrote {atomic_write_text(Path(args.markdown), page)}", highlight=False)
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
