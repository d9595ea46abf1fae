"""The field's baselines behind the policy interface: hand-checked decisions."""

from __future__ import annotations

import pytest

from elasticopt.models import Cluster
from elasticopt.profiles.efficiency import StatisticalEfficiency
from elasticopt.scheduling import SimulationConfig, get_policy, simulate
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.state import JobState, Snapshot
from elasticopt.testing.toy import toy_job
from elasticopt.solvers import solve


def state(spec: JobSpec, gpus=0, batch=0, done=0.0, since=None, cost=30.0, progress="samples") -> JobState:
    phase = Phase.RUNNING if gpus else Phase.QUEUED
    return JobState(spec, phase, gpus, batch, done, since, cost, progress)


def snap(gpus, *states) -> Snapshot:
    return Snapshot(0.0, Cluster(gpus, 8), tuple(states))


def test_registered():
    from elasticopt.scheduling import available_policies

    assert {"optimus", "tiresias", "pollux", "elastic-goodput"} <= set(available_policies())


def test_tiresias_least_attained_service_preempts_the_long_runner():
    old = toy_job("old", arrival_s=0.0, submitted_gpus=2, submitted_batch=64, total_samples=1e9)
    new = toy_job("new", arrival_s=10.0, submitted_gpus=2, submitted_batch=64, total_samples=1e9)
    pol = get_policy("tiresias", thresholds_gpu_s=(100.0,))
    rate = old.throughput.samples_per_s(2, 64)
    ran = state(old, 2, 64, done=rate * 3600)  # 2 GPUs x 1 h = 7200 GPU-s attained: queue 1
    assert pol.attained_gpu_s(ran) == pytest.approx(7200.0)
    alloc = pol.allocate(snap(2, ran, state(new)))
    assert alloc.get("new") == (2, 64) and alloc.get("old") is None  # preempted
    # below the threshold, FIFO among equals keeps the running job
    fresh = state(old, 2, 64, done=rate * 10)
    assert pol.allocate(snap(2, fresh, state(new))).get("old") == (2, 64)


def test_optimus_keeps_the_batch_and_gives_gpus_by_time_saved():
    a = toy_job("a", submitted_gpus=1, submitted_batch=64, total_samples=1e7)
    b = toy_job("b", submitted_gpus=1, submitted_batch=64, total_samples=1e4)
    alloc = get_policy("optimus").allocate(snap(3, state(a), state(b)))
    assert {kb[1] for kb in alloc.assignments.values() if kb} == {64}
    # both admitted on 1 GPU; the extra GPU goes to the long job (it saves far more time)
    assert alloc.get("a")[0] >= 2 and alloc.get("b") == (1, 64)
    assert alloc.gpus <= 3


def test_pollux_admits_everyone_before_growing_and_solves_exactly():
    jobs = [toy_job(f"j{i}", submitted_gpus=1, submitted_batch=64, total_samples=1e6) for i in range(3)]
    pol = get_policy("pollux")
    s = snap(4, *(state(j) for j in jobs))
    alloc = pol.allocate(s)
    assert all(alloc.get(j.id) is not None for j in jobs) and alloc.gpus == 4
    table = pol.build_table(s)
    assert solve(table, "numpy-dp").objective == solve(table, "milp").objective


def test_pollux_restart_discount_keeps_a_job_near_its_end():
    j = toy_job("j", submitted_gpus=1, submitted_batch=64, total_samples=2e4)
    rate = j.throughput.samples_per_s(1, 64)
    near_end = state(j, 1, 64, done=2e4 - rate * 5, since=1e4, cost=30.0)  # 5 s left, restart 30 s
    assert get_policy("pollux", payback=False).allocate(snap(8, near_end)).get("j") == (1, 64)


def test_elastic_goodput_picks_a_smaller_batch_when_samples_are_worth_less():
    eff = StatisticalEfficiency(8, 8.0)  # E(64) = 16/72: big batches waste most samples
    j = toy_job("j", submitted_gpus=1, submitted_batch=8, total_samples=1e6, efficiency=eff)
    by_throughput = get_policy("elastic").allocate(snap(1, state(j)))
    by_goodput = get_policy("elastic-goodput").allocate(snap(1, state(j)))
    assert by_throughput.get("j")[1] > by_goodput.get("j")[1]


@pytest.mark.parametrize("policy", ["optimus", "tiresias", "pollux", "elastic-goodput"])
def test_baselines_finish_a_generated_workload(policy):
    from elasticopt.scheduling.workload_generator import generate_workload

    jobs = generate_workload(40, 16, 1.5, seed=2)
    res = simulate(jobs, policy, SimulationConfig(gpus=16, gpus_per_node=4, tick_s=1800.0, progress="goodput"))
    assert res.metrics.completed == 40
