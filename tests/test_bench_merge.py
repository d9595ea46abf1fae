"""``elasticopt bench --merge``: runs of one suite measured apart, published as one benchmark.

elasticopt/benchmarking/merge.py. The merged result is the runs' rows and instances, unchanged; summaries and
the page are computed from them as for one run.
"""

import json

import pytest

from elasticopt.benchmarking import family_instances, run_benchmark, write_results
from elasticopt.benchmarking.measures import solver_summaries
from elasticopt.benchmarking.merge import load_result, merge_results
from elasticopt.benchmarking.rows import BenchResult
from elasticopt.cli import main
from elasticopt.errors import ValidationError

SOLVERS = ["numpy-dp", "milp"]


def _run(seed, **kw):
    opts = dict(repeats=1, time_limit_s=30, lp_relaxation=False)
    opts.update(kw)
    return run_benchmark(SOLVERS, family_instances(["uniform", "mck-strongly"], [8], [16], [seed]), **opts)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    out = []
    for seed in (0, 1):
        res = _run(seed)
        write_results(res, base / f"s{seed}", plots=False)
        out.append((res, base / f"s{seed}"))
    return out


def test_results_json_round_trips(two_runs):
    res, folder = two_runs[0]
    back = load_result(folder)
    assert back.rows == res.rows and back.instances == res.instances
    assert back.settings["time_limit_s"] == 30 and back.environment["packages"] == res.environment["packages"]
    assert "commit" in back.environment  # the checkout's commit, or None outside one


def test_merged_is_the_union_and_summaries_are_computed_from_it(two_runs):
    (a, fa), (b, fb) = two_runs
    merged = merge_results([load_result(fa), load_result(fb)], sources=["s0", "s1"])
    assert merged.rows == a.rows + b.rows and merged.instances == a.instances + b.instances
    assert merged.ok and [r["source"] for r in merged.settings["merged"]] == ["s0", "s1"]
    assert merged.settings["elapsed_s"] == pytest.approx(a.settings["elapsed_s"] + b.settings["elapsed_s"])
    by = {s.solver: s for s in solver_summaries(merged)}
    assert by["milp"].instances == 4 and by["milp"].solved == 4  # every instance of both runs counted
    one = {s.solver: s for s in solver_summaries(BenchResult(a.rows + b.rows, a.instances + b.instances,
                                                             a.settings, a.environment))}
    assert by["milp"].sgm_total_s == pytest.approx(one["milp"].sgm_total_s)


def test_cli_merge_writes_the_files_and_a_page_naming_every_run(two_runs, tmp_path, capsys):
    (_, fa), (_, fb) = two_runs
    page = tmp_path / "page.md"
    rc = main(["bench", "--merge", str(fa), str(fb / "results.json"), "--out", str(tmp_path / "m"),
               "--markdown", str(page), "--no-plots"])
    assert rc == 0
    doc = json.loads((tmp_path / "m" / "results.json").read_text())
    assert len(doc["instances"]) == 4 and doc["ok"] and len(doc["settings"]["merged"]) == 2
    text = page.read_text()
    assert "elasticopt bench --merge" in text and "merged from 2 runs" in text
    assert str(fa) in text and "uniform-n8-g16-s1" in text
    assert "its command was not recorded" in text  # written by write_results, not by the CLI
    # how each run held its time limit: milp (whose library can overrun it) in a forked process
    assert "milp ran in a forked process killed at the limit" in text and "; milp in a forked process" in text
    assert [r["isolated"] for r in doc["settings"]["merged"]] == [["milp"], ["milp"]]


def test_a_run_without_a_limit_says_every_solver_ran_in_process(tmp_path):
    from elasticopt.benchmarking.markdown import markdown_report

    res = _run(3, time_limit_s=None)
    assert "Every solver ran in this process" in markdown_report(res, command="x")


def test_a_cli_run_records_its_command_and_the_merged_page_lists_it(tmp_path):
    for seed in ("0", "1"):
        assert main(["bench", "--solver", "numpy-dp", "--family", "uniform", "--jobs", "6", "--gpus", "8",
                     "--seeds", seed, "--repeats", "1", "--no-lp", "--no-plots", "--out", str(tmp_path / seed)]) == 0
    assert load_result(tmp_path / "0").settings["command"].endswith(f"--out {tmp_path / '0'} --no-lp --no-plots")
    page = tmp_path / "page.md"
    assert main(["bench", "--merge", str(tmp_path / "0"), str(tmp_path / "1"), "--out", str(tmp_path / "m"),
                 "--markdown", str(page), "--no-plots"]) == 0
    text = page.read_text()
    assert "--seeds 1 --repeats 1" in text and "--seeds 0 --repeats 1" in text
    assert "command" not in load_result(tmp_path / "m").settings  # each run's is under merged


