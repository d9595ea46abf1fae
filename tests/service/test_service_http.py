"""``elasticopt serve --http``: same answer as ``elasticopt solve``, bad input, two clients, disconnects."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from urllib.parse import urlparse

import httpx
import pytest

from service_helpers import ELASTICOPT, ROOT, check_response, instance_request, malformed_requests


def test_http_answer_is_the_solve_answer(http_server):
    solved = subprocess.run(ELASTICOPT + ["solve", str(ROOT / "instances" / "mixed.json"), "--json"],
                            capture_output=True, text=True, timeout=300)
    expect = json.loads(solved.stdout)
    r = httpx.post(http_server + "/v1/solve", json=instance_request("mixed.json", "m"), timeout=60)
    assert r.status_code == 200
    resp = check_response(r.json())
    assert resp["objective"] == expect["objective"]
    got = {j: (None if a is None else {"gpus": a["gpus"], "batch": a["batch"]}) for j, a in resp["allocation"].items()}
    assert got == expect["allocation"]


def test_http_info_and_schemas(http_server):
    info = check_response(httpx.get(http_server + "/v1/info").json())
    assert "dp" in info["solvers"]
    schema = httpx.get(http_server + "/v1/schema/request").json()
    assert schema["$id"] == "urn:elasticopt:request:1"


def test_http_survives_1000_malformed_requests_in_a_row(http_server):
    with httpx.Client(timeout=60) as client:
        for body in malformed_requests(1000, seed=1):
            r = client.post(http_server + "/v1/solve", content=body)
            resp = check_response(r.json())
            assert not resp["ok"] and r.status_code in (400, 422, 500, 503), resp
            assert resp["error"]["code"] != "internal" and resp["error"]["path"], resp
        r = client.post(http_server + "/v1/solve", json=instance_request("tiny.json", "after"))
    assert r.status_code == 200 and r.json()["objective_value"] == pytest.approx(275.0)


def test_two_concurrent_clients_get_their_own_answers(http_server):
    expect = {}
    for name in ("tiny.json", "mixed.json", "paper-small.json"):
        expect[name] = httpx.post(http_server + "/v1/solve", json=instance_request(name), timeout=60).json()["objective"]
    errors: list[str] = []

    def client(names: list[str]) -> None:
        with httpx.Client(timeout=120) as c:
            for i, name in enumerate(names * 5):
                resp = c.post(http_server + "/v1/solve", json=instance_request(name, f"{name}#{i}")).json()
                if resp.get("id") != f"{name}#{i}" or resp.get("objective") != expect[name]:
                    errors.append(f"{name}#{i}: {str(resp)[:200]}")

    threads = [threading.Thread(target=client, args=(["tiny.json", "paper-small.json"],)),
               threading.Thread(target=client, args=(["mixed.json", "tiny.json"],))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _raw(url: str, data: bytes) -> socket.socket:
    u = urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=30)
    s.sendall(data)
    return s


def test_client_disconnecting_mid_request_does_not_disturb_the_service(http_server):
    body = json.dumps(instance_request("paper-small.json")).encode()
    head = (f"POST /v1/solve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    _raw(http_server, head + body[: len(body) // 3]).close()  # gone while sending the body
    _raw(http_server, head + body).close()  # gone while the request is being solved
    r = httpx.post(http_server + "/v1/solve", json=instance_request("tiny.json", "still"), timeout=60)
    assert r.status_code == 200 and r.json()["id"] == "still"
