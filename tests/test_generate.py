"""Instance generator: reproducible, loadable, solvable; the committed instances."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt import load_instance, solve, verify
from elasticopt.cli import main
from elasticopt.cli.generate import register
from elasticopt.errors import ValidationError
from elasticopt.generate import FAMILIES, generate_instance
from elasticopt.models import MeasuredThroughput, dumps_instance
from elasticopt.profiles import ParametricProfile, profile_names
from elasticopt.solvers import Status

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elasticopt")
    register(parser.add_subparsers(dest="command"))
    return parser


def _readme_commands() -> list[list[str]]:
    text = (INSTANCES / "README.md").read_text()
    return [shlex.split(line)[1:] for line in text.splitlines() if line.startswith("elasticopt generate ")]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_same_arguments_same_bytes(family):
    a = dumps_instance(generate_instance(family, 25, 48, seed=11))
    b = dumps_instance(generate_instance(family, 25, 48, seed=11))
    c = dumps_instance(generate_instance(family, 25, 48, seed=12))
    assert a == b
    assert a != c


def test_cli_writes_the_same_file_twice(tmp_path):
    parser = _parser()
    outs = []
    for name in ("a.json", "b.json"):
        args = parser.parse_args(["generate", "--family", "paper", "--jobs", "30", "--gpus", "64",
                                  "--seed", "5", "-o", str(tmp_path / name)])
        assert args.func(args) == 0
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]
    assert not [p for p in tmp_path.iterdir() if p.name not in ("a.json", "b.json")]  # no temp files left
    assert outs[0] == dumps_instance(generate_instance("paper", 30, 64, 5)).encode()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(FAMILIES)), st.integers(1, 40), st.integers(1, 96),
       st.integers(0, 2**32 - 1), st.sampled_from([4, 8]))
def test_every_family_loads_solves_and_verifies(tmp_path_factory, family, jobs, gpus, seed, gpn):
    problem = generate_instance(family, jobs, gpus, seed, gpus_per_node=gpn)
    path = tmp_path_factory.mktemp("gen") / "inst.json"
    path.write_text(dumps_instance(problem))
    loaded = load_instance(path)
    assert dumps_instance(loaded) == dumps_instance(problem)
    sol = solve(loaded, "dp")
    assert sol.status is Status.OPTIMAL
    assert solve(loaded, "numpy-dp").objective == sol.objective
    report = verify(loaded, sol)
    assert report.ok, report.errors
    running = sum(j.running.gpus for j in loaded.jobs if j.running is not None)
    assert running <= gpus  # running jobs were placed inside the cluster


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_agrees_with_jax_dp(family):
    problem = generate_instance(family, 40, 64, seed=3)
    a, b = solve(problem, "dp"), solve(problem, "numpy-dp")
    assert a.status is Status.OPTIMAL and a.objective == b.objective
    assert verify(problem, a).ok


def test_paper_family_uses_named_profiles_and_stays_small():
    problem = generate_instance("paper", 200, 256, seed=2)
    names = set(profile_names())
    assert all(isinstance(j.throughput, ParametricProfile) and j.throughput.name in names for j in problem.jobs)
    assert len({j.throughput.name for j in problem.jobs}) >= 10  # a real mix
    assert any(j.running is not None for j in problem.jobs) and any(j.running is None for j in problem.jobs)
    assert all(j.remaining_samples and j.remaining_samples > 0 for j in problem.jobs)
    counts = [len(j.options(gpus_cap=256)) for j in problem.jobs]
    assert 1 <= min(counts) and max(counts) <= 12


@pytest.mark.parametrize("kind", ["uncorrelated", "weakly", "strongly", "subset-sum"])
def test_mck_profit_weight_relation(kind):
    problem = generate_instance(f"mck-{kind}", 30, 300, seed=1, options=6)
    assert problem.objective == "throughput"
    r = round(2 * 300 / 30)
    for job in problem.jobs:
        assert isinstance(job.throughput, MeasuredThroughput)
        pts = job.throughput.points
        assert len(pts) == 6
        for (k, b), p in pts.items():
            assert 1 <= k <= r and b % k == 0
            d = max(1, r // 10)  # Pisinger's offset R / 10
            if kind == "strongly":
                assert p == k + d
            elif kind == "subset-sum":
                assert p == k
            elif kind == "weakly":
                assert max(1, k - d) <= p <= k + d
            else:
                assert 1 <= p <= r
        assert len(job.options()) == 6  # every item is a feasible option
        assert job.running is None or job.running.gpus == min(pts)[0]  # on its lightest item


def test_bad_arguments_are_named():
    with pytest.raises(ValidationError, match="family"):
        generate_instance("nope", 3, 8, 0)
    with pytest.raises(ValidationError, match="jobs"):
        generate_instance("paper", 0, 8, 0)


def test_a_job_count_too_large_to_hold_is_refused_at_once(capsys):
    """``--jobs 100000000`` ran until killed (hours, ~300 GB); now refused before anything is built."""
    from elasticopt.cli import main
    from elasticopt.generate import MAX_GENERATED_JOBS

    with pytest.raises(ValidationError, match="jobs: expected an integer <= 1,000,000, found 1000001"):
        generate_instance("paper", MAX_GENERATED_JOBS + 1, 8, 0)
    assert main(["generate", "--family", "paper", "--jobs", "100000000", "--gpus", "8", "-o", "-"]) == 2
    err = capsys.readouterr().err
    assert "jobs: expected an integer <= 1,000,000, found 100000000" in err and "Traceback" not in err


def test_an_objective_the_family_cannot_price_names_the_family_and_the_way_out(tmp_path, capsys):
    # The mck families draw no remaining samples, which 'completion' divides by: the error names the
    # option, the family, the job field and what to do (found by running every family x objective in the CLI).
    with pytest.raises(ValidationError) as e:
        generate_instance("mck-weakly", 6, 16, 0, objective="completion")
    assert e.value.path == "objective" and e.value.found == "completion"
    assert "'mck-weakly'" in str(e.value) and "jobs[0].remaining_samples" in str(e.value)
    assert "drop --objective" in str(e.value)
    assert generate_instance("paper", 6, 16, 0, objective="completion").objective == "completion"
    out = tmp_path / "x.json"
    assert main(["generate", "--family", "mck-weakly", "--jobs", "6", "--gpus", "16", "--objective", "completion",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "expected an objective that can price the 'mck-weakly' family's jobs" in err
    assert "Traceback" not in err and not out.exists()


# ---------------------------------------------------------------- committed instances


def test_readme_commands_reproduce_committed_instances(tmp_path):
    commands = _readme_commands()
    assert len(commands) >= 6
    parser = _parser()
    for argv in commands:
        i = argv.index("-o")
        target = ROOT / argv[i + 1]
        argv = argv[:i + 1] + [str(tmp_path / target.name)] + argv[i + 2:]
        args = parser.parse_args(argv)
        assert args.func(args) == 0
        assert (tmp_path / target.name).read_bytes() == target.read_bytes(), target.name


def test_medium_paper_instance_solves():
    problem = load_instance(INSTANCES / "paper-medium.json")
    assert len(problem.jobs) == 200 and problem.cluster.gpus == 256
    sol = solve(problem)
    assert sol.status is Status.OPTIMAL
    assert verify(problem, sol).ok
    assert solve(problem, "numpy-dp").objective == sol.objective


def test_stress_instance_solves():
    problem = load_instance(INSTANCES / "mck-strongly-100x10.json")
    sol = solve(problem, "dp")
    assert sol.status is Status.OPTIMAL and verify(problem, sol).ok
    assert solve(problem, "numpy-dp").objective == sol.objective
