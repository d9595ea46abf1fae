"""Pure parts of the launcher: batch split, learning-rate rules, sampler arithmetic, ordering, journal."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticopt.errors import ValidationError
from elasticopt.launcher.devices import DevicePool, detect_gpus
from elasticopt.launcher.journal import Journal, replay
from elasticopt.launcher.observed import ObservedThroughput
from elasticopt.launcher.plan import LRRamp, epoch_and_offset, rank_slice, scaled_lr, split_batch
from elasticopt.launcher.protocol import (
    checkpoint_path,
    list_checkpoints,
    prune_checkpoints,
    torn_checkpoint_samples,
)
from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.actions import plan_actions


@given(k=st.integers(1, 16), local=st.integers(1, 600), m=st.integers(1, 256))
def test_split_batch_covers_local_batch_within_memory(k, local, m):
    plan = split_batch(k * local, k, m)
    assert plan.local_batch == local and sum(plan.micro_batches) == local
    assert max(plan.micro_batches) <= m
    assert max(plan.micro_batches) - min(plan.micro_batches) <= 1
    assert plan.accumulation_steps == math.ceil(local / m)  # as few passes as memory allows


def test_split_batch_examples_and_errors():
    assert split_batch(128, 1, 64).micro_batches == (64, 64)
    assert split_batch(128, 2, 64).micro_batches == (64,)
    assert split_batch(100, 1, 64).micro_batches == (50, 50)
    with pytest.raises(ValidationError, match="multiple"):
        split_batch(100, 3, 64)
    with pytest.raises(ValidationError):
        split_batch(64, 0, 64)


def test_lr_rules():
    assert scaled_lr(0.1, 256, 1024, "linear") == pytest.approx(0.4)
    assert scaled_lr(0.1, 256, 1024, "sqrt") == pytest.approx(0.2)
    assert scaled_lr(0.1, 256, 64, "sqrt") == pytest.approx(0.05)
    assert scaled_lr(0.1, 256, 1024, "none") == 0.1
    with pytest.raises(ValidationError):
        scaled_lr(0.1, 256, 1024, "cubic")


def test_lr_ramp_goes_linearly_from_current_to_target():
    r = LRRamp(0.1, 0.1)
    assert r.lr_at(0) == r.lr_at(1000) == 0.1
    r2 = r.retarget(100, 0.2, ramp_steps=10)
    assert r2.lr_at(99) == pytest.approx(0.1)
    assert r2.lr_at(100) == pytest.approx(0.11)
    assert r2.lr_at(104) == pytest.approx(0.15)
    assert r2.lr_at(109) == r2.lr_at(500) == pytest.approx(0.2)
    # a change in the middle of a ramp starts from where the ramp was
    r3 = r2.retarget(105, 0.05, ramp_steps=5)
    assert r3.lr_from == pytest.approx(0.15) and r3.lr_at(109) == pytest.approx(0.05)
    assert r.retarget(5, 0.1, 10).lr_at(5) == 0.1  # same target: no ramp


@given(
    pos=st.integers(0, 10**6),
    b=st.sampled_from([64, 128, 256]),
    k=st.sampled_from([1, 2, 4]),
)
def test_rank_slices_partition_the_global_batch(pos, b, k):
    parts = [rank_slice(pos, b, k, r) for r in range(k)]
    assert parts[0][0] == pos and parts[-1][1] == pos + b
    for (s0, e0), (s1, _) in zip(parts, parts[1:]):
        assert e0 == s1 and e0 - s0 == b // k


@given(batches=st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([64, 128, 256])), min_size=1, max_size=20))
def test_resumed_stream_never_repeats_or_skips(batches):
    """Whatever (k, b) every step has, the consumed stream positions are exactly 0..total."""
    pos, seen = 0, []
    for k, b in batches:
        for r in range(k):
            s, e = rank_slice(pos, b, k, r)
            seen.extend(range(s, e))
        pos += b
    assert seen == list(range(pos))


def test_epoch_and_offset():
    assert epoch_and_offset(0, 100) == (0, 0)
    assert epoch_and_offset(250, 100) == (2, 50)


def test_actions_release_before_they_take():
    current = {"a": (4, 256), "b": (2, 128), "c": (1, 64), "d": None}
    target = {"a": (2, 128), "b": None, "c": (3, 192), "d": (2, 64)}
    kinds = [(a.kind, a.job_id) for a in plan_actions(current, target)]
    assert kinds == [("stop", "b"), ("rescale", "a"), ("rescale", "c"), ("start", "d")]
    used = sum(v[0] for v in current.values() if v)
    peak = used
    for act in plan_actions(current, target):
        cur = current[act.job_id]
        used += (act.gpus if act.kind != "stop" else 0) - (cur[0] if cur else 0)
        peak = max(peak, used)
    assert peak <= max(7, sum(v[0] for v in target.values() if v))


def test_checkpoint_files(tmp_path):
    for s in (100, 300, 200):
        checkpoint_path(tmp_path, s).parent.mkdir(parents=True, exist_ok=True)
        checkpoint_path(tmp_path, s).write_text("x")
    (tmp_path / "checkpoints" / ".ckpt-000000000400.pt.123.tmp").write_text("torn")
    assert [s for s, _ in list_checkpoints(tmp_path)] == [300, 200, 100]
    assert torn_checkpoint_samples(tmp_path) == 400
    prune_checkpoints(tmp_path, keep=2)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [300, 200]


def test_journal_survives_a_torn_last_line(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    j.append({"event": "generation_start", "job_id": "a", "generation": 1, "gpus": 2, "batch": 128,
              "devices": [0, 1], "pid": 1, "started_at": j.t0})  # fmt: skip
    j.append({"event": "throughput", "job_id": "a", "gpus": 2, "batch": 128, "samples_per_s": 10.0})
    with open(tmp_path / "journal.jsonl", "a") as f:
        f.write('{"event": "generation_end", "job_id": "a", "gen')  # killed mid-append
    state = replay(tmp_path / "journal.jsonl")
    assert state.jobs["a"].open_generation["generation"] == 1
    j2 = Journal(tmp_path / "journal.jsonl")  # restart: same origin, valid again
    assert j2.t0 == j.t0
    j2.append({"event": "completed", "job_id": "a", "samples_done": 5})
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["event"] == "completed"
    assert replay(tmp_path / "journal.jsonl").jobs["a"].completed_at is not None


def test_observed_throughput_overrides_prior():
    prior = MeasuredThroughput.from_rows([[1, 64, 100.0], [2, 128, 180.0]])
    m = ObservedThroughput(prior, smoothing=1.0)
    assert m.samples_per_s(2, 128) == 180.0
    m.observe(2, 128, 150.0)
    m.observe(4, 256, 300.0)
    m.observe(1, 64, float("nan"))
    assert m.samples_per_s(2, 128) == 150.0 and m.samples_per_s(1, 64) == 100.0
    assert m.candidates(4, 64, 256) == [(1, 64), (2, 128), (4, 256)]
    assert m.candidates(2, 64, 256) == [(1, 64), (2, 128)]
    assert m.name == "observed+measured"


def test_device_pool(monkeypatch):
    pool = DevicePool("cpu", (0, 1, 2))
    assert pool.acquire("a", 2) == [0, 1] and pool.acquire("b", 2) is None
    assert pool.acquire("b", 1) == [2] and pool.free() == []
    pool.release("a")
    assert pool.free() == [0, 1] and pool.claim("c", [0]) and not pool.claim("d", [2])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert detect_gpus() == [3, 5]
    assert DevicePool.detect(gpus=2).ids == (3, 5)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect_gpus() == []
    assert DevicePool.detect().kind == "cpu"
    assert DevicePool.detect(cpu_slots_n=5).ids == (0, 1, 2, 3, 4)
    with pytest.raises(Exception, match="--cpu-slots"):
        DevicePool.detect(gpus=1)
