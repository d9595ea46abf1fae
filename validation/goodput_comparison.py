"""Throughput vs goodput scheduling: the seed paper's policy against the field's baselines.

Usage::

    python validation/goodput_comparison.py [--jobs 200] [--gpus 16] [--duration-max-h 4]
                                            [--loads 0.5,1,1.5,2.5] [--seeds 0,1,2] [--out validation/results]

Policies: ``elastic`` (the seed paper: throughput speedup), ``elastic-goodput``
(the same solver on T x E), ``pollux`` (p = -1 power mean of goodput
speedups, restart discount), ``fixed-batch`` (the paper's baseline),
``optimus`` and ``tiresias``.  Each runs every workload (Philly sizes and
durations, T4 networks whose statistical efficiency was fitted to Pollux's
validation runs) under both progress accountings:

- ``samples``: a job is done after its samples, any batch in range is as good
  (the seed paper's assumption);
- ``goodput``: a job is done after its samples *at efficiency* (each sample at
  batch b worth E(b)), what the measured validation runs say.

Writes ``goodput_comparison.csv`` (one tidy row per policy x accounting x load
x seed; pandas reads it), ``goodput_comparison.json`` (summary),
``goodput_comparison_jct.{png,pdf,svg}``, ``goodput_comparison_rescales.{png,pdf,svg}``
and ``goodput_comparison.md`` (tables and the reading).  Same arguments, same
numbers (wall times aside).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import time
from pathlib import Path

from elasticopt._io import atomic_write_text
from elasticopt.plotting import plot_metric_by_load
from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.hysteresis import DEFAULT_HYSTERESIS
from elasticopt.scheduling.workload_generator import generate_workload

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("elastic", "elastic-goodput", "pollux", "fixed-batch", "optimus", "tiresias")
PROGRESS = ("samples", "goodput")
FIELDS = ("policy", "progress", "load", "seed", "jobs", "completed", "jct_mean_h", "jct_median_h", "jct_p95_h",
          "queue_delay_mean_h", "makespan_h", "utilisation", "rescales_per_job", "restart_s_per_job",
          "mean_final_batch_over_min", "mean_efficiency_at_final_batch", "decision_ms_mean", "wall_s")


def run_one(jobs, policy: str, progress: str, load: float, seed: int, args) -> dict:
    """One simulation -> one tidy row."""
    cfg = SimulationConfig(gpus=args.gpus, gpus_per_node=args.gpus_per_node, restart_cost_s=args.restart_cost_s,
                           tick_s=args.tick_s, seed=seed, progress=progress)
    res = simulate(jobs, policy, cfg, policy_options={"solver": args.solver})
    m = res.metrics
    by_id = {j.id: j for j in jobs}
    ratios, effs = [], []
    for r in res.records:
        spec = by_id[r.job_id]
        if r.final_batch:
            ratios.append(r.final_batch / spec.batch_min)
            eff = spec.statistical_efficiency
            effs.append(float(eff(r.final_batch)) if eff is not None else 1.0)
    h = 3600.0
    return {
        "policy": policy, "progress": progress, "load": load, "seed": seed, "jobs": m.jobs, "completed": m.completed,
        "jct_mean_h": m.jct_mean_s / h if m.jct_mean_s is not None else None,
        "jct_median_h": m.jct_median_s / h if m.jct_median_s is not None else None,
        "jct_p95_h": m.jct_p95_s / h if m.jct_p95_s is not None else None,
        "queue_delay_mean_h": m.queue_delay_mean_s / h if m.queue_delay_mean_s is not None else None,
        "makespan_h": m.makespan_s / h if m.makespan_s is not None else None,
        "utilisation": m.utilisation, "rescales_per_job": m.rescales / m.jobs, "restart_s_per_job": m.restart_s / m.jobs,
        "mean_final_batch_over_min": statistics.fmean(ratios) if ratios else None,
        "mean_efficiency_at_final_batch": statistics.fmean(effs) if effs else None,
        "decision_ms_mean": m.decision_s_mean * 1e3, "wall_s": res.wall_s,
    }  # fmt: skip


def read_rows(path: Path) -> list[dict]:
    """The tidy rows of a previous run (numbers parsed, empty cells None)."""
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            r: dict = {}
            for k, v in row.items():
                if k in ("policy", "progress"):
                    r[k] = v
                elif v == "":
                    r[k] = None
                else:
                    r[k] = int(v) if k in ("seed", "jobs", "completed") else float(v)
            out.append(r)
    return out


def _mean(rows, key):
    vals = [r[key] for r in rows if r[key] is not None]
    return statistics.fmean(vals) if vals else None


def summary_table(rows: list[dict], progress: str, key: str, fmt: str = "{:.2f}") -> list[str]:
    """Markdown table: policy x load, mean over seeds of ``key``."""
    loads = sorted({r["load"] for r in rows})
    out = [f"| policy | " + " | ".join(f"load {x:g}" for x in loads) + " |", "|---|" + "---|" * len(loads)]
    for pol in dict.fromkeys(r["policy"] for r in rows):
        cells = []
        for x in loads:
            v = _mean([r for r in rows if r["policy"] == pol and r["progress"] == progress and r["load"] == x], key)
            cells.append("-" if v is None else fmt.format(v))
        out.append(f"| {pol} | " + " | ".join(cells) + " |")
    return out


def ratio(rows, a: str, b: str, progress: str, load: float, key: str = "jct_mean_h") -> float | None:
    """Mean over seeds of policy a's ``key`` divided by policy b's, same seeds."""
    vals = []
    for r in rows:
        if r["policy"] == a and r["progress"] == progress and r["load"] == load and r[key] is not None:
            other = [s for s in rows if s["policy"] == b and s["progress"] == progress and s["load"] == load
                     and s["seed"] == r["seed"] and s[key] is not None]
            if other and other[0][key] > 0:
                vals.append(r[key] / other[0][key])
    return statistics.fmean(vals) if vals else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=16)
    ap.add_argument("--duration-max-h", type=float, default=4.0,
                    help="clip Philly durations (hours): with a few hundred jobs a 48 h tail job would leave the "
                         "cluster idle around it and no load would be heavy")
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--loads", default="0.5,1,1.5,2.5", help="offered loads, comma-separated")
    ap.add_argument("--seeds", default="0,1,2", help="workload seeds, comma-separated")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--restart-cost-s", type=float, default=30.0)
    ap.add_argument("--tick-s", type=float, default=1800.0, help="periodic re-decision (Tiresias' demotions)")
    ap.add_argument("--solver", default="dp")
    ap.add_argument("--out", type=Path, default=ROOT / "validation" / "results")
    ap.add_argument("--from-csv", action="store_true",
                    help="do not simulate: rebuild the tables, plots and report from OUT/goodput_comparison.csv")
    args = ap.parse_args(argv)
    loads = [float(x) for x in args.loads.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    policies = args.policies.split(",")
    rows = []
    t0 = time.perf_counter()
    if args.from_csv:
        rows = read_rows(args.out / "goodput_comparison.csv")
        loads = sorted({r["load"] for r in rows})
        policies = list(dict.fromkeys(r["policy"] for r in rows))
    for load in ([] if args.from_csv else loads):
        for seed in seeds:
            jobs = generate_workload(args.jobs, args.gpus, load, seed=seed, duration_max_s=args.duration_max_h * 3600)
            for progress in PROGRESS:
                for pol in policies:
                    rows.append(run_one(jobs, pol, progress, load, seed, args))
                    r = rows[-1]
                    print(f"load {load:g} seed {seed} {progress:>7} {pol:>15}: mean JCT {r['jct_mean_h'] or 0:.2f} h, "
                          f"{r['rescales_per_job']:.2f} rescales/job, batch x{r['mean_final_batch_over_min'] or 0:.1f}",
                          flush=True)
    total_s = time.perf_counter() - t0
    out = args.out
    if args.from_csv:
        total_s = float(json.loads((out / "goodput_comparison.json").read_text())["total_wall_s"])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r[k] is None else r[k]) for k in FIELDS})
    atomic_write_text(out / "goodput_comparison.csv", buf.getvalue())
    command = (f"python validation/goodput_comparison.py --jobs {args.jobs} --gpus {args.gpus} "
               f"--duration-max-h {args.duration_max_h:g} --loads {args.loads} --seeds {args.seeds}")
    summary = {"command": command, "policies": policies, "loads": loads, "seeds": seeds, "total_wall_s": total_s,
               "mean_jct_h": {p: {pol: {str(x): _mean([r for r in rows if r["policy"] == pol and r["progress"] == p
                                                       and r["load"] == x], "jct_mean_h") for x in loads}
                                  for pol in policies} for p in PROGRESS}}
    atomic_write_text(out / "goodput_comparison.json", json.dumps(summary, indent=1) + "\n")
    plot_metric_by_load(rows, "jct_mean_h", out / "goodput_comparison_jct", ylabel="mean JCT (h)", log_y=True)
    plot_metric_by_load(rows, "rescales_per_job", out / "goodput_comparison_rescales", ylabel="rescales per job")
    md = [f"# Throughput vs goodput scheduling ({args.jobs} jobs, {args.gpus} T4 GPUs, seeds {args.seeds})", "",
          "Mean over seeds; every run goes until all jobs are done. Philly sizes and durations (clipped at "
          f"{args.duration_max_h:g} h), t4 networks, restart cost {args.restart_cost_s:g} s, re-decision every "
          f"{args.tick_s:g} s and at every arrival and completion, default hysteresis "
          f"({DEFAULT_HYSTERESIS}).", "",
          f"Reproduce: `{command}` ({total_s / 60:.0f} min here). Tidy rows: `goodput_comparison.csv`; "
          "figures `goodput_comparison_jct.*`, `goodput_comparison_rescales.*` (error bars: min..max over seeds).", ""]
    for p in PROGRESS:
        md += [f"## Mean JCT (h), progress counted in {p}", ""] + summary_table(rows, p, "jct_mean_h") + [""]
    for p in PROGRESS:
        md += [f"## Rescales per job, {p} accounting", ""] + summary_table(rows, p, "rescales_per_job") + [""]
    for p in PROGRESS:
        md += [f"## Median JCT (h), {p} accounting", ""] + summary_table(rows, p, "jct_median_h") + [""]
    md += ["## Utilisation (GPU-time held / capacity over the run), goodput accounting", ""]
    md += summary_table(rows, "goodput", "utilisation") + [""]
    md += ["## Mean final batch / batch_min (samples accounting)", ""]
    md += summary_table(rows, "samples", "mean_final_batch_over_min", "{:.1f}") + [""]
    md += ["## Mean statistical efficiency at the final batch (goodput accounting)", ""]
    md += summary_table(rows, "goodput", "mean_efficiency_at_final_batch", "{:.3f}") + [""]
    md += ["## Ratios (mean over seeds of per-seed ratios of mean JCT)", "",
           "| load | elastic-goodput / elastic (goodput acc.) | elastic-goodput / elastic (samples acc.) | "
           "pollux / elastic-goodput (goodput acc.) | elastic / fixed-batch (samples acc.) | "
           "elastic / fixed-batch (goodput acc.) |", "|---|---|---|---|---|---|"]
    for x in loads:
        cells = [ratio(rows, "elastic-goodput", "elastic", "goodput", x), ratio(rows, "elastic-goodput", "elastic", "samples", x),
                 ratio(rows, "pollux", "elastic-goodput", "goodput", x), ratio(rows, "elastic", "fixed-batch", "samples", x),
                 ratio(rows, "elastic", "fixed-batch", "goodput", x)]  # fmt: skip
        md.append(f"| {x:g} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    reading = ROOT / "validation" / "goodput_reading.md"
    if reading.is_file():
        md += ["", reading.read_text().strip()]
    atomic_write_text(out / "goodput_comparison.md", "\n".join(md) + "\n")
    print(f"wrote {out / 'goodput_comparison.md'} ({total_s:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
