"""One loader discipline for every file a user hands in (issue 21, item 8).

Launch jobs files, workload files (JSON, CSV, Pollux CSV), pools files and service
requests are read through :mod:`elasticopt.models.jsontext`, as instance files are:
nesting depth, huge integers, NaN / Infinity, non-UTF-8 bytes and a missing file are
errors naming the file and the JSON path (or CSV row), never a traceback; pool sizes
beyond the named limits are refused; an unexpected exception exits 4, never 1.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elasticopt.errors import InstanceError, ValidationError
from elasticopt.launcher.jobsfile import load_jobs
from elasticopt.models import Cluster, load_instance
from elasticopt.models.cluster import MAX_GPUS_PER_NODE, MAX_NODES, MAX_POOL_GPUS, Pool
from elasticopt.models.jsontext import MAX_DEPTH, parse_json, read_csv, read_json
from elasticopt.scheduling.hetero import cluster_preset
from elasticopt.scheduling.pollux_trace import import_pollux
from elasticopt.scheduling.workload import MAX_WEIGHT, load_workload
from elasticopt.testing.fuzz import names_file_and_path, run_cli

ROOT = Path(__file__).resolve().parent.parent
JOBS = (ROOT / "elasticopt/launcher/examples/jobs_cpu.json").read_text()
WORKLOAD = {"format": "elasticopt-workload/1", "jobs": [
    {"id": "a", "arrival_s": 0, "profile": "t4/imagenet", "duration_s": 600},
    {"id": "b", "arrival_s": 60, "throughput": [[1, 64, 400.0], [2, 128, 780.0]], "batch_min": 64, "batch_max": 128,
     "max_local": 64, "total_samples": 100000},
]}
CSV = "id,arrival_s,profile,duration_s\na,0,t4/imagenet,600\nb,60,t4/imagenet,1200\n"
DEEP = "[" * 100_000 + "]" * 100_000


def err(loader, path, json_path, *words):
    """``loader(path)`` raises an InstanceError naming ``path`` and ``json_path``; returns the message."""
    with pytest.raises(InstanceError) as ei:
        loader(path)
    msg = str(ei.value)
    assert msg.startswith(f"{path}: {json_path}: expected "), msg
    for w in words:
        assert w in msg, msg
    assert len(msg) < 1000, msg
    return msg


# ---------------------------------------------------------------- the three measured jobs-file tracebacks


def test_jobs_file_with_infinity_in_a_throughput_row(tmp_path):
    f = tmp_path / "jobs.json"
    f.write_text(JOBS.replace("[1, 64, 4000]", "[1, 64, Infinity]", 1))
    err(load_jobs, f, "jobs[0].throughput[0][2]", "finite")


def test_jobs_file_nested_100000_deep(tmp_path):
    f = tmp_path / "jobs.json"
    f.write_text('{"format": "elasticopt-jobs/1", "jobs": ' + DEEP + "}")
    err(load_jobs, f, "(root)", "nested")


def test_jobs_file_nested_deeper_than_the_limit_but_parseable(tmp_path):
    doc = json.loads(JOBS)
    doc["jobs"][0]["env"] = {"X": json.loads("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2))}
    f = tmp_path / "jobs.json"
    f.write_text(json.dumps(doc))
    err(load_jobs, f, "jobs[0].env.X" + "[0]" * (MAX_DEPTH - 4), "levels of nesting")


def test_jobs_file_not_utf8(tmp_path):
    f = tmp_path / "jobs.json"
    f.write_bytes(JOBS.encode().replace(b"mlp-a", b"ml\xff-a"))
    err(load_jobs, f, "(root)", "UTF-8", "0xff", "byte offset")


def test_jobs_file_huge_integer_and_missing_file(tmp_path):
    f = tmp_path / "jobs.json"
    f.write_text(JOBS.replace("400000", "1" + "0" * 5000, 1))
    err(load_jobs, f, "jobs[0].total_samples", "5,001 digits")
    err(load_jobs, tmp_path / "none.json", "(file)", "No such file")


# ---------------------------------------------------------------- workload files


def test_workload_json_edge_values_name_file_and_path(tmp_path):
    f = tmp_path / "wl.json"
    for text, path, word in [
        (json.dumps(WORKLOAD).replace('"duration_s": 600', '"duration_s": NaN'), "jobs[0].duration_s", "finite"),
        (json.dumps(WORKLOAD).replace("780.0", "1e999"), "jobs[1].throughput[1][2]", "finite"),
        ('{"format": "elasticopt-workload/1", "jobs": ' + DEEP + "}", "(root)", "nested"),
        (json.dumps(WORKLOAD).replace('"arrival_s": 60', '"arrival_s": 9007199254740993'), "jobs[1].arrival_s",
         "2**53"),
    ]:
        f.write_text(text)
        err(load_workload, f, path, word)
    f.write_bytes(b"\xfe\xff" + json.dumps(WORKLOAD).encode("utf-16-be"))
    err(load_workload, f, "(root)", "UTF-8")


def test_duration_whose_samples_overflow_blames_that_job(tmp_path):
    doc = json.loads(json.dumps(WORKLOAD))
    doc["jobs"][0]["duration_s"] = 1e308
    f = tmp_path / "wl.json"
    f.write_text(json.dumps(doc))
    msg = err(load_workload, f, "jobs[0].duration_s", "finite", "1e+308")
    assert "remaining_samples" not in msg and "jobs[1]" not in msg


def test_workload_weight_over_the_named_limit(tmp_path):
    doc = json.loads(json.dumps(WORKLOAD))
    doc["jobs"][1]["weight"] = MAX_WEIGHT * 10
    f = tmp_path / "wl.json"
    f.write_text(json.dumps(doc))
    err(load_workload, f, "jobs[1].weight", "MAX_WEIGHT")


def test_workload_csv_bad_bytes_header_and_rows(tmp_path):
    f = tmp_path / "wl.csv"
    f.write_bytes(CSV.encode().replace(b"b,60", b"\xffb,60"))
    err(load_workload, f, "(root)", "UTF-8")
    f.write_text(CSV.replace("duration_s", " duration_s"))
    err(load_workload, f, "header", "column names", "' duration_s'")
    f.write_text(CSV + "c,0,t4/imagenet,10,1,2\n")
    err(load_workload, f, "row 4", "at most 4 cells")
    f.write_text(CSV.replace("1200", "inf"))
    err(load_workload, f, "row 3.duration_s", "finite")
    f.write_text(CSV.replace("1200", '"12\n'))
    err(load_workload, f, "line 4", "CSV record", "unexpected end of data")  # the quote runs to the end
    assert [j.id for j in load_workload(_write(tmp_path / "ok.csv", "\ufeff" + CSV))] == ["a", "b"]  # BOM dropped


def test_pollux_csv_goes_through_the_same_reader(tmp_path):
    head = "name,time,application,num_replicas,batch_size\n"
    f = _write(tmp_path / "p.csv", head + "j1,0,imagenet,2,200\n")
    assert [j.id for j in import_pollux(f)] == ["j1"]
    _write(f, head + "j1,inf,imagenet,2,200\n")
    err(import_pollux, f, "row 2.time", "finite")
    _write(f, head + "j1,0,imagenet\n")
    err(import_pollux, f, "row 2", "5 cells")
    f.write_bytes((head + "j\xe91,0,imagenet,2,200\n").encode("latin-1"))
    err(import_pollux, f, "(root)", "UTF-8")


# ---------------------------------------------------------------- pools files and service requests


def test_pools_file(tmp_path):
    f = _write(tmp_path / "pools.json", '{"pools": {"a100": {"nodes": 2, "gpus_per_node": 8}}}')
    assert cluster_preset(str(f)).gpus == 16
    for text, path, word in [
        ('{"pools": {"a100": {"nodes": Infinity, "gpus_per_node": 8}}}', "pools.a100.nodes", "finite"),
        ('{"pools": {"a100": {"nodes": 1000000000, "gpus_per_node": 8}}}', "pools.a100.nodes", "MAX_NODES"),
        ('{"pools": {"a100": {"nodes": 2, "gpus_per_node": 8.0}}}', "pools.a100.gpus_per_node", "integer"),
        ('{"pools": {"a100": {"nodes": 2, "gpus_per_node": 8, "x": 1}}}', "pools.a100.x", "a pool field: nodes, gpus_per_node"),
        ('{"pools": ' + DEEP + "}", "(root)", "nested"),
    ]:
        _write(f, text)
        err(lambda p: cluster_preset(str(p)), f, path, word)


def test_service_requests_use_the_same_checks():
    from elasticopt.service.protocol import ServiceError, parse_request

    for data, code, path in [
        (b'{"format": "elasticopt-request/1", "x": NaN}', "invalid_request", "x"),
        (b'{"a": [' + b"1" * 5000 + b"]}", "invalid_request", "a[0]"),
        (DEEP.encode(), "invalid_json", "(root)"),
        (b'{"a": "\xff"}', "invalid_json", "(root)"),
    ]:
        with pytest.raises(ServiceError) as ei:
            parse_request(data)
        assert (ei.value.code, ei.value.path) == (code, path), ei.value


def test_shared_reader_functions(tmp_path):
    assert parse_json(b'{"a": [1, 2.5]}', "x") == {"a": [1, 2.5]}
    assert read_json(_write(tmp_path / "a.json", '{"k": 1}')) == {"k": 1}
    assert read_csv(_write(tmp_path / "a.csv", "x,y\n\n1,2\n")) == [["x", "y"], ["1", "2"]]
    with pytest.raises(InstanceError, match=r"a directory"):
        read_json(tmp_path)


# ---------------------------------------------------------------- sizes: named limits, in seconds and megabytes


def test_pool_size_limits_are_named():
    with pytest.raises(ValidationError, match="MAX_NODES"):
        Pool(MAX_NODES + 1, 1)
    with pytest.raises(ValidationError, match="MAX_GPUS_PER_NODE"):
        Pool(1, MAX_GPUS_PER_NODE + 1)
    with pytest.raises(ValidationError, match="MAX_POOL_GPUS"):
        Pool(MAX_NODES, MAX_GPUS_PER_NODE)
    with pytest.raises(ValidationError, match=r"cluster.gpus.*MAX_NODES"):
        Cluster(10**9, 8)
    assert Cluster(MAX_POOL_GPUS, 64).gpus == MAX_POOL_GPUS  # at the limit: built, no per-node list
    assert Pool(MAX_NODES, 16).gpus == MAX_NODES * 16


def _instance(tmp_path, gpus: int, gpus_per_node: int = 8) -> Path:
    doc = json.loads((ROOT / "instances/tiny.json").read_text())
    doc["cluster"] = {"gpus": gpus, "gpus_per_node": gpus_per_node}
    return _write(tmp_path / "big.json", json.dumps(doc))


@pytest.mark.parametrize("gpus", [10**9, 2**40])
def test_huge_one_pool_instance_is_refused_with_a_named_limit(tmp_path, gpus):
    f = _instance(tmp_path, gpus)
    err(load_instance, f, "cluster.gpus", "MAX_NODES")


#: Runs ``python -m elasticopt ARGS`` and writes, last on stderr, the peak resident memory of that program itself:
#: VmHWM of its own address space (Linux ``/proc``).  ``ru_maxrss`` cannot tell: the child is forked from the test
#: process before it execs, and Linux keeps the larger of the two peaks across exec, so a test process past 2 GB
#: (2.4 GB at this point of the suite) read as a 2.4 GB child; ``RUSAGE_CHILDREN`` is moreover the largest of every
#: child ever reaped.
_PEAK_WRAPPER = (
    "import runpy, sys\n"
    "try:\n"
    "    runpy.run_module('elasticopt', run_name='__main__', alter_sys=True)\n"
    "finally:\n"
    "    hwm = [x for x in open('/proc/self/status') if x.startswith('VmHWM:')][0].split()[1]\n"
    "    sys.stderr.write(f'\\npeak-kib {hwm}\\n')\n"
)


def _run_measured(args: list[str], timeout_s: float) -> tuple[int, str, float, int]:
    """``python -m elasticopt ARGS``: (exit code, stderr without the peak line, wall seconds, its peak in KiB)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _PEAK_WRAPPER] + args, capture_output=True, text=True,
                       timeout=timeout_s)
    wall_s = time.perf_counter() - t0
    head, _, peak = r.stderr.rpartition("\npeak-kib ")
    return r.returncode, head, wall_s, int(peak.split()[0])


