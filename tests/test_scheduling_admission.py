"""Admission control in the simulator: jobs dropped by a deadline or a bounded queue, and conservation."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt.errors import ValidationError
from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.autoscaler import Autoscaler
from elasticopt.scheduling.records import read_jobs_csv, write_jobs_csv
from elasticopt.scheduling.simulated import SimulatedExecutor
from elasticopt.testing.toy import toy_job
from elasticopt.models import Cluster
from elasticopt.scheduling.policies.static import StaticPolicy

# 100 s on (1, 64) of the toy model (tests/test_scheduling_simulator.py: restart cost delays completion exactly)
SAMPLES_100S = 92.75362318840578 * 100


def one_gpu_jobs(n, gap_s=10.0):
    return [toy_job(f"j{i}", arrival_s=gap_s * i, total_samples=SAMPLES_100S) for i in range(n)]


def test_deadline_drops_the_jobs_that_cannot_start_in_time():
    # one GPU, static, no restart cost: j0 runs [0, 100], j1 [100, 200], ...; j_i (arrival 10 i) starts at
    # 100 i, i.e. after waiting 90 i s: with a 150 s deadline j0, j1 start (waits 0, 90) and j2.. are dropped
    jobs = one_gpu_jobs(5)
    res = simulate(jobs, "static", SimulationConfig(gpus=1, restart_cost_s=0.0, admission_deadline_s=150.0))
    status = {r.job_id: r.status for r in res.records}
    assert status == {"j0": "completed", "j1": "completed", "j2": "dropped", "j3": "dropped", "j4": "dropped"}
    dropped = {r.job_id: r.dropped_s for r in res.records if r.status == "dropped"}
    assert dropped == {"j2": pytest.approx(170.0), "j3": pytest.approx(180.0), "j4": pytest.approx(190.0)}
    m = res.metrics
    assert (m.completed, m.dropped, m.failed, m.unfinished, m.jobs) == (2, 3, 0, 0, 5)
    assert res.end_s == pytest.approx(200.0)  # j1's completion, not a deadline
    assert all(r.first_start_s is None and r.samples_done == 0 and r.gpu_s == 0 for r in res.records
               if r.status == "dropped")


def test_a_job_that_starts_at_its_deadline_is_not_dropped():
    # j1 waits exactly 90 s for j0's completion at 100: its deadline at 90 + 10 = 100 comes after the completion
    jobs = one_gpu_jobs(2)
    res = simulate(jobs, "static", SimulationConfig(gpus=1, restart_cost_s=0.0, admission_deadline_s=90.0))
    assert [r.status for r in res.records] == ["completed", "completed"]


def test_queue_limit_drops_the_newest_arrivals_beyond_it():
    # one GPU busy with j0 [0, 100]: j1 and j2 may wait, j3 and j4 find two jobs waiting and are turned away
    jobs = one_gpu_jobs(5)
    res = simulate(jobs, "static", SimulationConfig(gpus=1, restart_cost_s=0.0, queue_limit=2))
    status = {r.job_id: r.status for r in res.records}
    assert status == {"j0": "completed", "j1": "completed", "j2": "completed", "j3": "dropped", "j4": "dropped"}
    assert {r.job_id: r.dropped_s for r in res.records if r.status == "dropped"} == {"j3": 30.0, "j4": 40.0}
    zero = simulate(jobs, "static", SimulationConfig(gpus=1, restart_cost_s=0.0, queue_limit=0))
    assert [r.status for r in zero.records] == ["completed"] + ["dropped"] * 4


def test_without_admission_control_nothing_is_dropped():
    res = simulate(one_gpu_jobs(4), "elastic", SimulationConfig(gpus=1))
    assert res.metrics.dropped == 0 and all(r.status == "completed" for r in res.records)


@pytest.mark.parametrize("field, value", [("admission_deadline_s", -1.0), ("queue_limit", -1), ("queue_limit", 1.5),
                                          ("queue_limit", True)])
def test_bad_admission_settings_are_refused(field, value):
    with pytest.raises(ValidationError, match=field):
        SimulationConfig(gpus=4, **{field: value})


def test_drop_refuses_a_running_or_unknown_job():
    ex = SimulatedExecutor(cluster=Cluster(1, 1))
    scaler = Autoscaler(ex, Cluster(1, 1), StaticPolicy(), restart_cost_s=0.0)
    scaler.submit_many(one_gpu_jobs(2, gap_s=0.0))
    assert scaler.never_started() == ["j1"] and not scaler.may_drop("j0")
    with pytest.raises(ValidationError, match="never started"):
        scaler.drop(["j0"])
    with pytest.raises(ValidationError, match="active"):
        scaler.drop(["nope"])
    assert scaler.drop(["j1"]) == ["j1"] and scaler.active_ids == ("j0",)


def test_dropped_jobs_survive_the_jobs_csv(tmp_path):
    res = simulate(one_gpu_jobs(3), "static", SimulationConfig(gpus=1, restart_cost_s=0.0, queue_limit=0))
    back = read_jobs_csv(write_jobs_csv(tmp_path / "jobs.csv", res.records))
    assert back == list(res.records)


@st.composite
def admission_runs(draw):
    gpus = draw(st.integers(1, 4))
    n = draw(st.integers(1, 8))
    jobs = [toy_job(f"j{i}", arrival_s=draw(st.sampled_from([0.0, 0.0, 20.0, 75.0, 300.0])),
                    total_samples=draw(st.floats(2e3, 4e4)), submitted_gpus=draw(st.sampled_from([1, 1, 2])))
            for i in range(n)]
    cfg = SimulationConfig(
        gpus=gpus, restart_cost_s=draw(st.sampled_from([0.0, 30.0])),
        admission_deadline_s=draw(st.sampled_from([None, 0.0, 50.0, 400.0])),
        queue_limit=draw(st.sampled_from([None, 0, 1, 3])),
        horizon_s=draw(st.sampled_from([None, 250.0])),
    )
    return jobs, cfg, draw(st.sampled_from(["elastic", "fixed-batch", "static", "tiresias"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(admission_runs())
def test_every_job_ends_exactly_one_of_completed_dropped_unfinished(run):
    jobs, cfg, policy = run
    res = simulate(jobs, policy, cfg, policy_options={"solver": "numpy-dp"}, keep_segments=True)
    m = res.metrics
    arrived = {j.id for j in jobs if cfg.horizon_s is None or j.arrival_s <= cfg.horizon_s}
    assert {r.job_id for r in res.records} == arrived  # each submitted job has one record
    assert m.completed + m.dropped + m.failed + m.unfinished == m.jobs == len(arrived)
    ran = {s.job_id for s in res.segments}
    by_id = {j.id: j for j in jobs}
    for r in res.records:
        assert r.status in ("completed", "dropped", "running", "queued")
        if r.status == "dropped":  # never ran, left while waiting, within its deadline and after its arrival
            assert r.job_id not in ran and r.first_start_s is None and r.completion_s is None
            assert r.arrival_s <= r.dropped_s
            if cfg.admission_deadline_s is not None and cfg.queue_limit is None:
                assert r.dropped_s == pytest.approx(r.arrival_s + cfg.admission_deadline_s)
        else:
            assert r.dropped_s is None
        if r.status == "completed":
            assert r.samples_done == by_id[r.job_id].total_samples
            if cfg.admission_deadline_s is not None:
                assert r.first_start_s - r.arrival_s <= cfg.admission_deadline_s + 1e-9
    if cfg.horizon_s is None:
        assert m.unfinished == 0  # run to the end: every job completed or dropped
    if cfg.admission_deadline_s is None and cfg.queue_limit is None:
        assert m.dropped == 0


def test_a_job_at_its_deadline_makes_elastic_shrink_a_held_job_instead_of_dropping_it():
    # A takes both GPUs of the idle cluster (its cool-down: 15 x 30 s); B arrives at 10 s and must start at once.
    # At its deadline B counts as waiting without bound (the rule yields entirely) and weighs due_weight
    # times its weight: A shrinks to one GPU and B starts.  Without both (queue_yield 0, due_weight 1) B is lost.
    from elasticopt.scheduling.hysteresis import Hysteresis

    jobs = [toy_job("A", total_samples=5e6, submitted_gpus=2, submitted_batch=128),
            toy_job("B", arrival_s=10.0, total_samples=2e4)]
    kept = simulate(jobs, "elastic", SimulationConfig(gpus=2, restart_cost_s=30.0, admission_deadline_s=0.0),
                    policy_options={"solver": "numpy-dp"})
    assert [r.status for r in kept.records] == ["completed", "completed"]
    assert kept.records[1].first_start_s == 10.0 and kept.records[0].rescales >= 1
    rule = Hysteresis(min_interval_restarts=15.0, queue_yield=0.0)
    lost = simulate(jobs, "elastic", SimulationConfig(gpus=2, restart_cost_s=30.0, admission_deadline_s=0.0,
                                                      hysteresis=rule),
                    policy_options={"solver": "numpy-dp", "due_weight": 1.0})
    assert [r.status for r in lost.records] == ["completed", "dropped"]
