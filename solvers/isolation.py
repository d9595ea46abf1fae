"""A hard time limit: one solve in a forked process, killed at its deadline.

HiGHS and SCIP read their time limits only at some points of their search
(the reference suite: HiGHS stopped at 838 s under a 60 s limit, SCIP at
127 s; docs/design.md §3).  A backend that declares
``Capabilities.time_limit_overruns`` is therefore run, when the call has a
time limit, in a child process forked from the caller; the parent waits until
``time_limit_s + kill_grace_s(time_limit_s)`` and kills the child if it has
not answered.  A killed solve is ``Status.LIMIT`` with ``Reason.TIME_LIMIT``
and no allocation (the child's incumbent dies with it); a child that dies on
its own (a crash of the library, the kernel's out-of-memory killer) is
``Status.ERROR`` naming its exit code or signal.

Why fork, not spawn or a fork server: the child starts as a copy of the warm
caller, so the solve inside it costs what it costs in process (imports,
numba-compiled kernels and the table are there already; nothing is pickled on
the way in).  Measured on mck-strongly n=1000, G=1024: fork 8-13 ms to start,
the solve inside 13-16 ms as in process; a fork server 7-18 ms to start but
the solve inside 400-800 ms (every child loads the compiled kernels again).
The child runs only the backend's own code (HiGHS or SCIP, numpy, the
placement), never jax, whose threads a fork does not copy.  Where the
platform has no safe ``fork`` (Windows; macOS, whose system libraries are
not fork-safe with threads), and in a daemonic ``multiprocessing`` worker
(which may not have children), the solve runs in process, soft limit as
before, and says so in ``stats["isolation"]``.

``stats["isolated_call_s"]`` is the wall time of the solve call inside the
child (``elasticopt bench`` reports it as the total time: starting the child
is the harness's cost, as a benchmark runner's process start is);
``stats["isolation_overhead_s"]`` is the rest of the parent's wall time.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from elasticopt.solvers.solution import Reason, Solution, Status

__all__ = ["kill_grace_s", "fork_available", "solve_isolated"]

#: Least seconds past the time limit before a child is killed (a backend that honours its limit
#: stops within this: HiGHS finishes its node, the placement its step).
MIN_GRACE_S = 1.0
#: Fraction of the time limit added as grace where that is more (3 s at 60 s).
GRACE_FRACTION = 0.05


def kill_grace_s(time_limit_s: float) -> float:
    """Seconds past ``time_limit_s`` at which an isolated solve is killed."""
    return max(MIN_GRACE_S, GRACE_FRACTION * float(time_limit_s))


def fork_available() -> bool:
    """Whether this process can fork a solver child safely: POSIX, not macOS (whose system libraries are
    not fork-safe in a process with threads; Python's default start method there is spawn), and not itself a
    daemonic ``multiprocessing`` worker (which may not have children: a ``multiprocessing.Pool``'s)."""
    return (sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _child(conn: Any, call: Callable[[], Solution]) -> None:
    """Run ``call`` and send its solution, timed; any exception is sent as text (the parent makes it ERROR)."""
    try:  # its own process group: a kill reaches the solver executables it starts too (Pyomo's cbc, glpk)
        os.setpgid(0, 0)
    except OSError:
        pass
    t0 = time.perf_counter()
    try:
        sol = call()
        payload: Any = ("ok", sol, time.perf_counter() - t0)
    except BaseException as exc:  # the parent turns it into an ERROR solution, as Backend.solve would
        payload = ("raised", f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    try:
        conn.send(payload)
    finally:
        conn.close()


def _with_stats(sol: Solution, stats: Mapping[str, Any]) -> Solution:
    from dataclasses import replace

    return replace(sol, stats={**sol.stats, **stats})


def _kill(proc: Any) -> None:
    """Kill the child and its process group, and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # not yet its own group (killed before setpgid ran) or already gone
        pass
    proc.kill()
    proc.join()


def _died(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def solve_isolated(call: Callable[[], Solution], *, solver: str, time_limit_s: float,
                   extra_stats: Mapping[str, Any] | None = None, scale: int = 1,
                   tie_scale: int = 1) -> Solution:
    """Run ``call()`` (one in-process solve) in a forked child; kill it at the deadline.

    Parameters
    ----------
    call
        The solve, as the child runs it (``Backend.solve`` with ``isolate=False``).
    solver
        The backend's name (for the solution and the messages).
    time_limit_s
        The call's time limit, seconds; the child is killed at
        ``time_limit_s + kill_grace_s(time_limit_s)`` after it starts.
    extra_stats
        Added to the stats of a solution the parent makes (killed, died).
    scale, tie_scale
        The table's scales, for a solution the parent makes.

    Returns
    -------
    Solution
        The child's solution with ``stats["isolated_call_s"]`` and
        ``stats["isolation_overhead_s"]``; ``LIMIT``/``TIME_LIMIT`` if it was
        killed; ``ERROR`` if it died or raised.
    """
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, call), daemon=True, name=f"elasticopt-{solver}")
    grace = kill_grace_s(time_limit_s)
    t0 = time.perf_counter()
    with warnings.catch_warnings():  # jax warns on every fork of a process it runs in; the child never uses jax
        warnings.filterwarnings("ignore", message=r".*os\.fork\(\) was called.*")
        warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks.*")
        proc.start()
    send.close()  # the parent's copy: the child's end closing is what ends a recv
    common = {"solver": solver, "scale": scale, "tie_scale": tie_scale}
    base = dict(extra_stats or {})
    try:
        answered = recv.poll(max(0.0, t0 + time_limit_s + grace - time.perf_counter()))
        payload = None
        if answered:
            try:
                payload = recv.recv()
            except EOFError:  # the child died before it sent anything
                payload = None
        wall = time.perf_counter() - t0
        if not answered:
            _kill(proc)
            stats = {**base, "isolation": "fork", "killed_at_s": wall, "isolated_call_s": wall,
                     "isolation_overhead_s": 0.0}
            return Solution(
                Status.LIMIT,
                message=(f"{solver}: ran past its time limit of {time_limit_s:g} s and was killed at {wall:.1f} s "
                         f"(limit + {grace:g} s grace; docs/design.md §3): its best allocation is lost"),
                solve_s=wall, stats=stats, reason=Reason.TIME_LIMIT, **common)
        proc.join()
        if payload is None:
            return Solution(
                Status.ERROR,
                message=(f"{solver}: the solver process died without an answer ({_died(proc.exitcode)}) after "
                         f"{wall:.2f} s; out of memory or a crash of the solver's library"),
                solve_s=wall, stats={**base, "isolation": "fork", "isolated_call_s": wall}, reason=Reason.ERROR,
                **common)
        kind, value, inner = payload
        timing = {"isolation": "fork", "isolated_call_s": inner, "isolation_overhead_s": max(0.0, wall - inner)}
        if kind == "raised":
            return Solution(Status.ERROR, message=f"{solver}: {value}", solve_s=inner, stats={**base, **timing},
                            reason=Reason.ERROR, **common)
        return _with_stats(value, timing)
    finally:
        recv.close()
        if proc.is_alive():  # an exception in the parent (Ctrl-C): never leave the child running
            _kill(proc)
