"""The public surface (issue 16): the simulation API, the registries and the API reference."""

import importlib.util
import re
from pathlib import Path

import elasticopt

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_name_imports():
    assert len(set(elasticopt.__all__)) == len(elasticopt.__all__)
    for name in elasticopt.__all__:
        assert getattr(elasticopt, name) is not None, name
    namespace: dict = {}
    exec("from elasticopt import *", namespace)
    assert set(elasticopt.__all__) <= set(namespace)


def test_simulation_api_and_registries_are_public():
    from elasticopt.profiles import register_profile
    from elasticopt.scheduling import SimulationConfig, register_policy, simulate
    from elasticopt.solvers import register

    assert elasticopt.simulate is simulate and elasticopt.SimulationConfig is SimulationConfig
    assert elasticopt.register_policy is register_policy
    assert elasticopt.register_solver is register
    assert elasticopt.register_profile is register_profile
    for name in ("ElasticPolicy", "FixedBatchPolicy", "GreedyPolicy", "StaticPolicy", "Policy", "Snapshot",
                 "Allocation", "JobSpec", "Backend", "Outcome", "SolverOptionError", "read_throughput_csv"):
        assert name in elasticopt.__all__, name
    assert {"elastic", "fixed-batch", "static", "greedy"} <= set(elasticopt.available_policies())


def test_api_reference_lists_every_public_name():
    text = (ROOT / "docs" / "api.md").read_text()
    headings = set(re.findall(r"^### `(\w+)`$", text, re.M))
    missing = sorted(set(elasticopt.__all__) - headings)
    assert not missing, f"docs/api.md lacks {missing}: run python docs/make_api.py"
    stale = sorted(headings - set(elasticopt.__all__))
    assert not stale, f"docs/api.md documents names that are not public: {stale}: run python docs/make_api.py"


def test_api_reference_generator_covers_everything():
    spec = importlib.util.spec_from_file_location("make_api", ROOT / "docs" / "make_api.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = mod.render()
    for name in elasticopt.__all__:
        assert f"### `{name}`" in text, name
    assert "**Parameters**" in text and "- `time_limit_s`" in text
    assert "\n----------\n" not in text  # numpydoc underlines become bold titles


def test_docs_links_point_to_files_that_exist():
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", md.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            assert (md.parent / target).exists(), f"{md.relative_to(ROOT)} links to missing {target}"


def test_solve_and_verify_name_an_argument_of_the_wrong_kind():
    """``elasticopt.solve("instances/tiny.json")`` (a path, a plausible first try) was an AttributeError."""
    import pytest

    import elasticopt
    from elasticopt.errors import ValidationError
    from elasticopt.models import load_instance

    with pytest.raises(ValidationError, match=r"problem: expected a Problem or a compiled OptionTable, found "
                                              r"'instances/tiny.json' \(read an instance file with "
                                              r"elasticopt.models.load_instance\(path\) first\)"):
        elasticopt.solve("instances/tiny.json")
    problem = load_instance(Path(__file__).resolve().parents[1] / "instances" / "tiny.json")
    with pytest.raises(ValidationError, match="solution: expected a Solution"):
        elasticopt.verify(problem, None)
    with pytest.raises(ValidationError, match="problem: expected the Problem that was solved"):
        elasticopt.verify(None, elasticopt.solve(problem))
