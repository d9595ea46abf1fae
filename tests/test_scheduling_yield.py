"""The anti-thrashing rule yields to queued work: hand-checked cases, properties, and elastic >= fixed-batch."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.hysteresis import DEFAULT_HYSTERESIS, Hysteresis, queue_value
from elasticopt.scheduling.typedcompile import TypedCompile
from elasticopt.scheduling.state import JobState, to_model_job
from elasticopt.testing.toy import toy_job
from elasticopt.scheduling.workload_generator import generate_workload


def state(job_id="a", gpus=0, batch=0, since_s=None, cost_s=30.0, arrival_s=0.0, weight=1.0, done=0.0):
    spec = toy_job(job_id, arrival_s=arrival_s, weight=weight, total_samples=1e6)
    phase = Phase.RUNNING if gpus else Phase.QUEUED
    return JobState(spec=spec, phase=phase, gpus=gpus, batch=batch, samples_done=done, since_rescale_s=since_s,
                    restart_cost_s=cost_s)


def test_queue_value_by_hand():
    now = 100.0
    jobs = [state("r1", 4, 256, 10.0), state("r2", 2, 128, 10.0),
            state("q1", arrival_s=40.0),               # waited 60 s = 2 restart costs: 1 + 2
            state("q2", arrival_s=100.0, weight=2.0)]  # just arrived: 2 * (1 + 0)
    assert queue_value(jobs, now) == pytest.approx((3.0 + 2.0) / 2)  # per running job
    assert queue_value(jobs[:2], now) == 0.0
    assert queue_value(jobs[2:], now) == pytest.approx(5.0)  # nobody running: divided by 1
    free = [state("q", arrival_s=0.0, cost_s=0.0)]
    assert queue_value(free, 0.0) == 1.0 and math.isinf(queue_value(free, 1.0))


def test_yield_factor_and_shrink_cool_down_by_hand():
    rule = Hysteresis(min_interval_restarts=15.0, queue_yield=1.0)
    assert rule.yield_factor(0.0) == 1.0 and rule.shrink_interval_restarts(0.0) == 15.0
    assert rule.yield_factor(4.0) == pytest.approx(0.2) and rule.shrink_interval_restarts(4.0) == pytest.approx(3.0)
    assert rule.yield_factor(math.inf) == 0.0
    assert Hysteresis(min_interval_restarts=15.0, queue_yield=0.0).yield_factor(100.0) == 1.0
    assert Hysteresis(queue_yield=math.inf).yield_factor(1e-9) == 0.0
    with pytest.raises(ValidationError, match="queue_yield"):
        Hysteresis(queue_yield=-1.0)
    with pytest.raises(ValidationError, match="queue_yield"):
        Hysteresis(queue_yield=float("nan"))


def test_a_shrink_in_its_cool_down_is_allowed_once_the_queue_waits_enough():
    rule = Hysteresis(min_interval_restarts=15.0, queue_yield=1.0)  # cool-down 450 s at 30 s a restart
    st_ = state(gpus=8, batch=512, since_s=100.0)
    assert not rule.allows(st_, 4, 256)              # nothing queued: 100 s < 450 s
    assert not rule.allows(st_, 4, 256, queue=2.0)   # 450 / 3 = 150 s > 100 s
    assert rule.allows(st_, 4, 256, queue=4.0)       # 450 / 5 = 90 s <= 100 s
    assert not rule.allows(st_, 8, 256, queue=1e9)   # not a shrink: the full cool-down holds
    assert not Hysteresis(min_interval_restarts=15.0, queue_yield=0.0).allows(st_, 4, 256, queue=1e9)
    assert rule.allows(state(gpus=8, batch=512, since_s=500.0), 4, 256)  # past the cool-down, as before


def test_the_policy_penalty_yields_with_the_rule():
    from elasticopt.scheduling.policies.elastic import ElasticPolicy

    pol = ElasticPolicy(rescale_penalty=0.3, hysteresis=Hysteresis(min_interval_restarts=15.0, queue_yield=1.0))
    pol._queue = 0.0
    assert pol.penalty_now() == 0.3
    pol._queue = 2.0
    assert pol.penalty_now() == pytest.approx(0.1)


@settings(max_examples=60, deadline=None)
@given(since=st.floats(0.0, 1000.0), queue=st.sampled_from([0.0, 0.3, 1.0, 5.0, 40.0, math.inf]),
       qy=st.sampled_from([0.0, 0.5, 1.0, math.inf]), cool=st.sampled_from([0.0, 5.0, 15.0]),
       gain=st.sampled_from([0.0, 0.2]), done=st.sampled_from([0.0, 5e5, 999_990.0]))
def test_the_incremental_compile_applies_the_rule_as_allows_does(since, queue, qy, cool, gain, done):
    """The compiler's array form of the rule keeps exactly the options ``allows`` allows, queue included."""
    rule = Hysteresis(min_gain=gain, min_interval_restarts=cool, queue_yield=qy)
    jobs = [state("run", gpus=4, batch=128, since_s=since, done=done), state("q", arrival_s=0.0)]
    table = TypedCompile().table(jobs, Cluster(8, 8), objective="speedup", hysteresis=rule, queue=queue)
    got = {(int(k), int(b)) for k, b, v in zip(table.gpus[0], table.batch[0], table.valid[0]) if v}
    opts = {(o[0], o[1]) for o in to_model_job(jobs[0]).options(gpus_cap=8)}
    want = {o for o in opts if rule.allows(jobs[0], o[0], o[1], queue=queue)} | {(4, 128)}
    assert got == want


