"""Summaries, files and plots of a :class:`BenchResult`.

:func:`summarize` groups rows by (family, n, G, solver) and gives medians and
the ratio to ``dp``; :func:`write_results` writes ``rows.csv``, ``results.json``,
``solvers.csv`` (shifted geometric means and solved counts per solver, over
all instances and per family: :mod:`elasticopt.benchmarking.measures`),
``instances.csv`` (size, reductions, LP gap per instance),
``performance_profile.csv`` and, unless told not to, the plots
``performance_profile.*``, ``time_vs_n.*`` and ``time_vs_G.*`` (PNG, PDF,
SVG) -- every file atomically.  Plots use matplotlib's Agg canvas directly (no pyplot, no global
backend switch).
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from elasticopt._io import atomic_write_text
from elasticopt.benchmarking.measures import DEFAULT_SHIFT_S, performance_profile, solver_summaries
from elasticopt.benchmarking.rows import ROW_FIELDS, BenchResult, BenchRow

__all__ = ["SummaryRow", "summarize", "write_results", "plot_times", "rows_csv", "solvers_csv", "instances_csv"]

#: The solver the ratios are taken against.
BASELINE = "dp"
#: Most plot panels (one per family / file) before pooling into one.
MAX_PANELS = 4


@dataclass(frozen=True)
class SummaryRow:
    """Medians of one solver on one size (all seeds and repeats pooled).

    ``ratio_to_dp``: median ``total_s`` over ``dp``'s on the same size (>1 =
    slower than dp); ``solve_ratio_to_dp`` the same for ``solve_s``.
    ``agree``: runs that agree with the best known objective, of those that
    could be compared; ``disagree`` the runs that conflict.
    """

    family: str
    n: int
    G: int
    solver: str
    runs: int
    instances: int
    statuses: str
    median_total_s: float
    median_solve_s: float
    min_total_s: float
    max_total_s: float
    median_warmup_s: float | None
    ratio_to_dp: float | None
    solve_ratio_to_dp: float | None
    agree: int
    compared: int
    disagree: int
    unverified: int
    max_gap_to_best: float | None
    median_dp_ops_run: float | None
    median_dp_ops_per_s: float | None
    median_dp_ops_fraction: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def _median(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def summarize(result: BenchResult | Sequence[BenchRow]) -> list[SummaryRow]:
    """Group rows by (family, n, G, solver); sorted by family, size, then median time."""
    rows = result.rows if isinstance(result, BenchResult) else list(result)
    groups: dict[tuple[str, int, int, str], list[BenchRow]] = {}
    for r in rows:
        groups.setdefault((r.family, r.n, r.G, r.solver), []).append(r)
    base: dict[tuple[str, int, int], tuple[float, float]] = {}
    for (fam, n, G, solver), rs in groups.items():
        if solver == BASELINE:
            base[(fam, n, G)] = (statistics.median(r.total_s for r in rs), statistics.median(r.solve_s for r in rs))
    out = []
    for (fam, n, G, solver), rs in groups.items():
        tot = statistics.median(r.total_s for r in rs)
        sol = statistics.median(r.solve_s for r in rs)
        b = base.get((fam, n, G))
        counts = Counter(r.status for r in rs)
        gaps = [r.gap_to_best for r in rs if r.gap_to_best is not None]
        out.append(
            SummaryRow(
                family=fam, n=n, G=G, solver=solver, runs=len(rs), instances=len({r.instance for r in rs}),
                statuses=", ".join(f"{c} {s}" for s, c in sorted(counts.items())),
                median_total_s=tot, median_solve_s=sol,
                min_total_s=min(r.total_s for r in rs), max_total_s=max(r.total_s for r in rs),
                median_warmup_s=_median([r.warmup_s for r in rs]),
                ratio_to_dp=(tot / b[0]) if b and b[0] > 0 else None,
                solve_ratio_to_dp=(sol / b[1]) if b and b[1] > 0 else None,
                agree=sum(r.agrees_with_best is True for r in rs),
                compared=sum(r.agrees_with_best is not None for r in rs),
                disagree=sum(r.agrees_with_best is False for r in rs),
                unverified=sum(not r.verified for r in rs),
                max_gap_to_best=max(gaps) if gaps else None,
                median_dp_ops_run=_median([r.dp_ops_run for r in rs]),
                median_dp_ops_per_s=_median([r.dp_ops_per_s for r in rs]),
                median_dp_ops_fraction=_median([r.dp_ops_fraction for r in rs]),
            )
        )
    out.sort(key=lambda s: (s.family, s.n, s.G, s.median_total_s))
    return out


def rows_csv(rows: Sequence[BenchRow]) -> str:
    """The rows as CSV text (header = :data:`ROW_FIELDS`; None as empty)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(ROW_FIELDS), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in r.to_dict().items()})
    return buf.getvalue()


