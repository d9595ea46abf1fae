"""The compiler's options (``models/options.py`` ``option_blocks``: shared blocks of fitted profiles, the jobs' own
measured points read as arrays) against their reference, ``Job.typed_options`` (what ``verify`` and the brute
force enumerate): every (job, type, k, b, packed, samples/s), no more, no fewer, on random one-type and general
problems (measured points, packed points, GPU and batch limits that cut some of them, fitted profiles) and on a
1,000-job caller-values request as the service builds it."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt.models.flat import _option_rows
from elasticopt.models.problem import Problem
from elasticopt.testing.strategies import general_problems, problems


def _compiled(problem: Problem) -> list[tuple]:
    rows = _option_rows(problem)
    types = problem.cluster.types
    return sorted((problem.jobs[int(j)].id, types[int(t)], int(k), int(b), bool(p), float(s))
                  for j, t, k, b, p, s in zip(rows.job, rows.gpu_type, rows.gpus, rows.batch, rows.packed,
                                              rows.samples_per_s))


def _reference(problem: Problem) -> list[tuple]:
    return sorted((job.id, o.gpu_type, o.gpus, o.batch, o.packed, float(o.samples_per_s))
                  for job in problem.jobs for o in job.typed_options(problem.cluster, problem.node_aware))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=st.one_of(problems(), general_problems()))
def test_the_compiled_options_are_the_reference_options(problem):
    assert _compiled(problem) == _reference(problem)


def test_a_thousand_caller_value_jobs_compile_to_the_reference_options():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from bench_service import requests_for
    finally:
        sys.path.pop(0)
    from elasticopt.service.translate import translate

    problem = translate(requests_for(1000, 1024)["values"]).problem
    compiled = _compiled(problem)
    assert len(compiled) > 10_000 and compiled == _reference(problem)
