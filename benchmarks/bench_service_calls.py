"""Benchmark: a host's recorded requests, call by call, as ``elasticopt serve`` answers them.

    python benchmarks/bench_service_calls.py FILE [--slow-ms 50] [--passes 2] [--kernel-cache DIR]

FILE: what ``elasticopt serve --record FILE`` kept of a host's run (one
request per line; every runner takes ``--serve "... serve --stdio --record
FILE"``).  One service is built as ``elasticopt serve`` builds it (the
kernel cache folder, the full warm-up, the frozen heap), then answers the
file's requests in order (each call timed with the heap settling that
follows its response, :meth:`AllocationService.settle`), ``--passes`` times (the second pass meets only
request shapes the service has seen).  Per pass it prints the per-call
median, p99 and max after the first call, the calls over ``--slow-ms``, and
for those calls how many jax traced or compiled a kernel in (jax's own
``/jax/core/compile/*`` duration events) and the jobs they held: issue 22's
target is no call over 50 ms at 100 jobs on shapes the service has seen,
which a pass separates from the first use of a shape.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax.monitoring
import orjson

from elasticopt.service import AllocationService
from elasticopt.solvers.dp.kernel_cache import default_kernel_cache, use_kernel_cache

_COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/backend_compile_duration")
_events: list[str] = []


def _listen(event: str, duration_s: float, **_: object) -> None:
    if event in _COMPILE_EVENTS:
        _events.append(event)


def _jobs(line: bytes) -> int:
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return 0
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    return len(jobs) if isinstance(jobs, list) else 0


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", metavar="FILE", help="requests kept by `elasticopt serve --record FILE`")
    ap.add_argument("--slow-ms", type=float, default=50.0, help="a call over this is listed (default 50)")
    ap.add_argument("--passes", type=int, default=2, help="answer the file this many times (default 2)")
    ap.add_argument("--kernel-cache", default=None, metavar="DIR",
                    help="as `elasticopt serve --kernel-cache` (default: its default folder; none: no cache)")
    a = ap.parse_args()
    try:
        with open(a.file, "rb") as fh:
            lines = [line for line in fh.read().splitlines() if line.strip()]
    except OSError as exc:
        raise SystemExit(f"bench_service_calls: {a.file}: cannot read it ({exc.strerror}); expected a file "
                         "written by `elasticopt serve --record FILE`") from None
    if not lines:
        raise SystemExit(f"bench_service_calls: {a.file}: no requests in it; expected a file written by "
                         "`elasticopt serve --record FILE`")
    cache = a.kernel_cache
    use_kernel_cache(default_kernel_cache() if cache is None else (None if cache.strip().lower() == "none" else cache))
    jax.monitoring.register_event_duration_secs_listener(_listen)
    jobs = [_jobs(line) for line in lines]
    service = AllocationService()
    t0 = time.perf_counter()
    service.warm_up()
    print(f"{a.file}: {len(lines)} requests, jobs per request median {statistics.median(jobs):.0f}, max "
          f"{max(jobs)}; warm-up {time.perf_counter() - t0:.1f} s")
    for p in range(1, a.passes + 1):
        times, compiled = [], []
        for line in lines:
            _events.clear()
            t = time.perf_counter()
            service.handle_bytes(line)
            service.settle()  # as both transports do once the response is sent (counted here)
            times.append(1e3 * (time.perf_counter() - t))
            compiled.append(len(_events))
        rest = times[1:] if p == 1 else times  # the first call of a run is the host's first request
        slow = [i for i, ms in enumerate(times) if ms > a.slow_ms and (p > 1 or i > 0)]
        with_kernel = [i for i in slow if compiled[i]]
        print(f"  pass {p}: first call {times[0]:.1f} ms; then median {statistics.median(rest):.1f} ms, p99 "
              f"{_pct(rest, 0.99):.1f} ms, max {max(rest):.1f} ms; {len(slow)} over {a.slow_ms:g} ms, "
              f"{len(with_kernel)} of them with a kernel traced or compiled; calls with one: "
              f"{sum(1 for c in compiled if c)}")
        if slow:
            sj = [jobs[i] for i in slow]
            plain = [i for i in slow if not compiled[i]]
            print(f"    jobs in the calls over {a.slow_ms:g} ms: min {min(sj)}, median {statistics.median(sj):.0f}, "
                  f"max {max(sj)}; at most 100 jobs: {sum(1 for j in sj if j <= 100)}"
                  + (f"; without a kernel built, slowest {max(times[i] for i in plain):.1f} ms "
                     f"({jobs[max(plain, key=lambda i: times[i])]} jobs)" if plain else ""))
        small = [ms for i, ms in enumerate(times) if jobs[i] <= 100 and (p > 1 or i > 0)]
        if small:
            print(f"    calls of at most 100 jobs: {len(small)}, max {max(small):.1f} ms, "
                  f"{sum(1 for ms in small if ms > a.slow_ms)} over {a.slow_ms:g} ms")


if __name__ == "__main__":
    main()
