"""The project's one plotting module: matplotlib on the Agg canvas (no pyplot, no global state).

Every figure is written atomically in each requested format (PNG for a
quick look, PDF and SVG for papers), by :func:`save_figure`.  Plots of
simulations (:func:`plot_jct_cdf`, :func:`plot_allocation_timeline`), of
policy comparisons (:func:`plot_metric_by_load`) and of solver benchmarks
(:func:`plot_solver_times`, :func:`plot_performance_profile`) live here; callers pass plain rows or results.
"""

from __future__ import annotations

import io
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from elasticopt._io import atomic_write_bytes

__all__ = [
    "FORMATS",
    "new_figure",
    "save_figure",
    "plot_jct_cdf",
    "plot_allocation_timeline",
    "plot_metric_by_load",
    "plot_solver_times",
    "plot_performance_profile",
    "plot_cdf_panels",
    "plot_ci_panels",
]

#: Formats written by default: raster for a quick look, vector for papers.
FORMATS: tuple[str, ...] = ("png", "pdf", "svg")


def new_figure(width_in: float, height_in: float, rows: int = 1, cols: int = 1, **subplots: Any):
    """A figure on its own Agg canvas and its axes as a 2-D array ``[rows, cols]``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False, **subplots)
    return fig, axes


def save_figure(fig, path: str | os.PathLike[str], formats: Iterable[str] = FORMATS, dpi: int = 120) -> list[Path]:
    """Write ``fig`` as ``path`` with each suffix of ``formats`` (``path``'s own suffix is replaced).

    Returns the files written, in ``formats`` order.
    """
    stem = Path(path).with_suffix("")
    out = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=dpi)
        out.append(atomic_write_bytes(stem.with_suffix("." + fmt), buf.getvalue()))
    return out


def plot_jct_cdf(results: Sequence, path: str | os.PathLike[str], formats: Iterable[str] = FORMATS) -> list[Path]:
    """Empirical CDF of the JCT of completed jobs, one line per simulation result (log x axis).

    Parameters
    ----------
    results
        :class:`~elasticopt.scheduling.simulator.SimulationResult` objects.
    path
        Output path; one file per format.
    """
    fig, axes = new_figure(6, 4)
    ax = axes[0, 0]
    for res in results:
        jct = sorted(r.jct_s for r in res.records if r.jct_s is not None)
        if not jct:
            continue
        n_all = len(res.records)
        ys = [(i + 1) / n_all for i in range(len(jct))]
        ax.step([max(j, 1e-3) for j in jct], ys, where="post", label=f"{res.policy} ({len(jct)}/{n_all} done)")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of all jobs completed")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path, formats)


def plot_allocation_timeline(results: Sequence, path: str | os.PathLike[str],
                             formats: Iterable[str] = FORMATS) -> list[Path]:
    """GPUs in use and jobs queued over time: one panel per policy, shared axes (readable with many).

    Parameters
    ----------
    results
        :class:`~elasticopt.scheduling.simulator.SimulationResult` objects.
    path
        Output path; one file per format.
    """
    results = [r for r in results if r.timeline]
    n = max(len(results), 1)
    fig, axes = new_figure(7, 1.6 * n + 0.6, n, 1, sharex=True, sharey=True)
    scale = 3600.0
    for ax, res in zip(axes[:, 0], results):
        t = [p.time_s / scale for p in res.timeline] + [res.end_s / scale]
        used = [p.gpus_in_use for p in res.timeline]
        queued = [p.queued for p in res.timeline]
        ax.fill_between(t, used + used[-1:], step="post", alpha=0.35, color="tab:blue", label="GPUs in use")
        ax.step(t, queued + queued[-1:], where="post", lw=0.8, color="tab:red", label="jobs queued")
        ax.axhline(res.config.gpus, color="k", lw=0.5, ls="--")
        ax.set_title(res.policy, fontsize=9, loc="left")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time (h)")
    return save_figure(fig, path, formats)


def plot_metric_by_load(rows: Sequence[Mapping[str, Any]], metric: str, path: str | os.PathLike[str], *,
                        panel_key: str = "progress", series_key: str = "policy", x_key: str = "load",
                        ylabel: str | None = None, log_y: bool = False,
                        formats: Iterable[str] = FORMATS) -> list[Path]:
    """Mean of ``metric`` over seeds against load, one line per policy, one panel per accounting.

    Parameters
    ----------
    rows
        Tidy rows (one per run) with ``panel_key``, ``series_key``, ``x_key`` and ``metric``.
    metric
        The column to plot; the error bars span the seeds' min and max.
    """
    panels = sorted({r[panel_key] for r in rows})
    series = list(dict.fromkeys(r[series_key] for r in rows))
    fig, axes = new_figure(5.2 * len(panels), 3.8, 1, len(panels), sharey=True)
    for ax, panel in zip(axes[0], panels):
        for s in series:
            pts: dict[float, list[float]] = {}
            for r in rows:
                if r[panel_key] == panel and r[series_key] == s and r.get(metric) is not None:
                    pts.setdefault(float(r[x_key]), []).append(float(r[metric]))
            if not pts:
                continue
            xs = sorted(pts)
            mean = [statistics.fmean(pts[x]) for x in xs]
            lo = [m - min(pts[x]) for m, x in zip(mean, xs)]
            hi = [max(pts[x]) - m for m, x in zip(mean, xs)]
            ax.errorbar(xs, mean, yerr=[lo, hi], marker="o", ms=3, capsize=2, label=s)
        ax.set_title(f"{panel_key} = {panel}", fontsize=9)
        ax.set_xlabel(x_key)
        if log_y:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel(ylabel or metric)
    axes[0, -1].legend(fontsize=7)
    return save_figure(fig, path, formats)


def plot_cdf_panels(panels: Mapping[str, Mapping[str, tuple[Sequence[float], int]]], path: str | os.PathLike[str],
                    *, xlabel: str = "job completion time (s)", formats: Iterable[str] = FORMATS) -> list[Path]:
    """Empirical CDFs, one panel per key of ``panels``, one line per series (log x axis).

    Parameters
    ----------
    panels
        panel title -> series label -> (values, n_all): the values (e.g. the JCTs of
        completed jobs, pooled over seeds) and the count they are a fraction of
        (every job), so a line ends at the fraction completed.
    """
    n = max(len(panels), 1)
    fig, axes = new_figure(min(4.2 * n, 17), 3.6, 1, n, sharey=True)
    for ax, (title, series) in zip(axes[0], panels.items()):
        for label, (values, n_all) in series.items():
            vs = sorted(values)
            if not vs or not n_all:
                continue
            ax.step([max(v, 1e-3) for v in vs], [(i + 1) / n_all for i in range(len(vs))], where="post",
                    label=f"{label} ({len(vs)}/{n_all})")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=9)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("fraction of all jobs")
    return save_figure(fig, path, formats)


def plot_ci_panels(panels: Mapping[str, Mapping[str, Sequence[tuple[float, float, float | None]]]],
                   path: str | os.PathLike[str], *, xlabel: str = "offered load",
                   ylabels: Mapping[str, str] | None = None, log_x: bool = False, log_y: Iterable[str] = (),
                   formats: Iterable[str] = FORMATS) -> list[Path]:
    """Means with confidence-interval error bars against x: one panel per metric, one line per series.

    Parameters
    ----------
    panels
        metric -> series label -> [(x, mean, half-width of the interval or None), ...].
    ylabels
        Axis label per metric (default the metric's name).
    log_y
        Metrics whose panel has a log y axis.
    """
    logs = set(log_y)
    n = max(len(panels), 1)
    fig, axes = new_figure(4.6 * n, 3.6, 1, n)
    for ax, (metric, series) in zip(axes[0], panels.items()):
        for label, pts in series.items():
            pts = sorted(p for p in pts if p[1] is not None)
            if not pts:
                continue
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] or 0.0 for p in pts],
                        marker="o", ms=3, capsize=3, label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel((ylabels or {}).get(metric, metric))
        if log_x:
            ax.set_xscale("log")
        if metric in logs:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, path, formats)


def plot_solver_times(summary: Sequence, out_dir: str | Path, formats: Iterable[str] = ("png",),
                      max_panels: int = 6) -> list[Path]:
    """Median total solve time against n and against G, log-log, one line per solver.

    ``summary`` rows need ``family``, ``solver``, ``n``, ``G`` and ``median_total_s``
    (:class:`elasticopt.benchmarking.SummaryRow`).  One panel per family, pooled
    into one beyond ``max_panels``.  Writes ``time_vs_n.*`` and ``time_vs_G.*``.
    """
    rows = [dict(family=s.family, solver=s.solver, n=s.n, G=s.G, t=s.median_total_s) for s in summary]
    fams = sorted({r["family"] for r in rows})
    if len(fams) > max_panels:
        for r in rows:
            r["family"] = "all instances"
        fams = ["all instances"]
    solvers = sorted({r["solver"] for r in rows})
    paths: list[Path] = []
    for axis, fname, label in (("n", "time_vs_n", "jobs n"), ("G", "time_vs_G", "GPUs G")):
        fig, axes = new_figure(5.5 * len(fams), 4.2, 1, len(fams))
        for ax, fam in zip(axes[0], fams):
            for solver in solvers:
                pts: dict[int, list[float]] = {}
                for r in rows:
                    if r["family"] == fam and r["solver"] == solver:
                        pts.setdefault(r[axis], []).append(r["t"])
                if not pts:
                    continue
                xs = sorted(pts)
                ax.plot(xs, [max(statistics.median(pts[x]), 1e-6) for x in xs], marker="o", label=solver)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(label)
            ax.set_ylabel("median solve time, s (build + run)")
            ax.set_title(fam)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize="small")
        paths += save_figure(fig, Path(out_dir) / fname, formats, dpi=110)
    return paths


def plot_performance_profile(profile: Any, path: str | os.PathLike[str], formats: Iterable[str] = FORMATS,
                             title: str = "") -> list[Path]:
    """A Dolan-Moré performance profile: rho_s(tau) against tau (log2 axis), one step line per solver.

    ``profile`` is an :class:`elasticopt.benchmarking.measures.PerformanceProfile`
    (``solvers``, ``taus``, ``fractions``, ``ratios``, ``left_out``).  The line
    of a solver ends at its largest ratio; the right edge (past the largest
    ratio measured) shows the fraction it solved at all.
    """
    fig, axes = new_figure(6.4, 4.2)
    ax = axes[0, 0]
    taus = list(profile.taus) or [1.0]
    right = max(taus) * 2.0
    for s in profile.solvers:
        fr = list(profile.fractions.get(s, ())) or [0.0] * len(taus)
        ax.step(taus + [right], fr + fr[-1:], where="post", label=f"{s} ({fr[-1]:.0%} solved)")
    ax.set_xscale("log", base=2)
    ax.set_xlim(1, right)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("tau: time / fastest solver's time on the instance (log2)")
    ax.set_ylabel("fraction of instances within tau")
    n = len(profile.ratios)
    left = len(profile.left_out)
    ax.set_title(title or f"performance profile, total time ({n} instances" + (f"; {left} solved by none" if left else "")
                 + ")", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return save_figure(fig, path, formats)
