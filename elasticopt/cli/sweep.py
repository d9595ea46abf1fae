"""``elasticopt sweep``: run a TOML grid of simulations in parallel, resumably, and report it.

Examples::

    elasticopt sweep validation/specs/paper_comparison.toml --out results/paper --workers 2
    elasticopt sweep spec.toml --out results/x --address 10.0.0.1:6379     # cells as Ray tasks
    elasticopt sweep spec.toml --out results/x --list                      # the cells, run nothing
    elasticopt sweep spec.toml --out results/x --report-only               # table and plots of what is done

A spec's ``[grid]`` gives each parameter a value or a list (an axis; every
combination is a cell) and ``[[variant]]`` tables add more cells
(docs/sweeps.md).  Each finished cell is written at once, atomically, to
``OUT/cells/``: run the same command again after a crash or ``kill -9`` and
only the missing cells run.  At the end: ``results.csv`` (+ ``.parquet`` with
pyarrow), ``summary.{csv,json,md}`` (means and Student-t intervals over seeds,
the compared policy against the baseline per cell) and ``plots/`` (PNG, PDF, SVG).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from elasticopt.errors import ValidationError

__all__ = ["register", "run"]


def register(subparsers) -> None:
    """Add the ``sweep`` subcommand."""
    p = subparsers.add_parser("sweep", help="run a TOML grid of simulations in parallel (local or Ray), resumable",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spec", type=Path, help="the sweep spec (.toml, docs/sweeps.md)")
    p.add_argument("--out", type=Path, default=None, help="results folder (default: results/<spec name>)")
    p.add_argument("--workers", type=int, default=None,
                   help="local worker processes (default: the CPUs, at most the cells; 1 = this process)")
    p.add_argument("--address", default=None,
                   help="run the cells on a Ray cluster: HOST:PORT, 'auto', or 'local' (a new local instance)")
    p.add_argument("--cpus-per-cell", type=float, default=1.0, help="CPUs each Ray task asks for (default 1)")
    p.add_argument("--list", action="store_true", help="print the cells and whether each is done; run nothing")
    p.add_argument("--report-only", action="store_true", help="run nothing: write the table and plots of done cells")
    p.add_argument("--no-plots", action="store_true", help="skip the plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the subcommand."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from elasticopt.sweep import check_cells, load_spec, pending_cells, run_sweep, write_report

    spec = load_spec(args.spec)
    out = args.out or Path("results") / spec.name
    if args.list:
        check_cells(spec)  # a cell that could not run is an error here too, as it is when the sweep runs
        todo = {c.key for c in pending_cells(spec, out)}
        shown = [a for a in spec.axes] or ["policy"]
        for c in spec.cells:
            p = c.as_dict()
            print(c.key, "todo" if c.key in todo else "done", " ".join(f"{a}={p[a]}" for a in shown))
        print(f"{len(spec.cells)} cells, {len(spec.cells) - len(todo)} done, {len(todo)} to run ({out})")
        return 0
    info: dict = {"backend": "none (--report-only)", "ran": 0, "already_done": None, "wall_s": 0.0}
    if not args.report_only:
        workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
        if workers < 1:
            raise ValidationError("--workers", "an integer >= 1", workers)
        err = Console(stderr=True)
        with Progress(TextColumn("sweep {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, transient=True, disable=args.quiet or not err.is_terminal) as bar:
            task = bar.add_task(spec.name, total=len(spec.cells))
            res = run_sweep(spec, out, workers=workers, address=args.address, cpus_per_cell=args.cpus_per_cell,
                            on_start=lambda total, done: bar.update(task, completed=done),
                            on_done=lambda doc: bar.advance(task))
        info = {"backend": res.backend, "ran": res.ran, "already_done": res.already_done, "wall_s": res.wall_s}
        print(f"sweep {spec.name}: {res.cells} cells, {res.already_done} already done, {res.ran} run now "
              f"on {res.backend} in {res.wall_s:.1f} s", file=sys.stderr)
    doc = write_report(spec, out, info, plots=not args.no_plots)
    print((out / "summary.md").read_text())
    print(f"wrote {out}/results.csv, summary.csv/json/md" + ("" if args.no_plots else ", plots/ (png, pdf, svg)"),
          file=sys.stderr)
    return 0 if doc["finished"] == doc["cells"] else 1
