"""``elasticopt serve``: the allocation service for research schedulers (docs/integrations.md).

``--stdio`` answers JSON lines on stdin/stdout (spawn it as a subprocess);
``--http`` serves ``POST /v1/solve`` on a local port and prints
``listening on http://HOST:PORT`` on stdout once it accepts connections.
"""

from __future__ import annotations

import argparse
import sys

from elasticopt.errors import ElasticoptError

__all__ = ["register", "run"]


def _port(text: str) -> int:
    """``--port``: a TCP port number, 0..65535 (0 picks a free one)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535 (0 picks a free one), found {text!r}")
    return port


def _count(text: str) -> int:
    """``--cache-jobs``: an integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0 (0 keeps none), found {text!r}")
    return n


def _sessions(text: str) -> int:
    """``--sessions``: an integer >= 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, found {text!r}")
    return n


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` subcommand."""
    p = sub.add_parser(
        "serve",
        help="allocation service for research schedulers (JSON lines or HTTP)",
        description="Answer allocation requests (format elasticopt-request/1, see docs/integrations.md) "
        "until stopped: JSON lines on stdin/stdout (--stdio) or HTTP on a local port (--http).",
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="one request per stdin line, one response per stdout line")
    mode.add_argument("--http", action="store_true", help="HTTP: POST /v1/solve, GET /v1/info (needs elasticopt[service])")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="HTTP: port (default 8765; 0 picks a free one)")
    p.add_argument("--solver", default="dp", help="backend of requests that name none: NAME or NAME:key=value,... "
                   "(default dp)")
    p.add_argument("--time-limit-s", type=float, default=None, help="time limit of requests that give none")
    p.add_argument("--placement-fallback", default="auto", metavar="SOLVER",
                   help="backend that solves again with node variables when the DP answers LIMIT for placement "
                   "(its search for the best allocation that places stopped first), from the DP's placed "
                   "allocation, within what is left of the time limit (default auto: the first installed "
                   "backend exact with node variables by capabilities: milp, cpsat, pyomo; 'none' answers that "
                   "LIMIT as it is)")
    p.add_argument("--max-body-mib", type=float, default=64.0, help="HTTP: largest request body read, in MiB "
                   "(default 64); a larger one is refused unread with HTTP 413 (request_too_large)")
    p.add_argument("--kernel-cache", default=None, metavar="DIR",
                   help="folder that keeps the DP's compiled kernels between runs, so each kernel shape is compiled "
                   "once per machine, not once per service (default $ELASTICOPT_KERNEL_CACHE, else "
                   "$XDG_CACHE_HOME/elasticopt/xla or ~/.cache/elasticopt/xla; 'none': compile in every run)")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="append every request to FILE, one JSON line each, before it is answered; "
                   "'elasticopt serve --stdio < FILE' answers them again (why did a host's run go as it did)")
    p.add_argument("--cache-jobs", type=_count, default=16384, metavar="N",
                   help="translated jobs kept between requests (default 16384; 0: none): a job whose JSON an earlier "
                   "request held in the same cluster and objective is not translated again (answers are the same)")
    p.add_argument("--sessions", type=_sessions, default=64, metavar="N",
                   help="sessions kept, the least recently used dropped first (default 64): a host that sends its "
                   "whole state once with \"session\", then only what changed (docs/integrations.md \"Sessions\")")
    warm = p.add_mutually_exclusive_group()
    warm.add_argument("--warm", action="store_true", help="compile the DP's kernels for one to three pools before "
                      "the first answer (the default; the flag states it): 10-20 s once")
    warm.add_argument("--no-warm-up", action="store_true", help="skip the warm-up (without it a host's calls pay "
                      "0.5-4 s at each new kernel shape)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the service until its input ends (stdio) or it is interrupted (HTTP)."""
    from elasticopt.service import AllocationService, serve_stdio

    if not args.max_body_mib > 0:
        raise ElasticoptError(f"--max-body-mib {args.max_body_mib}: expected a number of MiB > 0")
    fallback = None if args.placement_fallback == "none" else args.placement_fallback
    from elasticopt.solvers.dp.kernel_cache import default_kernel_cache, use_kernel_cache

    cache = args.kernel_cache
    use_kernel_cache(default_kernel_cache() if cache is None else (None if cache.strip().lower() == "none" else cache))
    from elasticopt.solvers.base import CLI_TIME_LIMIT, checked_time_limit

    limit = checked_time_limit(args.time_limit_s, "--time-limit-s", **CLI_TIME_LIMIT)
    service = AllocationService(default_solver=args.solver, default_time_limit_s=limit,
                                placement_fallback=fallback, record=args.record, cache_jobs=args.cache_jobs,
                                max_sessions=args.sessions)
    if not args.no_warm_up:
        service.warm_up()  # ends with service.heap.collect_all()
    else:
        service.heap.collect_all()
    if args.stdio:
        serve_stdio(service, sys.stdin.buffer, sys.stdout.buffer)
        return 0
    try:
        from elasticopt.service.http import bind, serve_http

        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ElasticoptError(f"--http needs {exc.name}, which is not installed; fix: pip install 'elasticopt[service]'") from None
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise ElasticoptError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    host, port = sock.getsockname()[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    serve_http(service, sock, max_body_bytes=int(args.max_body_mib * 1024 * 1024))
    return 0
