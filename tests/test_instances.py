"""Instance files: round trip, and every bad file names file, JSON path, expected and found."""

import json
import os

import pytest

from elasticopt.errors import InstanceError
from elasticopt.models import dumps_instance, load_instance, problem_from_dict, save_instance

GOOD = {
    "format": "elasticopt-instance/1",
    "cluster": {"gpus": 8, "gpus_per_node": 4},
    "jobs": [
        {"id": "a", "throughput": [[1, 32, 100.0], [2, 64, 180.0]], "batch": {"min": 32, "max": 64, "max_local": 32}},
        {"id": "b", "throughput": [[1, 16, 50.0]], "running": {"gpus": 1, "batch": 16}},
    ],
}


def bad(tmp_path, mutate):
    doc = json.loads(json.dumps(GOOD))
    mutate(doc)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InstanceError) as ei:
        load_instance(f)
    assert str(f) in str(ei.value)
    return ei.value


def test_round_trip_and_defaults(tmp_path):
    p = problem_from_dict(GOOD)
    assert p.objective == "speedup" and not p.allow_preemption and p.cluster.gpus_per_node == 4
    b = p.job("b")
    assert (b.batch_min, b.batch_max, b.max_local) == (16, 16, 16)  # defaults from the measured points
    assert b.gpus_min == 1 and b.gpus_max is None and b.weight == 1.0
    out = tmp_path / "x.json"
    save_instance(p, out)
    q = load_instance(out)
    assert dumps_instance(q) == out.read_text()
    assert q == p or dumps_instance(q) == dumps_instance(p)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


@pytest.mark.parametrize("name", ["tiny", "mixed", "infeasible", "hetero-sia-12", "hetero-gavel-12",
                                  "placement-fragmented-12"])
def test_shipped_instances_load_and_round_trip(name, tmp_path):
    p = load_instance(f"instances/{name}.json")
    save_instance(p, tmp_path / "r.json")
    assert dumps_instance(load_instance(tmp_path / "r.json")) == dumps_instance(p)


def test_not_json(tmp_path):
    f = tmp_path / "x.json"
    f.write_text('{"format": "elasticopt-instance/1", ')
    with pytest.raises(InstanceError, match=r"x.json: \(root\): expected valid JSON, found .*line 1 column"):
        load_instance(f)


def test_missing_file(tmp_path):
    with pytest.raises(InstanceError, match="No such file"):
        load_instance(tmp_path / "none.json")


def test_wrong_type(tmp_path):
    e = bad(tmp_path, lambda d: d["jobs"][0]["batch"].__setitem__("max_local", "big"))
    assert e.path == "jobs[0].batch.max_local" and "integer" in e.expected and e.found == "big"


def test_unknown_objective(tmp_path):
    e = bad(tmp_path, lambda d: d.__setitem__("objective", "fastest"))
    assert e.path == "objective" and "'speedup'" in e.expected and e.found == "fastest"


def test_negative_throughput(tmp_path):
    e = bad(tmp_path, lambda d: d["jobs"][1]["throughput"][0].__setitem__(2, -5.0))
    assert e.path == "jobs[1].throughput[0][2]" and "> 0" in e.expected and e.found == -5.0


def test_duplicate_ids(tmp_path):
    e = bad(tmp_path, lambda d: d["jobs"][1].__setitem__("id", "a"))
    assert e.path == "jobs[1].id" and "unique" in e.expected and "jobs[0]" in e.expected


def test_no_feasible_option(tmp_path):
    e = bad(tmp_path, lambda d: d["jobs"][0]["batch"].__setitem__("max_local", 8))
    assert e.path == "jobs[0]" and "feasible option" in e.expected and "'a'" in str(e.found)
    assert "max_local" in str(e)


def test_unknown_field_and_missing_field(tmp_path):
    e = bad(tmp_path, lambda d: d["jobs"][0].__setitem__("gpu", 3))
    assert e.path == "jobs[0].gpu" and "allowed" in e.expected
    e = bad(tmp_path, lambda d: d.pop("cluster"))
    assert e.path == "cluster" and "present" in e.expected


def test_throughput_and_profile_together(tmp_path):
    e = bad(tmp_path, lambda d: d["jobs"][0].__setitem__("profile", "a100/resnet50"))
    assert e.path == "jobs[0]" and "exactly one of" in e.expected and e.found == "both"


def test_batch_range_reversed(tmp_path):
    e = bad(tmp_path, lambda d: d["jobs"][0]["batch"].update({"min": 64, "max": 32}))
    assert e.path == "jobs[0].batch.max" and e.found == 32


def test_wrong_format_tag(tmp_path):
    e = bad(tmp_path, lambda d: d.__setitem__("format", "elasticopt-instance/2"))
    assert e.path == "format"


def test_unknown_profile(tmp_path):
    e = bad(tmp_path, lambda d: d["jobs"].append({"id": "p", "profile": "nope/net"}))
    assert e.path == "jobs[2].profile" and e.found == "nope/net" and "known profile" in e.expected


def test_shipped_format_2_instances_are_what_the_readme_says():
    from elasticopt.models.problem import Pool

    sia = load_instance("instances/hetero-sia-12.json").cluster
    assert dict(sia.pools) == {"t4": Pool(6, 4), "a100": Pool(2, 8), "v100": Pool(3, 8)} and sia.gpus == 64
    gavel = load_instance("instances/hetero-gavel-12.json").cluster
    assert gavel.types == ("k80", "p100", "v100") and {p.gpus_per_node for p in gavel.pools.values()} == {4}
    frag = load_instance("instances/placement-fragmented-12.json")
    pool = frag.cluster.pools["a100"]
    assert (pool.nodes, pool.gpus_per_node, pool.gpus) == (4, 8, 26) and pool.free is not None
    assert any(len(ix) < 8 for ix in pool.free)  # fragmented: some node has GPUs taken
    assert any(m.packed for j in frag.jobs for m in j.throughput.values())  # measured packed rows
