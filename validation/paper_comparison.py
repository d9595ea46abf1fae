"""Reproduce the paper's comparison: elastic (k and b) vs fixed-batch (k only) vs static, over a grid.

Saxena et al. (MASCOTS 2020) report that choosing both GPUs and batch size
completes up to ~2x as many jobs as the strong baseline that rescales GPUs at
a fixed batch, with up to ~10x lower mean job completion time (one author's
summary adds: ~3x fewer jobs dropped).  This script runs every cell of a grid
(:func:`grid`: cluster, load, restart cost, submitted batch, admission
control), several seeds each, under the three policies, and writes

    validation/results/paper_comparison.md   (+ .png/.pdf/.svg, + .json with every figure)

Each point: a workload generated at the cell's load (Philly sizes and
durations, t4/* profiles, see elasticopt.scheduling.workload_generator),
simulated until every job is done or dropped.  *done* counts the jobs
completed by the horizon (the last arrival), *JCT* is the mean over every
completed job, *dropped* the jobs admission control turned away.

    python validation/paper_comparison.py                 # the whole grid (~40 min on 2 shared cores)
    python validation/paper_comparison.py --quick         # 64 GPUs, two loads, one seed: a smoke test
    python validation/paper_comparison.py --groups main --gpus 64 --loads 0.5,2 --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from elasticopt._io import atomic_write_text  # noqa: E402
from elasticopt.scheduling import SimulationConfig, simulate  # noqa: E402
from elasticopt.scheduling.workload_generator import generate_workload  # noqa: E402
from paper_report import markdown, plot  # noqa: E402

POLICIES = ("elastic", "fixed-batch", "static")
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Cell:
    """One setting of the grid; every seed of it is one point.

    ``group``: ``main`` (the load sweep of the report's first table), ``sensitivity`` (restart cost and
    submitted batch, the defect's grid) or ``paper`` (admission control: the paper's dropped jobs).
    """

    group: str
    gpus: int
    load: float
    restart_cost_s: float = 30.0
    submitted_batch: str = "random"
    admission_deadline_s: float | None = None
    queue_limit: int | None = None
    jobs_per_gpu: float = 2.0

    @property
    def jobs(self) -> int:
        """Jobs per run: ``jobs_per_gpu`` x GPUs, at least 100."""
        return max(100, int(self.jobs_per_gpu * self.gpus))

    @property
    def key(self) -> tuple:
        """What the simulation depends on (cells of several groups with one key are run once)."""
        return (self.gpus, self.load, self.restart_cost_s, self.submitted_batch, self.admission_deadline_s,
                self.queue_limit, self.jobs)


def grid(
    groups: Sequence[str] = ("main", "sensitivity", "paper"),
    gpus: Sequence[int] = (64, 256),
    loads: Sequence[float] = (0.5, 2.0, 8.0, 32.0),
    restart_costs_s: Sequence[float] = (0.0, 30.0, 300.0),
    submitted_batches: Sequence[str] = ("random", "min", "max"),
    sensitivity_gpus: int = 64,
    paper_loads: Sequence[float] = (8.0, 32.0),
    paper_deadlines_s: Sequence[float] = (0.0, 600.0),
    paper_jobs_per_gpu: float = 8.0,
) -> list[Cell]:
    """The cells of the comparison (seeds are separate: every cell runs under each of them).

    - ``main``: every cluster of ``gpus`` x ``loads``, restart cost 30 s, random submitted batch.
    - ``sensitivity``: ``sensitivity_gpus`` x ``loads`` x ``restart_costs_s`` x ``submitted_batches``.
    - ``paper``: ``sensitivity_gpus`` x ``paper_loads`` x admission deadlines ``paper_deadlines_s``
      (0: a job that cannot start at once is dropped) x ``submitted_batches``, 30 s restarts,
      ``paper_jobs_per_gpu`` jobs per GPU (a longer overload than the other groups').
    """
    out: list[Cell] = []
    if "main" in groups:
        out += [Cell("main", g, load) for g in gpus for load in loads]
    if "sensitivity" in groups:
        out += [Cell("sensitivity", sensitivity_gpus, load, cost, sb)
                for load in loads for cost in restart_costs_s for sb in submitted_batches]
    if "paper" in groups:
        out += [Cell("paper", sensitivity_gpus, load, 30.0, sb, admission_deadline_s=d, jobs_per_gpu=paper_jobs_per_gpu)
                for sb in submitted_batches for d in paper_deadlines_s for load in paper_loads]
    return out


def run_point(cell: Cell, seed: int, solver: str = "dp") -> dict:
    """Simulate one cell at one seed under every policy: metrics per policy."""
    jobs = generate_workload(cell.jobs, cell.gpus, cell.load, seed=seed, submitted_batch=cell.submitted_batch)
    horizon = max(j.arrival_s for j in jobs)
    # run to completion: the run up to the horizon is the same as with a horizon (no decision looks
    # ahead), so "done by the horizon" is read from the completion times
    cfg = SimulationConfig(gpus=cell.gpus, restart_cost_s=cell.restart_cost_s, seed=seed,
                           admission_deadline_s=cell.admission_deadline_s, queue_limit=cell.queue_limit)
    out = {}
    jct_of = {}
    for pol in POLICIES:
        res = simulate(jobs, pol, cfg, policy_options={"solver": solver})
        m = res.metrics
        by_h = [r for r in res.records if r.completion_s is not None and r.completion_s <= horizon]
        out[pol] = {"done": len(by_h), "completed": m.completed, "dropped": m.dropped, "unfinished": m.unfinished,
                    "jobs": m.jobs, "jct_mean_s": m.jct_mean_s, "jct_median_s": m.jct_median_s,
                    "utilisation": _util_until(res.timeline, horizon, cell.gpus), "rescales": m.rescales,
                    "rescales_per_job": m.rescales_per_job, "decision_ms": m.decision_s_mean * 1e3,
                    "wall_s": res.wall_s}
        jct_of[pol] = {r.job_id: r.completion_s - r.arrival_s for r in res.records if r.completion_s is not None}
    # mean JCT over the jobs both elastic and fixed-batch completed: with jobs dropped, each policy's own
    # mean is over a different set of jobs (the one that drops the long jobs looks faster)
    common = sorted(set(jct_of["elastic"]) & set(jct_of["fixed-batch"]))
    for pol in ("elastic", "fixed-batch"):
        out[pol]["jct_common_s"] = float(np.mean([jct_of[pol][j] for j in common])) if common else None
    return {"cell": dataclasses.asdict(cell), "seed": seed, "horizon_s": horizon, "policies": out}


def _util_until(timeline, horizon, gpus):
    """Time-average fraction of GPUs held over [0, horizon]."""
    area, prev_t, prev_u = 0.0, 0.0, 0
    for p in timeline:
        t = min(p.time_s, horizon)
        area += prev_u * (t - prev_t)
        prev_t, prev_u = t, p.gpus_in_use
    area += prev_u * max(horizon - prev_t, 0.0)
    return area / (horizon * gpus) if horizon > 0 else 0.0


def _stats(values) -> dict:
    """Mean, standard deviation (n-1), min and max of the finite values (NaN where there are none)."""
    v = np.array([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return {"mean": float("nan"), "sd": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "min": float(v.min()), "max": float(v.max()), "n": int(v.size)}


def summarise(cell: Cell, points: list[dict]) -> dict:
    """One row per cell: per policy the stats over seeds; ratios (means of per-seed ratios); the verdict."""
    row = {**dataclasses.asdict(cell), "jobs": cell.jobs, "seeds": [p["seed"] for p in points]}
    for pol in POLICIES:
        for key in ("done", "completed", "dropped", "jct_mean_s", "jct_common_s", "utilisation", "rescales_per_job"):
            row[f"{pol}:{key}"] = _stats([p["policies"][pol].get(key) for p in points])
    e = [p["policies"]["elastic"] for p in points]
    f = [p["policies"]["fixed-batch"] for p in points]
    row["done_ratio"] = _stats([a["done"] / b["done"] if b["done"] else None for a, b in zip(e, f)])
    row["jct_ratio"] = _stats([b["jct_mean_s"] / a["jct_mean_s"] if a["jct_mean_s"] and b["jct_mean_s"] else None
                               for a, b in zip(e, f)])
    row["jct_common_ratio"] = _stats([b["jct_common_s"] / a["jct_common_s"] if a["jct_common_s"] and b["jct_common_s"]
                                      else None for a, b in zip(e, f)])
    row["dropped_ratio"] = _stats([b["dropped"] / a["dropped"] if a["dropped"] else None for a, b in zip(e, f)])
    row["done_ok"] = row["elastic:done"]["mean"] >= row["fixed-batch:done"]["mean"]
    # JCT compared on the jobs both completed (the same as each one's mean when nothing is dropped)
    row["jct_ok"] = row["elastic:jct_common_s"]["mean"] <= row["fixed-batch:jct_common_s"]["mean"]
    row["seeds_done_worse"] = sum(a["done"] < b["done"] for a, b in zip(e, f))
    row["seeds_jct_worse"] = sum((a["jct_common_s"] or 0) > (b["jct_common_s"] or 0) for a, b in zip(e, f))
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", default="main,sensitivity,paper", help="which parts of the grid (default all)")
    p.add_argument("--gpus", default="64,256", help="cluster sizes of the main table (default 64,256)")
    p.add_argument("--loads", default="0.5,2,8,32", help="offered loads (default 0.5,2,8,32)")
    p.add_argument("--sensitivity-gpus", type=int, default=64, help="cluster of the sensitivity and paper cells")
    p.add_argument("--restart-costs-s", default="0,30,300", help="sensitivity: restart costs (default 0,30,300)")
    p.add_argument("--batches", default="random,min,max", help="sensitivity: submitted batch (random,min,max)")
    p.add_argument("--paper-loads", default="8,32", help="paper setting: loads (default 8,32)")
    p.add_argument("--deadlines-s", default="0,600", help="paper setting: admission deadlines (s, default 0,600)")
    p.add_argument("--paper-jobs-per-gpu", type=float, default=8.0, help="paper setting: jobs per GPU (default 8)")
    p.add_argument("--seeds", default="0,1,2", help="seeds (default 0,1,2)")
    p.add_argument("--solver", default="dp",
                   help="exact backend of elastic / fixed-batch (default dp; any registered exact backend "
                        "gives the same optima, only the time changes)")
    p.add_argument("--quick", action="store_true", help="main table only: 64 GPUs, loads 1,4, one seed")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--report-only", action="store_true",
                   help="rewrite the .md and plot from the .json of the last run in --out (no simulation)")
    args = p.parse_args(argv)
    if args.report_only:
        return _report_only(args.out)
    args.argv = " ".join(argv) if argv is not None else " ".join(sys.argv[1:])
    if args.quick:
        args.groups, args.gpus, args.loads, args.seeds = "main", "64", "1,4", "0"
    floats = lambda s: tuple(float(x) for x in s.split(",") if x.strip())  # noqa: E731
    seeds = tuple(int(x) for x in args.seeds.split(","))
    cells = grid(groups=tuple(args.groups.split(",")), gpus=tuple(int(x) for x in args.gpus.split(",")),
                 loads=floats(args.loads), restart_costs_s=floats(args.restart_costs_s),
                 submitted_batches=tuple(args.batches.split(",")), sensitivity_gpus=args.sensitivity_gpus,
                 paper_loads=floats(args.paper_loads),
                 paper_deadlines_s=floats(args.deadlines_s), paper_jobs_per_gpu=args.paper_jobs_per_gpu)
    t0 = time.perf_counter()
    done: dict[tuple, list[dict]] = {}  # cell key -> its points (a cell in two groups runs once)
    rows = []
    for i, cell in enumerate(cells):
        if cell.key not in done:
            pts = []
            for seed in seeds:
                pt = run_point(cell, seed, args.solver)
                pts.append(pt)
                e, fb = pt["policies"]["elastic"], pt["policies"]["fixed-batch"]
                print(f"[{i + 1}/{len(cells)}] {cell.group} G={cell.gpus} load={cell.load:g} "
                      f"cost={cell.restart_cost_s:g} batch={cell.submitted_batch} deadline={cell.admission_deadline_s} "
                      f"seed={seed}: done el/fb = {e['done']}/{fb['done']}, dropped {e['dropped']}/{fb['dropped']}, "
                      f"JCT el/fb = {(e['jct_mean_s'] or 0) / 3600:.2f}/{(fb['jct_mean_s'] or 0) / 3600:.2f} h "
                      f"[{time.perf_counter() - t0:.0f} s]", flush=True)
            done[cell.key] = pts
        rows.append(summarise(cell, done[cell.key]))
    wall = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    plot([r for r in rows if r["group"] == "main"], args.out / "paper_comparison.png", POLICIES)
    points = [pt for pts in done.values() for pt in pts]
    atomic_write_text(args.out / "paper_comparison.json",
                      json.dumps({"argv": args.argv, "wall_s": wall, "seeds": list(seeds), "solver": args.solver,
                                  "rows": rows, "points": points}, indent=1) + "\n")
    atomic_write_text(args.out / "paper_comparison.md", markdown(rows, args, wall, seeds))
    print(f"wrote {args.out}/paper_comparison.md (.png/.pdf/.svg, .json) in {wall:.0f} s")
    return 0


def _report_only(out: Path) -> int:
    """Rewrite the report and the plot from ``out/paper_comparison.json`` (the run's command and wall time kept)."""
    data = json.loads((out / "paper_comparison.json").read_text())
    rows = data["rows"]
    args = argparse.Namespace(argv=data["argv"], solver=data["solver"])
    plot([r for r in rows if r["group"] == "main"], out / "paper_comparison.png", POLICIES)
    atomic_write_text(out / "paper_comparison.md", markdown(rows, args, data["wall_s"], data["seeds"]))
    print(f"rewrote {out}/paper_comparison.md (.png/.pdf/.svg) from {out}/paper_comparison.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
