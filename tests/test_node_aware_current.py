"""A running job's current option in node-aware problems: found where the profile lists no packed option.

A node-aware profile lists a packed option at (type, k, b) only where packing is faster than
spreading; where k GPUs cannot be spread over more nodes than ceil(k / g) (16 GPUs on a pool of
2 x 8) the two rates are equal and the table has the unpacked option alone.  A job running there on
its fewest nodes keeps that option as its current one (``objectives.current_key``'s rule), in the
compiler (``kernels.current_mask``) and in ``job_values`` (verify, brute force) alike.  Before, it
had no current option: every option, staying included, paid the rescale penalty.
"""

from __future__ import annotations

import math

import elasticopt
from elasticopt.models import Cluster, Job, Problem, compile_problem
from elasticopt.models.objectives import job_values
from elasticopt.models.problem import Pool, Running
from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.hetero import cluster_preset, generate_hetero_workload
from elasticopt.scheduling.policies.elastic import ElasticPolicy
from elasticopt.testing.brute import brute_force


class NodeAware:
    """k x 100 samples/s packed (on ceil(k / 8) nodes), 0.8 of that spread over more nodes."""

    name = "node-aware-toy"

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        return self.samples_per_s_on_nodes(gpus, batch, -(-gpus // 8))

    def samples_per_s_on_nodes(self, gpus: int, batch: int, nodes: int) -> float | None:
        if gpus < 1 or batch < gpus:
            return None
        return 100.0 * gpus * (1.0 if nodes <= -(-gpus // 8) else 0.8)

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        return [(k, b) for k in (1, 2, 4, 8, 16) if k <= gpus_max for b in (64, 256) if batch_min <= b <= batch_max]


def _problem(nodes: tuple[int, ...], gpus: int = 16) -> Problem:
    job = Job(id="a", throughput=NodeAware(), batch_min=64, batch_max=256, max_local=256,
              running=Running(gpus, 256, "a100", nodes), remaining_samples=1e6)
    other = Job(id="b", throughput=NodeAware(), batch_min=64, batch_max=256, max_local=256, remaining_samples=1e6)
    cluster = Cluster(pools={"a100": Pool(nodes=2, gpus_per_node=8)})
    return Problem(cluster=cluster, jobs=(job, other), node_aware=True, rescale_penalty=0.5)


def test_job_on_its_fewest_nodes_without_a_packed_option_keeps_its_unpacked_one():
    problem = _problem((0, 1))  # 16 GPUs on both nodes: packed, and no more spread is possible
    table = compile_problem(problem)
    j = table.job_ids.index("a")
    o = int(table.current_option[j])
    assert o >= 0
    assert (int(table.gpus[j, o]), int(table.batch[j, o]), bool(table.packed[j, o])) == (16, 256, False)
    assert not (table.packed[j] & table.valid[j] & (table.gpus[j] == 16)).any()  # no packed option at k = 16
    # job_values (verify, brute force) match the same option: staying pays no penalty, moving pays 0.5
    job = problem.jobs[0]
    opts = job.typed_options(problem.cluster, node_aware=True)
    vals = job_values(problem, job, opts)
    stay = next(v for op, v in zip(opts, vals) if (op.gpus, op.batch) == (16, 256))
    move = next(v for op, v in zip(opts, vals) if (op.gpus, op.batch) == (16, 64))
    assert math.isclose(stay - move, 0.5)
    # every exact backend and brute force agree, and verify accepts the result
    best = brute_force(problem)
    for name in ("dp", "milp"):
        sol = elasticopt.solve(problem, name)
        assert elasticopt.verify(problem, sol).ok
        assert sol.objective == best


def test_job_with_a_packed_option_matches_it_and_a_spread_one_its_unpacked_one():
    four = _problem((0,), gpus=4)  # 4 GPUs on one node: packed, and a packed option exists (faster)
    table = compile_problem(four)
    j = table.job_ids.index("a")
    o = int(table.current_option[j])
    assert (int(table.gpus[j, o]), bool(table.packed[j, o])) == (4, True)
    spread = _problem((0, 1), gpus=4)  # the same 4 GPUs over two nodes: the unpacked option
    table = compile_problem(spread)
    o = int(table.current_option[table.job_ids.index("a")])
    assert (int(table.gpus[0, o]), bool(table.packed[0, o])) == (4, False)


def test_node_aware_run_offers_running_jobs_their_packed_options_and_current_option():
    """sia-64 node-aware: every running job has its current option; running jobs are offered packed options."""
    seen = {"running": 0, "no_current": 0, "with_packed": 0}

    class Watched(ElasticPolicy):
        def allocate(self, snapshot):
            if snapshot.jobs:
                t = self.build_table(snapshot)
                for j, jid in enumerate(t.job_ids):
                    if jid in t.running_ids:
                        seen["running"] += 1
                        seen["no_current"] += int(t.current_option[j] < 0)
                        seen["with_packed"] += int((t.packed[j] & t.valid[j]).any())
            return super().allocate(snapshot)

    Watched.option_filter = ElasticPolicy.option_filter
    cl = cluster_preset("sia-64")
    jobs = generate_hetero_workload(40, cl, 1.5, seed=4)
    res = simulate(jobs, Watched(node_aware=True), SimulationConfig(gpus=cl.gpus, cluster=cl, node_aware=True))
    assert res.metrics.completed == 40
    assert seen["running"] > 100
    assert seen["no_current"] == 0  # was most of them (370 of 431 running rows on 60 jobs)
    assert seen["with_packed"] > seen["running"] // 2  # was none
