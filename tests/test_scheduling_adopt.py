"""Autoscaler.adopt / adopt_finished: taking over jobs an earlier driver ran (a restarted launcher)."""

import pytest

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.scheduling import Action, Allocation, Autoscaler, JobHistory, Phase, SimulatedExecutor
from elasticopt.testing.toy import toy_job

COST = 5.0


class Target:
    """A policy returning whatever target the test sets (None: keep every running job as it is)."""

    name = "target"

    def __init__(self):
        self.target = None

    def allocate(self, snapshot):
        if self.target is None:
            return Allocation({j.id: j.allocation for j in snapshot.jobs})
        return Allocation(dict(self.target))


def _scaler(ex, policy=None, gpus=4):
    return Autoscaler(ex, Cluster(gpus, gpus_per_node=gpus), policy or Target(), restart_cost_s=COST)


def _running(job_id="a", gpus=2, batch=128, at=0.0, now=100.0, **kw):
    """A simulated executor on which ``job_id`` was started at ``at`` (by an earlier driver)."""
    ex = SimulatedExecutor()
    ex.set_time(at)
    spec = toy_job(job_id, total_samples=1e7, **kw)  # no restart cost on the executor
    assert ex.start(spec, gpus, batch)
    ex.set_time(now)
    return ex, spec


def test_adopted_running_job_keeps_its_allocation_and_history():
    ex, spec = _running(at=40.0, now=100.0)
    pol = Target()
    sc = _scaler(ex, pol)
    hist = JobHistory(first_start_s=10.0, gpu_s=50.0, starts=1, rescales=1)
    assert sc.adopt(spec, 2, 128, since_s=40.0, history=hist) is None  # no decision by default
    d = sc.reschedule("recovered")
    assert d.actions == () and d.running == 1 and d.queued == 0  # not started again
    assert sc.active_ids == ("a",) and sc.gpus_in_use == 2 and sc.timeline[-1].gpus_in_use == 2
    (st,) = sc.snapshot().jobs
    assert st.allocation == (2, 128) and st.since_rescale_s == pytest.approx(60.0)
    (r,) = sc.records()
    assert (r.status, r.first_start_s, r.final_gpus, r.final_batch) == ("running", 10.0, 2, 128)
    assert (r.starts, r.rescales, r.stops) == (1, 1, 0) and r.restart_s == 2 * COST
    assert r.gpu_s == pytest.approx(50.0 + 2 * 60.0)
    assert r.samples_done == ex.progress("a").samples_done > 0

    pol.target = {"a": (1, 64)}  # a later decision may rescale it (a shrink: never vetoed)
    d = sc.reschedule("tick")
    assert d.actions == (Action("rescale", "a", 1, 64),)
    assert ex.progress("a").gpus == 1
    ex.set_time(110.0)
    (r,) = sc.records()
    assert (r.rescales, r.final_gpus, r.restart_s) == (2, 1, 3 * COST)
    assert r.gpu_s == pytest.approx(170.0 + 1 * 10.0)


def test_adopted_job_completes_like_a_job_the_autoscaler_started():
    # one autoscaler from start to end, and one that hands over to another mid-run: same records
    def run(handover):
        ex = SimulatedExecutor()
        spec = toy_job("a", total_samples=20_000, submitted_gpus=2, submitted_batch=128)
        sc = _scaler(ex)
        pol = sc.policy
        pol.target = {"a": (2, 128)}
        sc.submit(spec)
        pol.target = None
        if handover:
            ex.set_time(30.0)
            (old,) = sc.records()
            sc = _scaler(ex)  # the new driver (the executor now calls it back)
            hist = JobHistory(first_start_s=old.first_start_s, starts=old.starts, rescales=old.rescales)
            sc.adopt(spec, 2, 128, since_s=0.0, history=hist, reschedule=True)
        end = ex.completion_time("a")
        ex.set_time(end)
        ex.complete("a")
        return sc.records()[0], end

    (a, end), (b, _) = run(False), run(True)
    assert a.status == b.status == "completed" and b.completion_s == end
    for f in ("first_start_s", "completion_s", "gpu_s", "starts", "rescales", "restart_s", "samples_done",
              "final_gpus", "final_batch"):  # fmt: skip
        assert getattr(a, f) == pytest.approx(getattr(b, f)), f
    assert b.gpu_s == pytest.approx(2 * end)


