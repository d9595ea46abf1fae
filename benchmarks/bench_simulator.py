"""Benchmark: a large simulated trace end to end with ``elastic``, with and without the hysteresis.

Prints, for the run with the anti-thrashing rule (the defaults: hysteresis
with its cool-down, the policy's rescale penalty) and, unless ``--no-compare``,
the same workload without it (no hysteresis, rescale penalty 0.01: what the
project did before): wall and CPU time of the simulation, the decision time (policy wall time: table assembly,
reductions, solve) and the solver's own time per decision (medians, side by
side in one run), rescales and restart seconds per job and the mean JCT.
Targets (issue 13), checked and printed, never asserted in a test: wall <= 120 s
on the 2-core development machine, median decision <= 2x the median solver
time, <= 3 rescales per job with mean JCT at most 5 % above the run without
the rule.  The machine's load average is printed with the figures.

    python benchmarks/bench_simulator.py --jobs 10000 --gpus 1024
    python benchmarks/bench_simulator.py --jobs 1000 --gpus 256 --min-gain 0.3 --payback-factor 2
    python benchmarks/bench_simulator.py --cluster sia-64 --jobs 300 --node-aware   # heterogeneous

With ``--trace philly`` (or a Philly-format CSV) every job of the public
Philly trace is replayed with its real arrival time, GPU count and duration
(:func:`~elasticopt.scheduling.traces.read_philly`) on the Philly-sized
cluster (1,248 GPUs, 8 per node, unless ``--gpus``), without the comparison
run; the target is the issue's (23): whole-trace wall <= 600 s for ``elastic``
on the 2-core machine.  Peak resident memory is printed with the figures.

    python benchmarks/bench_simulator.py --trace philly
    python benchmarks/bench_simulator.py --trace philly --limit 10000      # the first 10,000 arrivals

With ``--cluster`` (node pools per GPU type, as ``elasticopt simulate --cluster``)
the jobs are generated for that cluster (a network with a profile per type,
:func:`~elasticopt.scheduling.hetero.generate_hetero_workload`) and the same
figures are printed; the wall-time target is for the 10,000-job homogeneous run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import time

import numpy as np

from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.hetero import cluster_preset, generate_hetero_workload
from elasticopt.scheduling.hysteresis import DEFAULT_HYSTERESIS, Hysteresis
from elasticopt.scheduling.workload_generator import generate_workload


def figures(res, n_jobs: int) -> dict:
    """The benchmark's figures of one simulation result."""
    dec = np.array([d.decision_s for d in res.decisions])
    sol = np.array([d.solver_s for d in res.decisions])
    active = np.array([d.queued + d.running for d in res.decisions])
    m = res.metrics
    return {
        "simulate_wall_s": round(res.wall_s, 2), "decisions": int(len(dec)),
        "active_jobs_mean": round(float(active.mean()), 1), "active_jobs_max": int(active.max()),
        "decision_ms_median": round(float(np.median(dec) * 1e3), 3), "decision_ms_mean": round(float(dec.mean() * 1e3), 3),
        "decision_ms_p95": round(float(np.percentile(dec, 95) * 1e3), 3),
        "solver_ms_median": round(float(np.median(sol) * 1e3), 3), "solver_ms_mean": round(float(sol.mean() * 1e3), 3),
        "decision_over_solver_median": round(float(np.median(dec) / max(np.median(sol), 1e-12)), 2),
        "completed": m.completed, "rescales_per_job": round(m.rescales / n_jobs, 3),
        "restart_s_per_job": round(m.restart_s / n_jobs, 1), "mean_jct_h": round((m.jct_mean_s or 0) / 3600, 4),
        "utilisation": round(m.utilisation, 4),
    }  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--gpus", type=int, default=None, help="cluster GPUs (default 256; 1,248 with --trace)")
    p.add_argument("--trace", default=None, metavar="philly|CSV",
                   help="replay a whole Philly-format trace instead of generating --jobs (implies --no-compare)")
    p.add_argument("--limit", type=int, default=None, help="with --trace: only the first LIMIT arrivals")
    p.add_argument("--load", type=float, default=1.5)
    p.add_argument("--solver", default="dp")
    p.add_argument("--policy", default="elastic")
    p.add_argument("--restart-cost-s", type=float, default=30.0)
    p.add_argument("--min-gain", type=float, default=DEFAULT_HYSTERESIS.min_gain)
    p.add_argument("--payback-factor", type=float, default=DEFAULT_HYSTERESIS.payback_factor)
    p.add_argument("--cooldown-restarts", type=float, default=DEFAULT_HYSTERESIS.min_interval_restarts)
    p.add_argument("--queue-yield", type=float, default=DEFAULT_HYSTERESIS.queue_yield,
                   help="how fast the shrink cool-down and the rescale penalty yield to queued work (0: never)")
    p.add_argument("--rescale-penalty", type=float, default=None, help="policy's λ with the rule (default: its own)")
    p.add_argument("--progress", choices=["samples", "goodput"], default="samples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cluster", default=None, help="node pools per GPU type (sia-64, gavel-N, TYPE:NxG,...)")
    p.add_argument("--node-aware", action="store_true", help="packed vs spread rates of node-aware profiles")
    p.add_argument("--no-compare", action="store_true", help="skip the run without the hysteresis")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)

    cluster = None
    if args.trace is not None:
        from elasticopt.scheduling.traces import PHILLY_GPUS, read_philly

        args.gpus = args.gpus or PHILLY_GPUS
        t_read = time.perf_counter()
        jobs = read_philly(args.trace, seed=args.seed, limit=args.limit)
        read_s = time.perf_counter() - t_read
        args.jobs, args.no_compare = len(jobs), True
    elif args.cluster is not None:
        cluster = cluster_preset(args.cluster)
        args.gpus = cluster.gpus
        jobs = generate_hetero_workload(args.jobs, cluster, args.load, seed=args.seed)
    else:
        args.gpus = args.gpus or 256
        jobs = generate_workload(args.jobs, args.gpus, args.load, seed=args.seed)
    rule = Hysteresis(min_gain=args.min_gain, payback_factor=args.payback_factor,
                      min_interval_restarts=args.cooldown_restarts, queue_yield=args.queue_yield)
    out: dict = {"jobs": args.jobs, "gpus": args.gpus, "cluster": args.cluster or f"one pool of {args.gpus}",
                 "node_aware": args.node_aware, "load": args.load, "policy": args.policy,
                 "solver": args.solver, "hysteresis": dataclasses.asdict(rule),
                 "rescale_penalty_with": args.rescale_penalty or "policy default", "rescale_penalty_without": 0.01,
                 "load_average_before": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    if args.trace is not None:
        out.update({"trace": args.trace, "load": "the trace's own", "trace_read_s": round(read_s, 2),
                    "trace_span_days": round(max(j.arrival_s for j in jobs) / 86400, 2)})
    runs = {"with_hysteresis": True} if args.no_compare else {"with_hysteresis": True, "without_hysteresis": False}
    for label, on in runs.items():
        cfg = SimulationConfig(gpus=args.gpus, restart_cost_s=args.restart_cost_s, seed=args.seed, payback=on,
                               hysteresis=rule, progress=args.progress, cluster=cluster, node_aware=args.node_aware)
        options = {"solver": args.solver}
        if not on:
            options["rescale_penalty"] = 0.01
        elif args.rescale_penalty is not None:
            options["rescale_penalty"] = args.rescale_penalty
        cpu0 = time.process_time()
        res = simulate(jobs, args.policy, cfg, policy_options=options)
        out[label] = {**figures(res, args.jobs), "simulate_cpu_s": round(time.process_time() - cpu0, 2)}
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    w = out["with_hysteresis"]
    if args.trace is not None:
        checks = {"whole-trace wall <= 600 s": w["simulate_wall_s"] <= 600} if args.limit is None else {}
    else:  # the 10k homogeneous run's
        checks = {} if cluster is not None else {"wall <= 120 s": w["simulate_wall_s"] <= 120}
    checks.update({
        "median decision <= 2x median solver": w["decision_over_solver_median"] <= 2,
        "rescales per job <= 3": w["rescales_per_job"] <= 3,
    })
    if "without_hysteresis" in out and out["without_hysteresis"]["mean_jct_h"] > 0:
        ratio = w["mean_jct_h"] / out["without_hysteresis"]["mean_jct_h"]
        out["mean_jct_ratio_with_over_without"] = round(ratio, 4)
        checks["mean JCT <= 1.05x without"] = ratio <= 1.05
    out["targets"] = {k: ("OK" if v else "MISSED") for k, v in checks.items()}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for k, v in out.items():
            if isinstance(v, dict):
                print(f"{k}:")
                for kk, vv in v.items():
                    print(f"  {kk:>30}: {vv}")
            else:
                print(f"{k:>32}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
