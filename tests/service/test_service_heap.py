"""The service keeps Python's cyclic collector out of its requests (``elasticopt/service/heap.py``).

At Gavel's Figure 9 scale the job cache filled with ~170,000-220,000 objects of jobs that never came back, and
Python's own full collections, walking them all, stopped 33 of 4,276 requests for 42-158 ms, collecting
nothing.  After every response the service now collects the young generations and freezes the rest.
"""

from __future__ import annotations

import gc
import random

import pytest

from elasticopt.service import AllocationService
from elasticopt.service.heap import FrozenHeap


@pytest.fixture(autouse=True)
def _unfreeze_after():
    """The tests freeze the whole test process's heap; the tests after them get it back."""
    yield
    gc.unfreeze()


def _requests(count: int, jobs: int, seed: int = 0) -> list[dict]:
    """Gavel-like requests: every job's values change at every call, so every job is new to the job cache."""
    rng = random.Random(seed)
    out = []
    for r in range(count):
        out.append({
            "format": "elasticopt-request/1", "objective": "values", "verify": True,
            "cluster": {"pools": {"v100": {"nodes": 2, "gpus_per_node": 4}, "k80": {"nodes": 2, "gpus_per_node": 4}}},
            "jobs": [{"id": f"j{(r + i) % (2 * jobs)}",
                      "options": [{"gpus": k, "pool": t, "value": round(rng.uniform(0.1, 5.0) * k, 6)}
                                  for t in ("v100", "k80") for k in (1, 2, 4)]} for i in range(jobs)],
        })
    return out


def _full_collections(service: AllocationService, docs: list[dict], settle: bool) -> list[int]:
    """The objects each full collection the requests met had to walk in generation 2 (gc.callbacks), with or
    without settling after each request."""
    seen: list[int] = []

    def watch(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append(len(gc.get_objects(generation=2)))

    gc.callbacks.append(watch)
    try:
        for doc in docs:
            resp = service.handle(doc)
            assert resp["ok"], resp
            if settle:
                service.settle()
    finally:
        gc.callbacks.remove(watch)
    return seen


def test_no_full_collection_walks_what_the_requests_keep_once_the_service_settles():
    """When Python starts a full collection depends on what the process did before (it waits until the
    objects that survived since the last one reach a quarter of those that survived it), so the test first
    makes it start them soon: a collection with everything frozen (what ``gc.collect()`` after the warm-up's
    freeze does).  Without settling, the full collections inside the requests walk the job cache's growing
    objects; with it they do not happen, or walk only what one request left."""
    docs = _requests(400, 40)
    service = AllocationService()
    service.warm_up(full=False)
    gc.freeze()
    gc.collect()  # everything frozen: Python's next full collections come soon
    before = _full_collections(service, docs[:200], settle=False)
    assert before and max(before) > 50_000, ("without settling, full collections inside the requests walk what "
                                             f"they keep: {before}")
    service.heap.collect_all()
    gc.freeze()
    gc.collect()  # the same state again
    after = _full_collections(service, docs[200:], settle=True)
    assert all(walked < 5_000 for walked in after), after
    assert service.heap.full_collections == 0
    assert len(gc.get_objects()) < 50_000, "what the requests keep is frozen, out of the collector's walk"


def test_a_cycle_frozen_before_it_became_garbage_is_collected_once_the_heap_doubles(monkeypatch):
    """A frozen object is still freed by reference counting; a cycle that becomes garbage after it was frozen
    is not, so the heap is bounded: past twice its allocated blocks after the last full collection (and at
    least FULL_AFTER_BLOCKS more), a full collection runs between requests."""
    import weakref

    import elasticopt.service.heap as heap_mod

    class Node:
        def __init__(self) -> None:
            self.other = self  # a cycle

    heap = FrozenHeap()
    heap.collect_all()
    kept = [Node() for _ in range(1000)]
    probe = weakref.ref(kept[0])
    heap.settle()  # frozen while alive
    del kept  # cycles, now garbage inside the frozen heap: reference counting cannot free them
    heap.settle()
    assert probe() is not None and heap.full_collections == 0, "below the limit: no full collection"
    monkeypatch.setattr(heap_mod, "FULL_AFTER_BLOCKS", 0)
    heap.floor = 1  # as if the heap had more than doubled since the last full collection
    heap.settle()
    assert probe() is None and heap.full_collections == 1, "the frozen garbage cycles were freed"
    assert heap.floor > 1000, "the floor is the heap after that collection"
    heap.settle()
    assert heap.full_collections == 1, "not again until the heap has doubled again"


def _counting_service() -> tuple[AllocationService, list[int]]:
    service, calls = AllocationService(), []
    service.settle = lambda: calls.append(1)  # type: ignore[method-assign]
    return service, calls


REQUEST = b'{"format": "elasticopt-request/1", "cluster": {"gpus": 8}, "jobs": [{"id": "a", "throughput": [[1, 32, 100.0]]}]}'


def test_stdio_settles_after_each_response_it_sent():
    import io

    from elasticopt.service import serve_stdio

    service, calls = _counting_service()
    out = io.BytesIO()
    assert serve_stdio(service, io.BytesIO(REQUEST + b"\n\n" + b"not json\n"), out) == 2
    assert len(calls) == 2 and out.getvalue().count(b"\n") == 2


def test_http_settles_after_the_response_is_sent():
    import asyncio

    from elasticopt.service.http import make_app

    service, calls = _counting_service()
    app = make_app(service)
    sent: list[dict] = []

    async def call() -> None:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/v1/solve", "raw_path": b"/v1/solve", "query_string": b"",
                 "root_path": "", "headers": [(b"content-type", b"application/json"),
                                              (b"content-length", str(len(REQUEST)).encode())],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
        body = [{"type": "http.request", "body": REQUEST, "more_body": False}]

        async def receive() -> dict:
            return body.pop(0) if body else {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                assert calls == [], "settled after the response's last byte, not before"
            sent.append(message)

        await app(scope, receive, send)

    asyncio.run(call())
    assert sent[0]["status"] == 200 and b'"ok":true' in sent[1]["body"]
    assert calls == [1]


def test_bench_service_replay_reads_a_recording_call_by_call(tmp_path):
    """The benchmark that separated full collections from compilations (docs/integrations.md §4) runs on a
    recording as ``elasticopt serve --record`` writes it, in both modes."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    record = tmp_path / "requests.jsonl"
    record.write_text("".join(json.dumps(d) + "\n" for d in _requests(6, 5)) + "not json\n")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_service_replay.py"
    r = subprocess.run([sys.executable, str(script), str(record), "--calls", "--passes", "2", "--slow-ms", "0"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "7 requests, jobs per request median 5, max 5" in r.stdout, r.stdout
    assert "pass 1: first call" in r.stdout and "pass 2: first call" in r.stdout
    assert "calls of at most 100 jobs: 6," in r.stdout and "calls of at most 100 jobs: 7," in r.stdout
    assert "6 over 0 ms" in r.stdout and "7 over 0 ms" in r.stdout and "their longest stage" in r.stdout
    r = subprocess.run([sys.executable, str(script), str(record), "--repeats", "1"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "cache / no cache (total)" in r.stdout, r.stderr[-3000:]
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "none.jsonl"), "--calls"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 1 and "cannot read it" in r.stderr and "Traceback" not in r.stderr
