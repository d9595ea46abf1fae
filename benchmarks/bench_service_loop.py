"""Benchmark: ``elasticopt serve --stdio`` in a scheduler's loop, as Blox's drop-in calls it.

    python benchmarks/bench_service_loop.py [--calls 1000] [--jobs 100] [--nodes 32] [--gpus-per-node 4]

:class:`~elasticopt.integrations.blox.BloxPolicy` (its own request builder and stdio
client) schedules ``--jobs`` active jobs on one pool, call after call; between calls
a few jobs finish and as many arrive, and the GPUs the previous answer chose are
held (so every request carries running jobs, their nodes, caller values and an
idle value, as in Blox's simulator).  Each call's round trip through the
subprocess is timed; printed: the first call (it starts the service, which warms
up), then median, p99 and max of the others and how many took over 50 ms.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from typing import Any

from elasticopt.integrations.blox import BloxPolicy, ElasticoptClient


class _TimedClient(ElasticoptClient):
    """The drop-in's client, timing each round trip."""

    def __init__(self, command: list[str]):
        super().__init__(command=command)
        self.times_s: list[float] = []

    def request(self, doc: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        resp = super().request(doc)
        self.times_s.append(time.perf_counter() - t0)
        return resp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--churn", type=int, default=3, help="jobs that finish (and arrive) between calls")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    alpha: dict[str, float] = {}
    client = _TimedClient([sys.executable, "-m", "elasticopt", "serve", "--stdio"])
    policy = BloxPolicy(speedup_fn=lambda jid, info, k: k / (1.0 + alpha[jid] * (k - 1)), client=client)
    gpus = [{"Node_ID": n, "GPU_ID": n * a.gpus_per_node + i, "GPU_type": "gpu", "IN_USE": False, "JOB_IDS": None}
            for n in range(a.nodes) for i in range(a.gpus_per_node)]
    node_info: dict[int, dict[str, Any]] = {n: {} for n in range(a.nodes)}
    jobs: dict[str, dict[str, Any]] = {}
    clock = 0

    def arrive() -> None:
        nonlocal clock
        clock += 1
        jid = f"j{clock}"
        alpha[jid] = rng.uniform(0.02, 0.3)
        jobs[jid] = {"num_GPUs": rng.choice([1, 1, 2, 4, 8, 16]), "submit_time": clock}

    for _ in range(a.jobs):
        arrive()
    try:
        for _ in range(a.calls):
            out = policy.schedule_jobs(jobs, node_info, gpus)
            held = {g: jid for jid, ids in out["elasticopt"]["gpu_ids"].items() for g in ids}
            for row in gpus:
                row["JOB_IDS"] = held.get(row["GPU_ID"])
                row["IN_USE"] = row["JOB_IDS"] is not None
            for jid in rng.sample(sorted(jobs), a.churn):
                del jobs[jid]
                for row in gpus:
                    if row["JOB_IDS"] == jid:
                        row["JOB_IDS"], row["IN_USE"] = None, False
            for _ in range(a.churn):
                arrive()
    finally:
        client.close()
    first, rest = client.times_s[0], sorted(client.times_s[1:])
    p99 = rest[max(0, -(-99 * len(rest) // 100) - 1)]
    print(f"{len(client.times_s)} calls, {a.jobs} jobs, {a.nodes} x {a.gpus_per_node} GPUs, churn {a.churn}: "
          f"first {first:.2f} s (start + warm-up); after it median {1e3 * statistics.median(rest):.1f} ms, "
          f"p99 {1e3 * p99:.1f} ms, max {1e3 * rest[-1]:.1f} ms, over 50 ms: {sum(t > 0.05 for t in rest)}")


if __name__ == "__main__":
    main()
