"""The general model (docs/design.md §2): GPU types, nodes and placement, caller values, format 2."""

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt import solve, verify
from elasticopt.errors import InstanceError
from elasticopt.models import dumps_instance, load_instance, problem_from_dict
from elasticopt.models.placement import place, placement_implied
from elasticopt.models.problem import Cluster, Job, Pool, Problem, Running
from elasticopt.profiles.throughput import MeasuredThroughput
from elasticopt.solvers import Status
from elasticopt.solvers.solution import Solution
from elasticopt.testing.brute import brute_force
from elasticopt.testing.strategies import tiny_general_problems

EXACT = ("numpy-dp", "dp", "milp", "scip", "cpsat", "pyomo")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(tiny_general_problems(), st.booleans())
def test_exact_backends_equal_brute_force_on_general_problems(problem, reduce):
    ref = brute_force(problem)
    for name in EXACT + ("greedy",):
        s = solve(problem, name, reduce=reduce)
        rep = verify(problem, s)
        assert rep.ok, (name, rep.errors)
        if name == "greedy":  # never OPTIMAL; INFEASIBLE only when there is no allocation; what it returns places
            assert s.status is not Status.OPTIMAL
            assert s.status is not Status.INFEASIBLE or ref is None
            assert s.status is not Status.LIMIT or not s.allocation, s.message
            continue
        if ref is None:
            assert s.status in (Status.INFEASIBLE, Status.LIMIT), (name, s.status)
            continue
        if name in ("milp", "scip", "cpsat", "pyomo"):  # node variables: exact with placement
            assert s.status is Status.OPTIMAL, (name, s.message)
        if s.status is Status.OPTIMAL:
            assert s.objective == ref, (name, reduce)
        else:  # the DPs: the optimum over per-type totals did not place
            assert s.status is Status.LIMIT and s.bound is not None and s.bound >= ref


def _packed_job(jid, k, gtype="a", running=None):
    return Job(jid, {gtype: MeasuredThroughput({}, packed={(k, k): float(k)})}, 1, 64, 64, running=running)


def test_verify_rejects_totals_that_do_not_place():
    # two nodes of 4 GPUs; three packed jobs of 3 GPUs need 9 <= 8? no: two of 3 (6 <= 8) fit, but a 3 and a 4 and 1...
    cluster = Cluster(pools={"a": Pool(2, 4)})
    jobs = (_packed_job("x", 3), _packed_job("y", 3), Job("z", {"a": MeasuredThroughput({(2, 2): 2.0})}, 1, 64, 64))
    p = Problem(cluster, jobs, objective="throughput", allow_preemption=True)
    assert place(cluster.pools["a"], [3, 3], [2]).status == "placed"  # 3+1 | 3+1: z spreads over both nodes
    jobs2 = (_packed_job("x", 3), _packed_job("y", 3), _packed_job("z", 2))
    p2 = Problem(cluster, jobs2, objective="throughput", allow_preemption=True)
    assert place(cluster.pools["a"], [3, 3, 2], []).status == "impossible"  # 8 GPUs fit the total, not the nodes
    bad = Solution(Status.FEASIBLE, "hand", objective=8 * 2**20, objective_value=8.0, scale=2**20,
                   allocation={"x": (3, 3), "y": (3, 3), "z": (2, 2)},
                   gpu_types={"x": "a", "y": "a", "z": "a"}, packed={"x": True, "y": True, "z": True})
    rep = verify(p2, bad)
    assert not rep.ok and "cannot be placed" in rep.errors[0]
    for name in EXACT:
        s = solve(p2, name)
        assert verify(p2, s).ok
        if s.status is Status.OPTIMAL:
            assert s.objective == 6 * 2**20  # two of the three jobs
    assert solve(p, "milp").objective == 8 * 2**20


def test_placement_implied_condition():
    full = Pool(3, 8)
    assert placement_implied(full, [1, 2, 4, 8, 16])
    assert not placement_implied(full, [3])  # does not divide 8
    assert not placement_implied(full, [2, 12])  # 12 > 8, not a multiple
    assert not placement_implied(Pool(2, 6), [2, 3])  # 2 and 3 divide 6 but not each other
    assert not placement_implied(Pool(2, 8, ((0, 1, 2), tuple(range(8)))), [2])  # fragmented node
    assert placement_implied(Pool(2, 8, ((0, 1, 2), tuple(range(8)))), [])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 4, 8, 16]), max_size=8), st.integers(1, 4))
def test_divisible_sizes_place_whenever_the_total_fits(sizes, nodes):
    pool = Pool(nodes, 8)
    if sum(sizes) <= pool.gpus:
        assert place(pool, sizes, []).status == "placed"


