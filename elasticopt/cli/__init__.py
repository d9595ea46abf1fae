"""The ``elasticopt`` command line: one module per subcommand.

Each subcommand module exposes ``register(subparsers)`` (adds its parser and
sets ``func``) and ``run(args) -> int``.  Errors derived from
:class:`~elasticopt.errors.ElasticoptError` are printed without a traceback
and exit with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from elasticopt.errors import ElasticoptError

__all__ = ["main", "build_parser", "SUBCOMMANDS"]

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS: tuple[str, ...] = ("solve", "generate", "export", "bench", "simulate", "launch")

EPILOG = """examples:
  elasticopt solve instances/tiny.json                 solve with the jax DP, print the allocation
  elasticopt solve instances/mixed.json --solver all   every installed exact backend, side by side
  elasticopt solve instances/tiny.json --json -o sol.json

Run 'elasticopt COMMAND --help' for the options of each command."""


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    from elasticopt import __version__

    parser = argparse.ArgumentParser(
        prog="elasticopt",
        description="Elastic scaling of deep-learning training jobs: choose GPUs and batch size per job "
        "with exact solvers, simulate clusters, launch real jobs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"elasticopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"elasticopt.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``elasticopt`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ElasticoptError as exc:
        print(f"elasticopt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"elasticopt {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
