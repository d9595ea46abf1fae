"""Policies: registry and plug-ins, tie-breaking, and what each baseline may do."""

import textwrap

import pytest

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.scheduling import Allocation, JobState, Phase, Snapshot, available_policies, get_policy
from elasticopt.scheduling.autoscaler import check_allocation
from elasticopt.testing.toy import toy_job


def _state(spec, gpus=0, batch=0, done=0.0, cost=0.0):
    return JobState(spec, Phase.RUNNING if gpus else Phase.QUEUED, gpus, batch, done,
                    None if not gpus else 100.0, cost)


def _snap(states, gpus):
    return Snapshot(0.0, Cluster(gpus, 8), tuple(states))


def test_registry_lists_builtins_and_rejects_unknown():
    assert {"elastic", "fixed-batch", "static", "static-backfill", "greedy"} <= set(available_policies())
    with pytest.raises(ValidationError, match="elastic"):
        get_policy("no-such-policy")
    # options a policy does not take are ignored, taken ones are passed
    assert get_policy("static", solver="dp").name == "static"
    assert get_policy("elastic", solver="numpy-dp").solver == "numpy-dp"


def test_plugin_policy_by_module_colon_class(tmp_path, monkeypatch):
    (tmp_path / "my_sched.py").write_text(textwrap.dedent("""
        from elasticopt.scheduling import Allocation
        class Everyone1:
            name = "everyone-1"
            def __init__(self, batch=64):
                self.batch = batch
            def allocate(self, snapshot):
                free = snapshot.cluster.gpus
                out = {}
                for j in snapshot.jobs:
                    out[j.id] = (1, self.batch) if free > 0 else None
                    free -= 1
                return Allocation(out)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    pol = get_policy("my_sched:Everyone1", batch=32, solver="dp")
    assert pol.name == "everyone-1" and pol.batch == 32
    with pytest.raises(ValidationError):
        get_policy("my_sched:Missing")


@pytest.mark.parametrize("policy", ["elastic", "greedy"])
def test_ties_go_to_earlier_arrivals(policy):
    # 4 identical queued jobs, 2 GPUs: each is worth 1 on one GPU, two of them get in.
    jobs = [toy_job(j, arrival_s=t) for j, t in zip("abcd", [3.0, 2.0, 1.0, 0.0])]
    snap = _snap([_state(j) for j in jobs], 2)
    alloc = get_policy(policy, solver="numpy-dp").allocate(snap)
    check_allocation(snap, alloc)
    assert {j for j, v in alloc.assignments.items() if v} == {"c", "d"}
    assert alloc.get("d") == (1, 64)


def test_srpt_priority_prefers_short_jobs():
    jobs = [toy_job(j, arrival_s=float(i), total_samples=s) for i, (j, s) in
            enumerate(zip("abcd", [9e4, 1e4, 5e4, 2e3]))]
    snap = _snap([_state(j) for j in jobs], 2)
    alloc = get_policy("elastic", solver="numpy-dp", priority="srpt").allocate(snap)
    assert {j for j, v in alloc.assignments.items() if v} == {"b", "d"}


def test_elastic_uses_batch_freedom_fixed_batch_does_not():
    # Submitted on 4 GPUs at b=256 (local 64).  With 4 GPUs and 4 jobs, elastic runs all four
    # on one GPU each (b=64); fixed-batch cannot go below 4 GPUs at b=256.
    jobs = [toy_job(j, arrival_s=float(i), submitted_gpus=4, submitted_batch=256) for i, j in enumerate("abcd")]
    snap = _snap([_state(j) for j in jobs], 4)
    el = get_policy("elastic", solver="numpy-dp").allocate(snap)
    fb = get_policy("fixed-batch", solver="numpy-dp").allocate(snap)
    check_allocation(snap, el)
    check_allocation(snap, fb)
    assert sum(1 for v in el.assignments.values() if v) == 4
    assert [v for v in fb.assignments.values() if v] == [(4, 256)]
    assert fb.get("a") == (4, 256)


def test_static_fifo_blocks_and_backfill_does_not():
    big = toy_job("big", arrival_s=0.0, submitted_gpus=8, submitted_batch=512)
    small = toy_job("small", arrival_s=1.0, submitted_gpus=1, submitted_batch=64)
    run = toy_job("run", arrival_s=-1.0, submitted_gpus=4, submitted_batch=256)
    states = [_state(run, 4, 256), _state(big), _state(small)]
    snap = _snap(states, 8)
    fifo = get_policy("static").allocate(snap)
    bf = get_policy("static-backfill").allocate(snap)
    assert fifo.get("run") == (4, 256) and fifo.get("big") is None and fifo.get("small") is None
    assert bf.get("run") == (4, 256) and bf.get("big") is None and bf.get("small") == (1, 64)
    # a job that can never fit does not block the queue forever
    huge = toy_job("huge", arrival_s=-2.0, submitted_gpus=8, submitted_batch=512)
    alloc = get_policy("static").allocate(_snap([_state(huge), _state(small)], 4))
    assert alloc.get("small") == (1, 64) and alloc.info["skipped"] == ["huge"]


def test_payback_keeps_running_job_when_growth_does_not_pay():
    # One running job with 100 samples left: growing from 1 to 8 GPUs saves < 1 s but costs 30 s.
    spec = toy_job("a", total_samples=1000.0)
    st = _state(spec, 1, 64, done=900.0, cost=30.0)
    snap = _snap([st], 8)
    for name in ("elastic", "greedy"):
        assert get_policy(name, solver="numpy-dp").allocate(snap).get("a") == (1, 64)
    # without the restart cost the same job grows
    st0 = _state(spec, 1, 64, done=0.0, cost=0.0)
    assert get_policy("elastic", solver="numpy-dp").allocate(_snap([st0], 8)).get("a")[0] == 8


def test_check_allocation_rejects_bad_targets():
    spec = toy_job("a")
    snap = _snap([_state(spec), _state(toy_job("b"))], 4)
    with pytest.raises(ValidationError, match="at most 4"):
        check_allocation(snap, Allocation({"a": (4, 256), "b": (2, 128)}))
    with pytest.raises(ValidationError, match="above the cluster"):
        check_allocation(snap, Allocation({"a": (8, 512)}))
    with pytest.raises(ValidationError, match="does not divide"):
        check_allocation(snap, Allocation({"a": (4, 66)}))
    with pytest.raises(ValidationError, match="active job"):
        check_allocation(snap, Allocation({"zz": (1, 64)}))
