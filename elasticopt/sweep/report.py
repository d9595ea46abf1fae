"""A sweep's outputs: the tidy table, the summary across seeds with confidence intervals, and the plots.

Files written in the results folder (all atomically):

``results.csv`` (and ``results.parquet`` where pyarrow is installed)
    One row per cell, in spec order: ``cell`` (its key), every parameter, every
    metric.  Wall-time columns (:data:`~elasticopt.sweep.cells.TIMING_COLUMNS`)
    are the only ones that change between runs.
``summary.csv``, ``summary.json``, ``summary.md``
    Per group of cells equal in everything but the seed: the number of seeds
    and, per metric, the mean, the sample standard deviation and a
    Student-t confidence interval of the mean (``mean ± t_{(1+c)/2, n-1} s / sqrt(n)``,
    c = the spec's ``report.confidence``, default 0.95; none for one seed).
    ``comparison``: the compared policy against the baseline (default
    ``elastic`` vs ``fixed-batch``) per group, paired by seed: the per-seed
    ratios of jobs done and of mean JCT with their t-intervals, and whether the
    compared policy did at least as well in every seed.
``plots/jct_cdf[-SCENARIO].*``, ``plots/by_load[-SCENARIO].*`` (PNG, PDF, SVG)
    The JCT CDF per policy (one panel per load, JCTs pooled over seeds), and
    jobs done, jobs done by the last arrival and mean JCT against load with the
    confidence intervals as error bars; one pair per combination of the other
    axes that vary.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elasticopt._io import atomic_path, atomic_write_text
from elasticopt.sweep.spec import PARAMETERS, SweepSpec

__all__ = ["SUMMARY_METRICS", "collect", "table_rows", "write_table", "summarise", "compare", "t_interval",
           "write_report"]

#: Metrics summarised across seeds (those present in the rows; e.g. ``dropped`` where the simulator counts it).
SUMMARY_METRICS: tuple[str, ...] = (
    "completed", "completed_by_last_arrival", "dropped", "jct_mean_s", "jct_median_s", "jct_p95_s", "jct_mean_all_s",
    "jct_mean_by_last_arrival_s", "queue_delay_mean_s", "utilisation", "utilisation_by_last_arrival",
    "rescales_per_job", "restart_s_per_job", "mean_final_batch_over_min", "mean_efficiency_at_final_batch",
    "decision_s_mean",
)


def collect(spec: SweepSpec, out_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The result documents of the spec's finished cells, in spec order."""
    from elasticopt.sweep.cells import read_cell

    docs = []
    for c in spec.cells:
        doc = read_cell(out_dir, c.key, c.as_dict())
        if doc is not None:
            docs.append(doc)
    return docs


def table_rows(docs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per cell: ``cell``, the parameters, then the metrics (the first row's column order)."""
    rows = []
    for d in docs:
        row = {"cell": d["key"], **{k: d["row"][k] for k in PARAMETERS}}
        row.update({k: v for k, v in d["row"].items() if k not in row})
        rows.append(row)
    return rows


def _csv(rows: Sequence[Mapping[str, Any]]) -> str:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in cols})
    return buf.getvalue()


