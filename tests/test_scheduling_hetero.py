"""Heterogeneous clusters and placement through the simulator: conservation laws GPU by GPU, moves, policies."""

import json
import math
import subprocess
import sys
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.models.problem import Pool
from elasticopt.scheduling import SimulationConfig, get_policy, option_error, simulate
from elasticopt.scheduling.actions import Action
from elasticopt.scheduling.autoscaler import Autoscaler
from elasticopt.scheduling.hetero import cluster_preset, generate_hetero_workload
from elasticopt.scheduling.placing import order_for_gpus, place_targets
from elasticopt.scheduling.simulated import SimulatedExecutor
from elasticopt.scheduling.state import Allocation
from elasticopt.testing.toy import toy_job, toy_throughput

TYPES = ("a100", "t4", "v100")
SPEED = {"a100": 0.002, "t4": 0.01, "v100": 0.005}  # seconds per sample of the toy models, per type
POLICIES = ["elastic", "fixed-batch", "elastic-goodput", "static", "static-backfill", "tiresias"]


@st.composite
def hetero_runs(draw):
    n_types = draw(st.integers(1, 3))
    types = TYPES[:n_types]
    pools = {t: Pool(draw(st.integers(1, 3)), draw(st.sampled_from([2, 4, 8]))) for t in types}
    cluster = Cluster(pools=pools)
    jobs = []
    for i in range(draw(st.integers(1, 7))):
        mine = tuple(t for t in types if draw(st.booleans())) or (types[0],)
        models = {t: toy_throughput(per_sample_s=SPEED[t], sync_s=draw(st.sampled_from([0.0, 0.05])), name=f"toy-{t}")
                  for t in mine}
        sub = draw(st.sampled_from(mine))
        k = draw(st.sampled_from([k for k in (1, 2, 4) if k <= pools[sub].gpus]))
        jobs.append(toy_job(
            f"j{i}", arrival_s=draw(st.sampled_from([0.0, 0.0, 10.0, 300.0])), total_samples=draw(st.floats(1e3, 3e4)),
            submitted_gpus=k, submitted_batch=k * 16, model=models[sub], throughputs=models, submitted_type=sub,
            types=mine if draw(st.booleans()) else None,
        ))
    return cluster, jobs


def check_gpus(cluster: Cluster, jobs, res) -> None:
    """Every stretch on exactly its GPUs, of one type the job may use, that exist; no GPU held twice at once."""
    exists = {(t, n, i) for t, p in cluster.pools.items() for n, ix in enumerate(p.free_gpus()) for i in ix}
    by_id = {j.id: j for j in jobs}
    per_gpu = defaultdict(list)
    for s in res.segments:
        t, nodes = s.placement
        gpus = [(t, n, i) for n, ix in nodes for i in ix]
        assert len(gpus) == len(set(gpus)) == s.gpus, s
        assert set(gpus) <= exists, s
        assert by_id[s.job_id].model_for(t) is not None, s
        assert option_error(by_id[s.job_id], s.gpus, s.batch, cluster.capacity(t), t) is None
        for g in gpus:
            per_gpu[g].append((s.start_s, s.end_s, s.job_id))
    for g, spans in per_gpu.items():
        spans.sort()
        for (a0, a1, ja), (b0, b1, jb) in zip(spans, spans[1:]):
            assert b0 >= a1, f"GPU {g} held by {ja} until {a1} and by {jb} from {b0}"
    for t, pool in cluster.pools.items():  # never more of a pool's GPUs in use than it has
        events = sorted((x, d) for s in res.segments if s.placement[0] == t
                        for x, d in ((s.start_s, s.gpus), (s.end_s, -s.gpus)))
        used = 0
        for _, d in sorted(events, key=lambda e: (e[0], e[1])):
            used += d
            assert used <= pool.gpus


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hetero_runs(), st.sampled_from(POLICIES), st.sampled_from([0.0, 30.0]))
def test_conservation_laws_on_heterogeneous_clusters(run, policy, restart_cost_s):
    cluster, jobs = run
    pol = get_policy(policy, solver="numpy-dp")
    checked = []

    def on_decision(d, scaler):  # at every decision: the executor's GPUs are the pools', each held once
        held = scaler.executor.held()
        assert sum(1 for _ in held) == sum(scaler.executor.progress(j).gpus for j in scaler.active_ids)
        checked.append(len(held))

    cfg = SimulationConfig(gpus=cluster.gpus, cluster=cluster, restart_cost_s=restart_cost_s, seed=1)
    res = simulate(jobs, pol, cfg, keep_segments=True, on_decision=on_decision)
    by_id = {j.id: j for j in jobs}
    for r in res.records:  # every job completes, having processed exactly its samples
        assert r.status == "completed" and r.samples_done == by_id[r.job_id].total_samples
        segs = [s for s in res.segments if s.job_id == r.job_id]
        assert math.isclose(sum(s.samples for s in segs), by_id[r.job_id].total_samples, rel_tol=1e-9)
    check_gpus(cluster, jobs, res)
    if policy in ("static", "static-backfill", "tiresias"):  # type-blind: each job on its submitted type
        assert all(s.placement[0] == by_id[s.job_id].submitted_type for s in res.segments)
    assert checked


