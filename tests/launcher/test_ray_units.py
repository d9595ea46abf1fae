"""Pure parts of the multi-node launcher: packed-first device choice, placement groups, job state machine, extras."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticopt.errors import LauncherError
from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.launch_state import TRANSITIONS, LaunchState, LaunchedJob, StopMode
from elasticopt.launcher.ray_backend import placement_for
from elasticopt.scheduling.executor import Phase
from launcher_helpers import fake_spec


def pool_of(sizes: list[int], kind: str = "cpu") -> DevicePool:
    nodes = tuple(f"n{i}" for i, size in enumerate(sizes) for _ in range(size))
    return DevicePool(kind, tuple(range(len(nodes))), nodes)


def test_acquire_packs_on_one_node_best_fit_then_fewest_nodes():
    pool = pool_of([4, 2, 2])
    assert pool.gpus_per_node == 4
    assert pool.acquire("a", 2) == [4, 5]  # the smallest node that holds 2
    assert pool.acquire("b", 3) == [0, 1, 2]  # only n0 holds 3
    assert pool.acquire("c", 3) == [6, 7, 3]  # nobody holds 3: n2 (2 free) then n0 (1 free)
    assert pool.acquire("d", 1) is None
    pool.release("b")
    pool.retire("n0")  # the node left the cluster
    assert pool.free() == [] and pool.acquire("e", 1) is None


@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5), wants=st.lists(st.integers(1, 6), max_size=8))
def test_acquire_never_double_books_and_spans_as_few_nodes_as_possible(sizes, wants):
    pool = pool_of(sizes)
    held: dict[str, list[int]] = {}
    for i, k in enumerate(wants):
        free_by_node = {}
        for d in pool.free():
            free_by_node[pool.node_of(d)] = free_by_node.get(pool.node_of(d), 0) + 1
        got = pool.acquire(f"j{i}", k)
        if got is None:
            assert k > len(pool.free())
            continue
        held[f"j{i}"] = got
        assert len(got) == k and len(set(got)) == k
        # fewest nodes: as many as the largest free counts need
        need, left = 0, k
        for c in sorted(free_by_node.values(), reverse=True):
            if left <= 0:
                break
            need, left = need + 1, left - c
        assert len({pool.node_of(d) for d in got}) == need
    flat = [d for ds in held.values() for d in ds]
    assert len(flat) == len(set(flat))


def test_placement_group_per_generation():
    pool = pool_of([2, 2], kind="cuda")
    bundles, strategy, labels = placement_for(pool, [0, 1])
    assert bundles == [{"GPU": 1.0}] * 2 and strategy == "STRICT_PACK"
    assert labels == [{"ray.io/node-id": "n0"}] * 2
    bundles, strategy, labels = placement_for(pool_of([1, 1, 1]), [0, 2])
    assert bundles == [{"CPU": 1.0}] * 2 and strategy == "SPREAD"
    assert [lab["ray.io/node-id"] for lab in labels] == ["n0", "n2"]  # rank r on the node of device r


def test_job_state_machine_refuses_illegal_moves_and_derives_the_phase():
    job = LaunchedJob(fake_spec("a"))
    assert job.phase is Phase.QUEUED
    with pytest.raises(LauncherError, match="queued -> starting"):
        job.move(LaunchState.STARTING)  # a generation is launched only once it is pending
    for state, phase in [(LaunchState.PENDING, Phase.RESTARTING), (LaunchState.STARTING, Phase.RESTARTING),
                         (LaunchState.RUNNING, Phase.RUNNING), (LaunchState.STOPPING, Phase.RESTARTING)]:  # fmt: skip
        job.move(state)
        assert job.phase is phase
    job.stop_mode = StopMode.PREEMPT
    assert job.phase is Phase.QUEUED  # a preempted job is back in the queue while it stops
    job.move(LaunchState.COMPLETED)
    assert job.finished and not job.live
    for state in LaunchState:
        with pytest.raises(LauncherError):
            job.move(state)
    assert all(s in TRANSITIONS for s in LaunchState) and not TRANSITIONS[LaunchState.FAILED]


def test_base_package_and_launcher_import_without_torch_or_ray():
    code = (
        "import sys\n"
        "for m in ('torch', 'ray'): sys.modules[m] = None\n"
        "import elasticopt, elasticopt.launcher, elasticopt.launcher.driver, elasticopt.cli.launch\n"
        "import elasticopt.launcher.ray_worker\n"
        "from elasticopt.launcher.driver import make_executor\n"
        "from elasticopt.launcher.devices import DevicePool\n"
        "from elasticopt.errors import LauncherError\n"
        "import tempfile\n"
        "try:\n"
        "    make_executor('ray', tempfile.mkdtemp(), DevicePool('cpu', (0,)))\n"
        "except LauncherError as e:\n"
        "    assert \"pip install 'elasticopt[ray]'\" in str(e), e\n"
        "else:\n"
        "    raise SystemExit('the ray backend should need ray')\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


def test_gpu_launcher_check_refuses_without_a_gpu():
    import os
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "validation" / "gpu_launcher_check.py"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # this machine, whatever it has, seen without GPUs
    res = subprocess.run([sys.executable, str(script), "--backend", "both"], capture_output=True, text=True,
                         env=env, timeout=120)  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "no GPU on this machine" in res.stderr and "Nothing was run" in res.stderr and res.stdout == ""
