"""`elasticopt solve`: output, JSON, exit codes, errors without tracebacks."""

import json
import subprocess
import sys

from elasticopt.cli import main


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "elasticopt", *args], capture_output=True, text=True)


def test_solve_table_and_exit_0(capsys):
    assert main(["solve", "instances/tiny.json"]) == 0
    out = capsys.readouterr().out
    assert "OPTIMAL" in out and "275.0000" in out


def test_solve_json_and_output_file(tmp_path, capsys):
    out_file = tmp_path / "sol.json"
    assert main(["solve", "instances/tiny.json", "--json", "--output", str(out_file)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "optimal" and doc["objective"] == 275 * 2**20
    assert doc["allocation"] == {"a": {"gpus": 2, "batch": 64}, "b": {"gpus": 2, "batch": 64}}
    assert json.loads(out_file.read_text()) == doc


def test_infeasible_exit_1(capsys):
    assert main(["solve", "instances/infeasible.json"]) == 1
    assert "big-a" in capsys.readouterr().out


def test_bad_input_exit_2_without_traceback(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"format": "elasticopt-instance/1", "cluster": {"gpus": -3}, "jobs": []}')
    r = run_cli("solve", str(f))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "cluster.gpus" in r.stderr and ">= 0" in r.stderr and "-3" in r.stderr


def test_unknown_solver_exit_2():
    r = run_cli("solve", "instances/tiny.json", "--solver", "magic")
    assert r.returncode == 2 and "magic" in r.stderr and "Traceback" not in r.stderr


def test_solver_all_agrees(capsys):
    assert main(["solve", "instances/mixed.json", "--solver", "all"]) == 0
    out = capsys.readouterr().out
    assert "proven results agree" in out


def test_help_is_useful():
    r = run_cli("--help")
    assert r.returncode == 0 and "solve" in r.stdout and "examples" in r.stdout
    r = run_cli("solve", "--help")
    assert r.returncode == 0 and "--solver" in r.stdout and "Exit codes" in r.stdout


def test_long_allocation_is_plain_aligned_text(capsys, monkeypatch):
    """Past RICH_MAX_ROWS jobs the allocation is plain text: same title, columns and cells, aligned."""
    from elasticopt.cli import solve as solve_cli

    monkeypatch.setattr(solve_cli, "RICH_MAX_ROWS", 1)
    assert main(["solve", "instances/tiny.json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "allocation (dp)"
    assert lines[1].split() == ["job", "state", "current", "GPUs", "batch", "samples/s", "value"]
    rows = {ln.split()[0]: ln.split() for ln in lines[2:4]}
    assert sorted(rows) == ["a", "b"]
    assert [r[3:5] for r in rows.values()] == [["2", "64"], ["2", "64"]]  # the allocation --json reports
    assert len({len(ln) for ln in lines[1:4]}) == 1  # right-aligned numbers: every line as long as the header
    assert "OPTIMAL" in "\n".join(lines[4:])  # the summary table still follows


def _request(n=12):
    """A caller-values request as PolluxPolicy sends it, and the service's answer to it."""
    from elasticopt.integrations.pollux import PolluxPolicy
    from elasticopt.service import AllocationService

    class Node:
        resources, preemptible = {"nvidia.com/gpu": 4}, False

    class Job:
        def __init__(self, i):
            self.speedup_fn = lambda nodes, k: k / (1.0 + 0.05 * (i % 5) * (k - 1) + 0.2 * (nodes - 1))
            self.min_replicas, self.max_replicas, self.preemptible = 0, 8, True
            self.age, self.num_restarts = 100.0 + i, i % 3

    doc, _ = PolluxPolicy(client=object()).build_request({f"j{i}": Job(i) for i in range(n)},
                                                         {i: Node() for i in range(4)}, {})
    return doc, AllocationService().handle(dict(doc, solver="milp"))


def test_a_service_request_file_solves_as_the_service_answers_it(tmp_path, capsys):
    # a captured host request, replayed from the command line: the same model, the same optimum
    doc, answer = _request()
    f = tmp_path / "request.json"
    f.write_text(json.dumps(doc))
    assert main(["solve", str(f), "--solver", "all", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["agree"] and len(out["solutions"]) >= 3
    assert {s["objective"] for s in out["solutions"] if s["status"] == "optimal"} == {answer["objective"]}


def test_a_bad_request_file_names_file_and_json_path(tmp_path):
    doc, _ = _request(3)
    doc["jobs"][1]["options"][0]["gpus"] = -3
    f = tmp_path / "request.json"
    f.write_text(json.dumps(doc))
    r = run_cli("solve", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert str(f) in r.stderr and "jobs[1].options[0].gpus" in r.stderr and "-3" in r.stderr
    # neither an instance nor a request: the instance loader's own error
    f.write_text('{"format": "elasticopt-nothing/1"}')
    r = run_cli("solve", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr and str(f) in r.stderr


def test_an_output_that_cannot_be_written_is_a_clear_error_and_leaves_nothing(tmp_path, capsys):
    """A folder given as ``-o`` (or a file where a folder should be) was an internal IsADirectoryError: every
    command's output goes through ``elasticopt._io.atomic_path``, which now names the destination and what
    is in the way, and leaves no temporary file beside it."""
    before = sorted(p.name for p in tmp_path.iterdir())
    for argv, what in ((["solve", "instances/tiny.json", "--json", "-o", str(tmp_path)], "it is a directory"),
                       (["export", "instances/tiny.json", "-o", str(tmp_path)], "it is a directory"),
                       (["generate", "--family", "paper", "--jobs", "3", "--gpus", "8", "-o", str(tmp_path)],
                        "it is a directory")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path}: cannot write the output there ({what}); name a file, e.g. {tmp_path}/output." in err
    (tmp_path / "afile").write_text("x")
    assert main(["solve", "instances/tiny.json", "--json", "-o", str(tmp_path / "afile" / "sol.json")]) == 2
    assert f"({tmp_path / 'afile'} is a file, not a folder)" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before + ["afile"])  # no temporary file left