def test_sia_cluster_node_aware_run_with_real_profiles():
    cluster = cluster_preset("sia-64")
    jobs = generate_hetero_workload(40, cluster, 2.0, seed=4)
    res = simulate(jobs, "elastic", SimulationConfig(gpus=64, cluster=cluster, node_aware=True), keep_segments=True)
    assert res.metrics.completed == 40
    check_gpus(cluster, jobs, res)
    assert len({s.placement[0] for s in res.segments}) == 3  # every pool used


def test_a_move_to_another_type_is_a_rescale():
    cluster = Cluster(pools={"a": Pool(1, 2), "b": Pool(1, 2)})
    job = toy_job("j", total_samples=1e6, submitted_gpus=1, submitted_batch=16)

    class Mover:
        name = "mover"
        where = "a"

        def allocate(self, snap):
            return Allocation({"j": (1, 16)}, gpu_types={"j": self.where})

    pol = Mover()
    ex = SimulatedExecutor(cluster=cluster)
    scaler = Autoscaler(ex, cluster, pol, restart_cost_s=5.0, payback=False)
    scaler.submit(job)
    assert ex.placement("j") == ("a", ((0, (0,)),))
    scaler.tick()  # same target: nothing happens
    assert scaler.records()[0].rescales == 0
    pol.where = "b"
    d = scaler.tick()
    assert [(a.kind, a.placement) for a in d.actions] == [("rescale", ("b", ((0, (0,)),)))]
    assert ex.placement("j")[0] == "b" and scaler.records()[0].rescales == 1
    assert scaler.records()[0].restart_s == 10.0  # the start and the move each paid the restart


def test_keep_in_place_move_the_fewest_then_fall_back_to_the_proposal_for_a_packed_job():
    cluster = Cluster(pools={"g": Pool(2, 4)})
    held = {"x": ("g", ((0, (0, 1)),)), "y": ("g", ((1, (0,)),))}
    got = place_targets(cluster, {"x": ("g", 2, False), "y": ("g", 1, False), "z": ("g", 3, False)}, held)
    assert got["x"] == held["x"] and got["y"] == held["y"]  # unchanged jobs stay
    assert sum(len(ix) for _, ix in got["z"][1]) == 3
    # a packed 4-GPU job needs a whole node; keeping x and y spreads it: the smaller, y, moves, x stays
    want = {"x": ("g", 2, False), "y": ("g", 1, False), "z": ("g", 4, True)}
    got = place_targets(cluster, want, held)
    assert got == {"x": held["x"], "y": ("g", ((0, (2,)),)), "z": ("g", ((1, (0, 1, 2, 3)),))}
    # three packed 4-GPU jobs on four nodes each holding a 1-GPU job: three of those must move, past the
    # pairs the placer tries: the pool is packed from scratch, and the proposal is used
    cluster = Cluster(pools={"g": Pool(4, 4)})
    held = {f"r{i}": ("g", ((i, (0,)),)) for i in range(4)}
    want = {**{f"r{i}": ("g", 1, False) for i in range(4)}, **{f"z{i}": ("g", 4, True) for i in range(3)}}
    proposal = {**{f"r{i}": ("g", ((3, (i,)),)) for i in range(4)}, **{f"z{i}": ("g", ((i, (0, 1, 2, 3)),))
                                                                       for i in range(3)}}
    got = place_targets(cluster, want, held, proposal)
    assert got == proposal
    with pytest.raises(ValidationError, match="z"):  # a proposal that does not fit is refused
        place_targets(cluster, want, held, {**proposal, "z0": ("g", ((3, (0, 1, 2, 3)),))})


def test_jobs_trading_gpus_are_ordered_or_stopped_and_restarted():
    held = {"a": ("g", ((0, (0,)),)), "b": ("g", ((0, (1,)),))}
    swap = [Action("rescale", "a", 1, 8, ("g", ((0, (1,)),))), Action("rescale", "b", 1, 8, ("g", ((0, (0,)),)))]
    out = order_for_gpus(swap, held)
    assert [(a.kind, a.job_id) for a in out] == [("stop", "a"), ("rescale", "b"), ("start", "a")]
    chain = [Action("rescale", "a", 1, 8, ("g", ((0, (1,)),))), Action("stop", "b")]
    assert [(a.kind, a.job_id) for a in order_for_gpus(chain, held)] == [("stop", "b"), ("rescale", "a")]


