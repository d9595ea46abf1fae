"""validation/paper_comparison.py: its grid, one small run end to end, and the report rewritten from the JSON."""

import json

from validation.paper_comparison import Cell, grid, main, summarise


def test_the_grid_covers_the_sensitivity_cells_and_the_admission_cells():
    cells = grid()
    by = {g: [c for c in cells if c.group == g] for g in ("main", "sensitivity", "paper")}
    assert len(by["main"]) == 2 * 4 and {c.gpus for c in by["main"]} == {64, 256}
    sens = {(c.load, c.restart_cost_s, c.submitted_batch) for c in by["sensitivity"]}
    assert sens == {(load, cost, b) for load in (0.5, 2.0, 8.0, 32.0) for cost in (0.0, 30.0, 300.0)
                    for b in ("random", "min", "max")}
    assert all(c.admission_deadline_s is None for c in by["main"] + by["sensitivity"])
    assert {c.admission_deadline_s for c in by["paper"]} == {0.0, 600.0} and all(c.jobs == 512 for c in by["paper"])
    assert Cell("main", 16, 1.0).jobs == 100  # at least 100 jobs a run
    # a main cell and the sensitivity cell of the same setting are one simulation
    assert len({c.key for c in cells}) == len(cells) - 4


def test_summarise_by_hand():
    pol = lambda done, jct, dropped=0: {"done": done, "completed": done, "dropped": dropped,  # noqa: E731
                                        "jct_mean_s": jct, "jct_common_s": jct, "utilisation": 0.5,
                                        "rescales_per_job": 1.0}
    pts = [{"seed": 0, "policies": {"elastic": pol(10, 100.0), "fixed-batch": pol(8, 300.0), "static": pol(7, 400.0)}},
           {"seed": 1, "policies": {"elastic": pol(6, 200.0), "fixed-batch": pol(7, 200.0), "static": pol(5, 400.0)}}]
    row = summarise(Cell("sensitivity", 64, 8.0), pts)
    assert row["elastic:done"]["mean"] == 8.0 and row["fixed-batch:done"]["mean"] == 7.5
    assert row["done_ratio"]["mean"] == (10 / 8 + 6 / 7) / 2 and row["jct_ratio"]["min"] == 1.0
    assert row["done_ok"] and row["jct_ok"] and row["seeds_done_worse"] == 1 and row["seeds_jct_worse"] == 0


def test_a_small_run_writes_the_report_and_rewrites_it_from_its_json(tmp_path):
    assert main(["--groups", "main,paper", "--gpus", "16", "--loads", "2", "--paper-loads", "4",
                 "--deadlines-s", "0", "--batches", "min", "--paper-jobs-per-gpu", "2", "--seeds", "0",
                 "--sensitivity-gpus", "16",
                 "--out", str(tmp_path)]) == 0
    md = (tmp_path / "paper_comparison.md").read_text()
    data = json.loads((tmp_path / "paper_comparison.json").read_text())
    assert [r["group"] for r in data["rows"]] == ["main", "paper"]
    for r in data["rows"]:
        assert set(r["seeds"]) == {0} and isinstance(r["done_ok"], bool)
        p = [pt for pt in data["points"] if pt["cell"]["group"] == r["group"]][0]["policies"]
        assert all(v["completed"] + v["dropped"] + v["unfinished"] == v["jobs"] == 100 for v in p.values())
    assert "## Load sweep" in md and "## Admission control" in md and "elastic >= fb" in md
    assert (tmp_path / "paper_comparison.png").exists() and (tmp_path / "paper_comparison.svg").exists()
    (tmp_path / "paper_comparison.md").unlink()
    assert main(["--report-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "paper_comparison.md").read_text() == md
