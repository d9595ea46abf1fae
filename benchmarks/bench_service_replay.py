"""Benchmark: a host's recorded requests answered again, with and without the service's job cache.

    python benchmarks/bench_service_replay.py FILE [FILE ...] [--repeats 3]

FILE: what ``elasticopt serve --record FILE`` kept of a host's run (one
request per line; every runner takes ``--serve "... serve --stdio --record
FILE"``).  Each file's requests are answered in order, in-process, by two
services side by side (``AllocationService()`` and
``AllocationService(cache_jobs=0)``, each after ``warm_up``), ``--repeats``
times, interleaved request by request.  Printed per file: the requests, the
jobs per request (median, max), the job cache's hits among the jobs looked up
(the share of jobs a host sent again unchanged), and the median, p99 and total
milliseconds per request of each service (the fastest of the repeats per
request); answers are checked equal, request by request (``timings`` aside).
"""

from __future__ import annotations

import argparse
import statistics
import time

import orjson

from elasticopt.service import AllocationService


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE", help="requests kept by `elasticopt serve --record FILE`")
    ap.add_argument("--repeats", type=int, default=3, help="answer each file this many times (default 3)")
    a = ap.parse_args()
    for path in a.files:
        try:
            with open(path, "rb") as fh:
                lines = [line for line in fh.read().splitlines() if line.strip()]
        except OSError as exc:
            raise SystemExit(f"bench_service_replay: {path}: cannot read it ({exc.strerror}); expected a file "
                             "written by `elasticopt serve --record FILE`") from None
        if not lines:
            raise SystemExit(f"bench_service_replay: {path}: no requests in it; expected a file written by "
                             "`elasticopt serve --record FILE`")
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