def test_a_billion_gpu_instance_is_answered_in_seconds_and_megabytes(tmp_path):
    """The issue's check: a 10**9-GPU one-pool instance solves or is refused in < 10 s and < 2 GB (own process)."""
    f = _instance(tmp_path, 10**9)
    code, stderr, wall_s, peak_kib = _run_measured(["solve", str(f)], 60)
    assert code == 2 and "MAX_NODES" in stderr and "Traceback" not in stderr, stderr
    assert wall_s < 10, wall_s
    assert 0 < peak_kib < 2 * 1024 * 1024, peak_kib


def test_largest_allowed_one_pool_instance_solves_in_seconds(tmp_path):
    f = _instance(tmp_path, MAX_POOL_GPUS, 64)  # 16.7 M GPUs on 262,144 nodes: the jobs use 6 of them
    t0 = time.perf_counter()
    run = run_cli(["solve", str(f), "--json"], timeout_s=None)
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "optimal"
    assert time.perf_counter() - t0 < 30


# ---------------------------------------------------------------- a Python exception never decides an exit code


def test_unexpected_exception_exits_4_with_one_line(monkeypatch, tmp_path):
    import elasticopt.cli.solve as solve_cli

    def boom(*_a, **_k):
        raise TypeError("a bug")

    monkeypatch.setattr(solve_cli, "load_instance", boom)
    run = run_cli(["solve", str(ROOT / "instances/tiny.json")], timeout_s=None)
    assert run.code == 4, run
    assert "internal error" in run.stderr and "TypeError: a bug" in run.stderr and "Traceback" not in run.stderr
    run = run_cli(["-v", "solve", str(ROOT / "instances/tiny.json")], timeout_s=None)
    assert run.code == 4 and "Traceback" in run.stderr  # -v: the traceback, for the bug report

    def oom(*_a, **_k):
        raise MemoryError

    monkeypatch.setattr(solve_cli, "load_instance", oom)
    run = run_cli(["solve", str(ROOT / "instances/tiny.json")], timeout_s=None)
    assert run.code == 4 and "out of memory" in run.stderr


