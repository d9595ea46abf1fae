"""Benchmark: a host's recorded requests answered again, with and without the service's job cache.

    python benchmarks/bench_service_replay.py FILE [FILE ...] [--repeats 3]

FILE: what ``elasticopt serve --record FILE`` kept of a host's run (one
request per line; the Gavel and Blox runners take ``--serve "... serve
--stdio --record FILE"``, the Sia and Pollux runners ``--record``).  Each file's requests are answered in order, in-process, by two
services side by side (``AllocationService()`` and
``AllocationService(cache_jobs=0)``, each after ``warm_up``, each call timed
with the heap settling that follows its response), ``--repeats``
times, interleaved request by request.  Printed per file: the requests, the
jobs per request (median, max), the job cache's hits among the jobs looked up
(the share of jobs a host sent again unchanged), and the median, p99 and total
milliseconds per request of each service (the fastest of the repeats per
request); answers are checked equal, request by request (``timings`` aside).

    python benchmarks/bench_service_replay.py FILE --calls [--slow-ms 50] [--passes 2] [--kernel-cache DIR]

``--calls``: call by call, as ``elasticopt serve`` answers them.  One
service is built as ``serve`` builds it (the kernel cache folder, the full
warm-up, the frozen heap), then answers the file's requests in order, each
call timed with the heap settling that follows its response
(:meth:`AllocationService.settle`), ``--passes`` times (the second pass
meets only request shapes the service has seen).  Per pass: the per-call
median, p99 and max after the first call, the calls over ``--slow-ms``, and
how many of those jax traced or compiled a kernel in (jax's own
``/jax/core/compile/*`` duration events), the jobs they held and their
longest stage (the response's ``timings``, or outside them): issue
22's target is no call over 50 ms at 100 jobs on shapes the service has
seen, which a pass separates from the first use of a shape.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import orjson

from elasticopt.service import AllocationService

_COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/backend_compile_duration")
_events: list[str] = []


def _listen(event: str, duration_s: float, **_: object) -> None:
    if event in _COMPILE_EVENTS:
        _events.append(event)


def _ms(times: list[float]) -> str:
    times = sorted(times)
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    return f"median {1e3 * statistics.median(times):.2f} ms, p99 {1e3 * p99:.2f} ms, total {1e3 * sum(times):.0f} ms"


def _jobs(line: bytes) -> int:
    """How many jobs a recorded request holds (0 for a line that is not a request object: it is answered
    with its error, as the host was)."""
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return 0
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    return len(jobs) if isinstance(jobs, list) else 0


def _read(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as fh:
            lines = [line for line in fh.read().splitlines() if line.strip()]
    except OSError as exc:
        raise SystemExit(f"bench_service_replay: {path}: cannot read it ({exc.strerror}); expected a file "
                         "written by `elasticopt serve --record FILE`") from None
    if not lines:
        raise SystemExit(f"bench_service_replay: {path}: no requests in it; expected a file written by "
                         "`elasticopt serve --record FILE`")
    return lines


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def calls(path: str, lines: list[bytes], slow_ms: float, passes: int) -> None:
    """``--calls``: the file's requests call by call through one service as ``elasticopt serve`` runs."""
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_listen)
    jobs = [_jobs(line) for line in lines]
    service = AllocationService()
    t0 = time.perf_counter()
    service.warm_up()
    print(f"{path}: {len(lines)} requests, jobs per request median {statistics.median(jobs):.0f}, max "
          f"{max(jobs)}; warm-up {time.perf_counter() - t0:.1f} s")
    for p in range(1, passes + 1):
        times, compiled, longest = [], [], []
        for line in lines:
            _events.clear()
            t = time.perf_counter()
            resp, _ = service.handle_bytes(line)
            service.settle()  # as both transports do once the response is sent (counted here)
            times.append(1e3 * (time.perf_counter() - t))
            compiled.append(len(_events))
            stages = {k[:-2]: 1e3 * v for k, v in (resp.get("timings") or {}).items() if k != "total_s"}
            stages["outside"] = times[-1] - 1e3 * (resp.get("timings") or {}).get("total_s", 0.0)  # settle, encode
            longest.append(max(stages, key=stages.__getitem__))
        rest = times[1:] if p == 1 else times  # the first call of a run is the host's first request
        slow = [i for i, ms in enumerate(times) if ms > slow_ms and (p > 1 or i > 0)]
        print(f"  pass {p}: first call {times[0]:.1f} ms; then median {statistics.median(rest):.1f} ms, p99 "
              f"{_pct(rest, 0.99):.1f} ms, max {max(rest):.1f} ms; {len(slow)} over {slow_ms:g} ms, "
              f"{sum(1 for i in slow if compiled[i])} of them with a kernel traced or compiled; calls with one: "
              f"{sum(1 for c in compiled if c)}")
        if slow:
            sj = [jobs[i] for i in slow]
            plain = [i for i in slow if not compiled[i]]
            print(f"    jobs in the calls over {slow_ms:g} ms: min {min(sj)}, median {statistics.median(sj):.0f}, "
                  f"max {max(sj)}; at most 100 jobs: {sum(1 for j in sj if j <= 100)}"
                  + (f"; without a kernel built, slowest {max(times[i] for i in plain):.1f} ms "
                     f"({jobs[max(plain, key=lambda i: times[i])]} jobs)" if plain else ""))
            by = collections.Counter(longest[i] for i in slow)
            print("    their longest stage (the response's timings; outside: encoding and settling): "
                  + ", ".join(f"{k} {n}" for k, n in by.most_common()))
        small = [ms for i, ms in enumerate(times) if jobs[i] <= 100 and (p > 1 or i > 0)]
        if small:
            print(f"    calls of at most 100 jobs: {len(small)}, max {max(small):.1f} ms, "
                  f"{sum(1 for ms in small if ms > slow_ms)} over {slow_ms:g} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE", help="requests kept by `elasticopt serve --record FILE`")
    ap.add_argument("--repeats", type=int, default=3, help="answer each file this many times (default 3)")
    ap.add_argument("--calls", action="store_true", help="call by call through one service, as `serve` answers")
    ap.add_argument("--slow-ms", type=float, default=50.0, help="--calls: a call over this is counted (default 50)")
    ap.add_argument("--passes", type=int, default=2, help="--calls: answer each file this many times (default 2)")
    ap.add_argument("--kernel-cache", default=None, metavar="DIR",
                    help="--calls: as `elasticopt serve --kernel-cache` (default: its default folder; none: none)")
    a = ap.parse_args()
    if a.calls:
        from elasticopt.solvers.dp.kernel_cache import default_kernel_cache, use_kernel_cache

        cache = a.kernel_cache
        use_kernel_cache(default_kernel_cache() if cache is None
                         else (None if cache.strip().lower() == "none" else cache))
        for path in a.files:
            calls(path, _read(path), a.slow_ms, a.passes)
        return
    for path in a.files:
        lines = _read(path)
        jobs = [_jobs(line) for line in lines]
        best = {"cache": [float("inf")] * len(lines), "no cache": [float("inf")] * len(lines)}
        hits = looked = 0
        for _ in range(a.repeats):
            services = {"cache": AllocationService(), "no cache": AllocationService(cache_jobs=0)}
            for s in services.values():
                s.warm_up(full=False)
                s.job_cache.hits = s.job_cache.misses = 0  # (the warm-up's own request not counted)
            for i, line in enumerate(lines):
                answers = {}
                for name, s in services.items():
                    t0 = time.perf_counter()
                    resp = s.handle(line)
                    s.settle()  # as both transports do once the response is sent (counted here)
                    best[name][i] = min(best[name][i], time.perf_counter() - t0)
                    resp.pop("timings", None)
                    answers[name] = resp
                if answers["cache"] != answers["no cache"]:
                    raise SystemExit(f"{path}: request {i + 1}: the answers differ with and without the job cache")
            c = services["cache"].job_cache
            hits, looked = c.hits, c.hits + c.misses
        print(f"{path}: {len(lines)} requests, jobs per request median {statistics.median(jobs):.0f}, "
              f"max {max(jobs)}; job cache hits {hits}/{looked} ({100 * hits / max(1, looked):.1f} %)")
        for name, times in best.items():
            print(f"  {name:>8}: {_ms(times)}")
        ratio = sum(best["cache"]) / sum(best["no cache"])
        print(f"  cache / no cache (total): {ratio:.2f}")


if __name__ == "__main__":
    main()