def write_table(rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``results.csv``, and ``results.parquet`` when pyarrow is installed."""
    out = Path(out_dir)
    paths = [atomic_write_text(out / "results.csv", _csv(rows))]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return paths
    cols = list(dict.fromkeys(k for r in rows for k in r))
    data = {k: [r.get(k) for r in rows] for k in cols}
    for k, vs in data.items():  # one type per column: cluster may mix GPU counts and names
        if len({type(v) for v in vs if v is not None} - {int, float}) and any(isinstance(v, (int, float)) for v in vs):
            data[k] = [None if v is None else str(v) for v in vs]
        elif {type(v) for v in vs if v is not None} == {int, float}:
            data[k] = [None if v is None else float(v) for v in vs]
    with atomic_path(out / "results.parquet", suffix=".parquet") as tmp:
        pq.write_table(pa.table(data), tmp)
    paths.append(out / "results.parquet")
    return paths


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """(mean, sample standard deviation, half-width of the Student-t interval of the mean); None for n < 2."""
    from scipy.stats import t

    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return mean, None, None
    sd = statistics.stdev(values)
    return mean, sd, float(t.ppf((1 + confidence) / 2, n - 1) * sd / math.sqrt(n))


def _group_key(row: Mapping[str, Any], drop: Sequence[str]) -> tuple:
    return tuple((k, row[k]) for k in PARAMETERS if k not in drop)


def summarise(rows: Sequence[Mapping[str, Any]], confidence: float = 0.95) -> list[dict[str, Any]]:
    """Per group of rows equal in everything but the seed: n and mean / sd / CI of every metric."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(_group_key(r, ("seed",)), []).append(r)
    out = []
    for key, rs in groups.items():
        s: dict[str, Any] = {**dict(key), "seeds": len(rs), "seed_list": [r["seed"] for r in rs]}
        for m in SUMMARY_METRICS:
            vals = [float(r[m]) for r in rs if r.get(m) is not None]
            if m not in rs[0] or not vals:
                continue
            mean, sd, hw = t_interval(vals, confidence)
            s[f"{m}_mean"], s[f"{m}_sd"], s[f"{m}_ci"], s[f"{m}_n"] = mean, sd, hw, len(vals)
        out.append(s)
    return out


def compare(rows: Sequence[Mapping[str, Any]], policy: str, baseline: str,
            confidence: float = 0.95,
            jct_by_job: Mapping[str, Mapping[str, float]] | None = None) -> list[dict[str, Any]]:
    """``policy`` against ``baseline`` per group (everything but policy and seed equal), paired by seed.

    Per group: the seeds both ran, the per-seed ratios done(policy)/done(baseline)
    (also counted by the last arrival) and JCT(baseline)/JCT(policy) with their
    t-intervals, and ``done_ge_every_seed`` / ``jct_le_every_seed``: whether the
    policy completed at least as many jobs / had no higher mean JCT in every seed.

    ``jct_by_job`` (cell key -> job id -> JCT s, from the cells' results) adds the
    same for the mean JCT over the jobs *both* completed (``jct_both_ratio``,
    ``jct_both_le_every_seed``, ``jct_both_le_seed_mean``): where one policy completes
    jobs the other drops (admission control), each one's mean over its own
    completions compares different jobs.
    """
    groups: dict[tuple, dict[str, dict[int, Mapping[str, Any]]]] = {}
    for r in rows:
        groups.setdefault(_group_key(r, ("seed", "policy")), {}).setdefault(r["policy"], {})[r["seed"]] = r
    out = []
    for key, by_pol in groups.items():
        a, b = by_pol.get(policy, {}), by_pol.get(baseline, {})
        seeds = [s for s in a if s in b]
        if not seeds:
            continue
        row: dict[str, Any] = {**dict(key), "policy": policy, "baseline": baseline, "seeds": len(seeds)}
        for name, num, den, field in (("done_ratio", a, b, "completed"),
                                      ("done_by_last_arrival_ratio", a, b, "completed_by_last_arrival"),
                                      ("jct_ratio", b, a, "jct_mean_s")):
            vals = [num[s][field] / den[s][field] for s in seeds if num[s].get(field) and den[s].get(field)]
            if vals:
                row[f"{name}_mean"], _, row[f"{name}_ci"] = t_interval(vals, confidence)
        row["done_ge_every_seed"] = all(a[s]["completed"] >= b[s]["completed"] for s in seeds)
        row["done_by_last_arrival_ge_every_seed"] = all(
            a[s]["completed_by_last_arrival"] >= b[s]["completed_by_last_arrival"] for s in seeds)
        row["jct_le_every_seed"] = all(a[s]["jct_mean_s"] is not None and b[s]["jct_mean_s"] is not None
                                       and a[s]["jct_mean_s"] <= b[s]["jct_mean_s"] for s in seeds)
        both = [_both_means(jct_by_job, a[s]["cell"], b[s]["cell"]) for s in seeds] if jct_by_job else []
        both = [m for m in both if m is not None]
        if both and len(both) == len(seeds):
            row["jct_both_ratio_mean"], _, row["jct_both_ratio_ci"] = t_interval([fb / el for el, fb in both],
                                                                                  confidence)
            row["jct_both_le_every_seed"] = all(el <= fb for el, fb in both)
            row["jct_both_le_seed_mean"] = statistics.fmean(el for el, _ in both) <= statistics.fmean(
                fb for _, fb in both)
        out.append(row)
    return out


def _both_means(jct_by_job: Mapping[str, Mapping[str, float]], cell: str, base_cell: str
                ) -> tuple[float, float] | None:
    """Mean JCT of the policy's and the baseline's cell over the jobs both completed (None: none in common)."""
    a, b = jct_by_job.get(cell), jct_by_job.get(base_cell)
    if not a or not b:
        return None
    common = [j for j in a if j in b]
    if not common:
        return None
    return statistics.fmean(a[j] for j in common), statistics.fmean(b[j] for j in common)


def _fmt(mean: float | None, ci: float | None, scale: float = 1.0, digits: int = 2) -> str:
    if mean is None:
        return "-"
    text = f"{mean / scale:.{digits}f}"
    return text + (f" ± {ci / scale:.{digits}f}" if ci is not None else "")


def _markdown(spec: SweepSpec, rows, summary, comparison, run_info: Mapping[str, Any]) -> str:
    shown = [a for a in spec.axes if a not in ("seed", "policy")]
    pct = f"{spec.confidence:.0%}"
    lines = [f"# Sweep `{spec.name}`", "", spec.description.strip(), "",
             f"Spec `{spec.file}`: {len(spec.cells)} cells, {len(rows)} with results. "
             f"Means over seeds ± the half-width of the {pct} Student-t interval of the mean "
             "(none for one seed). done = jobs completed; JCT = mean JCT of completed jobs.", "",
             "| " + " | ".join(shown + ["policy", "seeds", "done", "done by last arrival", "mean JCT (h)",
                                        "rescales/job"]) + " |",
             "|" + "---|" * (len(shown) + 6)]
    for s in summary:
        lines.append("| " + " | ".join([str(s[a]) for a in shown] + [
            s["policy"], str(s["seeds"]), _fmt(s.get("completed_mean"), s.get("completed_ci"), digits=1),
            _fmt(s.get("completed_by_last_arrival_mean"), s.get("completed_by_last_arrival_ci"), digits=1),
            _fmt(s.get("jct_mean_s_mean"), s.get("jct_mean_s_ci"), 3600.0),
            _fmt(s.get("rescales_per_job_mean"), s.get("rescales_per_job_ci"))]) + " |")
    if comparison:
        lines += ["", f"## {spec.compare} vs {spec.baseline} (paired by seed)", "",
                  "| " + " | ".join(shown + ["seeds", "done ratio", "done-by-last-arrival ratio", "JCT ratio",
                                            "JCT-both ratio", "done >= every seed",
                                            "done by last arrival >= every seed", "JCT <= every seed",
                                            "JCT both <= (seed mean)"]) + " |",
                  "|" + "---|" * (len(shown) + 9)]
        for c in comparison:
            lines.append("| " + " | ".join([str(c[a]) for a in shown] + [
                str(c["seeds"]), _fmt(c.get("done_ratio_mean"), c.get("done_ratio_ci"), digits=3),
                _fmt(c.get("done_by_last_arrival_ratio_mean"), c.get("done_by_last_arrival_ratio_ci"), digits=3),
                _fmt(c.get("jct_ratio_mean"), c.get("jct_ratio_ci"), digits=3),
                _fmt(c.get("jct_both_ratio_mean"), c.get("jct_both_ratio_ci"), digits=3),
                "yes" if c["done_ge_every_seed"] else "**no**",
                "yes" if c["done_by_last_arrival_ge_every_seed"] else "**no**",
                "yes" if c["jct_le_every_seed"] else "**no**",
                "-" if "jct_both_le_seed_mean" not in c else "yes" if c["jct_both_le_seed_mean"] else "**no**",
            ]) + " |")
        lines += ["", "Ratios: done = done(compared) / done(baseline), JCT = JCT(baseline) / JCT(compared); "
                  "above 1 favours the compared policy. JCT-both: the same over the jobs both completed (paired "
                  "by seed; where one policy completes jobs the other drops, each one's own mean compares "
                  "different jobs); its verdict compares the seeds' means, as "
                  "validation/results/paper_comparison.md does."]
    lines += ["", f"Run: {run_info.get('backend', '?')}, {run_info.get('ran', '?')} cells run now, "
              f"{run_info.get('already_done', '?')} found done, {run_info.get('wall_s', 0.0):.0f} s wall.", ""]
    return "\n".join(lines)


def _slug(items: Sequence[tuple[str, Any]]) -> str:
    """File-name part of a scenario: ``cluster=64-restart_cost_s=30``; no dots (they would read as a suffix)."""
    text = "-".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in items)
    return "".join(ch if ch.isalnum() or ch in "=-_" else "p" if ch == "." else "_" for ch in text)


