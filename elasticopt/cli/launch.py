"""``elasticopt launch``: run real training jobs on this machine under the autoscaler.

Examples::

    elasticopt launch jobs.json --cpu-slots 2 --out runs/try1
    elasticopt launch jobs.json --gpus 8 --policy elastic --solver dp --out runs/a
    elasticopt launch jobs.json --gpus 8 --out runs/a      # again after a crash: resumes
    elasticopt launch jobs.json --backend ray --cpu-slots 2 --out runs/r   # a local Ray instance, warm workers
    elasticopt launch jobs.json --backend ray --address 10.0.0.1:6379 --out /shared/runs/r   # a Ray cluster

The JOBS_FILE format is described in :mod:`elasticopt.launcher.jobsfile`
(``python -c "import elasticopt.launcher.jobsfile as j; help(j)"``).
Ctrl-C stops every job at a checkpoint (a second Ctrl-C kills them); running
the same command again resumes.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``launch`` subcommand."""
    p = subparsers.add_parser(
        "launch",
        help="run real training jobs under the autoscaler (torchrun here, or a Ray cluster)",
        description="Run the jobs of JOBS_FILE (format elasticopt-jobs/1), started and rescaled by the "
        "autoscaler: as torchrun process groups on this machine's GPUs (or CPU slots), the default, or with "
        "--backend ray on the warm workers of a Ray cluster (a local instance, or --address). Writes "
        "jobs.csv, timeline.csv and summary.json like 'elasticopt simulate', plus workload.json to simulate "
        "the same jobs. Re-running on the same --out resumes a run whose launcher was killed.",
    )
    p.add_argument("jobs_file", metavar="JOBS_FILE", help="JSON jobs file (format elasticopt-jobs/1)")
    p.add_argument("--backend", choices=["torchrun", "ray"], default="torchrun",
                   help="torchrun: new processes per generation on this machine (default); ray: warm worker "
                   "actors on a Ray cluster, rescaled in well under a second (needs elasticopt[ray])")
    p.add_argument("--address", default=None,
                   help="ray: join the Ray cluster at ADDR (host:port, or 'auto'); default: start a local Ray "
                   "instance for this run. The run directory must be on a file system every node sees")
    dev = p.add_mutually_exclusive_group()
    dev.add_argument("--gpus", type=int, default=None,
                     help="use the first N GPUs of this machine (ray: of the cluster)")
    dev.add_argument("--cpu-slots", type=int, default=None,
                     help="use N CPU slots (one core per worker) instead of GPUs (ray: N CPUs of the cluster)")
    p.add_argument("--policy", default="elastic", help="scheduling policy (default elastic)")
    p.add_argument("--solver", default="dp",
                   help="solver of the policy (default dp); NAME:key=value,... sets its options")
    p.add_argument("--out", default="elasticopt-launch", help="run directory (default ./elasticopt-launch)")
    p.add_argument("--restart-cost-s", type=float, default=None,
                   help="seconds a start or rescale is charged by the autoscaler (default: 10 with torchrun, "
                   "1 with ray, about what a rescale costs with each)")
    p.add_argument("--tick-s", type=float, default=30.0,
                   help="re-decide every N seconds with the measured rates (0: only on events)")
    p.add_argument("--stop-timeout-s", type=float, default=120.0,
                   help="kill a generation that has not stopped N s after being asked (default 120)")
    p.add_argument("--max-restarts", type=int, default=3, help="crashes retried from a checkpoint (default 3)")
    p.add_argument("--no-payback", action="store_true", help="do not veto rescales that do not pay back")
    p.add_argument("--quiet", action="store_true", help="no live table")
    p.set_defaults(func=run)
    return p


def _table(executor, scaler):
    from rich.table import Table

    from elasticopt.launcher.driver import job_rows

    specs = [executor.jobs[j].spec for j in executor.jobs]
    t = Table(title=f"elasticopt launch — t={executor.now_s():.0f}s, "
                    f"{len(executor.pool.free())}/{executor.pool.size} {executor.pool.kind} free")  # fmt: skip
    for col in ("job", "phase", "gen", "workers", "batch", "samples/s", "progress", "restarts", "lost"):
        t.add_column(col, justify="left" if col in ("job", "phase") else "right")
    for r in job_rows(executor, specs):
        sps = f"{r['samples_per_s']:.0f}" if r["samples_per_s"] else "-"
        t.add_row(r["id"], r["phase"], str(r["generation"]), str(r["gpus"]), str(r["batch"]), sps,
                  f"{100 * r['progress']:.1f}%", str(r["restarts"]), str(r["lost"]))  # fmt: skip
    return t


