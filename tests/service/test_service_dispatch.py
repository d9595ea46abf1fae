"""The service in-process: request rules, caller values (exact vs brute force), solver failures."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticopt.errors import SolverError
from elasticopt.service import AllocationService
from elasticopt.solvers import Reason, Solution, Status

from service_helpers import ROOT, check_response, instance_request

SERVICE = AllocationService()


def _req(jobs, gpus=8, gpus_per_node=4, **extra):
    return {"format": "elasticopt-request/1", "cluster": {"gpus": gpus, "gpus_per_node": gpus_per_node},
            "objective": "values", "jobs": jobs, **extra}


def _brute(jobs, G, allow):
    """Best total of caller values: every job one option or idle (if it may), within G GPUs."""
    choices = []
    for jd in jobs:
        may_idle = "running" not in jd or jd.get("preemptible", allow)
        opts = [(o["gpus"], o["value"]) for o in jd["options"]]
        if may_idle:
            opts.append((0, jd.get("idle_value", 0.0)))
        choices.append(opts)
    best = None
    for combo in itertools.product(*choices):
        if sum(k for k, _ in combo) <= G:
            v = sum(v for _, v in combo)
            best = v if best is None or v > best else best
    return best


job_st = st.fixed_dictionaries(
    {"options": st.lists(st.tuples(st.integers(1, 4), st.integers(-30, 30)), min_size=1, max_size=3,
                         unique_by=lambda t: t[0])},
    optional={"idle_value": st.integers(-40, 10), "running": st.integers(1, 2), "preemptible": st.booleans()},
)


@given(st.lists(job_st, min_size=1, max_size=5), st.integers(0, 8), st.booleans())
def test_caller_values_are_solved_exactly(raw_jobs, G, allow):
    jobs = []
    for i, rj in enumerate(raw_jobs):
        jd = {"id": f"j{i}", "options": [{"gpus": k, "value": v / 4} for k, v in rj["options"]]}
        if "idle_value" in rj:
            jd["idle_value"] = rj["idle_value"] / 4
        if "running" in rj:
            jd["running"] = {"gpus": rj["running"]}
            if "preemptible" in rj:
                jd["preemptible"] = rj["preemptible"]
        jobs.append(jd)
    resp = check_response(SERVICE.handle(_req(jobs, gpus=G, allow_preemption=allow)))
    best = _brute(jobs, G, allow)
    if best is None:
        assert resp["ok"] and resp["status"] == "infeasible"
        return
    assert resp["ok"] and resp["status"] == "optimal", resp
    assert resp["objective_value"] == pytest.approx(best, abs=1e-5)
    alloc = resp["allocation"]
    total = sum(jd.get("idle_value", 0.0) if alloc[jd["id"]] is None else alloc[jd["id"]]["value"] for jd in jobs)
    assert total == pytest.approx(best, abs=1e-5)
    assert sum(a["gpus"] for a in alloc.values() if a) <= G


def test_placement_keeps_running_jobs_and_fits_nodes():
    jobs = [
        {"id": "keep", "options": [{"gpus": 2, "value": 5.0}], "running": {"gpus": 2, "nodes": [[1, 2]]}},
        {"id": "new", "options": [{"gpus": 4, "value": 9.0}]},
        {"id": "small", "options": [{"gpus": 2, "value": 3.0}]},
    ]
    resp = check_response(SERVICE.handle(_req(jobs)))
    a = resp["allocation"]
    assert a["keep"]["nodes"] == [[1, 2]] and a["keep"]["moved"] is False
    assert a["new"]["nodes"] == [[0, 4]]  # the only node with 4 free GPUs
    assert a["small"]["nodes"] == [[1, 2]]


def test_values_priced_per_span_choose_packed_or_spread_exactly():
    jobs = [
        {"id": "a", "options": [{"gpus": 3, "value": 3.0, "nodes": 1}, {"gpus": 3, "value": 2.0, "nodes": 2}]},
        {"id": "b", "options": [{"gpus": 3, "value": 3.0, "nodes": 1}, {"gpus": 3, "value": 2.5, "nodes": 2}]},
        {"id": "c", "options": [{"gpus": 2, "value": 2.0, "nodes": 1}]},
    ]
    # 2 nodes x 4 GPUs: 3 + 3 + 2 cannot all sit on one node each; the best spreads b (3 + 2.5 + 2)
    resp = check_response(SERVICE.handle(_req(jobs)))
    assert resp["objective_value"] == pytest.approx(7.5)
    a = resp["allocation"]
    assert {j: a[j]["value"] for j in "abc"} == {"a": 3.0, "b": 2.5, "c": 2.0}
    assert [len(a[j]["nodes"]) for j in "abc"] == [1, 2, 1]


@pytest.mark.parametrize(
    "doc,code,path",
    [
        (_req([{"id": "a", "options": [{"gpus": 2, "value": 1.0, "batch": 3}]}]), "invalid_request", "jobs[0].options[0].batch"),
        (_req([{"id": "a", "options": [{"gpus": 2, "value": 1.0}, {"gpus": 2, "value": 2.0}]}]), "invalid_request", "jobs[0].options[1]"),
        (_req([{"id": "a", "throughput": [[1, 2, 3.0]]}]), "invalid_request", "jobs[0]"),
        (_req([{"id": "a", "options": [{"gpus": 1, "value": 1}]}], objective="speedup"), "invalid_request", "jobs[0]"),
        ({**instance_request("tiny.json"), "jobs": [{"id": "x", "throughput": [[1, 64, 1.0]]},
                                                  {"id": "y", "throughput": [[3, 64, 1.0]]}]}, "invalid_request", "jobs[1]"),
        (_req([{"id": "a", "options": [{"gpus": 1, "value": 1}]}], cluster={"gpus": 8, "pools": {}}), "invalid_request", "cluster"),
    ],
)
def test_bad_requests_name_the_json_path(doc, code, path):
    resp = check_response(SERVICE.handle(json.dumps(doc)))
    assert not resp["ok"] and resp["error"]["code"] == code and resp["error"]["path"] == path, resp["error"]


def test_solver_exception_and_error_status_are_structured_errors():
    def raising(*a, **k):
        raise SolverError("backend exploded")

    def erroring(problem, solver, **k):
        return Solution(Status.ERROR, solver=solver, message="RuntimeError: out of memory")

    for fn, text in ((raising, "backend exploded"), (erroring, "out of memory")):
        svc = AllocationService(solve=fn)
        resp = check_response(svc.handle(json.dumps(instance_request("tiny.json", "e"))))
        assert resp["id"] == "e" and resp["error"]["code"] == "solver_error" and text in resp["error"]["message"]
        ok = check_response(SERVICE.handle(json.dumps(instance_request("tiny.json"))))  # others unaffected
        assert ok["ok"]


def test_bug_in_the_service_is_an_internal_error_not_a_crash():
    def broken(*a, **k):
        raise ZeroDivisionError("bug")

    resp = check_response(AllocationService(solve=broken).handle(json.dumps(instance_request("tiny.json"))))
    assert resp["error"]["code"] == "internal" and "ZeroDivisionError" in resp["error"]["message"]


def test_an_instance_file_is_a_request_as_it_is():
    text = (ROOT / "instances" / "tiny.json").read_text()
    resp = check_response(SERVICE.handle(text))
    assert resp["ok"] and resp["objective_value"] == pytest.approx(275.0)


POOLS = {"t4": {"nodes": 1, "gpus_per_node": 4}, "a100": {"nodes": 1, "gpus_per_node": 8}}


@given(st.lists(st.lists(st.tuples(st.sampled_from(["t4", "a100"]), st.integers(1, 4), st.integers(-20, 20)),
                         min_size=1, max_size=4, unique_by=lambda t: t[:2]), min_size=1, max_size=4))
def test_caller_values_on_several_pools_are_solved_exactly(raw):
    jobs = [{"id": f"j{i}", "options": [{"pool": t, "gpus": k, "value": v / 4} for t, k, v in opts]}
            for i, opts in enumerate(raw)]
    resp = check_response(SERVICE.handle({"format": "elasticopt-request/1", "cluster": {"pools": POOLS},
                                          "objective": "values", "jobs": jobs}))
    best = 0.0
    for combo in itertools.product(*[[None, *opts] for opts in raw]):
        use = {t: sum(c[1] for c in combo if c and c[0] == t) for t in POOLS}
        if use["t4"] <= 4 and use["a100"] <= 8:
            best = max(best, sum(c[2] / 4 for c in combo if c))
    assert resp["status"] == "optimal" and resp["objective_value"] == pytest.approx(best, abs=1e-5)
    for jd in jobs:
        a = resp["allocation"][jd["id"]]
        if a:
            first = 0 if a["pool"] == "t4" else 1  # global node index: pools in request order
            assert a["nodes"] == [[first, a["gpus"]]]


def test_an_unplaceable_optimum_of_the_dp_is_solved_again_with_node_variables():
    from elasticopt.solvers.api import solve

    def dp_cannot_place(problem, solver, **kw):
        if solver == "dp":
            return Solution(Status.LIMIT, solver="dp", message="dp: cannot be placed; use milp",
                            stats={"placement_s": 0.0}, reason=Reason.NOT_PLACEABLE)
        return solve(problem, solver, **kw)

    resp = check_response(AllocationService(solve=dp_cannot_place).handle(json.dumps(instance_request("tiny.json"))))
    assert resp["solver"] == "milp" and resp["status"] == "optimal" and "solved again with 'milp'" in resp["warnings"][0]
    none = check_response(AllocationService(solve=dp_cannot_place, placement_fallback=None).handle(
        json.dumps(instance_request("tiny.json"))))
    assert none["status"] == "limit" and none["allocation"] == {}


def test_the_re_solve_gets_what_is_left_of_the_time_limit():
    import time as _time

    from elasticopt.solvers.api import solve

    calls = []

    def slow_dp(problem, solver, **kw):
        calls.append((solver, kw.get("time_limit_s")))
        if solver == "dp":
            _time.sleep(0.3)
            return Solution(Status.LIMIT, solver="dp", message="dp: cannot be placed; use milp",
                            reason=Reason.NOT_PLACEABLE)
        return solve(problem, solver, **kw)

    req = instance_request("tiny.json")
    req["time_limit_s"] = 0.2
    resp = check_response(AllocationService(solve=slow_dp).handle(json.dumps(req)))
    assert [c[0] for c in calls] == ["dp"] and resp["status"] == "limit" and resp["reason"] == "not_placeable"
    assert "no time left" in resp["warnings"][0]
    calls.clear()
    req["time_limit_s"] = 5.0
    resp = check_response(AllocationService(solve=slow_dp).handle(json.dumps(req)))
    assert calls[0][0] == "dp" and calls[1][0] == "milp" and 4.0 < calls[1][1] < 4.8