def test_adopted_queued_job_is_started_by_the_next_decision():
    ex = SimulatedExecutor()
    ex.set_time(200.0)
    spec = toy_job("q")
    pol = Target()
    sc = _scaler(ex, pol)
    hist = JobHistory(first_start_s=20.0, gpu_s=80.0, starts=1, stops=1, last_alloc=(4, 256))
    sc.adopt(spec, 0, 0, history=hist)
    (r,) = sc.records()
    assert (r.status, r.final_gpus, r.gpu_s, r.first_start_s) == ("queued", 4, 80.0, 20.0)
    pol.target = {"q": (1, 64)}
    assert sc.reschedule("recovered").actions == (Action("start", "q", 1, 64),)
    ex.set_time(210.0)
    (r,) = sc.records()
    assert (r.status, r.starts, r.stops, r.first_start_s, r.final_gpus) == ("running", 2, 1, 20.0, 1)
    assert r.gpu_s == pytest.approx(90.0) and r.restart_s == 2 * COST


def test_adopt_finished_job_is_recorded_not_scheduled():
    ex, spec = _running("b", now=50.0)
    sc = _scaler(ex)
    done = toy_job("done", total_samples=1000)
    hist = JobHistory(first_start_s=1.0, gpu_s=12.5, starts=1, last_alloc=(1, 64))
    sc.adopt_finished(done, "completed", completion_s=14.0, history=hist)
    sc.adopt_finished(toy_job("bad"), "failed", samples_done=10.0)
    sc.adopt(spec, 2, 128, since_s=0.0)
    assert sc.active_ids == ("b",) and [j.id for j in sc.snapshot().jobs] == ["b"]
    sc.on_completed("done", 60.0)  # a late callback of the executor: ignored
    recs = {r.job_id: r for r in sc.records()}
    d = recs["done"]
    assert (d.status, d.first_start_s, d.completion_s, d.samples_done) == ("completed", 1.0, 14.0, 1000.0)
    assert (d.gpu_s, d.final_gpus, d.final_batch, d.starts, d.restart_s) == (12.5, 1, 64, 1, COST)
    assert (recs["bad"].status, recs["bad"].completion_s, recs["bad"].samples_done) == ("failed", None, 10.0)
    assert recs["b"].first_start_s == 0.0 and recs["b"].starts == 1 and recs["b"].gpu_s == pytest.approx(100.0)


def test_adopt_rejects_what_the_executor_does_not_report():
    ex, spec = _running(now=10.0)
    sc = _scaler(ex)
    with pytest.raises(ValidationError, match=r"executor's allocation \(2, 128\)"):
        sc.adopt(spec, 1, 64)
    with pytest.raises(ValidationError, match="executor's allocation"):
        sc.adopt(toy_job("never-started"), 1, 64)
    with pytest.raises(ValidationError, match="since_s"):
        sc.adopt(spec, 2, 128, since_s=11.0)
    sc.adopt(spec, 2, 128)
    with pytest.raises(ValidationError, match="not submitted before"):
        sc.adopt(spec, 2, 128)
    with pytest.raises(ValidationError, match="not submitted before"):
        sc.submit(spec)
    with pytest.raises(ValidationError, match="completion_s"):
        sc.adopt_finished(toy_job("x"), "completed")
    with pytest.raises(ValidationError, match="status"):
        sc.adopt_finished(toy_job("x"), "running", completion_s=1.0)
    ex.set_time(ex.completion_time("a"))
    ex.complete("a")
    assert ex.progress("a").phase is Phase.COMPLETED
    with pytest.raises(ValidationError, match="adopt_finished"):
        _scaler(ex).adopt(spec, 0, 0)
