"""``verify``'s fast path under per-option objectives, beside its reference (the full option list).

Under an objective whose ``per_option`` flag is set, ``verify`` enumerates each allocated job's options at the
chosen (type, k, b) only.  These tests hold it to the reference, ``verify``
of the same problem under a twin of the objective without the flag (every option of every job enumerated):

- on random one-type and general problems, random allocations (the jobs' own options, idle, and options they do
  not have), with and without the rescale penalty, the two reports are equal, field by field;
- the flag is true only where it may be: the built-in per-option objectives price every option of every job
  alike whether the job's other options are there or not, and by hand ``speedup`` does not (its value divides
  by the job's best rate over all its options), so it keeps the flag off.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem
from elasticopt.models.objectives import _REGISTRY, Objective, get_objective, job_values, objective_names
from elasticopt.solvers import Solution, Status, verify
from elasticopt.testing.strategies import general_problems, problems

PER_OPTION = tuple(n for n in objective_names() if get_objective(n).per_option)


def test_the_built_in_flags():
    assert PER_OPTION == ("throughput", "completion", "value")
    assert not any(get_objective(n).per_option for n in ("speedup", "goodput", "pollux"))


@contextlib.contextmanager
def _references():
    """Each per-option objective registered again as ``NAME.reference``, without the flag."""
    names = []
    try:
        for n in PER_OPTION:
            o = get_objective(n)
            _REGISTRY[f"{n}.reference"] = Objective(f"{n}.reference", o.values, o.doc, o.requires, per_option=False)
            names.append(f"{n}.reference")
        yield
    finally:
        for n in names:
            _REGISTRY.pop(n, None)


@st.composite
def _allocations(draw, problem: Problem) -> Solution:
    """Per job: idle, one of its options, or an option it does not have; GPU types and packing as chosen."""
    alloc, types, packed = {}, {}, {}
    for job in problem.jobs:
        opts = job.typed_options(problem.cluster, problem.node_aware)
        pick = draw(st.integers(0, 5))
        if pick == 0:
            alloc[job.id] = None
        elif pick == 1 or not opts:
            alloc[job.id] = (draw(st.integers(1, 4)), draw(st.sampled_from([1, 2, 4, 8, 16])))
            types[job.id] = draw(st.sampled_from(problem.cluster.types))
            packed[job.id] = draw(st.booleans())
        else:
            o = draw(st.sampled_from(opts))
            alloc[job.id] = (o.gpus, o.batch)
            types[job.id] = o.gpu_type
            packed[job.id] = o.packed
    return Solution(Status.FEASIBLE, "hand", objective=0, objective_value=0.0, allocation=alloc,
                    gpu_types=types, packed=packed, scale=1 << 10)


def _agree(problem: Problem, data) -> None:
    sol = data.draw(_allocations(problem))
    with _references():
        reference = replace(problem, objective=f"{problem.objective}.reference")
        for s in (sol, None):
            if s is None:  # the recomputed objective claimed: the report then checks what follows it
                ref = verify(reference, sol)
                if ref.objective is None:
                    return
                s = replace(sol, objective=ref.objective, objective_value=ref.objective_value)
            fast, ref = verify(problem, s), verify(reference, s)
            assert fast == ref


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems(objectives=PER_OPTION), data=st.data())
def test_fast_path_equals_reference_on_one_type_problems(problem, data):
    _agree(problem, data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=general_problems(objectives=PER_OPTION), data=st.data())
def test_fast_path_equals_reference_on_general_problems(problem, data):
    _agree(problem, data)


@settings(max_examples=100, deadline=None)
@given(problem=general_problems(), data=st.data())
def test_per_option_values_do_not_depend_on_the_other_options(problem, data):
    """For a flagged objective, the options at one (type, k, b) alone are priced as in the full list: the
    property the flag claims (the current option's penalty included: rescale_penalty is drawn)."""
    for name in PER_OPTION:
        p = replace(problem, objective=name)
        for job in p.jobs:
            full = job.typed_options(p.cluster, p.node_aware)
            if not full:
                continue
            o = data.draw(st.sampled_from(full))
            at = {(o.gpu_type, o.gpus, o.batch)}
            part = job.typed_options(p.cluster, p.node_aware, at)
            assert set(part) == {x for x in full if (x.gpu_type, x.gpus, x.batch) in at}
            whole = dict(zip(full, job_values(p, job, full)))
            for x, v in zip(part, job_values(p, job, part)):
                assert v == whole[x] or (v != v and whole[x] != whole[x])  # equal, or both nan


def test_speedup_depends_on_the_other_options_by_hand():
    """speedup = T / R, R the job's best T / k over all its options: without its best option (2 GPUs at 300
    samples/s, 150 per GPU) the 1-GPU option (100) would be worth 1.0 instead of 100 / 150."""
    job = Job("a", MeasuredThroughput({(1, 32): 100.0, (2, 64): 300.0}), 32, 64, 32)
    p = Problem(Cluster(4, 4), (job,), objective="speedup")
    full = job.typed_options(p.cluster)
    one = job.typed_options(p.cluster, at={(full[0].gpu_type, 1, 32)})
    assert job_values(p, job, full)[0] == 100.0 / 150.0
    assert job_values(p, job, one) == [1.0]
