"""Reproduce the paper's comparison: elastic (k and b) vs fixed-batch (k only) vs static.

Saxena et al. (MASCOTS 2020) report that choosing both GPUs and batch size
completes up to ~2x as many jobs as the strong baseline that rescales GPUs at
a fixed batch, with up to ~10x lower mean job completion time.  This script
sweeps the offered load from light to heavy on realistic clusters, several
seeds each, and writes a table and a plot:

    validation/results/paper_comparison.md   (+ .png, + .json with every figure)

Each run: a workload generated at the given load (Philly sizes and durations,
t4/* profiles, see elasticopt.scheduling.workload_generator), simulated until the last
arrival (the horizon): "completed" counts jobs finished by then, "JCT" is the
mean over those, "JCT all" counts unfinished jobs at the horizon.

    python validation/paper_comparison.py                 # default sweep, < 10 min on 2 cores
    python validation/paper_comparison.py --quick         # smaller, for a smoke test
    python validation/paper_comparison.py --gpus 64 --loads 0.5,1,2,4 --seeds 0,1,2 --solver dp
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from elasticopt._io import atomic_write_text
from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.workload_generator import generate_workload
from elasticopt.plotting import new_figure, save_figure

POLICIES = ("elastic", "fixed-batch", "static")
RESULTS = Path(__file__).resolve().parent / "results"


def run_point(gpus, load, seed, n_jobs, solver, restart_cost_s, submitted_batch="random"):
    """Simulate one (cluster, load, seed) under every policy; metrics per policy."""
    jobs = generate_workload(n_jobs, gpus, load, seed=seed, submitted_batch=submitted_batch)
    horizon = max(j.arrival_s for j in jobs)
    # run to completion: the run up to the horizon is the same as with a horizon (no decision looks
    # ahead), so "completed by the horizon" is read from the completion times
    cfg = SimulationConfig(gpus=gpus, restart_cost_s=restart_cost_s, seed=seed)
    out = {}
    for pol in POLICIES:
        res = simulate(jobs, pol, cfg, policy_options={"solver": solver})
        m = res.metrics
        by_h = [r for r in res.records if r.completion_s is not None and r.completion_s <= horizon]
        jct_h = [r.completion_s - r.arrival_s for r in by_h]
        util_h = _util_until(res.timeline, horizon, gpus)
        out[pol] = {"completed": len(by_h), "jobs": m.jobs, "jct_mean_s": m.jct_mean_s,
                    "jct_median_s": m.jct_median_s, "jct_p95_s": m.jct_p95_s,
                    "jct_horizon_s": float(np.mean(jct_h)) if jct_h else None, "makespan_s": m.makespan_s,
                    "utilisation": util_h, "rescales": m.rescales, "restart_s": m.restart_s,
                    "decision_ms": m.decision_s_mean * 1e3, "wall_s": res.wall_s}
    return {"gpus": gpus, "load": load, "seed": seed, "jobs": n_jobs, "horizon_s": horizon,
            "restart_cost_s": restart_cost_s, "submitted_batch": submitted_batch, "policies": out}


def _util_until(timeline, horizon, gpus):
    """Time-average fraction of GPUs held over [0, horizon]."""
    area, prev_t, prev_u = 0.0, 0.0, 0
    for p in timeline:
        t = min(p.time_s, horizon)
        area += prev_u * (t - prev_t)
        prev_t, prev_u = t, p.gpus_in_use
    area += prev_u * max(horizon - prev_t, 0.0)
    return area / (horizon * gpus) if horizon > 0 else 0.0


def _mean(points, pol, key):
    vals = [p["policies"][pol][key] for p in points if p["policies"][pol][key] is not None]
    return float(np.mean(vals)) if vals else float("nan")


def _ratio_mean(points, num_pol, den_pol, key):
    """Mean over seeds of the per-seed ratio num/den."""
    r = [p["policies"][num_pol][key] / p["policies"][den_pol][key] for p in points
         if p["policies"][num_pol][key] and p["policies"][den_pol][key]]
    return float(np.mean(r)) if r else float("nan")


def summarise(points):
    rows = []
    for gpus in sorted({p["gpus"] for p in points}):
        for load in sorted({p["load"] for p in points if p["gpus"] == gpus}):
            pts = [p for p in points if p["gpus"] == gpus and p["load"] == load]
            row = {"gpus": gpus, "load": load, "seeds": len(pts), "jobs": pts[0]["jobs"]}
            for pol in POLICIES:
                row[f"{pol}_completed"] = _mean(pts, pol, "completed")
                row[f"{pol}_jct_h"] = _mean(pts, pol, "jct_mean_s") / 3600
                row[f"{pol}_jct_horizon_h"] = _mean(pts, pol, "jct_horizon_s") / 3600
                row[f"{pol}_jct_median_h"] = _mean(pts, pol, "jct_median_s") / 3600
                row[f"{pol}_util"] = _mean(pts, pol, "utilisation")
            row["completed_ratio"] = _ratio_mean(pts, "elastic", "fixed-batch", "completed")
            row["jct_ratio"] = _ratio_mean(pts, "fixed-batch", "elastic", "jct_mean_s")
            row["jct_median_ratio"] = _ratio_mean(pts, "fixed-batch", "elastic", "jct_median_s")
            row["jct_horizon_ratio"] = _ratio_mean(pts, "fixed-batch", "elastic", "jct_horizon_s")
            rows.append(row)
    return rows


def plot(rows, path):
    clusters = sorted({r["gpus"] for r in rows})
    fig, axes = new_figure(5 * len(clusters), 7, 2, len(clusters))
    for c, gpus in enumerate(clusters):
        rs = [r for r in rows if r["gpus"] == gpus]
        loads = [r["load"] for r in rs]
        for pol, style in zip(POLICIES, ("o-", "s--", "^:")):
            axes[0][c].plot(loads, [r[f"{pol}_completed"] / r["jobs"] for r in rs], style, label=pol)
            axes[1][c].plot(loads, [r[f"{pol}_jct_h"] for r in rs], style, label=pol)
        axes[0][c].set_title(f"{gpus} GPUs")
        axes[0][c].set_ylabel("fraction of jobs completed by the horizon")
        axes[1][c].set_ylabel("mean JCT, all jobs to completion (h)")
        axes[1][c].set_yscale("log")
        for ax in axes[:, c]:
            ax.set_xscale("log")
            ax.set_xlabel("offered load")
            ax.grid(alpha=0.3)
        axes[0][c].legend(fontsize=8)
    save_figure(fig, path)


def markdown(rows, sens, args, wall_s):
    f = lambda x, d=2: "-" if x != x else f"{x:.{d}f}"  # noqa: E731  (NaN -> "-")
    lines = [
        "# elastic vs fixed-batch vs static (paper comparison)",
        "",
        f"Generated by `python validation/paper_comparison.py {args.argv}` in {wall_s:.0f} s "
        f"(solver `{args.solver}`, restart cost {args.restart_cost_s:.0f} s per start/rescale, "
        f"seeds {args.seeds}, t4/* profiles, Philly sizes and durations clipped at 48 h). "
        "Every run goes until all jobs are done. *done* = jobs completed by the horizon "
        "(= the last arrival; mean over seeds); *JCT* = mean JCT over all jobs (run to completion); "
        "*JCT by H* = mean JCT of the jobs completed by the horizon; util = GPUs held over [0, horizon]. "
        "Ratios are means of per-seed ratios: done elastic/fixed-batch, JCT fixed-batch/elastic.",
        "",
        "| GPUs | load | jobs | done elastic | done fixed-b | done static | **done ratio** | JCT elastic (h) "
        "| JCT fixed-b (h) | JCT static (h) | **JCT ratio** | median-JCT ratio | JCT-by-H ratio | util el / fb |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['gpus']} | {r['load']:g} | {r['jobs']} | {f(r['elastic_completed'], 1)} | "
            f"{f(r['fixed-batch_completed'], 1)} | {f(r['static_completed'], 1)} | **{f(r['completed_ratio'])}** | "
            f"{f(r['elastic_jct_h'])} | {f(r['fixed-batch_jct_h'])} | {f(r['static_jct_h'])} | "
            f"**{f(r['jct_ratio'])}** | {f(r['jct_median_ratio'])} | {f(r['jct_horizon_ratio'])} | "
            f"{f(r['elastic_util'])} / {f(r['fixed-batch_util'])} |"
        )
    if sens:
        lines += ["", "## Sensitivity (one seed)", "",
                  "| GPUs | load | restart cost (s) | submitted batch | done ratio | JCT ratio | rescales elastic |",
                  "|---|---|---|---|---|---|---|"]
        for p in sens:
            e, fb = p["policies"]["elastic"], p["policies"]["fixed-batch"]
            lines.append(f"| {p['gpus']} | {p['load']:g} | {p['restart_cost_s']:.0f} | {p['submitted_batch']} | "
                         f"{f(e['completed'] / fb['completed'] if fb['completed'] else float('nan'))} | "
                         f"{f(fb['jct_mean_s'] / e['jct_mean_s'] if e['jct_mean_s'] and fb['jct_mean_s'] else float('nan'))} | "
                         f"{e['rescales']} |")
    best_c = max(rows, key=lambda r: r["completed_ratio"] if r["completed_ratio"] == r["completed_ratio"] else -1)
    best_j = max(rows, key=lambda r: r["jct_ratio"] if r["jct_ratio"] == r["jct_ratio"] else -1)
    lines += ["", "## Findings", "",
              f"- Largest jobs-completed ratio: **{f(best_c['completed_ratio'])}x** at {best_c['gpus']} GPUs, "
              f"load {best_c['load']:g} (paper: up to ~2x).",
              f"- Largest mean-JCT ratio: **{f(best_j['jct_ratio'])}x** at {best_j['gpus']} GPUs, "
              f"load {best_j['load']:g} (paper: up to ~10x).",
              "", "![jobs completed and mean JCT vs load](paper_comparison.png)", "",
              "## Why (and where not)", "",
              "- **JCT: the gap is largest at light load and shrinks with load.** With GPUs free, elastic "
              "gives a job a large batch on many GPUs; fixed-batch can only add GPUs at the submitted batch, "
              "whose local batch shrinks (k <= b / min_local) and whose scaling efficiency collapses. Under "
              "heavy load every policy is queue-bound and both end up near one job per few GPUs.",
              "- **Jobs completed: the gap grows with load.** Elastic can shrink any job to one GPU with a small "
              "batch and admit queued jobs; fixed-batch needs b / max_local GPUs per job. But 94 % of Philly jobs "
              "ask for one GPU and most submitted batches already fit one GPU (b <= max_local), so the packing "
              "advantage applies to few jobs; and Philly durations are long-tailed (clipped at 48 h), so many "
              "jobs cannot finish by the horizon under any policy. Both cap the completed ratio below the "
              "paper's ~2x. Where users submit small batches (sensitivity table: `min`) the gap widens: "
              "fixed-batch is stuck at a small, inefficient per-GPU batch that elastic raises; where they "
              "submit the largest batch (`max`) fixed-batch is already efficient and the gap closes: under "
              "the anti-thrashing defaults (docs/design.md §4: cool-down of 15 restart costs, rescale penalty "
              "0.3) elastic can even complete fewer jobs there (one seed), because the rule holds running jobs "
              "on their option longer instead of shrinking them to admit queued ones.",
              "- **Finite workloads.** Each run has 2 jobs per GPU; at high load they arrive as a burst, so "
              "queueing is bounded by the burst and the baselines' mean JCT barely grows with load, while "
              "\"done by the horizon\" (a shorter window at higher load) falls for every policy.",
              "- **Restart cost** (30 s here; ~10 s measured for torchrun, docs/design.md §5) matters little against "
              "Philly durations of tens of minutes to hours; the anti-thrashing rule vetoes rescales that would "
              "not pay for themselves.",
              "- **Batch ranges** are Pollux's measured accuracy-neutral ranges (t4/*): wide for imagenet, "
              "cifar10 and ncf, narrow for bert. With narrow ranges (e.g. the a100/* profiles, 64-256) elastic "
              "has little batch freedom and approaches fixed-batch.", ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", default="64,256", help="cluster sizes (default 64,256)")
    p.add_argument("--loads", default="0.5,2,8,32", help="offered loads (default 0.5,2,8,32)")
    p.add_argument("--seeds", default="0,1,2", help="seeds (default 0,1,2)")
    p.add_argument("--jobs-per-gpu", type=float, default=2.0, help="jobs per run = this x GPUs (min 100)")
    p.add_argument("--solver", default="dp",
                   help="exact backend of elastic / fixed-batch (default dp; any registered exact backend "
                        "gives the same optima, only the time changes)")
    p.add_argument("--restart-cost-s", type=float, default=30.0)
    p.add_argument("--no-sensitivity", action="store_true")
    p.add_argument("--quick", action="store_true", help="64 GPUs, loads 1,4, one seed")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    args.argv = " ".join(argv) if argv is not None else " ".join(__import__("sys").argv[1:])
    if args.quick:
        args.gpus, args.loads, args.seeds, args.no_sensitivity = "64", "1,4", "0", True
    clusters = [int(x) for x in args.gpus.split(",")]
    loads = [float(x) for x in args.loads.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    t0 = time.perf_counter()
    points = []
    for gpus in clusters:
        n = max(100, int(args.jobs_per_gpu * gpus))
        for load in loads:
            for seed in seeds:
                pt = run_point(gpus, load, seed, n, args.solver, args.restart_cost_s)
                points.append(pt)
                e, fb = pt["policies"]["elastic"], pt["policies"]["fixed-batch"]
                print(f"G={gpus} load={load:g} seed={seed}: done el/fb/st = {e['completed']}/{fb['completed']}/"
                      f"{pt['policies']['static']['completed']} of {n}, JCT el/fb = "
                      f"{(e['jct_mean_s'] or 0) / 3600:.2f}/{(fb['jct_mean_s'] or 0) / 3600:.2f} h "
                      f"[{time.perf_counter() - t0:.0f} s]", flush=True)
    sens = []
    if not args.no_sensitivity:
        g0, l0 = clusters[0], max(loads)
        n0 = max(100, int(args.jobs_per_gpu * g0))
        for cost in (0.0, 300.0):
            sens.append(run_point(g0, l0, seeds[0], n0, args.solver, cost))
        sens.append(run_point(g0, l0, seeds[0], n0, args.solver, args.restart_cost_s, submitted_batch="max"))
        sens.append(run_point(g0, l0, seeds[0], n0, args.solver, args.restart_cost_s, submitted_batch="min"))
    rows = summarise(points)
    wall = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    plot(rows, args.out / "paper_comparison.png")
    atomic_write_text(args.out / "paper_comparison.json",
                      json.dumps({"rows": rows, "points": points, "sensitivity": sens}, indent=1) + "\n")
    atomic_write_text(args.out / "paper_comparison.md", markdown(rows, sens, args, wall))
    print(f"wrote {args.out}/paper_comparison.md (.png, .json) in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
