"""``verify`` reuses what ``Job.typed_options`` enumerated for the same job and cluster objects
(``solvers/verify.py`` ``_typed_options``; the service's job cache hands the same objects from request to
request): a report equals the one of a fresh enumeration, and another cluster or another job object is
enumerated afresh."""

from __future__ import annotations

import copy
import importlib
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem
from elasticopt.solvers import solve, verify
from elasticopt.testing.strategies import general_problems, problems

from test_verify_per_option import _allocations

verify_module = importlib.import_module("elasticopt.solvers.verify")  # (the package's `verify` is the function)


def _fresh(problem: Problem) -> Problem:
    """The same problem with copies of its jobs and cluster (other objects: nothing to reuse)."""
    return replace(problem, cluster=copy.copy(problem.cluster), jobs=tuple(copy.copy(j) for j in problem.jobs))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=st.one_of(problems(), general_problems()), data=st.data())
def test_a_report_is_the_one_of_a_fresh_enumeration(problem, data):
    sol = data.draw(_allocations(problem))
    first = verify(problem, sol)
    again = verify(problem, sol)  # every allocated job's options reused
    assert again == first == verify(_fresh(problem), sol)
    if first.objective is not None:  # the recomputed objective claimed: the rest of the report checked too
        claimed = replace(sol, objective=first.objective, objective_value=first.objective_value)
        assert verify(problem, claimed) == verify(_fresh(problem), claimed)


def test_the_same_job_on_a_smaller_cluster_is_enumerated_again():
    job = Job("a", MeasuredThroughput({(1, 32): 100.0, (4, 128): 300.0}), 32, 128, 32)
    big, small = Problem(Cluster(4, 4), (job,), objective="throughput"), Problem(Cluster(2, 4), (job,),
                                                                                   objective="throughput")
    sol = solve(big, "dp")
    assert sol.allocation == {"a": (4, 128)} and verify(big, sol).ok
    report = verify(small, sol)  # the same Job object: its 4-GPU option does not exist on 2 GPUs
    assert not report.ok and "is not a feasible option" in " ".join(report.errors)


def test_the_memo_is_bounded_and_keeps_its_objects():
    job = Job("a", MeasuredThroughput({(1, 32): 100.0}), 32, 32, 32)
    cluster = Cluster(4, 4)
    opts = verify_module._typed_options(job, cluster, False)
    assert opts == job.typed_options(cluster, False)
    assert verify_module._typed_options(job, cluster, False) is opts  # reused
    hit = verify_module._OPTIONS[(id(job), id(cluster), False, None)]
    assert hit[0] is job and hit[1] is cluster
    for i in range(verify_module._OPTIONS_MAX + 1):
        verify_module._typed_options(Job(f"j{i}", MeasuredThroughput({(1, 32): 1.0}), 32, 32, 32), cluster, False)
    assert len(verify_module._OPTIONS) <= verify_module._OPTIONS_MAX


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=st.one_of(problems(), general_problems()), data=st.data())
def test_prices_are_not_reused_across_objectives_or_penalties(problem, data):
    """The priced options of a job (``_PRICED``) are reused for the same job and cluster objects only under the
    same objective and rescale penalty: the same objects in a problem that prices them otherwise are priced
    afresh (the report equals a fresh enumeration's)."""
    sol = data.draw(_allocations(problem))
    verify(problem, sol)  # prices every allocated job under the first problem's objective and penalty
    other = replace(problem,
                    objective=data.draw(st.sampled_from(["speedup", "throughput", problem.objective])),
                    rescale_penalty=data.draw(st.sampled_from([0.0, 0.25, problem.rescale_penalty])))
    assert verify(other, sol) == verify(_fresh(other), sol)