@pytest.mark.parametrize("policy", ["greedy", "optimus"])
def test_type_blind_policies_refuse_several_types(policy):
    cluster = cluster_preset("t4:1x4,a100:1x4")
    jobs = generate_hetero_workload(5, cluster, 1.0, seed=0)
    with pytest.raises(ValidationError, match=f"policy '{policy}'.*one GPU type"):
        simulate(jobs, policy, SimulationConfig(gpus=8, cluster=cluster))


def test_a_policy_that_names_no_type_is_refused_on_several_types():
    cluster = cluster_preset("t4:1x4,a100:1x4")

    class Blind:
        name = "blind"

        def allocate(self, snap):
            return Allocation({j.id: (1, j.spec.batch_submitted) for j in snap.jobs[:1]})

    jobs = generate_hetero_workload(3, cluster, 1.0, seed=0)
    with pytest.raises(ValidationError, match="blind.gpu_types"):
        simulate(jobs, Blind(), SimulationConfig(gpus=8, cluster=cluster))


def test_cluster_presets_and_errors(tmp_path):
    sia = cluster_preset("sia-64")
    assert {t: (p.nodes, p.gpus_per_node) for t, p in sia.pools.items()} == {"t4": (6, 4), "a100": (2, 8), "v100": (3, 8)}
    assert cluster_preset("t4:2x4,a100:1x8").gpus == 16
    f = tmp_path / "pools.json"
    f.write_text(json.dumps({"pools": {"k80": {"nodes": 2, "gpus_per_node": 4}}}))
    assert cluster_preset(f).types == ("k80",)
    f.write_text(json.dumps({"pools": {"k80": {"nodes": 0, "gpus_per_node": 4}}}))
    with pytest.raises(ValidationError, match=r"pools\.k80"):
        cluster_preset(f)
    for bad in ("sia", "t4:2by4", "nonsense"):
        with pytest.raises(ValidationError, match="--cluster"):
            cluster_preset(bad)


def test_hetero_workload_is_seeded_and_feasible():
    cluster = cluster_preset("sia-64")
    a = generate_hetero_workload(30, cluster, 1.5, seed=7)
    assert a == generate_hetero_workload(30, cluster, 1.5, seed=7) and len(a) == 30
    for j in a:
        assert set(j.throughputs) <= set(cluster.types) and j.submitted_type in j.throughputs
        t = j.submitted_type
        assert option_error(j, j.submitted_gpus, j.batch_submitted, cluster.capacity(t), t) is None


def test_cli_simulates_a_heterogeneous_cluster(tmp_path):
    cmd = [sys.executable, "-m", "elasticopt", "simulate", "--cluster", "sia-64", "--jobs", "12", "--load", "1.5",
           "--policy", "elastic", "--policy", "static", "--quiet", "--out", str(tmp_path)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["config"]["cluster"]["pools"]) == {"t4", "a100", "v100"}
    assert summary["metrics"]["elastic"]["completed"] == 12
    bad = subprocess.run(cmd[:5] + ["bogus", "--quiet"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--cluster" in bad.stderr and "Traceback" not in bad.stderr


def test_hetero_workload_files_round_trip_and_errors(tmp_path):
    from elasticopt.errors import InstanceError
    from elasticopt.scheduling.workload import job_from_dict, load_workload, save_workload

    cluster = cluster_preset("sia-64")
    jobs = generate_hetero_workload(20, cluster, 1.5, seed=2)
    f = tmp_path / "w.json"
    save_workload(jobs, f)
    assert load_workload(f) == jobs
    with pytest.raises(ValidationError, match="use .json"):
        save_workload(jobs, tmp_path / "w.csv")
    d = {"id": "x", "arrival_s": 0, "duration_s": 60, "profiles": {"t4": "t4/imagenet", "a100": "a100/resnet50"},
         "types": ["a100"]}
    spec = job_from_dict(d)
    assert spec.submitted_type == "a100" and spec.model_for("t4") is None and spec.throughput.name == "a100/resnet50"
    for bad, where in (({**d, "profile": "t4/imagenet"}, "jobs\\[0\\]"), ({**d, "types": ["k80"]}, "types"),
                       ({**d, "submitted_type": "t4"}, "submitted_type"), ({**d, "profiles": {"t4": "nope"}}, "profiles.t4"),
                       ({"id": "y", "arrival_s": 0, "duration_s": 1, "profile": "t4/imagenet", "types": ["t4"]}, "types")):
        with pytest.raises(InstanceError, match=where):
            job_from_dict(bad)


def test_cli_generates_a_hetero_workload_and_simulates_it(tmp_path):
    f = tmp_path / "w.json"
    gen = subprocess.run([sys.executable, "-m", "elasticopt", "simulate", "--generate", str(f), "--cluster", "sia-64",
                          "--jobs", "10"], capture_output=True, text=True, timeout=300)
    assert gen.returncode == 0, gen.stderr
    run = subprocess.run([sys.executable, "-m", "elasticopt", "simulate", str(f), "--cluster", "sia-64", "--policy",
                          "static", "--quiet"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "10/10" in run.stdout, run.stderr
