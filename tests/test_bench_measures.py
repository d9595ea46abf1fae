"""Benchmark measures: shifted geometric means, solved counts, performance profiles, LP gap, suites, Markdown."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from elasticopt.benchmarking import BenchResult, file_instances, run_benchmark
from elasticopt.benchmarking.difficulty import lp_gap, lp_relaxation
from elasticopt.benchmarking.markdown import markdown_report
from elasticopt.benchmarking.measures import (
    instance_times,
    performance_profile,
    shifted_geometric_mean,
    solver_summaries,
)
from elasticopt.benchmarking.suites import get_suite
from elasticopt.cli import main
from elasticopt.errors import ValidationError
from elasticopt.generate import ALL_FAMILIES
from elasticopt.models import compile_problem, dumps_instance
from elasticopt.solvers import Reason, Status, get_backend
from elasticopt.testing.cases import case


def test_shifted_geometric_mean_by_hand():
    assert shifted_geometric_mean([0.0, 0.0], 1.0) == pytest.approx(0.0)
    assert shifted_geometric_mean([1.0, 3.0], 1.0) == pytest.approx(math.sqrt(2 * 4) - 1)
    assert shifted_geometric_mean([5.0], 0.01) == pytest.approx(5.0)
    assert math.isnan(shifted_geometric_mean([], 1.0))
    with pytest.raises(ValueError, match="shift"):
        shifted_geometric_mean([1.0], 0.0)
    with pytest.raises(ValueError, match=">= 0"):
        shifted_geometric_mean([-1.0], 1.0)


@pytest.fixture(scope="module")
def lp_case(tmp_path_factory):
    """lp-fractional (LP 39.5 against the optimum 38) as a file, benchmarked with the DP and two MIP backends."""
    path = tmp_path_factory.mktemp("lp") / "lp-fractional.json"
    path.write_text(dumps_instance(case("lp-fractional").problem))
    return run_benchmark(["numpy-dp", "milp", "scip"], file_instances([path]), repeats=1, time_limit_s=30)


def _synthetic(template: BenchResult, table: dict[tuple[str, str], tuple[float, str]], limit: float) -> BenchResult:
    """Rows of ``template`` rewritten: (instance, solver) -> (total seconds, status)."""
    row = template.rows[0]
    rows = tuple(replace(row, instance=i, solver=s, total_s=t, status=st, within_limit=t <= limit, incumbents=None,
                         first_incumbent_s=None, optimum_found_s=None)
                 for (i, s), (t, st) in table.items())
    return BenchResult(rows, template.instances, {**template.settings, "time_limit_s": limit}, template.environment)


def test_summaries_and_profile_by_hand(lp_case):
    # A: 1 s, 2 s, unsolved (LIMIT); B: 2 s, 1 s, 4 s; C solves nothing; limit 10 s
    res = _synthetic(lp_case, {
        ("p1", "A"): (1.0, "OPTIMAL"), ("p2", "A"): (2.0, "OPTIMAL"), ("p3", "A"): (10.0, "LIMIT"),
        ("p1", "B"): (2.0, "OPTIMAL"), ("p2", "B"): (1.0, "OPTIMAL"), ("p3", "B"): (4.0, "OPTIMAL"),
        ("p1", "C"): (3.0, "ERROR"), ("p2", "C"): (3.0, "LIMIT"), ("p3", "C"): (3.0, "LIMIT"),
        ("p4", "A"): (10.0, "LIMIT"), ("p4", "B"): (10.0, "LIMIT"), ("p4", "C"): (10.0, "LIMIT"),
    }, limit=10.0)
    s = {x.solver: x for x in solver_summaries(res, 1.0)}
    assert (s["A"].solved, s["B"].solved, s["C"].solved) == (2, 3, 0)
    assert s["A"].sgm_total_s == pytest.approx((2 * 3 * 11 * 11) ** 0.25 - 1)  # unsolved at the limit
    assert s["B"].sgm_total_s == pytest.approx((3 * 2 * 5 * 11) ** 0.25 - 1)
    assert s["C"].sgm_total_s == pytest.approx(10.0)  # an ERROR after 3 s counts at the limit too
    assert s["B"].sgm_ratio_to_best == 1.0 and s["A"].sgm_ratio_to_best > 1
    assert [x.solver for x in solver_summaries(res, 1.0)] == ["B", "A", "C"]
    prof = performance_profile(res)
    assert prof.left_out == ("p4",) and set(prof.ratios) == {"p1", "p2", "p3"}
    assert prof.ratios["p1"] == {"A": 1.0, "B": 2.0, "C": math.inf}
    assert prof.taus == (1.0, 2.0)
    assert prof.fractions["A"] == pytest.approx((1 / 3, 2 / 3))
    assert prof.fractions["B"] == pytest.approx((2 / 3, 1.0))
    assert prof.fractions["C"] == (0.0, 0.0)
    assert prof.csv().splitlines()[:2] == ["tau,A,B,C", "1,0.333333,0.666667,0"]


def test_lp_gap_reductions_and_incumbents_of_a_real_run(lp_case):
    res = lp_case
    assert res.ok
    (rec,) = res.instances
    S = case("lp-fractional").optimum // 38
    assert rec.best_objective == 38 * S
    assert rec.lp_bound == pytest.approx(39.5 * S) and rec.lp_status == "Optimal"  # a and half of b
    assert rec.lp_gap == pytest.approx(1.5 / 38)
    assert rec.options_removed == rec.options_before - rec.options >= 0
    by = {r.solver: r for r in res.rows}
    assert by["numpy-dp"].incumbents is None and by["numpy-dp"].first_incumbent_s is None
    for name in ("milp", "scip"):
        r = by[name]
        assert r.status == "OPTIMAL" and r.incumbents >= 1
        assert r.build_s <= r.first_incumbent_s <= r.optimum_found_s <= r.total_s
    times = {t.solver: t for t in instance_times(res)}
    assert all(t.solved for t in times.values())
    summ = {x.solver: x for x in solver_summaries(res)}
    assert summ["numpy-dp"].sgm_first_incumbent_s is None and summ["milp"].sgm_first_incumbent_s is not None
    page = markdown_report(res, command="elasticopt bench X")
    assert "elasticopt bench X" in page and "## Per family" in page
    assert f"{1.5 / 38:.2e}" in page and "every result verified" in page


def test_lp_relaxation_of_tables_and_gap_edge_cases():
    t = compile_problem(case("lp-fractional").problem)
    assert lp_relaxation(t).bound == pytest.approx(39.5 * (case("lp-fractional").optimum // 38))
    assert lp_gap(None, 5) is None and lp_gap(10.0, None) is None and lp_gap(5.0, 5) == 0


def test_models_over_the_column_limit_are_limit_not_built(monkeypatch):
    from elasticopt.solvers import formulation

    monkeypatch.setattr(formulation, "MAX_COLUMNS", 2)
    t = compile_problem(case("lp-fractional").problem)
    for name in ("milp", "scip", "cpsat"):
        s = get_backend(name).solve(t)
        assert s.status is Status.LIMIT and "MAX_COLUMNS" in s.message and s.objective is None, name
        assert s.reason is Reason.STATE_SPACE, name  # the model's size, not "solved"
    lp = lp_relaxation(t)
    assert lp.bound is None and lp.status.startswith("not built")


def test_reference_suite_definition_and_subsets():
    s = get_suite("reference")
    assert s.families == tuple(ALL_FAMILIES) and s.jobs == (1000, 10000) and s.gpus == (1024, 100_000, 1_000_000)
    assert len(s.seeds) >= 3 and s.time_limit_s == 60 and {"dp", "milp", "cpsat", "scip"} <= set(s.solvers)
    full = s.instances()
    assert len(full) == len(ALL_FAMILIES) * 2 * 3 * len(s.seeds) == len({i.name for i in full})
    sub = s.instances(families=["paper"], jobs=[1000], gpus=[1024], seeds=[0])
    assert [i.name for i in sub] == ["paper-n1000-g1024-s0"]
    with pytest.raises(ValidationError, match="members of suite"):
        s.instances(jobs=[200])
    with pytest.raises(ValidationError, match="reference"):
        get_suite("nope")


def test_cli_suite_subset_prints_the_summary_and_writes_the_page(tmp_path, capsys):
    out, md = tmp_path / "res", tmp_path / "docs" / "benchmarks.md"
    rc = main(["bench", "--suite", "reference", "--family", "mck-strongly", "--jobs", "1000", "--gpus", "1024",
               "--seeds", "0", "--solver", "dp", "milp", "scip", "--time-limit-s", "30", "--out", str(out),
               "--markdown", str(md)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "shifted geometric mean" in text and "sgm first incumbent" in text and "LP gap" in text
    assert f"performance profile: {out / 'performance_profile.png'}" in text
    assert (out / "performance_profile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "performance_profile.csv").read_text().startswith("tau,")
    page = md.read_text()
    assert "elasticopt bench --suite reference --solver dp milp scip --family mck-strongly" in page
    assert "## Not run" in page and f"{len(get_suite('reference').instances()) - 1} instance(s)" in page
    assert "(../res/performance_profile.svg)" in page and "| mck-strongly-n1000-g1024-s0 | 1000 | 1024 |" in page


def test_instance_status_names_a_limit_that_is_not_the_time_limit():
    from types import SimpleNamespace

    from elasticopt.benchmarking.measures import _status_of

    row = lambda status, reason: SimpleNamespace(status=status, reason=reason)  # noqa: E731
    assert _status_of(row("LIMIT", "time_limit")) == "LIMIT"
    assert _status_of(row("LIMIT", "state_space")) == "LIMIT (state_space)"  # a model not built for its size
    assert _status_of(row("LIMIT", "not_placeable")) == "LIMIT (not_placeable)"
    assert _status_of(row("OPTIMAL", "solved")) == "OPTIMAL"
