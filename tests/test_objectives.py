"""One home per objective (issue 21): each objective is one registered object that every path reads.

- hand-checked values of each built-in objective;
- a registered objective works on every path: ``Problem``, instance files of
  both formats, the compiled table and ``verify``, the scheduler's
  incremental table (equal to ``compile_problem``'s at every decision), the
  service's list and ``elasticopt generate --objective``;
- ``requires`` is enforced, naming the job and the field;
- each objective's formula is written once: the incremental path keeps no
  copy (it runs the registered value functions).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import elasticopt
from elasticopt.errors import InstanceError, ValidationError
from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem, Running, problem_from_dict
from elasticopt.models.objectives import (
    Objective,
    _REGISTRY,
    get_objective,
    job_values,
    objective_names,
    per_gpu_best,
    register_objective,
)
from elasticopt.profiles.efficiency import StatisticalEfficiency

ROOT = Path(__file__).resolve().parent.parent


def _job(**kw):
    pts = {(1, 32): 100.0, (2, 64): 150.0, (2, 32): 180.0}
    return Job("a", MeasuredThroughput(pts), 32, 64, 32, **kw)


def _values(objective, job):
    p = Problem(Cluster(4, 4), (job,), objective=objective)
    opts = job.options(4)
    return {(k, b): v for (k, b, _), v in zip(opts, job_values(p, job, opts))}


def test_builtin_objectives_by_hand():
    assert objective_names()[:5] == ("speedup", "throughput", "completion", "goodput", "value")
    j = _job(weight=2.0, remaining_samples=1000.0)
    # R = best T / k = max(100, 75, 90) = 100
    assert _values("speedup", j) == pytest.approx({(1, 32): 2.0, (2, 64): 3.0, (2, 32): 3.6})
    assert _values("throughput", j) == pytest.approx({(1, 32): 200.0, (2, 64): 300.0, (2, 32): 360.0})
    assert _values("completion", j) == pytest.approx({(1, 32): 0.2, (2, 64): 0.3, (2, 32): 0.36})
    # E(b) = (phi + 32) / (phi + b), phi = 32: E(64) = 2/3; goodput T*E: 100, 100, 180; R = 100
    g = _job(weight=2.0, efficiency=StatisticalEfficiency(32, 32.0))
    assert _values("goodput", g) == pytest.approx({(1, 32): 2.0, (2, 64): 2.0, (2, 32): 3.6})
    v = _job(weight=2.0, values={("gpu", 1, 32): 5.0, ("gpu", 2, 32): -1.0})
    vals = _values("value", v)
    assert vals[(1, 32)] == 10.0 and vals[(2, 32)] == -2.0 and np.isnan(vals[(2, 64)])


def _half_throughput(rows, jobs):
    return 0.5 * jobs.weight[rows.job] * rows.samples_per_s


@pytest.fixture
def registered():
    obj = register_objective(Objective("test-half", _half_throughput, "w * T / 2"))
    yield obj
    _REGISTRY.pop("test-half", None)


def test_a_registered_objective_works_on_every_model_path(registered):
    jobs = (_job(), Job("b", MeasuredThroughput({(1, 32): 70.0, (3, 96): 200.0}), 32, 96, 32,
                        running=Running(1, 32)))
    p = Problem(Cluster(4, 4), jobs, objective="test-half")
    sol = elasticopt.solve(p, "numpy-dp")
    assert elasticopt.verify(p, sol).ok and sol.status.name == "OPTIMAL"
    ref = elasticopt.solve(Problem(Cluster(4, 4), jobs, objective="throughput"), "numpy-dp")
    assert sol.allocation == ref.allocation and sol.objective_value == pytest.approx(ref.objective_value / 2)
    assert elasticopt.solve(p, "milp").objective == sol.objective
    for fmt, cluster in (("elasticopt-instance/1", {"gpus": 4, "gpus_per_node": 4}),
                         ("elasticopt-instance/2", {"pools": {"gpu": {"nodes": 1, "gpus_per_node": 4}}})):
        rows = [[1, 32, 100.0]] if fmt.endswith("1") else [["gpu", 1, 32, 100.0]]
        doc = {"format": fmt, "cluster": cluster, "objective": "test-half", "jobs": [{"id": "a", "throughput": rows}]}
        assert problem_from_dict(doc).objective == "test-half"
    assert "test-half" in elasticopt.objective_names()


def test_unknown_objective_lists_the_registry(registered):
    with pytest.raises(ValidationError, match="objective: expected one of speedup.*test-half"):
        Problem(Cluster(4, 4), (_job(),), objective="nope")
    doc = {"format": "elasticopt-instance/1", "cluster": {"gpus": 4}, "objective": "nope",
           "jobs": [{"id": "a", "throughput": [[1, 32, 100.0]]}]}
    with pytest.raises(InstanceError) as e:
        problem_from_dict(doc, "f.json")
    assert e.value.path == "objective" and "'test-half'" in e.value.expected and "'value'" not in e.value.expected
    doc["objective"] = "value"  # registered, but format 1 has no caller values
    with pytest.raises(InstanceError, match="format 2") as e:
        problem_from_dict(doc, "f.json")
    assert e.value.path == "objective"


def test_required_fields_are_enforced():
    obj = register_objective(Objective("test-needs-rem", lambda rows, jobs: jobs.remaining[rows.job], "1 / rem",
                                       {"remaining_samples": "a number (test-needs-rem reads it)"}))
    try:
        with pytest.raises(ValidationError, match=r"jobs\[0\]\.remaining_samples: expected a number \(test-needs-rem"):
            Problem(Cluster(4, 4), (_job(),), objective="test-needs-rem")
        assert Problem(Cluster(4, 4), (_job(remaining_samples=5.0),), objective=obj.name).objective == obj.name
    finally:
        _REGISTRY.pop("test-needs-rem", None)
    with pytest.raises(ValidationError, match="objective.requires"):
        Objective("x", _half_throughput, "x", {"no_such_field": "y"})
    with pytest.raises(ValidationError, match="objective.name"):
        Objective("has space", _half_throughput, "x")


def test_duplicate_objective_is_refused_unless_replaced(registered):
    with pytest.raises(elasticopt.DuplicateNameError, match="objective name.*test-half"):
        register_objective(Objective("test-half", _half_throughput, "again"))
    assert register_objective(registered) is registered
    other = register_objective(Objective("test-half", _half_throughput, "again"), replace=True)
    assert get_objective("test-half") is other
    with pytest.raises(elasticopt.DuplicateNameError):
        register_objective(Objective("speedup", _half_throughput, "mine"))


def test_the_incremental_table_runs_a_registered_objective(registered):
    from test_scheduling_incremental import checking

    from elasticopt.scheduling import SimulationConfig, simulate
    from elasticopt.scheduling.hysteresis import Hysteresis
    from elasticopt.scheduling.policies.elastic import ElasticPolicy
    from elasticopt.scheduling.workload_generator import generate_workload

    def sqrt_speedup(rows, jobs):
        best = per_gpu_best(rows, rows.samples_per_s, jobs.n)
        return jobs.weight[rows.job] * np.sqrt(rows.samples_per_s / best[rows.job])

    register_objective(Objective("test-half", sqrt_speedup, "sqrt speedup"), replace=True)
    rule = Hysteresis()
    pol = checking(ElasticPolicy)(objective="test-half", hysteresis=rule)
    assert pol._uses_cache()
    res = simulate(generate_workload(40, 16, 1.5, seed=2), pol,
                   SimulationConfig(gpus=16, gpus_per_node=4, hysteresis=rule, tick_s=3600.0))
    assert res.metrics.completed == 40 and type(pol).checked >= 40
    # the one compiler serves every objective, caller values included (a policy's jobs carry none)
    assert ElasticPolicy(objective="value")._uses_cache()


def test_service_and_cli_read_the_registry(registered):
    from elasticopt.cli import build_parser
    from elasticopt.service.dispatch import AllocationService

    assert build_parser().parse_args(["generate", "--family", "paper", "--jobs", "2", "--gpus", "4",
                                      "--objective", "test-half", "-o", "-"]).objective == "test-half"
    svc = AllocationService()
    assert "test-half" in svc.info()["objectives"]
    doc = {"format": "elasticopt-request/1", "cluster": {"gpus": 4, "gpus_per_node": 4}, "objective": "test-half",
           "jobs": [{"id": "a", "throughput": [[1, 32, 100.0], [2, 64, 190.0]]}]}
    resp = svc.handle(doc)
    assert resp["ok"] and resp["objective_value"] == pytest.approx(95.0), resp


def test_one_compile_path_builds_every_option_table():
    """No second compiler: outside models/ an OptionTable is built only by the dp's core reduction (a
    sub-table of a compiled one), and the scheduler has no table assembly of its own."""
    import re

    pkg = [ROOT / d for d in ("elasticopt", "models", "solvers")]
    built = sorted(str(p.relative_to(ROOT)) for d in pkg for p in d.rglob("*.py")
                   if re.search(r"\bOptionTable\(", p.read_text()))
    assert built == ["models/table.py", "solvers/dp/reduced_costs.py"]
    assert not (ROOT / "elasticopt" / "scheduling" / "optioncache.py").exists()


def test_changing_an_objective_changes_every_path():
    """Replace ``speedup`` by a wrapper that counts its calls: the compile, verify, the incremental
    table and the greedy policy all run it (no path keeps a formula of its own)."""
    from elasticopt.scheduling import SimulationConfig, get_policy, simulate
    from elasticopt.scheduling.policies.elastic import ElasticPolicy
    from elasticopt.scheduling.workload_generator import generate_workload

    original = get_objective("speedup")
    calls = {"n": 0}

    def counted(rows, jobs):
        calls["n"] += 1
        return original.values(rows, jobs)

    register_objective(Objective("speedup", counted, original.doc, original.requires), replace=True)
    try:
        p = Problem(Cluster(4, 4), (_job(),))
        sol = elasticopt.solve(p, "numpy-dp")
        assert calls["n"] >= 1
        n = calls["n"]
        assert elasticopt.verify(p, sol).ok and calls["n"] > n
        jobs = generate_workload(10, 8, 1.0, seed=1)
        for pol in (ElasticPolicy(), get_policy("greedy")):
            n = calls["n"]
            if isinstance(pol, ElasticPolicy):
                assert pol._uses_cache()
            simulate(jobs, pol, SimulationConfig(gpus=8, gpus_per_node=4))
            assert calls["n"] > n, pol.name
    finally:
        register_objective(original, replace=True)
    assert get_objective("speedup") is original
