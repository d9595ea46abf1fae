"""The ``pollux`` objective (Pollux's p = -1 fitness) as a model objective: hand-checked values, the job
fields it reads (``Running.restart_cost_s``, ``Job.progress``) in both instance formats and the service,
and the policy on several GPU types."""

from __future__ import annotations

import json

import pytest

import elasticopt
from elasticopt.errors import ValidationError
from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem, Running
from elasticopt.models.objectives import get_objective, job_values, pollux_objective

# 1 GPU: 100 samples/s; 2 GPUs: 160 (per GPU 80); E = 1 (measured points carry none)
POINTS = {(1, 32): 100.0, (2, 64): 160.0}


def _job(jid: str, running: Running | None = None, remaining: float | None = None, progress: str = "samples",
         efficiency=None) -> Job:
    return Job(jid, MeasuredThroughput(POINTS), 32, 64, 32, running=running, remaining_samples=remaining,
               progress=progress, efficiency=efficiency)


def test_values_by_hand():
    """w (1/idle - 1/(S d)), S = T / best per-GPU rate, d = left / (cost + left) for a running job's change."""
    p = Problem(Cluster(4, 4), (_job("q"),), objective="pollux")
    # queued: S = 1 at (1, 32) and 160/100 = 1.6 at (2, 64); no discount
    assert job_values(p, p.jobs[0], p.jobs[0].options()) == pytest.approx([100 - 1, 100 - 1 / 1.6])
    run = _job("r", Running(1, 32, restart_cost_s=30.0), remaining=6000.0)
    p = Problem(Cluster(4, 4), (run,), objective="pollux")
    # current (1, 32): no discount; (2, 64): left = 6000 / 160 = 37.5 s, d = 37.5 / 67.5
    d = 37.5 / 67.5
    assert job_values(p, run, run.options()) == pytest.approx([100 - 1, 100 - 1 / (1.6 * d)])
    # no restart cost: no discount
    free = _job("r", Running(1, 32), remaining=6000.0)
    p = Problem(Cluster(4, 4), (free,), objective="pollux")
    assert job_values(p, free, free.options()) == pytest.approx([99, 100 - 1 / 1.6])


def test_goodput_progress_divides_by_the_goodput_rate():
    """With progress 'goodput' the time left at (2, 64) is remaining / (T E(b))."""
    eff = {32: 1.0, 64: 0.5}.get
    run = _job("r", Running(1, 32, restart_cost_s=30.0), remaining=6000.0, progress="goodput", efficiency=eff)
    p = Problem(Cluster(4, 4), (run,), objective="pollux")
    # goodput per GPU: 100 at (1, 32), 160 * 0.5 / 2 = 40 at (2, 64): best 100; S(2, 64) = 80 / 100
    left = 6000.0 / 80.0
    d = left / (30.0 + left)
    assert job_values(p, run, run.options()) == pytest.approx([99, 100 - 1 / (0.8 * d)])


def test_parameters_and_fields_are_checked():
    with pytest.raises(ValidationError, match="idle_speedup"):
        pollux_objective(1.5)
    with pytest.raises(ValidationError, match="restart_cost_s"):
        Running(1, 32, restart_cost_s=-1.0)
    with pytest.raises(ValidationError, match="restart_cost_s"):
        Running(1, 32, restart_cost_s=float("nan"))
    with pytest.raises(ValidationError, match="progress"):
        _job("a", progress="epochs")
    assert get_objective("pollux").name == "pollux" and pollux_objective(0.05).name == "pollux:0.05"


@pytest.mark.parametrize("fmt", [1, 2])
def test_instance_files_carry_restart_cost_and_progress(tmp_path, fmt):
    from elasticopt.models.instance import load_instance, save_instance

    eff = None
    jobs = (_job("r", Running(1, 32, "gpu" if fmt == 2 else None, (0,) if fmt == 2 else None, restart_cost_s=45.0),
                 remaining=6000.0, progress="goodput", efficiency=eff), _job("q", remaining=100.0))
    p = Problem(Cluster(4, 4), jobs, objective="pollux")
    path = save_instance(p, tmp_path / "p.json")
    doc = json.loads(path.read_text())
    assert doc["format"].endswith(f"/{fmt}")
    assert doc["jobs"][0]["running"]["restart_cost_s"] == 45 and doc["jobs"][0]["progress"] == "goodput"
    assert "progress" not in doc["jobs"][1]
    back = load_instance(path)
    assert back.jobs[0].running.restart_cost_s == 45.0 and back.jobs[0].progress == "goodput"
    assert back.jobs[1].progress == "samples"
    a, b = elasticopt.solve(p, "dp"), elasticopt.solve(back, "dp")
    assert a.objective == b.objective and elasticopt.verify(back, b).ok


def test_a_bad_field_names_file_and_path(tmp_path):
    from elasticopt.models.instance import load_instance
    from elasticopt.errors import InstanceError

    doc = {"format": "elasticopt-instance/1", "cluster": {"gpus": 4, "gpus_per_node": 4}, "objective": "pollux",
           "jobs": [{"id": "a", "throughput": [[1, 32, 100.0]], "batch": {"min": 32, "max": 32, "max_local": 32},
                     "running": {"gpus": 1, "batch": 32, "restart_cost_s": -3}, "progress": "epochs"}]}
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InstanceError) as exc:
        load_instance(f)
    assert str(f) in str(exc.value) and ("restart_cost_s" in str(exc.value) or "progress" in str(exc.value))


def test_the_service_passes_restart_cost_and_progress():
    from elasticopt.service.dispatch import AllocationService

    svc = AllocationService()
    base = {"format": "elasticopt-request/1", "cluster": {"gpus": 2, "gpus_per_node": 2}, "objective": "pollux",
            "jobs": [{"id": "r", "throughput": [[1, 32, 100.0], [2, 64, 160.0]],
                      "batch": {"min": 32, "max": 64, "max_local": 32},
                      "running": {"gpus": 1, "batch": 32}, "remaining_samples": 6000.0}]}
    free = svc.handle(base)
    assert free["ok"], free
    costly = json.loads(json.dumps(base))
    costly["jobs"][0]["running"]["restart_cost_s"] = 30.0
    held = svc.handle(costly)
    assert held["ok"], held
    # free: growing to 2 GPUs is worth 100 - 1/1.6; with a 30 s restart the discount makes staying best
    assert free["objective_value"] == pytest.approx(100 - 1 / 1.6)
    assert held["objective_value"] == pytest.approx(99.0)


def test_the_pollux_policy_runs_on_several_gpu_types():
    from elasticopt.scheduling import SimulationConfig, simulate
    from elasticopt.scheduling.hetero import cluster_preset, generate_hetero_workload

    cl = cluster_preset("t4:1x4,a100:1x4")
    jobs = generate_hetero_workload(12, cl, 1.0, seed=0)
    res = simulate(jobs, "pollux", SimulationConfig(gpus=cl.gpus, cluster=cl))
    assert res.metrics.completed == 12
