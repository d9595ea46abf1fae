"""A GPU-type attribute is a field of ``Pool``, read and written field by field (docs/design.md §9, issue 21).

Every reader of pools (instance files of format 2, the service's requests,
the simulator's pools files) goes through ``pool_from_dict``, which refuses an
unknown field naming it; the writer writes every field; and the schemas'
pool definitions list exactly ``Pool``'s fields (the request's: all but
``free``, which requests do not carry), so a field added to one of the three
files and not the others fails here instead of being dropped.
"""

from __future__ import annotations

import json

import pytest

from elasticopt.errors import InstanceError, ValidationError
from elasticopt.models import problem_from_dict, problem_to_dict
from elasticopt.models.cluster import POOL_FIELDS, Pool, pool_from_dict, pool_to_dict
from elasticopt.models.instance_format2 import instance_schema_2


def test_pool_round_trip_field_by_field():
    for pool in (Pool(2, 4), Pool(2, 4, ((0, 1, 2, 3), (1, 3))), Pool(0, 8)):
        assert pool_from_dict(pool_to_dict(pool)) == pool
    assert pool_from_dict({"nodes": 2, "gpus_per_node": 4, "free": [4, 2]}).free == ((0, 1, 2, 3), (0, 1))
    assert pool_to_dict(Pool(2, 4)) == {"nodes": 2, "gpus_per_node": 4}  # defaults left out


@pytest.mark.parametrize("bad, path, words", [
    ({"nodes": 2, "gpus_per_node": 4, "no_such_field": 80}, "p.no_such_field", "a pool field: nodes, gpus_per_node, free"),
    ({"nodes": 2}, "p.gpus_per_node", "present"),
    ({"nodes": -1, "gpus_per_node": 4}, "p.nodes", ">= 0"),
    ({"nodes": 1, "gpus_per_node": 4, "free": [[0, 0]]}, "p.free[0]", "distinct"),
    ({"nodes": 1, "gpus_per_node": 4, "free": [5]}, "p.free[0]", "at most gpus_per_node"),
    ({"nodes": 1, "gpus_per_node": 4, "free": "all"}, "p.free", "per node"),
])
def test_pool_errors_name_the_field(bad, path, words):
    with pytest.raises(ValidationError) as e:
        pool_from_dict(bad, "p")
    assert e.value.path == path and words in e.value.expected


def _schema_pool_fields(schema: dict, *keys: str) -> set[str]:
    node = schema
    for k in keys:
        node = node[k]
    return set(node["properties"])


def test_schemas_list_exactly_the_pool_fields():
    from elasticopt.service import load_schema

    assert _schema_pool_fields(instance_schema_2(), "$defs", "pool") == set(POOL_FIELDS)
    req = load_schema("request-1")
    request_pool = req["definitions"]["cluster"]["properties"]["pools"]["additionalProperties"]
    assert set(request_pool["properties"]) == set(POOL_FIELDS) - {"free"}


def test_instance_loader_and_writer_carry_every_field():
    doc = {"format": "elasticopt-instance/2",
           "cluster": {"pools": {"a": {"nodes": 1, "gpus_per_node": 4, "free": [[0, 2]]},
                                 "b": {"nodes": 2, "gpus_per_node": 2}}},
           "jobs": [{"id": "j", "throughput": [["a", 1, 8, 1.0], ["b", 2, 16, 1.5]]}]}
    p = problem_from_dict(doc)
    assert p.cluster.pools["a"].free == ((0, 2),)
    assert problem_to_dict(p)["cluster"] == doc["cluster"]
    bad = json.loads(json.dumps(doc))
    bad["cluster"]["pools"]["b"]["no_such_field"] = 16
    with pytest.raises(InstanceError) as e:
        problem_from_dict(bad, "f.json")
    assert e.value.path.startswith("cluster.pools.b") and e.value.file == "f.json"


def test_simulator_pools_file_refuses_unknown_fields(tmp_path):
    from elasticopt.scheduling.hetero import cluster_preset as parse_cluster

    f = tmp_path / "pools.json"
    f.write_text(json.dumps({"pools": {"t4": {"nodes": 2, "gpus_per_node": 4, "free": [4, 2]}}}))
    assert parse_cluster(str(f)).pools["t4"].free == ((0, 1, 2, 3), (0, 1))  # carried, not dropped
    f.write_text(json.dumps({"pools": {"t4": {"nodes": 2, "gpus_per_node": 4, "no_such_field": 16}}}))
    with pytest.raises(ValidationError, match=r"pools\.t4\.no_such_field: expected a pool field"):
        parse_cluster(str(f))


def test_service_values_path_builds_pools_by_the_same_reader():
    from elasticopt.service.dispatch import AllocationService

    req = {"format": "elasticopt-request/1", "objective": "values",
           "cluster": {"pools": {"a": {"nodes": 1, "gpus_per_node": 4}, "b": {"nodes": 1, "gpus_per_node": 2}}},
           "jobs": [{"id": "j", "options": [{"pool": "a", "gpus": 2, "value": 3.0},
                                            {"pool": "b", "gpus": 2, "value": 2.0}]}]}
    resp = AllocationService().handle(req)
    assert resp["ok"], resp
    req["cluster"]["pools"]["b"]["no_such_field"] = 16  # not a field of requests: refused, not dropped
    resp = AllocationService().handle(req)
    assert not resp["ok"] and "no_such_field" in json.dumps(resp)
