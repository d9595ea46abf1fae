"""``elasticopt generate``: write a seeded instance file.

Example::

    elasticopt generate --family paper --jobs 200 --gpus 256 --seed 1 -o instances/paper-medium.json
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``generate`` subcommand."""
    from elasticopt.generate import ALL_FAMILIES as FAMILIES
    from elasticopt.models.objectives import get_objective, objective_names

    p = subparsers.add_parser(
        "generate",
        help="generate a seeded instance file",
        description="Generate a seeded allocation instance (same arguments, same file byte for byte).",
    )
    p.add_argument("--family", required=True, choices=sorted(FAMILIES), help="instance family")
    p.add_argument("--jobs", type=int, required=True, help="number of jobs")
    p.add_argument("--gpus", type=int, required=True, help="GPUs in the cluster")
    p.add_argument("--seed", type=int, default=0, help="seed of numpy.random.default_rng (default 0)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    p.add_argument("--objective", choices=[n for n in objective_names() if "values" not in get_objective(n).requires],
                   default=None, help="override the family's objective (a registered one; generated jobs carry no "
                   "caller values)")
    p.add_argument("--running-fraction", type=float, default=None,
                   help="paper/uniform/ladder: share of jobs drawn as running (default 0.3)")
    p.add_argument("--options", type=int, default=None, help="mck families: items per job (default 10)")
    p.add_argument("--range", type=int, default=None, dest="R",
                   help="mck families: weights (GPU counts) drawn from [1, R] (default about 2 G / n; "
                   "Pisinger's hard classes use R = 1000 with G about n R / 4)")
    p.add_argument("--cluster", choices=["sia", "gavel"], default=None,
                   help="hetero: Sia's T4/A100/V100 cluster (default) or Gavel's K80/P100/V100, scaled to --gpus")
    p.add_argument("-o", "--output", required=True, help="instance file to write ('-' for stdout)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Generate the instance and write it atomically; returns the exit code."""
    from elasticopt.generate import generate_instance
    from elasticopt.models import dumps_instance, save_instance

    kw = {}
    if args.objective is not None:
        kw["objective"] = args.objective
    if args.running_fraction is not None:
        kw["running_fraction"] = args.running_fraction
    if args.options is not None:
        kw["options"] = args.options
    if args.R is not None:
        kw["R"] = args.R
    if args.cluster is not None:
        kw["cluster"] = args.cluster
    problem = generate_instance(args.family, args.jobs, args.gpus, args.seed,
                                gpus_per_node=args.gpus_per_node, **kw)
    if args.output == "-":
        sys.stdout.write(dumps_instance(problem))
        return 0
    path = save_instance(problem, args.output)
    running = sum(j.running is not None for j in problem.jobs)
    print(f"wrote {path}: {len(problem.jobs)} jobs ({running} running), {problem.cluster.gpus} GPUs, "
          f"objective {problem.objective}", file=sys.stderr)
    return 0
