"""``elasticopt simulate``: compare scheduling policies on a workload, or generate one.

Examples::

    elasticopt simulate --generate wl.csv --gpus 64 --jobs 300 --load 1.5 --seed 1
    elasticopt simulate wl.csv --gpus 64 --policy elastic --policy fixed-batch --policy static \\
        --restart-cost-s 30 --horizon-s 86400 --out results/
    elasticopt simulate pollux/workloads/workload-6.csv --gpus 64 --gpus-per-node 4   # Pollux CSV
    elasticopt simulate wl.csv --gpus 64 --policy my_module:MyPolicy                  # your policy
    elasticopt simulate --cluster sia-64 --jobs 300 --load 1.5 --node-aware \
        --policy elastic --policy fixed-batch --policy static                      # heterogeneous

``--trace philly`` (or a Philly-format CSV's path) replays every job of the
public Philly trace with its real arrival time, GPU count and duration, on a
Philly-sized cluster (1,248 GPUs on 8-GPU nodes unless ``--gpus`` says
otherwise); ``--checkpoint DIR`` saves each run every ``--checkpoint-every-s``
seconds, so the same command after a crash resumes it.  A WORKLOAD may also be
a Pollux or Sia workload CSV or a Gavel ``.trace`` file (docs/workloads.md)::

    elasticopt simulate --trace philly --policy elastic --checkpoint ckpt/ --out results/philly

``--cluster`` names node pools per GPU type (``sia-64``, ``sia-N``, ``gavel-N``,
``t4:6x4,a100:2x8``, or a ``{"pools": ...}`` JSON file); without a WORKLOAD it
generates jobs for it (each a network with a profile per GPU type) from
``--jobs``, ``--load`` and ``--seed`` (``--generate OUT.json --cluster ...``
writes them).  A workload job with one ``profile`` uses it on every type; one
with ``profiles`` (JSON) has a profile per type.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from elasticopt.errors import InstanceError, ValidationError

__all__ = ["register", "run"]

#: The workload-generation options and their defaults: used only where jobs are generated (``--generate OUT``, or
#: ``--cluster SPEC`` without a WORKLOAD); given beside a workload file or ``--trace``, they are refused
#: (:func:`_check_unused_generation`), not silently ignored.
GENERATION_DEFAULTS: dict[str, object] = {
    "jobs": 200, "load": 1.0, "networks": None, "duration_max_s": 48 * 3600.0, "duration_scale": 1.0,
}


def register(subparsers) -> None:
    """Add the ``simulate`` subcommand."""
    p = subparsers.add_parser(
        "simulate",
        help="simulate a cluster under several scheduling policies and compare them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("workload", nargs="?", help="workload file: elasticopt .csv/.json (docs/workloads.md) "
                   "or a Pollux CSV (name,time,application,num_replicas,batch_size)")
    p.add_argument("--gpus", type=int, default=None, help="GPUs in the cluster (one pool; required without --cluster)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    p.add_argument("--cluster", default=None, metavar="SPEC",
                   help="node pools per GPU type: sia-64, sia-N, gavel-N, TYPE:NODESxGPUS,... or a pools .json")
    p.add_argument("--node-aware", action="store_true",
                   help="jobs of node-aware profiles run at their packed or spread rate; policies choose which")
    p.add_argument("--policy", action="append", dest="policies", metavar="NAME",
                   help="policy name or module:Class; repeat to compare (default: elastic, fixed-batch, static)")
    p.add_argument("--solver", default="dp",
                   help="solver backend of the policies that solve (default dp); NAME:key=value,... sets its options")
    p.add_argument("--priority", default="arrival", choices=["arrival", "srpt"], help="tie-break order")
    p.add_argument("--rescale-penalty", type=float, default=None, help="λ of docs/design.md §2 (policy default if unset)")
    p.add_argument("--restart-cost-s", type=float, default=30.0, help="seconds lost at every start/rescale")
    p.add_argument("--horizon-s", type=float, default=None, help="stop at this time (default: all jobs done)")
    p.add_argument("--tick-s", type=float, default=None, help="also re-decide every TICK seconds")
    p.add_argument("--admission-deadline-s", type=float, default=None, metavar="S",
                   help="drop a job not started S seconds after its arrival (default: wait forever)")
    p.add_argument("--queue-limit", type=int, default=None, metavar="N",
                   help="at most N never-started jobs wait; newer arrivals beyond it are dropped")
    p.add_argument("--seed", type=int, default=0, help="seed (throughput noise; workload generation)")
    p.add_argument("--seeds", default=None, metavar="S1,S2,...",
                   help="run every policy once per seed (the throughput noise draw; see --noise); "
                        "results.csv holds one row per policy and seed")
    p.add_argument("--progress", choices=["samples", "goodput"], default="samples",
                   help="count work in samples (the seed paper: any batch in range is as good) or in effective "
                        "samples, each worth the statistical efficiency E(b) of its batch (default samples)")
    p.add_argument("--cooldown-restarts", type=float, default=None,
                   help="hysteresis: no change of a running job before it ran this many restart costs "
                        "(default from docs/design.md §4)")
    p.add_argument("--queue-yield", type=float, default=None,
                   help="hysteresis: how fast a running job's cool-down and rescale penalty yield to queued work "
                        "(0: never; default from docs/design.md §4)")
    p.add_argument("--min-gain", type=float, default=None,
                   help="hysteresis: a grow must raise the job's rate by this fraction (default 0)")
    p.add_argument("--noise", type=float, default=0.0,
                   help="log-std of the true/believed throughput factor per job (default 0: exact belief)")
    p.add_argument("--no-payback", action="store_true", help="disable the anti-thrashing rule (veto and filter)")
    p.add_argument("--out", type=Path, default=None,
                   help="write results.csv (tidy: one row per policy and seed), summary.json, jobs-*.csv, "
                        "timeline-*.csv and plots (PNG, PDF, SVG) here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    g = p.add_argument_group("workload generation (--generate)")
    g.add_argument("--generate", type=Path, metavar="OUT", help="write a generated workload (.csv/.json) and exit")
    d = GENERATION_DEFAULTS
    g.add_argument("--jobs", type=int, default=d["jobs"], help="number of jobs (default 200)")
    g.add_argument("--load", type=float, default=d["load"],
                   help="offered load: submitted GPU-demand / GPUs (default 1)")
    g.add_argument("--networks", default=d["networks"], help="comma-separated profile names (default: the t4/* set)")
    p.add_argument("--trace", default=None, metavar="philly|CSV",
                   help="replay a whole Philly-format trace (the name philly: $ELASTICOPT_DATA/traces/philly.csv); "
                        "with --generate: the trace CSV to sample sizes and durations from (default: committed fit)")
    p.add_argument("--checkpoint", type=Path, default=None, metavar="DIR",
                   help="save each run's state here every --checkpoint-every-s s and its result at its end; "
                        "the same command after a crash resumes where it stopped")
    p.add_argument("--checkpoint-every-s", type=float, default=60.0, help="wall seconds between checkpoints (60)")
    g.add_argument("--duration-max-s", type=float, default=d["duration_max_s"], help="clip durations (default 48 h)")
    g.add_argument("--duration-scale", type=float, default=d["duration_scale"], help="multiply every duration")
    p.set_defaults(func=run)


def load_any(path: str | Path, seed: int = 0):
    """Jobs of any workload file: elasticopt, Pollux / Sia CSV, Gavel trace, Philly trace.

    See :mod:`~elasticopt.scheduling.traces`.
    """
    from elasticopt.scheduling.traces import load_any as load

    return load(path, seed=seed)


def _generate(args) -> int:
    from elasticopt.scheduling.workload_generator import generate_workload
    from elasticopt.scheduling.workload import save_workload

    common = {"load": args.load, "seed": args.seed, "jobs": args.jobs}
    if args.cluster is not None:  # jobs with a profile per GPU type: JSON only
        from elasticopt.scheduling.hetero import generate_hetero_workload

        jobs = generate_hetero_workload(args.jobs, _cluster(args), args.load, seed=args.seed,
                                        duration_max_s=args.duration_max_s, duration_scale=args.duration_scale)
        meta = {"generator": "elasticopt.scheduling.hetero", "cluster": args.cluster, **common}
    else:
        if args.gpus is None:
            raise ValidationError("--gpus", "the cluster's GPUs the load refers to", None)
        nets = [n.strip() for n in args.networks.split(",")] if args.networks else None
        trace = None if args.trace is None else (_trace_file(args.trace))
        jobs = generate_workload(args.jobs, args.gpus, args.load, seed=args.seed, networks=nets, trace=trace,
                                 duration_max_s=args.duration_max_s, duration_scale=args.duration_scale)
        meta = {"generator": "elasticopt.scheduling.workload_generator", "gpus": args.gpus, **common}
    save_workload(jobs, args.generate, meta=meta)
    print(f"wrote {len(jobs)} jobs to {args.generate} (last arrival at {jobs[-1].arrival_s:.0f} s)")
    return 0


def _trace_file(text: str) -> Path:
    from elasticopt.scheduling.traces import TRACE_NAMES, trace_path

    return trace_path(text) if text in TRACE_NAMES else Path(text)


def _run_one(jobs, pol, name: str, cfg, options: dict, args, progress):
    """One simulation, resumed from and saved to ``--checkpoint`` when given."""
    from elasticopt.scheduling import simulate

    if args.checkpoint is None:
        return simulate(jobs, pol, cfg, progress=progress)
    import pickle

    from elasticopt._io import atomic_write_bytes
    from elasticopt.scheduling.checkpoint import Checkpointer, fingerprint, load_checkpoint

    key = fingerprint(jobs, cfg, name, options)
    stem = f"{name.replace('/', '_').replace(':', '_')}-seed{cfg.seed}-{key}"
    done = args.checkpoint / f"{stem}.result.pkl"
    if done.is_file():  # finished before the crash (a file this command wrote itself)
        return pickle.loads(done.read_bytes())
    saver = Checkpointer(args.checkpoint / f"{stem}.state.pkl", key)
    state = load_checkpoint(saver.path, key)
    res = simulate(jobs, pol, cfg, progress=progress, checkpoint=saver, checkpoint_every_s=args.checkpoint_every_s,
                   resume=state)
    atomic_write_bytes(done, pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
    saver.path.unlink(missing_ok=True)
    return res


def _fmt_s(v):
    if v is None:
        return "-"
    return f"{v / 3600:.2f} h" if v >= 3600 else f"{v:.0f} s"


def _table(results, title: str = "policy comparison"):
    from rich.table import Table

    t = Table(title=title)
    for col in ("policy", "done", "dropped", "JCT mean", "JCT p50", "JCT p95", "JCT all*", "wait", "util", "makespan",
                "rescales", "restart", "decide ms"):
        t.add_column(col, justify="left" if col == "policy" else "right", no_wrap=col == "policy")
    for r in results:
        m = r.metrics
        t.add_row(r.policy, f"{m.completed}/{m.jobs}", str(m.dropped), _fmt_s(m.jct_mean_s), _fmt_s(m.jct_median_s),
                  _fmt_s(m.jct_p95_s), _fmt_s(m.jct_mean_all_s), _fmt_s(m.queue_delay_mean_s),
                  f"{m.utilisation:.0%}", _fmt_s(m.makespan_s), f"{m.rescales} ({m.rescales_per_job:.2f}/job)",
                  _fmt_s(m.restart_s),
                  f"{m.decision_s_mean * 1e3:.1f}/{m.decision_s_p95 * 1e3:.1f}")
    return t


def ratios(results) -> dict:
    """elastic / fixed-batch ratios of jobs completed and mean JCT, when both ran."""
    from elasticopt.scheduling.metrics import ratio

    by = {r.policy: r.metrics for r in results}
    if "elastic" not in by or "fixed-batch" not in by:
        return {}
    e, f = by["elastic"], by["fixed-batch"]
    return {
        "completed_elastic_over_fixed_batch": ratio(e.completed, f.completed),
        "mean_jct_fixed_batch_over_elastic": ratio(f.jct_mean_s, e.jct_mean_s),
        "mean_jct_all_fixed_batch_over_elastic": ratio(f.jct_mean_all_s, e.jct_mean_all_s),
        **({"dropped_fixed_batch_over_elastic": ratio(f.dropped, e.dropped)} if f.dropped or e.dropped else {}),
    }


def _config(args, seed: int):
    import dataclasses

    from elasticopt.scheduling import SimulationConfig
    from elasticopt.scheduling.hysteresis import DEFAULT_HYSTERESIS

    rule = DEFAULT_HYSTERESIS
    if args.cooldown_restarts is not None:
        rule = dataclasses.replace(rule, min_interval_restarts=args.cooldown_restarts)
    if args.min_gain is not None:
        rule = dataclasses.replace(rule, min_gain=args.min_gain)
    if args.queue_yield is not None:
        rule = dataclasses.replace(rule, queue_yield=args.queue_yield)
    cluster = _cluster(args)
    return SimulationConfig(gpus=args.gpus if cluster is None else cluster.gpus, gpus_per_node=args.gpus_per_node,
                            restart_cost_s=args.restart_cost_s, horizon_s=args.horizon_s, tick_s=args.tick_s,
                            seed=seed, throughput_noise=args.noise, payback=not args.no_payback, hysteresis=rule,
                            progress=args.progress, cluster=cluster, node_aware=args.node_aware,
                            admission_deadline_s=args.admission_deadline_s, queue_limit=args.queue_limit)


def _cluster(args):
    """The ``--cluster`` pools (None: one pool of ``--gpus``)."""
    if args.cluster is None:
        if args.gpus is None:
            raise ValidationError("--gpus", "the cluster's GPUs (or --cluster SPEC)", None)
        return None
    from elasticopt.scheduling.hetero import cluster_preset

    cluster = cluster_preset(args.cluster)
    if args.gpus is not None and args.gpus != cluster.gpus:
        raise ValidationError("--gpus", f"the GPUs of --cluster {args.cluster} ({cluster.gpus}) or nothing", args.gpus)
    return cluster


def _seeds(args) -> list[int]:
    if args.seeds is None:
        return [args.seed]
    try:
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        raise ValidationError("--seeds", "comma-separated integers, e.g. 0,1,2", args.seeds) from None
    if not seeds:
        raise ValidationError("--seeds", "at least one integer", args.seeds)
    return seeds


def results_table(runs) -> str:
    """The tidy long table: one CSV row per (policy, seed), every metric a column (pandas reads it)."""
    import io

    rows = [{"policy": res.policy, "seed": seed, "progress": res.config.progress, **res.metrics.to_dict(),
             "wall_s": res.wall_s} for seed, res in runs]
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return buf.getvalue()


def _check_unused_generation(args) -> None:
    """Refuse a workload-generation option given beside a workload file or ``--trace`` (it would change nothing)."""
    for name, default in GENERATION_DEFAULTS.items():
        value = getattr(args, name)
        if value != default:
            flag = "--" + name.replace("_", "-")
            source = f"the workload file {args.workload}" if args.trace is None else f"--trace {args.trace}"
            raise ValidationError(flag, f"no {flag} beside a workload file or --trace (it applies only where jobs "
                                  f"are generated: --generate OUT, or --cluster SPEC without a WORKLOAD)", value,
                                  hint=f"the jobs of {source} are simulated as they are; drop {flag}, or "
                                       "write a new workload with --generate")


def run(args) -> int:
    """Run the subcommand."""
    if args.generate is not None:
        return _generate(args)
    if args.workload is not None or args.trace is not None:
        _check_unused_generation(args)
    if args.workload is not None and args.trace is not None:
        raise ValidationError("simulate", "a WORKLOAD file or --trace, not both", (args.workload, args.trace))
    if args.workload is None and args.trace is not None:
        from elasticopt.scheduling.traces import PHILLY_GPUS, PHILLY_GPUS_PER_NODE

        args.workload = args.trace
        if args.gpus is None and args.cluster is None:
            args.gpus, args.gpus_per_node = PHILLY_GPUS, PHILLY_GPUS_PER_NODE
    if args.workload is None and args.cluster is None:
        raise ValidationError("simulate", "a WORKLOAD file (or --trace philly, --generate OUT, or --cluster SPEC)",
                              None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from elasticopt._io import atomic_write_text
    from elasticopt.scheduling import get_policy
    from elasticopt.solvers import get_backend
    from elasticopt.solvers.options import parse_solver_arg
    from elasticopt.scheduling.records import write_jobs_csv, write_summary_json, write_timeline_csv

    if args.workload is None:
        from elasticopt.scheduling.hetero import generate_hetero_workload

        jobs = generate_hetero_workload(args.jobs, _cluster(args), args.load, seed=args.seed,
                                        duration_max_s=args.duration_max_s, duration_scale=args.duration_scale)
    else:
        jobs = load_any(args.workload, seed=args.seed)
    if not jobs:
        raise InstanceError(str(args.workload), "jobs", "at least one job", 0)
    seeds = _seeds(args)
    solver, solver_options = parse_solver_arg(args.solver)
    get_backend(solver).check_options(solver_options)  # a bad solver or option fails even for policies without one
    options: dict = {"solver": solver, "priority": args.priority}
    if solver_options:
        options["solver_options"] = solver_options
    if args.rescale_penalty is not None:
        options["rescale_penalty"] = args.rescale_penalty
    names = args.policies or ["elastic", "fixed-batch", "static"]
    for n in names:
        get_policy(n, **options)  # a bad name fails before any simulation runs
    if args.checkpoint is not None:
        from elasticopt.scheduling.simulator import check_checkpoint_every_s

        check_checkpoint_every_s(args.checkpoint_every_s, "--checkpoint-every-s")
    err = Console(stderr=True)
    runs = []  # (seed, result)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=args.quiet or not err.is_terminal) as bar:
        for seed in seeds:
            cfg = _config(args, seed)
            for name in names:
                pol = get_policy(name, payback=cfg.payback, hysteresis=cfg.hysteresis, **options)
                task = bar.add_task(f"{pol.name:>14} seed {seed}", total=len(jobs))
                try:
                    res = _run_one(jobs, pol, name, cfg, options, args,
                                   lambda done, total, t=task: bar.update(t, completed=done))
                except InstanceError:
                    raise
                except ValidationError as exc:  # a value of the workload no decision can hold: name the file
                    raise InstanceError(str(args.workload or f"--cluster {args.cluster}"), "jobs",
                                        f"jobs whose values policy {pol.name!r} can decide on", str(exc),
                                        "the job named comes from this workload") from None
                runs.append((seed, res))
    console = Console()
    if not console.is_terminal:  # a pipe or file: never cut the policy names to "pol…"
        console = Console(width=250)
    first = [res for seed, res in runs if seed == seeds[0]]
    for seed in seeds:
        console.print(_table([res for s, res in runs if s == seed], f"policy comparison, seed {seed}"))
    print("JCT all*: mean with unfinished jobs counted at the end; wait: arrival to first start; "
          "decide ms: policy wall time per decision, mean/p95")
    rat = ratios(first)
    if rat:
        print("elastic vs fixed-batch: " + ", ".join(f"{k} = {v:.2f}" for k, v in rat.items() if v is not None))
    if args.out is not None:
        from elasticopt.plotting import plot_allocation_timeline, plot_jct_cdf

        out = args.out
        for seed, res in runs:
            safe = res.policy.replace("/", "_").replace(":", "_") + ("" if len(seeds) == 1 else f"-seed{seed}")
            write_jobs_csv(out / f"jobs-{safe}.csv", res.records)
            write_timeline_csv(out / f"timeline-{safe}.csv", res.timeline)
        atomic_write_text(out / "results.csv", results_table(runs))
        write_summary_json(out / "summary.json", {
            "workload": str(args.workload) if args.workload else f"generated for --cluster {args.cluster}",
            "jobs": len(jobs), "config": _config(args, seeds[0]), "seeds": seeds,
            "policy_options": options, "metrics": {r.policy: r.metrics for r in first}, "ratios": rat,
            "metrics_by_seed": {str(s): {r.policy: r.metrics for t, r in runs if t == s} for s in seeds},
            "wall_s": {r.policy: r.wall_s for r in first},
        })  # fmt: skip
        plot_jct_cdf(first, out / "jct_cdf.png")
        plot_allocation_timeline(first, out / "timeline.png")
        print(f"wrote {out}/results.csv, summary.json, jobs-*.csv, timeline-*.csv, jct_cdf.*, timeline.* "
              "(png, pdf, svg)", file=sys.stderr)
    return 0