def _plots(spec: SweepSpec, docs, summary, out: Path) -> list[Path]:
    from elasticopt.plotting import plot_cdf_panels, plot_ci_panels

    other = [a for a in spec.axes if a not in ("seed", "policy", "load")]
    scen = lambda p: tuple((a, p[a]) for a in other)  # noqa: E731
    paths: list[Path] = []
    for sc in dict.fromkeys(scen(d["params"]) for d in docs):
        slug = ("-" + _slug(sc)) if sc else ""
        panels: dict[str, dict[str, tuple[list[float], int]]] = {}
        for d in docs:
            if scen(d["params"]) != sc:
                continue
            series = panels.setdefault(f"load {d['params']['load']:g}", {})
            vals, n = series.get(d["params"]["policy"], ([], 0))
            series[d["params"]["policy"]] = (vals + list(d["jct_s"]), n + d["row"]["jobs"])
        paths += plot_cdf_panels(dict(sorted(panels.items(), key=lambda kv: float(kv[0].split()[1]))),
                                 out / "plots" / f"jct_cdf{slug}")
        ci: dict[str, dict[str, list]] = {"completed": {}, "completed_by_last_arrival": {}, "jct_mean_h": {}}
        for s in summary:
            if scen(s) != sc:
                continue
            for m in ("completed", "completed_by_last_arrival"):
                ci[m].setdefault(s["policy"], []).append((s["load"], s.get(f"{m}_mean"), s.get(f"{m}_ci")))
            jm, jc = s.get("jct_mean_s_mean"), s.get("jct_mean_s_ci")
            ci["jct_mean_h"].setdefault(s["policy"], []).append(
                (s["load"], None if jm is None else jm / 3600, None if jc is None else jc / 3600))
        loads = {s["load"] for s in summary}
        paths += plot_ci_panels(ci, out / "plots" / f"by_load{slug}",
                                ylabels={"completed": "jobs done (mean, CI over seeds)",
                                         "completed_by_last_arrival": "jobs done by the last arrival",
                                         "jct_mean_h": "mean JCT, h (mean, CI over seeds)"},
                                log_x=len(loads) > 1 and max(loads) / min(loads) >= 8, log_y=("jct_mean_h",))
    return paths


