"""Workload copies for the host-simulator runners (``validation/pollux_simulator.py``,
``validation/sia_simulator.py``): the first N jobs of a workload, and paired copies whose arrivals are moved by a
seeded draw (``--perturb-arrivals S --seeds K,...``), every policy on the same copy.

Running the hosts and reading their results is in ``host_runs.py``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from elasticopt.errors import ElasticoptError

__all__ = ["head_workload", "add_perturb_arguments", "perturb_seeds", "moved_copy", "parse_seeds",
           "perturb_arrivals"]


def head_workload(src: Path, dst: Path, jobs: int) -> Path:
    """The first ``jobs`` jobs of a workload CSV (0: all of it, the file itself), written to ``dst``."""
    if jobs <= 0:
        return src
    lines = src.read_text().splitlines(keepends=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.write_text("".join(lines[:jobs + 1]))
    os.replace(tmp, dst)
    return dst


def add_perturb_arguments(ap: argparse.ArgumentParser) -> None:
    """``--perturb-arrivals SECONDS --seeds K,...``: paired moved copies of every workload (see
    :func:`perturb_arrivals`); read back by :func:`perturb_seeds`."""
    ap.add_argument("--perturb-arrivals", type=float, default=0.0, metavar="SECONDS",
                    help="run each workload with every arrival moved by a seeded uniform draw in +-SECONDS (one "
                         "copy per --seeds; both policies see the same copy): a paired comparison over a few seeds "
                         "tells a lead from the chaos of one run (default 0: the workloads as they are)")
    ap.add_argument("--seeds", default="1", metavar="K,K,...",
                    help="the seeds of --perturb-arrivals, comma-separated (default 1)")


def perturb_seeds(args: argparse.Namespace) -> list[int | None]:
    """The seeds of ``--perturb-arrivals`` (``[None]``: the workloads as they are); clear errors."""
    if not args.perturb_arrivals >= 0:
        raise ElasticoptError(f"--perturb-arrivals {args.perturb_arrivals}: expected seconds >= 0")
    return parse_seeds(args.seeds) if args.perturb_arrivals else [None]


def moved_copy(workload: Path, out: Path, tag: str, seconds: float, seed: int | None) -> tuple[Path, str]:
    """``(workload file, tag)`` of one copy: the workload itself, or its arrivals moved (seed ``seed``)."""
    if seed is None:
        return workload, tag
    tag += f"-arrivals{seconds:g}s-seed{seed}"
    return perturb_arrivals(workload, out / "workloads" / f"{tag}.csv", seconds, seed), tag


def parse_seeds(text: str) -> list[int]:
    """``--seeds``: comma-separated integers."""
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        seeds = []
    if not seeds:
        raise ElasticoptError(f"--seeds {text!r}: expected comma-separated integers, e.g. 1,2,3")
    return seeds


def perturb_arrivals(src: Path, dst: Path, seconds: float, seed: int, column: str = "time") -> Path:
    """A copy of a workload CSV whose every arrival (``column``) is moved by a draw of ``random.Random(seed)``,
    uniform in [-seconds, seconds] (never below 0), rows re-sorted by arrival (ties in file order); every other
    cell as it was, times written as the source writes them (integers stay integers, else one decimal).

    A paired comparison over a few seeds tells a policy's lead from the chaos of one run: an event-driven
    simulation is sensitive to which round a job arrives in, and both policies see the same moved arrivals.
    """
    import csv
    import random

    with src.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, list(reader)
    if not fields or column not in fields:
        raise ElasticoptError(f"{src}: no {column!r} column to perturb (columns: {fields})")
    rng = random.Random(seed)
    moved = []
    for i, row in enumerate(rows):
        text = row[column].strip()
        try:
            t = float(text)
        except ValueError:
            raise ElasticoptError(f"{src}, row {i + 2}, column {column!r}: expected a number of seconds, "
                                  f"found {text!r}") from None
        t = max(t + rng.uniform(-seconds, seconds), 0.0)
        row[column] = str(round(t)) if text.lstrip("-").isdigit() else f"{t:.1f}"
        moved.append((t, i, row))
    moved.sort(key=lambda x: (x[0], x[1]))
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(r for _, _, r in moved)
    os.replace(tmp, dst)
    return dst
