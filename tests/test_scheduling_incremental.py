"""Incremental compile (TypedCompile) builds exactly the table compile_problem builds; hysteresis."""

from __future__ import annotations

import numpy as np
import pytest

from elasticopt.models import compile_problem
from elasticopt.models.reductions import compile_reduced
from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.workload_generator import generate_workload
from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.policies.elastic import ElasticPolicy
from elasticopt.scheduling.policies.fixed_batch import FixedBatchPolicy

TABLE_FIELDS = ("gpus", "batch", "utility", "value", "samples_per_s", "valid", "idle_allowed", "current_option",
                "gpu_type", "packed", "capacities")


def assert_same_table(fast, slow):
    assert fast.job_ids == slow.job_ids
    assert (fast.capacity, fast.scale, fast.tie_scale) == (slow.capacity, slow.scale, slow.tie_scale)
    assert fast.running_ids == slow.running_ids
    assert (fast.types, fast.pools, fast.stats) == (slow.types, slow.pools, slow.stats)
    for name in TABLE_FIELDS:
        a, b = getattr(fast, name), getattr(slow, name)
        assert a.shape == b.shape, name
        assert np.array_equal(a, b), name


def checking(cls, reduced=False):
    class Checked(cls):
        checked = 0

        def allocate(self, snapshot):
            if snapshot.jobs:
                assert_same_table(self.build_table(snapshot), compile_problem(self.build_problem(snapshot)))
                if reduced:  # what the policy solves: the table solve() compiles and reduces from the problem
                    assert_same_table(self.build_table(snapshot, reduced=True),
                                      compile_reduced(self.build_problem(snapshot)))
                type(self).checked += 1
            return super().allocate(snapshot)

    Checked.option_filter = cls.option_filter
    return Checked


@pytest.mark.parametrize(
    "cls, objective, progress, preempt, rule",
    [
        (ElasticPolicy, "speedup", "samples", False, Hysteresis()),
        (ElasticPolicy, "goodput", "goodput", False, Hysteresis(min_gain=0.1, payback_factor=2.0)),
        (ElasticPolicy, "throughput", "samples", True, Hysteresis(min_gain=0.3)),
        (ElasticPolicy, "completion", "goodput", False, Hysteresis()),
        (FixedBatchPolicy, "speedup", "goodput", False, Hysteresis(min_gain=0.2)),
        (ElasticPolicy, "pollux", "goodput", False, Hysteresis()),
        (ElasticPolicy, "pollux:0.05", "samples", False, Hysteresis(min_gain=0.1)),
    ],
)
def test_incremental_table_equals_compiled_table_at_every_decision(cls, objective, progress, preempt, rule):
    if objective.startswith("pollux:"):
        from elasticopt.scheduling.policies.pollux import _objective_for

        assert _objective_for(float(objective.split(":")[1])) == objective
    jobs = generate_workload(60, 32, 1.5, seed=3)
    pol = checking(cls)(objective=objective, allow_preemption=preempt, hysteresis=rule, priority="srpt")
    assert pol._uses_cache()
    cfg = SimulationConfig(gpus=32, gpus_per_node=4, progress=progress, hysteresis=rule, tick_s=3600.0)
    res = simulate(jobs, pol, cfg)
    assert res.metrics.completed == 60
    assert type(pol).checked >= 60


def test_incremental_and_compiled_paths_give_the_same_run():
    jobs = generate_workload(50, 16, 2.0, seed=5)
    cfg = SimulationConfig(gpus=16, gpus_per_node=4)
    a = simulate(jobs, ElasticPolicy(incremental=True), cfg)
    b = simulate(jobs, ElasticPolicy(incremental=False), cfg)
    assert [(r.job_id, r.completion_s, r.rescales) for r in a.records] == [
        (r.job_id, r.completion_s, r.rescales) for r in b.records
    ]


def test_overridden_filter_falls_back_to_compiling():
    class Mine(ElasticPolicy):
        def option_filter(self, state):
            return lambda k, b: k <= 2

    assert not Mine()._uses_cache()
    res = simulate(generate_workload(20, 16, 1.0, seed=1), Mine(), SimulationConfig(gpus=16))
    assert all(r.final_gpus <= 2 for r in res.records)