def test_a_queued_jobs_waiting_value_makes_the_rule_release_a_held_job():
    """A takes the idle cluster; B waits; when C arrives B's waiting makes A shrink within its cool-down.

    8 GPUs, 30 s restarts, cool-down 15 restart costs (450 s).  At t = 60 B has waited 0: V = 1 (one
    running job), the shrink cool-down is 450 / 2 = 225 s > 60 s, A keeps its GPUs.  At t = 200 B has
    waited 140 s (4.67 restart costs) and C 0: V = 5.67 + 1, so 450 / 7.67 = 59 s <= 200 s: A shrinks and
    B and C start at once.  Without yielding (queue_yield 0) both wait until A is done.
    """
    big = 6e6  # A: hours on 8 GPUs
    jobs = [toy_job("A", arrival_s=0.0, total_samples=big, submitted_gpus=8, submitted_batch=512),
            toy_job("B", arrival_s=60.0, total_samples=2e4), toy_job("C", arrival_s=200.0, total_samples=2e4)]
    starts = {}
    for qy in (1.0, 0.0):
        rule = Hysteresis(min_interval_restarts=15.0, queue_yield=qy)
        res = simulate(jobs, "elastic", SimulationConfig(gpus=8, restart_cost_s=30.0, hysteresis=rule),
                       policy_options={"solver": "numpy-dp"})
        starts[qy] = {r.job_id: r.first_start_s for r in res.records}
        a = next(r for r in res.records if r.job_id == "A")
        starts[qy]["A_rescales"] = a.rescales
        starts[qy]["A_done"] = a.completion_s
    assert starts[1.0]["B"] == 200.0 and starts[1.0]["C"] == 200.0 and starts[1.0]["A_rescales"] >= 1
    assert starts[0.0]["B"] >= starts[0.0]["A_done"] and starts[0.0]["A_rescales"] == 0


def test_default_rule_yields():
    assert DEFAULT_HYSTERESIS.queue_yield > 0


# cells of validation/paper_comparison.py's sensitivity grid (64 GPUs, 128 jobs) where the rule without
# yielding (queue_yield 0) made elastic complete fewer jobs than fixed-batch: users submit their largest batch
# or a random one, heavy load, free and 30 s restarts
GRID = [(8.0, 0.0, "max"), (32.0, 30.0, "max"), (8.0, 0.0, "random")]


def small_grid(rule: Hysteresis, seeds=(0, 1, 2), gpus=64):
    """Per cell: the seeds' mean of jobs done by the horizon and of mean JCT, elastic and fixed-batch."""
    out = []
    for load, cost, batch in GRID:
        done = {"elastic": [], "fixed-batch": []}
        jct = {"elastic": [], "fixed-batch": []}
        for seed in seeds:
            jobs = generate_workload(2 * gpus, gpus, load, seed=seed, submitted_batch=batch)
            horizon = max(j.arrival_s for j in jobs)
            cfg = SimulationConfig(gpus=gpus, restart_cost_s=cost, seed=seed, hysteresis=rule)
            for pol in done:
                res = simulate(jobs, pol, cfg, policy_options={"solver": "dp"})
                done[pol].append(sum(r.completion_s is not None and r.completion_s <= horizon for r in res.records))
                jct[pol].append(res.metrics.jct_mean_s)
        out.append(((load, cost, batch), {p: float(np.mean(v)) for p, v in done.items()},
                    {p: float(np.mean(v)) for p, v in jct.items()}))
    return out


def test_elastic_completes_at_least_as_many_jobs_as_fixed_batch_with_no_higher_mean_jct():
    for cell, done, jct in small_grid(DEFAULT_HYSTERESIS):
        assert done["elastic"] >= done["fixed-batch"], (cell, done)
        assert jct["elastic"] <= jct["fixed-batch"], (cell, jct)
