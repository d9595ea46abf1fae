"""``elasticopt serve --stdio``: same answer as ``elasticopt solve``, survives bad input."""

from __future__ import annotations

import json
import subprocess

import pytest

from service_helpers import ELASTICOPT, ROOT, check_response, instance_request, malformed_requests


def _serve(lines: bytes, *extra: str) -> tuple[list[dict], subprocess.CompletedProcess]:
    proc = subprocess.run(ELASTICOPT + ["serve", "--stdio", *extra], input=lines, capture_output=True, timeout=300)
    return [json.loads(x) for x in proc.stdout.splitlines()], proc


@pytest.mark.parametrize("name,solver", [("tiny.json", "dp"), ("mixed.json", "dp"), ("mixed.json", "milp"),
                                         ("paper-small.json", "numpy-dp"), ("infeasible.json", "dp")])
def test_stdio_answer_is_the_solve_answer(tmp_path, name, solver):
    solved = subprocess.run(
        ELASTICOPT + ["solve", str(ROOT / "instances" / name), "--solver", solver, "--json"],
        capture_output=True, text=True, timeout=300,
    )
    expect = json.loads(solved.stdout)
    req = instance_request(name, request_id=name)
    req["solver"] = solver
    (resp,), proc = _serve(json.dumps(req).encode() + b"\n")
    assert proc.returncode == 0, proc.stderr
    check_response(resp)
    assert resp["id"] == name
    assert resp["status"] == expect["status"]
    assert resp["objective"] == expect["objective"]
    assert resp["infeasible_jobs"] == expect["infeasible_jobs"]
    got = {j: (None if a is None else {"gpus": a["gpus"], "batch": a["batch"]}) for j, a in resp["allocation"].items()}
    if expect["status"] != "infeasible":
        assert got == expect["allocation"]  # same deterministic solver on the same problem
        assert resp["verified"] is True


def test_stdio_survives_1000_malformed_requests_in_a_row():
    bad = malformed_requests(1000)
    good = json.dumps(instance_request("tiny.json", request_id="after")).encode()
    resps, proc = _serve(b"\n".join(bad) + b"\n" + good + b"\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(resps) == 1001
    for r in resps[:-1]:
        check_response(r)
        assert r["ok"] is False
        err = r["error"]
        assert err["message"] and err["path"] and err["code"] != "internal", err
    last = check_response(resps[-1])
    assert last["ok"] and last["id"] == "after" and last["objective_value"] == pytest.approx(275.0)


def test_stdio_input_ending_mid_request_answers_and_exits_cleanly():
    good = json.dumps(instance_request("tiny.json", request_id=1)).encode()
    resps, proc = _serve(good + b"\n" + good[: len(good) // 2])  # the host died while writing
    assert proc.returncode == 0
    assert [r["ok"] for r in resps] == [True, False]
    assert resps[1]["error"]["code"] == "invalid_json"


def test_stdio_stops_quietly_when_the_host_closes_stdout():
    proc = subprocess.Popen(ELASTICOPT + ["serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # type: ignore[union-attr]
    good = json.dumps(instance_request("tiny.json")).encode() + b"\n"
    try:
        proc.stdin.write(good * 3)  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    except BrokenPipeError:
        pass
    assert proc.wait(timeout=120) == 0
    assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]


def test_record_keeps_every_request_and_a_replay_answers_the_same(tmp_path):
    """``--record FILE``: each request a line (a pretty-printed one made one line), in order, bad ones too; the
    file fed back to ``serve --stdio`` gets the same answers; a record in a missing folder is a clear error."""
    reqs = [instance_request("tiny.json", request_id=1), instance_request("mixed.json", request_id=2)]
    lines = json.dumps(reqs[0]).encode() + b"\n" + b"{not json\n" + json.dumps(reqs[1]).encode() + b"\n"
    record = tmp_path / "requests.jsonl"
    first, proc = _serve(lines, "--no-warm-up", "--record", str(record))
    assert proc.returncode == 0, proc.stderr
    kept = record.read_bytes().splitlines()
    assert len(kept) == 3 and json.loads(kept[0]) == reqs[0] and kept[1] == b"{not json"
    again, proc = _serve(record.read_bytes(), "--no-warm-up")
    assert [(r["ok"], r.get("objective")) for r in again] == [(r["ok"], r.get("objective")) for r in first]
    assert [r["ok"] for r in first] == [True, False, True]
    from elasticopt.service import AllocationService

    service = AllocationService(record=tmp_path / "pretty.jsonl")
    service.handle_bytes(json.dumps(reqs[0], indent=2))
    assert json.loads((tmp_path / "pretty.jsonl").read_bytes().splitlines()[0]) == reqs[0]
    _, proc = _serve(b"", "--no-warm-up", "--record", str(tmp_path / "no" / "such" / "r.jsonl"))
    assert proc.returncode != 0 and b"Traceback" not in proc.stderr
    assert b"--record" in proc.stderr and b"existing, writable folder" in proc.stderr