def write_report(spec: SweepSpec, out_dir: str | os.PathLike[str], run_info: Mapping[str, Any] | None = None, *,
                 plots: bool = True) -> dict[str, Any]:
    """Write the table, the summary and the plots of every finished cell; returns the summary document."""
    out = Path(out_dir)
    docs = collect(spec, out)
    rows = table_rows(docs)
    write_table(rows, out)
    summary = summarise(rows, spec.confidence)
    by_job = {d["key"]: d["jct_by_job_s"] for d in docs if "jct_by_job_s" in d}
    comparison = compare(rows, spec.compare, spec.baseline, spec.confidence, by_job)
    atomic_write_text(out / "summary.csv", _csv([{k: v for k, v in s.items() if k != "seed_list"} for s in summary]))
    doc = {"spec": spec.name, "file": spec.file, "cells": len(spec.cells), "finished": len(rows),
           "axes": list(spec.axes), "confidence": spec.confidence,
           "interval": "Student-t interval of the mean across seeds", "summary": summary, "comparison": comparison,
           "run": dict(run_info or {})}
    atomic_write_text(out / "summary.json", json.dumps(doc, indent=1, sort_keys=True) + "\n")
    atomic_write_text(out / "summary.md", _markdown(spec, rows, summary, comparison, run_info or {}))
    if plots and docs:
        doc["plots"] = [str(p) for p in _plots(spec, docs, summary, out)]
    return doc
