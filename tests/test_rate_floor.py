"""The rule's rate floors (``Hysteresis.start_floor`` / ``due_floor``), elasticopt/scheduling/hysteresis.py.

A job under admission control starts only at >= φ_s of its submitted rate, and while the queue's waiting
value is unbounded (a job at its admission deadline) a running job yields only down to min(φ_d x its
submitted rate, its rate now).

- hand-checked: one job's options, queued and running, at a bounded and an unbounded queue value, in the
  scalar and the array form; the elastic policy's decision on one small snapshot with and without them;
  fixed-batch keeps the baseline's settings;
- property: on random jobs, rules and queue values, no option the rule allows is below the floor, and the
  two forms agree;
- the incremental table equals the compiled one at every decision of runs with admission deadlines,
  where the floors act.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import Cluster, MeasuredThroughput
from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.hysteresis import Hysteresis, option_filter
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.policies.elastic import ElasticPolicy
from elasticopt.scheduling.policies.fixed_batch import FixedBatchPolicy
from elasticopt.scheduling.state import JobState, Snapshot
from elasticopt.scheduling.workload_generator import generate_workload
from tests.test_scheduling_incremental import checking

# submitted (4, 256) at 400 samples/s: φ = 0.5 of it is 200 samples/s, φ = 0.75 is 300
PTS = {(1, 32): 90.0, (1, 64): 120.0, (2, 128): 220.0, (3, 192): 320.0, (4, 256): 400.0}
OPTS = sorted(PTS)


def spec(job_id="j", **kw) -> JobSpec:
    return JobSpec(job_id, MeasuredThroughput(PTS), 32, 256, 64, total_samples=1e6, submitted_gpus=4,
                   submitted_batch=256, **kw)


def both_forms(rule: Hysteresis, s: JobState, queue: float) -> list[bool]:
    """The scalar verdicts on every option but the current one, checked against the array form."""
    K = np.array([[float(k) for k, _ in OPTS]])
    rate = np.array([[PTS[o] for o in OPTS]])
    one = np.array
    rnow = s.progress_per_s(s.gpus, s.batch) if s.is_running else 0.0
    arr = rule.allows_array(K, rate, one([float(s.gpus)]), one([s.remaining_samples]), one([s.restart_cost_s]),
                            one([rnow]), one([s.is_running]),
                            one([np.inf if s.since_rescale_s is None else s.since_rescale_s]), queue,
                            one([rule.floor(s, queue)]))[0]
    out = []
    for o, (k, b) in enumerate(OPTS):
        if (k, b) == s.allocation:
            continue
        assert rule.allows(s, k, b, queue=queue) == bool(arr[o]), (k, b, queue)
        out.append(rule.allows(s, k, b, queue=queue))
    return out


def test_floors_by_hand():
    rule = Hysteresis(min_interval_restarts=15.0, start_floor=0.75, due_floor=0.5)
    queued = JobState(spec(), Phase.QUEUED, 0, 0, 0.0, None, 30.0)
    # a queued job without an admission deadline has no floor; with one, (1, 32), (1, 64) and (2, 128) are below
    # 300 at any queue value
    assert rule.floor(queued, math.inf) == 0.0 and both_forms(rule, queued, math.inf) == [True] * 5
    queued = JobState(spec(start_by_s=600.0), Phase.QUEUED, 0, 0, 0.0, None, 30.0)
    assert rule.floor(queued, math.inf) == rule.floor(queued, 2.0) == 300.0
    assert both_forms(rule, queued, 0.0) == both_forms(rule, queued, math.inf) == [False, False, False, True, True]
    assert both_forms(Hysteresis(min_interval_restarts=15.0), queued, math.inf) == [True] * 5  # no floor
    # running on (4, 256), its cool-down over: a shrink to any option while the queue's value is bounded,
    # down to the due floor (200) while it is unbounded
    big = JobState(spec(), Phase.RUNNING, 4, 256, 0.0, 1000.0, 30.0)
    assert rule.floor(big, math.inf) == 200.0
    assert both_forms(rule, big, 0.0) == [True, True, True, True]
    assert both_forms(rule, big, math.inf) == [False, False, True, True]
    # running on (1, 64), below the due floor: at an unbounded value nothing below its rate now (120)
    low = JobState(spec(), Phase.RUNNING, 1, 64, 0.0, 1000.0, 30.0)
    assert rule.floor(low, math.inf) == 120.0
    assert both_forms(rule, low, math.inf) == [False, True, True, True]  # (1, 32) no; grows pay back
    assert option_filter(queued, Hysteresis(), math.inf) is None
    assert option_filter(JobState(spec(), Phase.QUEUED, 0, 0, 0.0, None, 30.0), rule, math.inf) is None
    assert option_filter(queued, rule, 0.0)(2, 128) is False and option_filter(queued, rule, 0.0)(3, 192) is True


def test_elastic_admits_a_due_job_without_crushing_the_running_one():
    # 4 GPUs: A runs on all 4 at its submitted (4, 256), past its cool-down; B (submitted (4, 256) too) is at
    # its admission deadline: the rule yields entirely (no cool-down, no λ) and B weighs due_weight.
    # Speedups (R = 120/GPU): (1, 64) 1.0, (2, 128) 1.83, (3, 192) 2.67, (4, 256) 3.33.
    # Without floors (weight 5): A on 1 GPU, B on 3: 1.0 + 5 x 2.67 = 14.3 > 1.83 + 5 x 1.83 = 11.0.
    # With them B must start at >= 300 samples/s ((3, 192) or more) and A keep >= 200 ((2, 128) or more):
    # both cannot hold on 4 GPUs, and B's value at (4, 256) (5 x 3.33 = 16.7) needs A stopped, which the
    # policy may not do (no preemption): B is dropped and A keeps its GPUs.
    a = JobState(spec("A"), Phase.RUNNING, 4, 256, 0.0, 1000.0, 30.0)
    b = JobState(spec("B", arrival_s=100.0, start_by_s=100.0), Phase.QUEUED, 0, 0, 0.0, None, 30.0)
    snap = Snapshot(100.0, Cluster(gpus=4), (a, b))
    assert ElasticPolicy(solver="dp", start_floor=0.0, due_floor=0.0).allocate(snap).assignments == {
        "A": (1, 64), "B": (3, 192)}
    got = ElasticPolicy(solver="dp").allocate(snap).assignments
    assert got["A"] == (4, 256) and got.get("B") is None
    # on 6 GPUs B starts on (4, 256) (5 x 3.33) beside A on (2, 128) (1.83): A keeps 220 >= 200, B gets 400
    a6 = JobState(spec("A"), Phase.RUNNING, 4, 256, 0.0, 1000.0, 30.0)
    got = ElasticPolicy(solver="dp").allocate(Snapshot(100.0, Cluster(gpus=6), (a6, b))).assignments
    assert got == {"A": (2, 128), "B": (4, 256)}


def test_fixed_batch_keeps_the_baselines_settings():
    fb, el = FixedBatchPolicy(), ElasticPolicy()
    assert (fb.hysteresis.start_floor, fb.hysteresis.due_floor, fb.due_weight) == (0.0, 0.0, 10.0)
    assert (el.hysteresis.start_floor, el.hysteresis.due_floor, el.due_weight) == (0.75, 0.5, 5.0)


rates = st.one_of(st.sampled_from([100.0, 200.0, 400.0]), st.floats(1.0, 1000.0))


@st.composite
def floored_jobs(draw):
    ks = draw(st.lists(st.sampled_from([1, 2, 3, 4, 8]), min_size=1, max_size=5, unique=True))
    pts = {(k, m * k): draw(rates) for k in ks for m in (32, 64) if m == 32 or draw(st.booleans())}
    k_sub, b_sub = draw(st.sampled_from(sorted(pts)))
    sp = JobSpec("j", MeasuredThroughput(pts), 32, 512, 64, total_samples=draw(st.floats(1e3, 1e7)),
                 submitted_gpus=k_sub, submitted_batch=b_sub, start_by_s=draw(st.sampled_from([None, 0.0, 600.0])))
    running = draw(st.booleans())
    k0, b0 = draw(st.sampled_from(sorted(pts))) if running else (0, 0)
    since = draw(st.one_of(st.none(), st.floats(0.0, 5000.0))) if running else None
    s = JobState(sp, Phase.RUNNING if running else Phase.QUEUED, k0, b0, draw(st.floats(0.0, 900.0)), since,
                 draw(st.sampled_from([0.0, 10.0, 30.0])))
    return s, sorted(pts)


@settings(max_examples=300, deadline=None)
@given(st.builds(Hysteresis, min_gain=st.sampled_from([0.0, 0.3]), payback_factor=st.sampled_from([0.0, 1.0]),
                 min_interval_restarts=st.sampled_from([0.0, 15.0]), start_floor=st.sampled_from([0.0, 0.5, 1.0]),
                 due_floor=st.sampled_from([0.0, 0.5, 1.0])),
       st.lists(floored_jobs(), min_size=1, max_size=5), st.sampled_from([0.0, 0.7, math.inf]))
def test_no_allowed_option_is_below_the_floor_and_the_forms_agree(rule, jobs, queue):
    n, width = len(jobs), max(len(o) for _, o in jobs)
    K, rate = np.ones((n, width)), np.ones((n, width))
    for j, (s, opts) in enumerate(jobs):
        for o, (k, b) in enumerate(opts):
            K[j, o], rate[j, o] = k, s.progress_per_s(k, b)
    col = lambda f: np.array([f(s) for s, _ in jobs], dtype=float)  # noqa: E731
    arr = rule.allows_array(K, rate, col(lambda s: s.gpus), col(lambda s: s.remaining_samples),
                            col(lambda s: s.restart_cost_s),
                            col(lambda s: (s.progress_per_s(s.gpus, s.batch) or 0.0) if s.is_running else 0.0),
                            np.array([s.is_running for s, _ in jobs]),
                            col(lambda s: np.inf if s.since_rescale_s is None else s.since_rescale_s), queue,
                            col(lambda s: rule.floor(s, queue)))
    for j, (s, opts) in enumerate(jobs):
        sub = s.progress_per_s(s.spec.submitted_gpus, s.spec.batch_submitted)
        for o, (k, b) in enumerate(opts):
            if (k, b) == s.allocation:
                continue
            ok = rule.allows(s, k, b, queue=queue)
            assert ok == bool(arr[j, o]), (j, k, b, s)
            if not ok:
                continue
            if not s.is_running:
                if s.spec.start_by_s is not None:
                    assert s.progress_per_s(k, b) >= rule.start_floor * sub
            elif math.isinf(queue):
                assert s.progress_per_s(k, b) >= min(rule.due_floor * sub, s.progress_per_s(s.gpus, s.batch))


def test_incremental_table_equals_compiled_table_where_the_floors_act():
    # deadline 0 at load 8: a job that cannot start at once is due, so most decisions are at an unbounded
    # queue value (floors on); restart cost 0 under goodput accounting makes any waiting job count +inf too
    for deadline, cost, progress in ((0.0, 30.0, "samples"), (300.0, 0.0, "goodput")):
        jobs = generate_workload(60, 16, 8.0, seed=4, submitted_batch="max")
        pol = checking(ElasticPolicy)(objective="speedup" if progress == "samples" else "goodput")
        assert pol._uses_cache() and pol.hysteresis.has_floors
        cfg = SimulationConfig(gpus=16, gpus_per_node=4, progress=progress, restart_cost_s=cost,
                               admission_deadline_s=deadline, seed=4)
        res = simulate(jobs, pol, cfg)
        assert type(pol).checked >= 30
        assert res.metrics.completed > 0