FORMAT2 = {
    "format": "elasticopt-instance/2",
    "cluster": {"pools": {"a100": {"nodes": 2, "gpus_per_node": 8}, "t4": {"nodes": 2, "gpus_per_node": 4, "free": [4, [0, 2, 3]]}}},
    "objective": "value",
    "jobs": [
        {"id": "a", "throughput": [["a100", 1, 32, 100], ["a100", 4, 128, 380, "packed"], ["t4", 2, 64, 55]],
         "values": [["a100", 1, 32, 1.0], ["a100", 4, 128, 3.8, "packed"], ["t4", 2, 64, 0.5]],
         "running": {"gpus": 2, "batch": 64, "type": "t4", "nodes": [0]}},
        {"id": "b", "throughput": [["t4", 3, 96, 70, "packed"]], "values": [["t4", 3, 96, 2.0, "packed"]],
         "types": ["t4"]},
    ],
}


def test_format2_round_trip_and_solve(tmp_path):
    p = problem_from_dict(FORMAT2)
    assert p.cluster.types == ("a100", "t4") and p.cluster.capacity("t4") == 7
    f = tmp_path / "p.json"
    f.write_text(dumps_instance(p))
    q = load_instance(f)
    assert dumps_instance(q) == dumps_instance(p)
    objs = {name: solve(p, name) for name in EXACT}
    assert {s.objective for s in objs.values()} == {objs["milp"].objective}
    s = objs["dp"]
    assert verify(p, s).ok and s.gpu_types["b"] == "t4"
    assert list(s.placement["b"]) == ["t4/1"]  # packed: one node; best fit takes the fragmented one (3 free)
    assert s.placement["b"]["t4/1"] == (0, 2, 3)  # its free GPU indices


@pytest.mark.parametrize("mutate,path", [
    (lambda d: d["jobs"][0]["throughput"].__setitem__(0, ["v100", 1, 32, 100]), "jobs[0].throughput[0][0]"),
    (lambda d: d["jobs"][0]["running"].__setitem__("type", "k80"), "jobs[0].running.type"),
    (lambda d: d["cluster"].__setitem__("gpus", 4), "cluster"),
    (lambda d: d["cluster"]["pools"]["t4"].__setitem__("free", [4]), "cluster.pools.t4.free"),
    (lambda d: d["jobs"][1].__setitem__("profile", "a100/bert"), "jobs[1]"),
])
def test_format2_errors_name_file_and_path(tmp_path, mutate, path):
    doc = json.loads(json.dumps(FORMAT2))
    mutate(doc)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InstanceError) as ei:
        load_instance(f)
    assert str(f) in str(ei.value) and ei.value.path.startswith(path)


def test_format2_model_errors_name_the_file_the_jobs_json_path_and_the_files_value(tmp_path):
    """A rule the model checks while a job is built (Running's node count) is reported at the job's JSON path
    in the file, with the file's value, as format 1 reports its job errors: before, format 2 built ``Running``
    outside its error mapping and the error named neither the file nor the job (``running.nodes: ...``)."""
    doc = json.loads(json.dumps(FORMAT2))
    doc["jobs"][0]["running"]["nodes"] = [0, 1, 2]  # 3 nodes for a job on 2 GPUs
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InstanceError) as ei:
        load_instance(f)
    e = ei.value
    assert (e.file, e.path, e.expected, e.found) == (str(f), "jobs[0].running.nodes", "1 to 2 node indices", [0, 1, 2])
    assert str(e) == f"{f}: jobs[0].running.nodes: expected 1 to 2 node indices, found [0, 1, 2]"
    out = subprocess.run([sys.executable, "-m", "elasticopt", "solve", str(f)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{f}: jobs[0].running.nodes: expected 1 to 2 node indices, found [0, 1, 2]" in out.stderr
    # the limits are one rule for both formats: the same error, at the same path
    for fmt_doc in (doc, {"format": "elasticopt-instance/1", "cluster": {"gpus": 8},
                          "jobs": [{"id": "a", "throughput": [[1, 32, 100.0]]}]}):
        d = json.loads(json.dumps(fmt_doc))
        d["jobs"][0].pop("running", None)
        d["jobs"][0]["batch"] = {"min": 64, "max": 32, "max_local": 32}
        with pytest.raises(InstanceError) as ei:
            problem_from_dict(d)
        assert (ei.value.path, ei.value.expected, ei.value.found) == ("jobs[0].batch.max", "an integer >= batch.min (64)", 32)


def test_running_job_current_option_includes_type_and_nodes():
    pts = MeasuredThroughput({(2, 2): 2.0}, packed={(2, 2): 3.0})
    cl = Cluster(pools={"a": Pool(2, 4), "b": Pool(1, 4)})
    for nodes, packed in (((0,), True), ((0, 1), False)):
        j = Job("r", {"a": pts, "b": pts}, 1, 64, 64, running=Running(2, 2, "a", nodes))
        p = Problem(cl, (j,), objective="throughput", rescale_penalty=100.0)
        s = solve(p, "dp")
        assert (s.gpu_types["r"], s.packed["r"]) == ("a", packed)  # the penalty keeps it where it is
