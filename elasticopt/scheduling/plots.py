"""Plots of simulation results (matplotlib, Agg backend): JCT CDF, GPUs in use and queue over time."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path

from elasticopt._io import atomic_write_bytes

__all__ = ["plot_jct_cdf", "plot_timeline"]


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | os.PathLike[str]) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=120, bbox_inches="tight")
    return atomic_write_bytes(path, buf.getvalue())


def plot_jct_cdf(results: Sequence, path: str | os.PathLike[str]) -> Path:
    """Empirical CDF of the JCT of completed jobs, one line per policy (log x axis).

    Parameters
    ----------
    results
        :class:`~elasticopt.scheduling.simulator.SimulationResult` objects.
    path
        Output image (``.png``, ``.svg``, ``.pdf``).
    """
    plt = _figure()
    fig, ax = plt.subplots(figsize=(6, 4))
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
    out = _save(fig, path)
    plt.close(fig)
    return out


def plot_timeline(results: Sequence, path: str | os.PathLike[str]) -> Path:
    """GPUs in use (top) and queue length (bottom) over time, one line per policy."""
    plt = _figure()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    scale, unit = 3600.0, "h"
    for res in results:
        t = [p.time_s / scale for p in res.timeline] + [res.end_s / scale]
        used = [p.gpus_in_use for p in res.timeline]
        queued = [p.queued for p in res.timeline]
        if not used:
            continue
        ax1.step(t, used + used[-1:], where="post", label=res.policy, lw=1)
        ax2.step(t, queued + queued[-1:], where="post", label=res.policy, lw=1)
    if results:
        ax1.axhline(results[0].config.gpus, color="k", lw=0.5, ls="--")
    ax1.set_ylabel("GPUs in use")
    ax2.set_ylabel("jobs queued")
    ax2.set_xlabel(f"time ({unit})")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    out = _save(fig, path)
    plt.close(fig)
    return out
