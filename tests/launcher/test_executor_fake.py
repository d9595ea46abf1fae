"""TorchrunExecutor with the fake worker: many jobs, faults, recovery (no torch)."""

from __future__ import annotations

import json

from launcher_helpers import fake_spec, run_until

from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.torchrun import TorchrunExecutor
from elasticopt.launcher.journal import replay
from elasticopt.launcher.protocol import list_checkpoints
from elasticopt.scheduling.executor import Phase


def make(tmp_path, recorder, slots=4, **kw):
    ex = TorchrunExecutor(tmp_path / "run", DevicePool("cpu", tuple(range(slots))), **kw)
    ex.set_listener(recorder)
    return ex


def test_many_jobs_complete_and_report_throughput(tmp_path, recorder):
    ex = make(tmp_path, recorder)
    for i in range(4):
        assert ex.start(fake_spec(f"j{i}", total=2000 + 500 * i), 1, 64)
    run_until(ex, lambda: len(recorder.completed) == 4)
    assert sorted(recorder.completed) == ["j0", "j1", "j2", "j3"]
    for i in range(4):
        p = ex.progress(f"j{i}")
        assert p.phase is Phase.COMPLETED and p.samples_done == 2000 + 500 * i and p.gpus == 0
    assert {t[0] for t in recorder.throughput} == {"j0", "j1", "j2", "j3"}
    assert ex.pool.free() == [0, 1, 2, 3]
    # measured points flow into the job's throughput model
    assert ex.job_spec("j0").throughput.observed[(1, 64)] > 0


def test_rescale_resumes_at_stop_position(tmp_path, recorder):
    ex = make(tmp_path, recorder, slots=2)
    ex.start(fake_spec("a", total=20000), 1, 64)
    run_until(ex, lambda: ex.progress("a").phase is Phase.RUNNING and ex.progress("a").samples_done >= 640)
    assert ex.rescale("a", 2, 128)
    assert ex.progress("a").phase is Phase.RESTARTING
    run_until(ex, lambda: ex.progress("a").generation == 2 and ex.progress("a").phase is Phase.RUNNING)
    gen1 = json.loads((tmp_path / "run/jobs/a/gen-0001/status.json").read_text())
    assert gen1["state"] == "stopped"
    spec2 = json.loads((tmp_path / "run/jobs/a/gen-0002/spec.json").read_text())
    assert (spec2["gpus"], spec2["batch"], spec2["devices"]) == (2, 128, [0, 1])
    run_until(ex, lambda: recorder.completed == ["a"])
    assert ex.jobs["a"].account.lost_samples == 0
    assert len(ex.jobs["a"].account.downtimes_s) == 1 and ex.jobs["a"].account.downtimes_s[0] > 0
    # the whole job ran exactly total samples: no repeat, no skip
    assert ex.progress("a").samples_done == 20000


def test_stop_preempts_to_queue_and_start_resumes(tmp_path, recorder):
    ex = make(tmp_path, recorder, slots=1)
    ex.start(fake_spec("a", total=20000), 1, 64)
    run_until(ex, lambda: ex.progress("a").samples_done >= 640)
    ex.stop("a")
    run_until(ex, lambda: ex.jobs["a"].handle is None)
    p = ex.progress("a")
    assert p.phase is Phase.QUEUED and p.gpus == 0 and ex.pool.free() == [0]
    assert list_checkpoints(tmp_path / "run/jobs/a")[0][0] == p.samples_done
    ex.start(ex.job_spec("a"), 1, 128)
    run_until(ex, lambda: recorder.completed == ["a"])
    assert ex.jobs["a"].account.lost_samples == 0


def test_grow_waits_for_shrink_to_release_devices(tmp_path, recorder):
    ex = make(tmp_path, recorder, slots=2)
    ex.start(fake_spec("a", total=40000), 2, 128)
    run_until(ex, lambda: ex.progress("a").phase is Phase.RUNNING)
    ex.rescale("a", 1, 64)  # shrink first, as the autoscaler orders it
    ex.start(fake_spec("b", total=2000), 1, 64)
    run_until(ex, lambda: ex.progress("b").phase is Phase.RUNNING and ex.progress("a").phase is Phase.RUNNING)
    assert sorted(ex.pool.held_by("a") + ex.pool.held_by("b")) == [0, 1]
    ex.shutdown()


def test_worker_killed_restarts_from_checkpoint_and_counts_lost(tmp_path, recorder):
    ex = make(tmp_path, recorder, slots=1, checkpoint_every_s=0.05)
    ex.start(fake_spec("a", total=8000, args=["--crash-after", "4000"]), 1, 64)
    run_until(ex, lambda: recorder.completed == ["a"])
    job = ex.jobs["a"]
    assert job.account.restarts == 1 and job.generation == 2
    assert 0 <= job.account.lost_samples <= 64 * 2 * 10  # at most a checkpoint interval of steps
    assert ex.progress("a").samples_done == 8000
    assert replay(tmp_path / "run/journal.jsonl").jobs["a"].lost_samples == job.account.lost_samples


def test_crash_at_start_or_missing_script_fails_only_that_job(tmp_path, recorder):
    ex = make(tmp_path, recorder, slots=3)
    ex.start(fake_spec("bad", args=["--crash-at-start"]), 1, 64)
    ex.start(fake_spec("missing", script=str(tmp_path / "nope.py")), 1, 64)
    ex.start(fake_spec("good", total=2000), 1, 64)
    run_until(ex, lambda: "good" in recorder.completed and len(recorder.failed) == 2)
    assert "log.txt" in recorder.failed["bad"] and "exited with code 3" in recorder.failed["bad"]
    assert "not found" in recorder.failed["missing"]
    assert ex.progress("bad").phase is Phase.FAILED
    # actions on finished or failed jobs are ignored with a reason
    assert ex.rescale("bad", 1, 128) is False
    assert ex.rescale("good", 1, 128) is False
    assert ex.stop("missing") is False
    assert ex.pool.free() == [0, 1, 2]


def test_stop_timeout_kills_a_job_that_ignores_the_control_file(tmp_path, recorder):
    ex = make(tmp_path, recorder, slots=1, stop_timeout_s=0.3, checkpoint_every_s=0.05)
    ex.start(fake_spec("a", total=10**6, args=["--ignore-stop"]), 1, 64)
    run_until(ex, lambda: ex.progress("a").samples_done >= 1280)
    ex.stop("a")
    run_until(ex, lambda: ex.jobs["a"].handle is None, timeout_s=10)
    assert ex.progress("a").phase is Phase.QUEUED
    assert ex.progress("a").samples_done == list_checkpoints(tmp_path / "run/jobs/a")[0][0]
