"""Sessions (elasticopt/service/session.py): a host sends its whole state once, then only what changed, and every
request is answered exactly as the whole request it stands for -- on random sequences of host states (jobs
arriving, leaving, changing; the cluster, the preemption flag and the priority changing; invalid requests among
them) -- with errors at the paths of the request that was sent, and a failed request leaving the session as it
was."""

from __future__ import annotations

import copy
import json
import random
import threading
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.errors import InstanceError
from elasticopt.service import AllocationService
from elasticopt.service.dispatch import HTTP_STATUS
from elasticopt.service.protocol import ERROR_CODES, load_schema
from elasticopt.service.session import Sessions, session_update

from service_helpers import check_response
from test_service_jobcache import _sequence, _values_request


def _send(service: AllocationService, doc: dict) -> dict:
    resp = check_response(service.handle(json.dumps(doc).encode()))
    resp.pop("timings", None)
    return resp


def _as_sent(ref: dict, whole: dict, delta: dict) -> dict:
    """The whole request's error ``ref`` at the paths of ``delta``, the changes that stand for it: ``jobs[i]`` of
    an upserted job is ``upsert[u]``; a job kept from the session keeps its path (and is named in the message)."""
    upserted = {jd["id"]: u for u, jd in enumerate(delta.get("upsert", []))}

    def path(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            u = upserted.get(whole["jobs"][int(m.group(1))]["id"])
            return m.group(0) if u is None else f"upsert[{u}]"
        return re.sub(r"\bjobs\[(\d+)\]", one, text)

    err = dict(ref["error"])
    err["path"] = path(err["path"])
    return err


@settings(max_examples=max(40, settings().max_examples), deadline=None)
@given(rng=st.randoms(use_true_random=False), steps=st.integers(1, 8))
def test_a_session_is_answered_as_the_whole_requests(rng: random.Random, steps: int):
    plain, service = AllocationService(), AllocationService()
    last, revision = None, 0  # the last whole request the session answered, and its revision
    for n, doc in enumerate(_sequence(rng, steps)):
        ref = _send(plain, doc)
        try:
            delta = None if last is None else session_update(last, doc, "host", revision)
        except ValueError:  # a field dropped (the priority), duplicate ids: the client sends the whole state again
            delta = None
        resp = _send(service, dict(doc, session="host") if delta is None else delta)
        got = resp.pop("session", None)
        if not ref["ok"]:
            assert not resp["ok"] and got is None, (n, doc, delta)
            if delta is None:
                assert resp == ref, (n, doc)
            else:
                err = resp["error"]
                want = _as_sent(ref, doc, delta)
                assert (err["code"], err["path"], err["expected"], err["found"]) == \
                    (want["code"], want["path"], want["expected"], want["found"]), (n, doc, delta)
                assert service.sessions.state("host").revision == revision  # the session as it was
            continue
        assert resp == ref, (n, doc, delta)
        assert got == {"id": "host", "revision": 1 if delta is None else revision + 1}
        last, revision = doc, got["revision"]
        if delta is not None:
            assert len(delta["upsert"]) <= len(doc["jobs"])


def _start(service: AllocationService, doc: dict, name: str = "s") -> dict:
    resp = _send(service, dict(doc, session=name))
    assert resp["ok"] and resp["session"] == {"id": name, "revision": 1}
    return resp


def test_changes_are_applied_in_place_and_answered_as_the_whole_request():
    service, plain = AllocationService(), AllocationService()
    doc = _values_request(6)
    _start(service, doc)
    new = copy.deepcopy(doc)
    new["jobs"][2]["options"][0]["value"] = 9.0
    new["jobs"].pop(4)
    new["jobs"].append({"id": "late", "options": [{"gpus": 2, "value": 5.0}]})
    delta = session_update(doc, new, "s", 1)
    assert [jd["id"] for jd in delta["upsert"]] == ["j2", "late"] and delta["remove"] == ["j4"]
    assert set(delta) == {"format", "session", "base", "upsert", "remove"}  # nothing else changed
    resp = _send(service, delta)
    assert resp.pop("session") == {"id": "s", "revision": 2}
    assert resp == _send(plain, new)
    state = service.sessions.state("s")
    assert [jd["id"] for jd in state.doc["jobs"]] == ["j0", "j1", "j2", "j3", "j5", "late"]
    # a request field sent with the changes replaces the session's for this request and the later ones
    bigger = dict(new, cluster={"pools": {"a": {"nodes": 4, "gpus_per_node": 4}}})
    resp = _send(service, session_update(new, bigger, "s", 2))
    assert resp.pop("session")["revision"] == 3 and resp == _send(plain, bigger)
    resp = _send(service, {"format": "elasticopt-request/1", "session": "s", "base": 3})
    assert resp.pop("session")["revision"] == 4 and resp == _send(plain, bigger)


def test_a_removed_job_leaves_the_kept_priority():
    service, plain = AllocationService(), AllocationService()
    doc = dict(_values_request(4), priority=["j3", "j2", "j1", "j0"])
    _start(service, doc)
    resp = _send(service, {"format": "elasticopt-request/1", "session": "s", "base": 1, "remove": ["j2"]})
    whole = dict(doc, jobs=[jd for jd in doc["jobs"] if jd["id"] != "j2"], priority=["j3", "j1", "j0"])
    assert resp["ok"] and resp.pop("session")["revision"] == 2 and resp == _send(plain, whole)


@pytest.mark.parametrize("delta, code, path, found", [
    ({"base": 7}, "session_unknown", "base", "7"),
    ({"base": 1, "session": "other"}, "session_unknown", "base", "1"),
    ({"base": 1, "remove": ["nope"]}, "invalid_request", "remove[0]", "nope"),
    ({"base": 1, "remove": ["j1", "j1"]}, "invalid_request", "remove[1]", "j1"),
    ({"base": 1, "remove": ["j1"], "upsert": [{"id": "j1", "options": [{"gpus": 1, "value": 1.0}]}]},
     "invalid_request", "remove[0]", "j1"),
    ({"base": 1, "upsert": [{"id": "x", "options": [{"gpus": 1, "value": 1.0}]}] * 2}, "invalid_request",
     "upsert[1].id", "x"),
    ({"base": 1, "upsert": [{"id": "x", "options": [{"gpus": 0, "value": 1.0}]}]}, "invalid_request",
     "upsert[0].options[0].gpus", "0"),
    ({"base": 1, "upsert": [{"id": "x", "options": [{"gpus": 1, "value": 1.0, "pool": "z"}]}]},
     "invalid_request", "upsert[0].options[0].pool", "z"),
    ({"base": 1, "jobs": []}, "invalid_request", "jobs", "0 jobs"),
    ({"upsert": []}, "invalid_request", "base", "nothing"),
    ({"base": 0}, "invalid_request", "base", "0"),
    ({"base": 1, "op": "info"}, "invalid_request", "op", "info"),
])
def test_bad_changes_are_refused_by_name_and_leave_the_session(delta, code, path, found):
    service = AllocationService()
    _start(service, _values_request(3))
    resp = _send(service, dict({"format": "elasticopt-request/1", "session": "s"}, **delta))
    assert not resp["ok"], resp
    err = resp["error"]
    assert (err["code"], err["path"], err["found"]) == (code, path, found), err
    assert service.sessions.state("s").revision == 1
    assert _send(service, {"format": "elasticopt-request/1", "session": "s", "base": 1})["session"]["revision"] == 2


def test_a_kept_job_that_the_new_cluster_refuses_is_named_by_its_id():
    service = AllocationService()
    doc = _values_request(2)
    doc["jobs"][1]["options"][0]["pool"] = "a"
    _start(service, doc)
    resp = _send(service, {"format": "elasticopt-request/1", "session": "s", "base": 1,
                           "cluster": {"pools": {"b": {"nodes": 1, "gpus_per_node": 4}}}})
    err = resp["error"]
    assert err["path"] == "jobs[1].options[0].pool" and "job 'j1' of session 's'" in err["message"], err


def test_the_least_recently_used_session_is_dropped_and_the_host_starts_again():
    service = AllocationService(max_sessions=2)
    doc = _values_request(2)
    for name in ("a", "b", "c"):
        _start(service, doc, name)
    assert len(service.sessions) == 2 and service.sessions.state("a") is None
    resp = _send(service, {"format": "elasticopt-request/1", "session": "a", "base": 1})
    assert resp["error"]["code"] == "session_unknown" and "holds no such session" in resp["error"]["message"]
    _start(service, doc, "a")  # the whole state again
    with pytest.raises(ValueError, match="max_sessions"):
        Sessions(0)


def test_a_session_dropped_while_it_is_answered_keeps_its_lock_until_the_request_ends():
    sessions = Sessions(max_sessions=1)
    sessions.keep("a", {"jobs": []}, None, True, None)
    inside, release, order = threading.Event(), threading.Event(), []

    def first() -> None:
        with sessions.hold("a"):
            inside.set()
            release.wait(5)
            order.append("first ends")

    def second() -> None:
        with sessions.hold("a"):
            order.append("second runs")

    t1 = threading.Thread(target=first)
    t1.start()
    assert inside.wait(5)
    sessions.keep("b", {"jobs": []}, None, True, None)  # drops "a" (one session kept) while "a" is answered
    assert sessions.state("a") is None
    t2 = threading.Thread(target=second)
    t2.start()
    t2.join(0.2)
    assert t2.is_alive() and order == [], "a request of the dropped session ran beside the one being answered"
    release.set()
    t1.join(5)
    t2.join(5)
    assert order == ["first ends", "second runs"]
    assert "a" not in sessions._locks  # the dropped session's lock went with its last request


def test_the_error_code_is_declared_everywhere():
    assert "session_unknown" in ERROR_CODES and HTTP_STATUS["session_unknown"] == 409
    codes = load_schema("response-1")["definitions"]["failed"]["properties"]["error"]["properties"]["code"]["enum"]
    assert "session_unknown" in codes
    assert {"session", "base", "upsert", "remove"} <= set(load_schema("request-1")["properties"])


def test_session_update_sends_what_changed_and_refuses_a_dropped_field():
    a = {"format": "elasticopt-request/1", "objective": "values", "priority": ["x"], "jobs": [{"id": "x"}]}
    b = {"format": "elasticopt-request/1", "objective": "values", "id": 7, "jobs": [{"id": "x"}, {"id": "y"}]}
    with pytest.raises(ValueError, match="priority"):
        session_update(a, b, "s", 3)
    assert session_update(b, dict(b, id=8), "s", 3) == {"format": "elasticopt-request/1", "id": 8, "session": "s",
                                                        "base": 3, "upsert": [], "remove": []}


def test_a_session_over_stdio_and_its_record_replayed(tmp_path):
    rec = tmp_path / "rec.jsonl"
    doc = _values_request(5)
    new = copy.deepcopy(doc)
    new["jobs"][0]["options"][0]["value"] = 7.0
    lines = [json.dumps(dict(doc, session="h")), json.dumps(session_update(doc, new, "h", 1))]
    cmd = [sys.executable, "-m", "elasticopt", "serve", "--stdio", "--no-warm-up"]
    out = subprocess.run(cmd + ["--record", str(rec)], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, timeout=300, check=True).stdout.splitlines()
    first, second = (json.loads(x) for x in out)
    assert second["ok"] and second["session"] == {"id": "h", "revision": 2}
    assert second["objective"] == _send(AllocationService(), new)["objective"]
    again = subprocess.run(cmd, input=rec.read_text(), capture_output=True, text=True, timeout=300,
                           check=True).stdout.splitlines()
    assert [json.loads(x)["objective"] for x in again] == [first["objective"], second["objective"]]


def test_solve_refuses_a_file_of_changes_by_name(tmp_path):
    from elasticopt.cli.solve import load_problem_file

    path = tmp_path / "delta.json"
    path.write_text(json.dumps({"format": "elasticopt-request/1", "session": "s", "base": 2, "upsert": []}))
    with pytest.raises(InstanceError, match=r"delta.json: base: expected a whole request"):
        load_problem_file(str(path))


def test_serve_keeps_as_many_sessions_as_asked_and_refuses_none():
    doc = _values_request(2)
    lines = [json.dumps(dict(doc, session=name)) for name in ("a", "b")]
    lines.append(json.dumps({"format": "elasticopt-request/1", "session": "a", "base": 1}))
    cmd = [sys.executable, "-m", "elasticopt", "serve", "--stdio", "--no-warm-up", "--sessions", "1"]
    out = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300, check=True)
    last = json.loads(out.stdout.splitlines()[-1])
    assert last["error"]["code"] == "session_unknown" and "1 sessions used last" in last["error"]["message"]
    bad = subprocess.run(cmd[:-1] + ["0"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--sessions: expected an integer >= 1, found '0'" in bad.stderr
    assert "Traceback" not in bad.stderr