def run(args: argparse.Namespace) -> int:
    """Run the launch; returns 0 when every job completed, 1 if some failed, 130 if interrupted."""
    import logging

    from elasticopt.errors import ValidationError
    from elasticopt.launcher.devices import DevicePool
    from elasticopt.launcher.driver import LaunchConfig
    from elasticopt.launcher.jobsfile import load_jobs
    from elasticopt.solvers import get_backend
    from elasticopt.solvers.options import parse_solver_arg

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    specs = load_jobs(args.jobs_file)
    solver, solver_options = parse_solver_arg(args.solver)
    get_backend(solver).check_options(solver_options)  # a bad solver or option fails before any device is taken
    args.solver, args.solver_options = solver, solver_options
    if args.address and args.backend != "ray":
        raise ValidationError("--address", "--backend ray (torchrun runs on this machine)", args.address)
    config = LaunchConfig(
        policy=args.policy, solver=args.solver, solver_options=args.solver_options, backend=args.backend, restart_cost_s=args.restart_cost_s,
        tick_s=args.tick_s or None, stop_timeout_s=args.stop_timeout_s, max_restarts=args.max_restarts,
        payback=not args.no_payback,
    )  # fmt: skip  (checked before any device is taken or Ray started)
    pool = _ray_pool(args) if args.backend == "ray" else DevicePool.detect(gpus=args.gpus, cpu_slots_n=args.cpu_slots)
    try:
        return _launch(args, specs, pool, config)
    finally:
        if args.backend == "ray":
            import ray  # noqa: PLC0415

            ray.shutdown()


def _ray_pool(args: argparse.Namespace):
    """Connect to Ray (a local instance unless --address) and return the cluster's devices."""
    from elasticopt.launcher import ray_backend  # noqa: PLC0415 - optional extra
    from elasticopt.launcher.devices import cpu_slots  # noqa: PLC0415

    local_cpus = None if args.address else (args.cpu_slots or (0 if args.gpus else len(cpu_slots())))
    ray_backend.connect(args.address, num_cpus=local_cpus, num_gpus=None if args.address else args.gpus)
    return ray_backend.cluster_pool("cpu" if args.cpu_slots else ("cuda" if args.gpus else None),
                                    max_devices=args.gpus or args.cpu_slots)  # fmt: skip


def _launch(args: argparse.Namespace, specs, pool, config) -> int:
    from rich.console import Console  # noqa: PLC0415
    from rich.live import Live  # noqa: PLC0415

    from elasticopt.launcher.driver import launch  # noqa: PLC0415

    console = Console(stderr=True)
    where = f"{len(set(pool.nodes))} Ray node(s)" if args.backend == "ray" else "this machine"
    console.print(f"launching {len(specs)} job(s) on {pool.size} {pool.kind} device(s) {list(pool.ids)} of {where}; "
                  f"policy {args.policy}, solver {args.solver}; run directory {args.out}")  # fmt: skip
    if args.quiet or not console.is_terminal:
        result = launch(specs, args.out, pool, config)
    else:
        with Live(console=console, refresh_per_second=2) as live:
            result = launch(specs, args.out, pool, config, on_update=lambda ex, sc: live.update(_table(ex, sc)))
    m = result.summary["metrics"]
    failed = [r for r in result.records if r.status == "failed"]
    console.print(f"{m['completed']}/{m['jobs']} job(s) completed; mean JCT "
                  f"{m['jct_mean_s'] if m['jct_mean_s'] is None else round(m['jct_mean_s'], 1)} s; "
                  f"records in {result.out_dir}/jobs.csv, summary.json")  # fmt: skip
    for r in failed:
        console.print(f"job {r.job_id} failed: {result.summary['jobs'][r.job_id]['message']}")
    if result.interrupted:
        console.print("interrupted: jobs stopped at a checkpoint; run the same command again to resume")
        return 130
    return 1 if failed else 0


def _main(argv: list[str] | None = None) -> int:
    """``python -m elasticopt.cli.launch JOBS_FILE ...`` (same as ``elasticopt launch``)."""
    from elasticopt.errors import ElasticoptError

    parser = argparse.ArgumentParser(prog="elasticopt")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["launch", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except ElasticoptError as exc:
        print(f"elasticopt launch: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())