def test_errors_name_file_and_path_in_the_fuzz_form(tmp_path):
    f = tmp_path / "jobs.json"
    f.write_text(JOBS.replace("[1, 64, 4000]", "[1, 64, Infinity]", 1))
    run = run_cli(["launch", str(f), "--cpu-slots", "1", "--out", str(tmp_path / "run")], timeout_s=None)
    assert run.code == 2 and names_file_and_path(run.stderr, str(f)), run.stderr


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_format_2_job_whose_options_all_exceed_the_cluster_loads_and_waits(tmp_path):
    """Found by the fuzz: the loader's "any option at all" probe built a pool over MAX_GPUS_PER_NODE."""
    doc = {"format": "elasticopt-instance/2", "cluster": {"pools": {"a100": {"nodes": 1, "gpus_per_node": 8}}},
           "jobs": [{"id": "big", "throughput": [["a100", 16, 256, 100.0]]},
                    {"id": "small", "throughput": [["a100", 2, 64, 50.0]]}]}
    f = _write(tmp_path / "big.json", json.dumps(doc))
    assert [j.id for j in load_instance(f).jobs] == ["big", "small"]
    run = run_cli(["solve", str(f), "--json"], timeout_s=None)
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout)["allocation"] == {"big": None, "small": {"gpus": 2, "batch": 64}}
