"""The service in a host's loop: instance files of every format `solve` reads, HTTP body limit."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from urllib.parse import urlparse

import pytest

from elasticopt import solve
from elasticopt.generate import generate_instance
from elasticopt.models import problem_from_dict
from elasticopt.models.instance_format2 import problem_to_dict_2
from elasticopt.service import AllocationService

from service_helpers import ROOT, check_response

SERVICE = AllocationService()


@pytest.mark.parametrize("seed", range(3))
def test_a_format_2_instance_is_a_request_as_it_is(seed):
    """A format-2 instance (pools) as `elasticopt solve` reads it: refused before ("format: expected one of
    'elasticopt-request/1', 'elasticopt-instance/1'"), now solved with the same objective as the model's solve."""
    doc = problem_to_dict_2(generate_instance("hetero", 8, 48, seed=seed, cluster="gavel"))
    assert doc["format"] == "elasticopt-instance/2"
    resp = check_response(SERVICE.handle(json.dumps(doc)))
    assert resp["ok"], resp
    expect = solve(problem_from_dict(doc))
    assert resp["objective"] == expect.objective and resp["status"] == expect.status.value
    resp2 = check_response(SERVICE.handle({**doc, "id": "f2", "solver": "milp", "time_limit_s": 60}))
    assert resp2["ok"] and resp2["id"] == "f2" and resp2["solver"] == "milp"
    assert resp2["objective"] == expect.objective
    used = {}
    for a in resp["allocation"].values():
        if a:
            used[a["pool"]] = used.get(a["pool"], 0) + a["gpus"]
    for t, pool in doc["cluster"]["pools"].items():
        assert used.get(t, 0) <= pool["nodes"] * pool["gpus_per_node"]


def test_a_bad_format_2_instance_names_the_path():
    doc = problem_to_dict_2(generate_instance("hetero", 4, 48, seed=0, cluster="gavel"))
    doc["jobs"][1]["types"] = ["no-such-type"]
    resp = check_response(SERVICE.handle(doc))
    assert not resp["ok"] and resp["error"]["code"] == "invalid_request"
    assert resp["error"]["path"].startswith("jobs[1]"), resp
    bad = check_response(SERVICE.handle({**problem_to_dict_2(generate_instance("hetero", 4, 48, seed=0,
                                                                                cluster="gavel")), "time_limit_s": -1}))
    assert not bad["ok"] and bad["error"]["path"] == "time_limit_s"


def _server(*extra):
    proc = subprocess.Popen([sys.executable, "-m", "elasticopt", "serve", "--http", "--port", "0", "--no-warm-up",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert line.startswith("listening on "), line
    return proc, urlparse(line.split()[-1])


def _raw(url, head: bytes, body_iter, read_reply=True) -> tuple[int, dict]:
    s = socket.create_connection((url.hostname, url.port), timeout=60)
    try:
        s.sendall(head)
        try:
            for part in body_iter:
                s.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused and closed: what we test
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            got = s.recv(65536)
            if not got:
                break
            data += got
    finally:
        s.close()
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1])


def _rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_http_refuses_a_body_over_the_limit_without_reading_it():
    proc, url = _server("--max-body-mib", "1")
    try:
        before = _rss_kib(proc.pid)
        # a 200 MB Content-Length with Expect: 100-continue (curl's way): refused from the header alone, the
        # body never asked for
        head = (f"POST /v1/solve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Expect: 100-continue\r\nContent-Length: {200 * 1000 * 1000}\r\n\r\n").encode()
        t0 = time.monotonic()
        status, resp = _raw(url, head, [])
        assert time.monotonic() - t0 < 5  # not after the drop window (10 s)
        assert status == 413 and check_response(resp)["error"]["code"] == "request_too_large"
        assert "Content-Length" in resp["error"]["found"] and resp["error"]["path"] == "(body)"
        # chunked, no Content-Length: refused once the chunks pass the limit, not read whole
        chunk = b"x" * 65536
        frames = (b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(200 * 1000 * 1000 // 65536))
        head = b"POST /v1/solve HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        status, resp = _raw(url, head, frames)
        assert status == 413 and resp["error"]["code"] == "request_too_large"
        assert _rss_kib(proc.pid) - before < 100 * 1024  # far below the 200 MB sent (800 MB resident before)
        # under the limit: answered as before
        small = (ROOT / "instances" / "tiny.json").read_bytes()
        head = (f"POST /v1/solve HTTP/1.1\r\nHost: x\r\nContent-Length: {len(small)}\r\n\r\n").encode()
        status, resp = _raw(url, head, [small])
        assert status == 200 and resp["ok"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_http_refusal_reaches_clients_that_send_the_whole_body_first():
    """urllib (as requests) sends all of a body before it reads: the refusal came as a connection reset
    ("[Errno 104] Connection reset by peer"), the structured error lost.  The rest of a refused body is now
    read and dropped, so the client gets the 413 and its error, with a Content-Length or chunked."""
    import urllib.error
    import urllib.request

    proc, url = _server("--max-body-mib", "1")
    try:
        before = _rss_kib(proc.pid)
        body = b"x" * (48 * 1024 * 1024)
        target = f"http://{url.hostname}:{url.port}/v1/solve"
        for data in (body, (body[i:i + 65536] for i in range(0, len(body), 65536))):  # Content-Length, chunked
            req = urllib.request.Request(target, data=data, headers={"Content-Type": "application/json"})
            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(req, timeout=60)
            assert exc.value.code == 413
            resp = check_response(json.loads(exc.value.read()))
            assert resp["error"]["code"] == "request_too_large" and "1048576 bytes" in resp["error"]["message"]
        assert _rss_kib(proc.pid) - before < 24 * 1024  # dropped as read: far below the 2 x 48 MiB sent
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_max_body_must_be_positive():
    out = subprocess.run([sys.executable, "-m", "elasticopt", "serve", "--http", "--max-body-mib", "0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--max-body-mib 0.0: expected a number of MiB > 0" in out.stderr
    assert "Traceback" not in out.stderr


def _gavel_like(rng, n, pools):
    jobs = []
    for i in range(n):
        k = rng.choice([1, 1, 2, 4])
        jobs.append({"id": str(i), "options": [{"gpus": k, "pool": t, "value": rng.uniform(0.2, 1.0)}
                                               for t, g in pools.items() if k <= g]})
    return {"format": "elasticopt-request/1", "objective": "values", "priority": [j["id"] for j in jobs],
            "cluster": {"pools": {t: {"nodes": 1, "gpus_per_node": g} for t, g in pools.items()}}, "jobs": jobs}


def test_after_the_warm_up_a_host_loop_compiles_no_kernel():
    """`elasticopt serve` warms up before its first answer: afterwards a Gavel-like loop (2 and 3 pools,
    1..40 jobs, the shapes of the 2:0:4 artifact and 8:8:8 static runs) and a one-pool loop build no new DP
    kernel (each new kernel was a 0.7-3.8 s call mid-run before: the '~1.8 s around the 8th request')."""
    import random

    from elasticopt.solvers.dp import jax_backend as jax_dp

    service = AllocationService()
    service.warm_up()
    before = (jax_dp._kernels.cache_info().misses, jax_dp._kernels_multi.cache_info().misses)
    rng = random.Random(0)
    for pools, sizes in (({"v100": 2, "k80": 4}, range(15, 0, -1)), ({"v100": 8, "p100": 8, "k80": 8}, (30, 28, 25, 20, 40, 10)),
                         ({"gpu": 8}, (12, 8, 3))):
        for n in sizes:
            resp = service.handle(_gavel_like(rng, n, pools))
            assert resp["ok"], resp
    after = (jax_dp._kernels.cache_info().misses, jax_dp._kernels_multi.cache_info().misses)
    assert after == before, f"kernels built after the warm-up: {before} -> {after}"


def test_the_loaders_fast_path_gives_the_same_answer_and_its_screen_still_applies():
    """Requests as text take the model loader's compiled-schema path (translate 300 -> 45 ms at 1,000 jobs);
    the answer is the one of the full checks, and text the loader's screen sends to the full checks (a
    3-digit exponent: 1e400 is infinity) is still refused with its path."""
    from service_helpers import instance_request

    doc = instance_request("mixed.json", "m")
    fast = check_response(SERVICE.handle(json.dumps(doc)))
    full = check_response(SERVICE.handle(doc))  # a parsed object: the full checks
    assert fast["ok"] and fast["objective"] == full["objective"] and fast["allocation"] == full["allocation"]
    text = json.dumps(doc).replace('"weight": 1', '"weight": 1e400', 1)
    if text == json.dumps(doc):
        job = doc["jobs"][0]
        text = json.dumps({**doc, "jobs": [{**job, "weight": 12345}] + doc["jobs"][1:]}).replace("12345", "1e400")
    bad = check_response(SERVICE.handle(text))
    assert not bad["ok"] and bad["error"]["path"].startswith("jobs[0]"), bad


def test_the_warm_up_leaves_the_heap_frozen_for_the_cyclic_collector():
    """Blox's loop had 50-120 ms calls every few hundred requests: generation-2 collections walking the
    ~230,000 objects of the interpreter, jax and the kernels.  After the warm-up they are frozen
    (gc.freeze): a full collection then walks only what requests keep."""
    import gc

    from elasticopt.service.heap import settle_heap

    service = AllocationService()
    service.warm_up(full=False)
    frozen = gc.get_freeze_count()
    assert frozen > 10_000, frozen  # the interpreter's and elasticopt's own objects at least
    settle_heap()  # again: idempotent, nothing alive is lost
    assert gc.get_freeze_count() >= frozen
    assert len(gc.get_objects()) < frozen, "most objects stay out of the collector's walk"
    resp = service.handle({"format": "elasticopt-request/1", "cluster": {"gpus": 8},
                           "jobs": [{"id": "a", "throughput": [[1, 32, 100.0], [2, 64, 190.0]]}]})
    assert resp["ok"] and resp["allocation"]["a"]["gpus"] == 2


@pytest.mark.parametrize("flags, code", [(["--warm", "--no-warm-up"], 2), (["--warm"], 0)])
def test_serve_warm_is_the_default_warm_up_and_excludes_no_warm_up(flags, code):
    line = json.dumps({"format": "elasticopt-request/1", "cluster": {"gpus": 8},
                       "jobs": [{"id": "a", "throughput": [[1, 32, 100.0]]}]})
    r = subprocess.run([sys.executable, "-m", "elasticopt", "serve", "--stdio", *flags], input=line + "\n",
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == code, r.stderr[-2000:]
    if code == 0:
        assert json.loads(r.stdout)["allocation"]["a"]["gpus"] == 1
    else:
        assert "not allowed with argument" in r.stderr
