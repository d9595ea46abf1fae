"""The ``elasticopt`` command line: one module per subcommand.

Each subcommand module exposes ``register(subparsers)`` (adds its parser and
sets ``func``) and ``run(args) -> int``.  Errors derived from
:class:`~elasticopt.errors.ElasticoptError` are printed without a traceback
and exit with code 2.  Any other exception is a bug of elasticopt (or memory
ran out): it is printed as one line and exits with :data:`EXIT_INTERNAL` (4),
never with a code a command gives a meaning to (0 done, 1 infeasible / a job
failed, 2 bad input, 3 exact solvers disagree); ``-v`` adds the traceback.  ``-v``/``-q`` (repeatable) set the level of the
``elasticopt`` loggers (default WARNING), written to stderr.  A reader that
closes the pipe early (``elasticopt solve --json | head``) ends the command
quietly with exit code 141 (128 + SIGPIPE), as shell tools do.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from elasticopt.errors import ElasticoptError

__all__ = ["main", "build_parser", "configure_logging", "SUBCOMMANDS", "EXIT_CODES", "EXIT_INTERNAL"]

#: Exit code of an unexpected exception (a bug, or memory ran out).
EXIT_INTERNAL = 4

#: Every exit code the command line gives, and what it means.
EXIT_CODES: dict[int, str] = {
    0: "done (solved; every launched job completed)",
    1: "infeasible / no solution (solve); some job failed (launch)",
    2: "bad input or usage: the message names the file, JSON path, expected and found",
    3: "proven optima of exact solvers disagree (solve --solver all)",
    EXIT_INTERNAL: "internal error: an unexpected exception (a bug) or out of memory; -v prints the traceback",
    130: "interrupted (Ctrl-C)",
    141: "stdout closed by its reader (128 + SIGPIPE)",
}

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS: tuple[str, ...] = ("solve", "generate", "export", "bench", "simulate", "sweep", "launch", "serve")

EPILOG = """examples:
  elasticopt solve instances/tiny.json                 solve with the jax DP, print the allocation
  elasticopt solve instances/mixed.json --solver all   every installed exact backend, side by side
  elasticopt solve instances/tiny.json --json -o sol.json
  elasticopt -v solve instances/tiny.json --solver cpsat:num_workers=2   with progress messages (INFO)

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
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more log messages on stderr: -v INFO, -vv DEBUG (default WARNING)")
    parser.add_argument("-q", "--quiet", action="count", default=0,
                        help="fewer log messages: -q ERROR only, -qq none")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(f"elasticopt.cli.{name}").register(sub)
    return parser


def configure_logging(verbose: int = 0, quiet: int = 0) -> int:
    """Set the level of the ``elasticopt`` loggers: WARNING, 10 lower per ``verbose``, 10 higher per ``quiet``.

    Messages go to stderr through a root handler, added unless the root
    logger already has one (an application's, or pytest's).
    Returns the level set.
    """
    level = min(max(logging.WARNING + 10 * (quiet - verbose), logging.DEBUG), logging.CRITICAL + 10)
    root = logging.getLogger()
    if not root.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    logging.getLogger("elasticopt").setLevel(level)
    return level


class _StderrHandler(logging.StreamHandler):
    """A stream handler writing to ``sys.stderr`` as it is when a record comes (callers redirect it)."""

    @property  # type: ignore[override]
    def stream(self):  # noqa: D102
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _stdout_closed() -> int:
    """The reader of stdout went away: silence the final flush and exit as ``SIGPIPE`` would."""
    try:  # point stdout at /dev/null so that the interpreter's last flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a file (captured, redirected in-process)
        pass
    return 141


def _raise_broken_pipe(console) -> None:
    """For rich consoles: a closed stdout raises BrokenPipeError (rich's own handler exits 1, "infeasible")."""
    console.quiet = True
    raise BrokenPipeError


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``elasticopt`` console script; returns the exit code."""
    from rich.console import Console

    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.quiet)
    saved = Console.on_broken_pipe
    Console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return _stdout_closed()
    except ElasticoptError as exc:
        print(f"elasticopt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"elasticopt {args.command}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(f"elasticopt {args.command}: internal error: out of memory (exit {EXIT_INTERNAL}); a size in the input "
              "is larger than this machine can hold", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001 - a bug: one line, a code of its own, never 1 ("infeasible")
        if args.verbose:
            import traceback

            traceback.print_exc(file=sys.stderr)
        text = " ".join(str(exc).split())[:300]
        print(f"elasticopt {args.command}: internal error (a bug of elasticopt, exit {EXIT_INTERNAL}): "
              f"{type(exc).__name__}: {text}; run with -v for the traceback and please report it", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        Console.on_broken_pipe = saved  # type: ignore[method-assign]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
