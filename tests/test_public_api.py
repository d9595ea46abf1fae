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