def test_policy_solves_the_table_without_nodes_and_only_placement_is_left_out():
    """One pool, no packed options: the nodeless table the policy solves is the table minus its pools."""
    from elasticopt.solvers import solve

    checked = []

    class Both(ElasticPolicy):
        def allocate(self, snapshot):
            if snapshot.jobs:
                full, bare = self.build_table(snapshot), self.build_table(snapshot, nodes=False)
                assert bare.pools is None and full.pools == tuple(snapshot.cluster.pools.values())
                for name in TABLE_FIELDS:
                    assert np.array_equal(getattr(full, name), getattr(bare, name)), name
                a, b = solve(full, "dp"), solve(bare, "dp")
                assert (a.objective, a.allocation) == (b.objective, b.allocation)
                assert set(a.placement) == {j for j, kb in a.allocation.items() if kb} and b.placement == {}
                checked.append(1)
            return super().allocate(snapshot)

    res = simulate(generate_workload(40, 16, 1.5, seed=2), Both(), SimulationConfig(gpus=16, gpus_per_node=4))
    assert res.metrics.completed == 40 and len(checked) >= 40


@pytest.mark.parametrize(
    "cls, cluster, node_aware, objective, progress, rule",
    [
        (ElasticPolicy, "sia-64", True, "speedup", "samples", Hysteresis(min_interval_restarts=15.0)),
        (ElasticPolicy, "sia-64", False, "goodput", "goodput", Hysteresis(min_gain=0.1, payback_factor=2.0)),
        (ElasticPolicy, "k80:2x4,p100:3x8,v100:4x2", True, "throughput", "goodput", Hysteresis()),
        (FixedBatchPolicy, "k80:2x4,p100:3x8,v100:4x2", True, "speedup", "samples", Hysteresis(min_gain=0.2)),
        (ElasticPolicy, "a100:4x4", True, "completion", "samples", Hysteresis()),
        (ElasticPolicy, "sia-64", True, "pollux", "goodput", Hysteresis()),
    ],
)
def test_incremental_table_equals_compiled_table_on_several_types_and_node_aware(cls, cluster, node_aware,
                                                                                  objective, progress, rule):
    """Several GPU types and node-aware (packed) profiles: the incremental table is the compiled one."""
    from elasticopt.scheduling.hetero import cluster_preset, generate_hetero_workload

    cl = cluster_preset(cluster)
    jobs = generate_hetero_workload(40, cl, 1.5, seed=4)
    pol = checking(cls, reduced=True)(objective=objective, hysteresis=rule, priority="srpt", node_aware=node_aware)
    assert pol._uses_cache(cl)
    cfg = SimulationConfig(gpus=cl.gpus, cluster=cl, node_aware=node_aware, progress=progress, hysteresis=rule)
    res = simulate(jobs, pol, cfg)
    assert res.metrics.completed == 40
    assert type(pol).checked >= 40


@pytest.mark.parametrize("node_aware", [True, False])
def test_incremental_and_compiled_paths_give_the_same_run_on_several_types(node_aware):
    from elasticopt.scheduling.hetero import cluster_preset, generate_hetero_workload

    cl = cluster_preset("sia-64")
    jobs = generate_hetero_workload(40, cl, 1.5, seed=6)
    cfg = SimulationConfig(gpus=cl.gpus, cluster=cl, node_aware=node_aware)
    a = simulate(jobs, ElasticPolicy(incremental=True, node_aware=node_aware), cfg)
    b = simulate(jobs, ElasticPolicy(incremental=False, node_aware=node_aware), cfg)
    assert [(r.job_id, r.completion_s, r.rescales, r.final_gpus) for r in a.records] == [
        (r.job_id, r.completion_s, r.rescales, r.final_gpus) for r in b.records
    ]
    import dataclasses

    def figures(m):  # everything but the wall times of the decisions
        return {k: v for k, v in dataclasses.asdict(m).items() if not k.startswith(("decision_s", "solver_s"))}

    assert figures(a.metrics) == figures(b.metrics)