def test_merge_refuses_runs_measured_differently_or_sharing_instances(two_runs, tmp_path, capsys):
    (a, fa), _ = two_runs
    with pytest.raises(ValidationError, match=r"s0 again: instances: .*uniform-n8-g16-s0"):
        merge_results([a, a], sources=["s0", "s0 again"])
    other = _run(2, time_limit_s=10)
    with pytest.raises(ValidationError, match=r"t: settings.time_limit_s: expected 30"):
        merge_results([a, other], sources=["s0", "t"])
    write_results(other, tmp_path / "t", plots=False)
    assert main(["bench", "--merge", str(fa), str(tmp_path / "t"), "--out", str(tmp_path / "x")]) == 2
    assert "settings.time_limit_s" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # nothing written
    assert main(["bench", "--merge", str(fa), "--seeds", "3"]) == 2
    assert "--seeds" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"format": "elasticopt-bench/0"}')
    assert main(["bench", "--merge", str(tmp_path / "bad.json")]) == 2
    assert "expected 'elasticopt-bench/1'" in capsys.readouterr().err
    rows = json.loads((fa / "results.json").read_text())
    del rows["rows"][1]["total_s"]
    (tmp_path / "cut.json").write_text(json.dumps(rows))
    assert main(["bench", "--merge", str(tmp_path / "cut.json")]) == 2
    err = capsys.readouterr().err
    assert "rows[1]" in err and "missing total_s" in err


def test_shards_partition_the_instances_and_merge_back(tmp_path, capsys):
    # --shard K/N runs instances K, K+N, ...; the parts' results merge into the benchmark of them all
    base = ["bench", "--solver", "numpy-dp", "--family", "uniform", "mck-strongly", "--jobs", "6", "--gpus", "8",
            "--seeds", "0", "1", "2", "--repeats", "1", "--no-lp", "--no-plots"]
    names = []
    for k in (1, 2, 3, 4):
        assert main(base + ["--shard", f"{k}/4", "--out", str(tmp_path / f"p{k}")]) == 0
        names.append([r.name for r in load_result(tmp_path / f"p{k}").instances])
    flat = [n for part in names for n in part]
    assert len(flat) == len(set(flat)) == 6 and all(names)  # disjoint, every instance once, no part empty
    assert "--shard 2/4" in load_result(tmp_path / "p2").settings["command"]
    assert main(["bench", "--merge"] + [str(tmp_path / f"p{k}") for k in (1, 2, 3, 4)]
                + ["--out", str(tmp_path / "all"), "--no-plots"]) == 0
    merged = load_result(tmp_path / "all")
    assert sorted(r.name for r in merged.instances) == sorted(flat) and merged.ok
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # argparse refuses it, exit 2
        main(base + ["--shard", "5/4"])
    assert exc.value.code == 2 and "1 <= K <= N" in capsys.readouterr().err


def test_replace_takes_a_later_runs_instances_over_an_earlier_runs(two_runs, tmp_path, capsys):
    """--replace: a rerun of some instances (after a change) replaces them in the merged benchmark, every solver's
    rows of them, and the page says which run replaced what; without it the same merge is refused."""
    (a, fa), (b, fb) = two_runs
    rerun = run_benchmark(SOLVERS, family_instances(["uniform"], [8], [16], [0]), repeats=1, time_limit_s=30,
                          lp_relaxation=False)
    write_results(rerun, tmp_path / "rerun", plots=False)
    merged = merge_results([a, b, rerun], sources=["s0", "s1", "rerun"], replace=True)
    names = sorted(r.name for r in merged.instances)
    assert names == sorted(r.name for r in a.instances + b.instances)  # the same 4 instances, once each
    again = [r for r in merged.rows if r.instance == "uniform-n8-g16-s0"]
    assert again == [r for r in rerun.rows]  # the rerun's rows, the earlier run's gone
    assert len(merged.rows) == len(a.rows) + len(b.rows)
    assert merged.settings["merged"][2]["replaced"] == ["uniform-n8-g16-s0 (of s0)"]
    assert merged.settings["merged"][0]["replaced"] == []
    page = tmp_path / "page.md"
    assert main(["bench", "--merge", str(fa), str(fb), str(tmp_path / "rerun"), "--replace", "--out",
                 str(tmp_path / "m"), "--markdown", str(page), "--no-plots"]) == 0
    text = page.read_text()
    assert f"replaces uniform-n8-g16-s0 (of {fa})" in text and "--replace" in text
    assert main(["bench", "--merge", str(fa), str(tmp_path / "rerun"), "--out", str(tmp_path / "x")]) == 2
    assert "give --replace" in capsys.readouterr().err
    assert main(["bench", "--replace", "--family", "uniform", "--jobs", "6", "--gpus", "8"]) == 2
    err = capsys.readouterr().err
    assert "--replace" in err and "Traceback" not in err
