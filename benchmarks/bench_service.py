"""Benchmark: what ``elasticopt serve`` adds on top of the solve, per request.

    python benchmarks/bench_service.py [--jobs 100 1000] [--repeats 15] [--solver dp]

For each size, on the same request, side by side in one run (medians):

- ``solve``: ``elasticopt.solve(problem)`` in-process from a built Problem
  (compile + reduce + backend) -- the floor;
- ``solve+verify``: the same, each solution checked by ``elasticopt.verify`` (what every result gets in
  the service; the same Problem object each time, so ``verify`` reuses what it priced, as it does for
  the service's cached jobs);
- ``load+solve``: building the Problem from the instance JSON document
  (the model's own loader) and solving it, in-process;
- ``service``: ``AllocationService.handle(bytes)`` in-process (parse,
  validate, translate, solve, verify, place, respond), after a warm-up that
  freezes the heap as ``elasticopt serve`` does, the same request again and
  again (every job in the service's job cache after the first);
- ``svc 1% new``: the same, each request with 1 % of its jobs changed (a value
  or the samples left: what a host's next event sends), translated anew;
- ``svc session``: the same changes sent as a session's (``elasticopt.service.session``): the whole
  request once, then per request only the jobs that changed (``session_update``), answered as the whole;
- ``svc no cache``: ``AllocationService(cache_jobs=0)``, every job translated
  at every request (the service before its job cache);
- ``stdio``: a round trip through ``elasticopt serve --stdio`` (a subprocess);
- ``http``: a round trip through ``elasticopt serve --http`` (urllib client);
- ``orjson``: ``orjson.loads`` of the request's bytes alone, the least any JSON
  transport must spend, beside ``budget``, a quarter of ``solve`` (issue 22's
  target: the service adds at most that).

Per request, the service's own timings (parse, validate, translate, compile, solve, verify, place) of a
whole request and of a session's 1 % changes, and what the request -> model steps (parse + validate +
translate) add to the solve: in a session the jobs kept are not parsed or translated again
(``elasticopt.service.translate_changes``).

Two request kinds: ``paper`` (fitted profiles, the instance family of
``elasticopt generate``) and ``values`` (caller values as PolluxPolicy sends
them: 1..16 replicas per job priced by a speedup function).  Overhead is
reported as milliseconds over ``solve`` and as ratios to it (in-process
service, with 1 % new jobs, and stdio; issue 22's target: service <= 1.25x
solve at 1,000 jobs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable

import orjson

from elasticopt import solve, verify
from elasticopt.generate import generate_instance
from elasticopt.integrations.pollux import PolluxPolicy
from elasticopt.models import problem_from_dict, problem_to_dict
from elasticopt.service import AllocationService
from elasticopt.service.session import session_update
from elasticopt.service.translate import translate

SERVE = [sys.executable, "-m", "elasticopt", "serve"]


def median_s(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class _Node:
    def __init__(self, gpus: int):
        self.resources, self.preemptible = {"nvidia.com/gpu": gpus}, False


class _Job:
    def __init__(self, i: int):
        alpha = 0.05 + 0.01 * (i % 20)
        self.speedup_fn = lambda nodes, k: k / (1.0 + alpha * (k - 1) + 0.2 * (nodes - 1))
        self.min_replicas, self.max_replicas, self.preemptible = 0, 16, True
        self.age, self.num_restarts = 100.0 + i, i % 3


def requests_for(n: int, gpus: int) -> dict[str, dict[str, Any]]:
    paper = problem_to_dict(generate_instance("paper", n, gpus, seed=1))
    paper["format"] = "elasticopt-request/1"
    jobs = {f"j{i}": _Job(i) for i in range(n)}
    nodes = {i: _Node(8) for i in range(gpus // 8)}
    values, _ = PolluxPolicy(client=object()).build_request(jobs, nodes, {})
    return {"paper": paper, "values": values}


def changed_requests(doc: dict[str, Any], count: int, share: float = 0.01) -> list[bytes]:
    """``count`` requests, request ``r`` with ``share`` of the jobs changed from ``doc`` (a caller value or the
    samples left; no two requests alike, so each changed job is new to the service's job cache)."""
    jobs = doc["jobs"]
    step = max(1, round(share * len(jobs)))
    out = []
    for r in range(count):
        new = [dict(jd) for jd in jobs]
        for i in range(r * step, (r + 1) * step):
            jd = new[i % len(new)]
            if "options" in jd:
                jd["options"] = [dict(o, value=o["value"] * (1 + 1e-6 * (r + 1))) for o in jd["options"]]
            else:
                jd["remaining_samples"] = jd.get("remaining_samples", 10**6) + r + 1
        out.append(json.dumps(dict(doc, jobs=new)).encode())
    return out


def session_requests(doc: dict[str, Any], count: int, name: str) -> tuple[bytes, list[bytes]]:
    """The requests of :func:`changed_requests` as a host's session sends them: the first whole (it starts
    session ``name``), then each as its changes from the one before (revisions 1, 2, ...)."""
    whole = [json.loads(r) for r in changed_requests(doc, count + 1)]
    deltas = [json.dumps(session_update(prev, cur, name, base)).encode()
              for base, (prev, cur) in enumerate(zip(whole, whole[1:]), start=1)]
    return json.dumps(dict(whole[0], session=name)).encode(), deltas


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--solver", default="dp")
    a = ap.parse_args()
    service = AllocationService()
    service.warm_up(full=False)  # then the heap is frozen, as in `elasticopt serve` (service.heap)
    uncached = AllocationService(cache_jobs=0)
    stdio = subprocess.Popen(SERVE + ["--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    http = subprocess.Popen(SERVE + ["--http", "--port", "0"], stdout=subprocess.PIPE, text=True)
    url = http.stdout.readline().split()[-1] + "/v1/solve"  # type: ignore[union-attr]
    rows = []
    try:
        for n in a.jobs:
            gpus = max(8, 8 * round(n * 1.024 / 8))
            for kind, doc in requests_for(n, gpus).items():
                doc = dict(doc, solver=a.solver)
                data = json.dumps(doc).encode()
                problem = translate(doc).problem
                model_doc = problem_to_dict(problem)

                def via_stdio() -> dict:
                    stdio.stdin.write(data + b"\n")  # type: ignore[union-attr]
                    stdio.stdin.flush()  # type: ignore[union-attr]
                    return json.loads(stdio.stdout.readline())  # type: ignore[union-attr]

                def via_http() -> dict:
                    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(req) as fh:
                        return json.loads(fh.read())

                objective = solve(problem, a.solver).objective
                for fn in (via_stdio, via_http):
                    assert fn()["objective"] == objective, "the transports must answer what solve answers"
                changed = iter(changed_requests(doc, a.repeats + 1))
                start, deltas = session_requests(doc, 2 * a.repeats + 1, f"{kind}-{n}")
                assert service.handle(start)["ok"]
                in_session = iter(deltas)
                t = {
                    "solve": median_s(lambda: solve(problem, a.solver), a.repeats),
                    "solve+verify": median_s(lambda: verify(problem, solve(problem, a.solver)), a.repeats),
                    "load+solve": median_s(lambda: solve(problem_from_dict(model_doc), a.solver), a.repeats),
                    "service": median_s(lambda: service.handle(data), a.repeats),
                    "svc 1% new": median_s(lambda: service.handle(next(changed)), a.repeats),
                    "svc session": median_s(lambda: service.handle(next(in_session)), a.repeats),
                    "svc no cache": median_s(lambda: uncached.handle(data), a.repeats),
                    "stdio": median_s(via_stdio, a.repeats),
                    "http": median_s(via_http, a.repeats),
                    "orjson": median_s(lambda: orjson.loads(data), a.repeats),
                }
                t["budget"] = 0.25 * t["solve"]
                runs = [service.handle(data)["timings"] for _ in range(a.repeats)]
                parts = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                runs = [service.handle(d)["timings"] for d in in_session]
                session_parts = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                rows.append((n, gpus, kind, len(data), t, parts, session_parts))
    finally:
        stdio.stdin.close()  # type: ignore[union-attr]
        stdio.wait()
        http.terminate()
        http.wait()
    print(f"medians of {a.repeats} requests, solver {a.solver}; overhead = transport time - solve time")
    head = f"{'jobs':>5} {'GPUs':>5} {'kind':>6} {'KiB':>6} " + " ".join(f"{k:>11}" for k in rows[0][4])
    print(head + f" {'stdio-solve':>12} {'http-solve':>11} {'service/solve':>13} {'1% new/solve':>12} "
          f"{'session/solve':>13} {'stdio/solve':>11} {'session/(solve+verify)':>22}")
    for n, gpus, kind, size, t, _, _ in rows:
        ms = " ".join(f"{1e3 * v:>9.2f}ms" for v in t.values())
        print(f"{n:>5} {gpus:>5} {kind:>6} {size / 1024:>6.0f} {ms} {1e3 * (t['stdio'] - t['solve']):>10.2f}ms "
              f"{1e3 * (t['http'] - t['solve']):>9.2f}ms {t['service'] / t['solve']:>12.2f}x "
              f"{t['svc 1% new'] / t['solve']:>11.2f}x {t['svc session'] / t['solve']:>12.2f}x "
              f"{t['stdio'] / t['solve']:>10.2f}x {t['svc session'] / t['solve+verify']:>21.2f}x")
    print(f"\nthe in-process service's own timings of the same request, whole / a session's 1 % changes (ms, "
          f"medians of {a.repeats}); request -> model = parse + validate + translate, over solve (the column above):")
    for n, _, kind, _, t, parts, session_parts in rows:
        for how, p in (("whole", parts), ("session", session_parts)):
            to_model = p["parse_s"] + p["validate_s"] + p["translate_s"]
            print(f"{n:>5} {kind:>6} {how:>7} " + " ".join(f"{k[:-2]}={1e3 * v:.2f}" for k, v in p.items())
                  + f"  request->model/solve={to_model / t['solve']:.2f}")


if __name__ == "__main__":
    main()