def _csv(fields: Sequence[str], dicts: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(fields), lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for d in dicts:
        w.writerow({k: ("" if d.get(k) is None else d.get(k)) for k in fields})
    return buf.getvalue()


def solvers_csv(result: BenchResult, shift_s: float = DEFAULT_SHIFT_S) -> str:
    """Per solver, over all instances (family ``all``) then per family: solved counts and shifted geometric means."""
    rows = solver_summaries(result, shift_s) + solver_summaries(result, shift_s, by_family=True)
    fields = ("family", "solver", "instances", "solved", "sgm_total_s", "sgm_ratio_to_best", "shift_s", "penalty_s",
              "sgm_first_incumbent_s", "sgm_optimum_found_s")
    return _csv(fields, [r.to_dict() for r in rows])


#: Columns of ``instances.csv``.
INSTANCE_FIELDS = ("name", "family", "n", "G", "capacity", "options_before", "options", "options_removed", "dp_ops",
                   "best_objective", "lp_bound", "lp_gap", "lp_status", "lp_s", "compile_s", "reduce_s",
                   "proven_disagree")


def instances_csv(result: BenchResult) -> str:
    """One row per instance: size, what the reductions removed, LP-relaxation gap (:data:`INSTANCE_FIELDS`)."""
    return _csv(INSTANCE_FIELDS, [{**r.to_dict(), "family": r.family} for r in result.instances])


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def plot_times(result: BenchResult, out_dir: str | Path) -> list[Path]:
    """Median total solve time against n and against G, log-log, one line per solver.

    One panel per instance family (file stem for files; pooled into one panel
    beyond :data:`MAX_PANELS` groups).  ERROR runs are left out; LIMIT runs
    count with the time they took.  Drawn by
    :func:`elasticopt.plotting.plot_solver_times`; returns the PNG, PDF and
    SVG paths written.
    """
    from elasticopt.plotting import plot_solver_times

    summ = summarize([r for r in result.rows if r.status != "ERROR"])  # a failed run has no meaningful time
    return plot_solver_times(summ, out_dir, formats=("png", "pdf", "svg"), max_panels=MAX_PANELS)


def write_results(result: BenchResult, out_dir: str | Path, *, plots: bool = True,
                  shift_s: float = DEFAULT_SHIFT_S) -> list[Path]:
    """Write ``rows.csv``, ``results.json`` (rows, instances, summaries, profile, environment), the CSVs and plots.

    Parameters
    ----------
    result
        A benchmark result.
    out_dir
        Folder (created if missing); existing files of the same names are replaced atomically.
    plots
        Also write the performance profile and ``time_vs_n`` / ``time_vs_G`` (PNG, PDF, SVG).
    shift_s
        Shift of the shifted geometric means, seconds.

    Returns
    -------
    list of Path
        The files written.
    """
    out = Path(out_dir)
    doc = result.to_dict()
    doc["summary"] = [s.to_dict() for s in summarize(result)]
    prof = performance_profile(result)
    doc["solver_summary"] = [s.to_dict() for s in solver_summaries(result, shift_s)]
    doc["family_summary"] = [s.to_dict() for s in solver_summaries(result, shift_s, by_family=True)]
    doc["performance_profile"] = prof.to_dict()
    paths = [
        atomic_write_text(out / "rows.csv", rows_csv(result.rows)),
        atomic_write_text(out / "results.json", json.dumps(_json_safe(doc), indent=1, default=str) + "\n"),
        atomic_write_text(out / "solvers.csv", solvers_csv(result, shift_s)),
        atomic_write_text(out / "instances.csv", instances_csv(result)),
        atomic_write_text(out / "performance_profile.csv", prof.csv()),
    ]
    if plots and result.rows:
        from elasticopt.plotting import plot_performance_profile

        paths += plot_performance_profile(prof, out / "performance_profile")
        paths += plot_times(result, out)
    return paths
