"""Workload files, the generator, the Pollux importer, records and the simulate CLI."""

import json

import pytest

from elasticopt.errors import InstanceError
from elasticopt.scheduling.workload_generator import generate_workload, philly_shapes
from elasticopt.scheduling.pollux_trace import import_pollux
from elasticopt.scheduling.records import read_jobs_csv, write_jobs_csv
from elasticopt.scheduling.simulator import SimulationConfig, simulate
from elasticopt.testing.toy import toy_job
from elasticopt.scheduling.workload import load_workload, save_workload


def test_generator_deterministic_feasible_and_at_load():
    a = generate_workload(300, 64, 1.5, seed=3)
    b = generate_workload(300, 64, 1.5, seed=3)
    assert [(j.id, j.arrival_s, j.total_samples, j.throughput.name) for j in a] == \
           [(j.id, j.arrival_s, j.total_samples, j.throughput.name) for j in b]
    assert a[0].arrival_s == 0 and all(x.arrival_s <= y.arrival_s for x, y in zip(a, a[1:]))
    for j in a:
        assert j.submitted_gpus <= 16 and j.throughput.samples_per_s(j.submitted_gpus, j.submitted_batch) > 0
        assert j.batch_min <= j.submitted_batch <= j.batch_max and j.submitted_batch % j.submitted_gpus == 0
    # offered load = submitted GPU-seconds per second of arrivals / GPUs
    work = sum(j.submitted_gpus * j.total_samples / j.throughput.samples_per_s(j.submitted_gpus, j.submitted_batch)
               for j in a)
    span = a[-1].arrival_s * len(a) / (len(a) - 1)
    assert 1.0 < work / span / 64 < 2.2


def test_philly_fit_matches_trace_shape():
    import numpy as np

    shapes = philly_shapes(20000, np.random.default_rng(0))
    ks = np.array([s.gpus for s in shapes])
    d = np.array([s.duration_s for s in shapes])
    assert 0.93 < np.mean(ks == 1) < 0.96
    assert 1000 < np.median(d[ks == 1]) < 1800  # trace: 1393 s
    assert d.min() >= 60


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_roundtrip(tmp_path, suffix):
    jobs = generate_workload(20, 16, 1.0, seed=1)
    save_workload(jobs, tmp_path / f"w{suffix}")
    back = load_workload(tmp_path / f"w{suffix}")
    assert [(j.id, j.arrival_s, j.total_samples, j.submitted_gpus, j.submitted_batch, j.throughput.name)
            for j in back] == [(j.id, j.arrival_s, j.total_samples, j.submitted_gpus, j.submitted_batch,
                                j.throughput.name) for j in jobs]


def test_json_inline_throughput_and_duration(tmp_path):
    p = tmp_path / "w.json"
    save_workload([toy_job("a", submitted_gpus=2, submitted_batch=64)], p)
    back = load_workload(p)[0]
    assert back.throughput.samples_per_s(2, 64) == toy_job("a").throughput.samples_per_s(2, 64)
    doc = {"format": "elasticopt-workload/1", "jobs": [
        {"id": "x", "arrival_s": 5, "throughput": [[1, 64, 100.0], [2, 128, 180.0]],
         "batch_min": 64, "batch_max": 128, "max_local": 64, "duration_s": 60, "submitted_batch": 64}]}
    p.write_text(json.dumps(doc))
    (x,) = load_workload(p)
    assert x.total_samples == 6000.0 and x.arrival_s == 5.0


@pytest.mark.parametrize("row, where", [
    ("a,0,t4/nosuch,100", "row 2.profile"),
    ("a,-1,t4/imagenet,100", "row 2.arrival_s"),
    ("a,0,t4/imagenet,abc", "row 2.total_samples"),
    ("a,0,t4/imagenet,", "row 2.total_samples"),
])
def test_csv_errors_name_file_and_row(tmp_path, row, where):
    p = tmp_path / "bad.csv"
    p.write_text("id,arrival_s,profile,total_samples\n" + row + "\n")
    with pytest.raises(InstanceError) as e:
        load_workload(p)
    assert str(p) in str(e.value) and where in str(e.value)


def test_infeasible_submitted_option_rejected(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("id,arrival_s,profile,total_samples,submitted_gpus,submitted_batch\na,0,t4/imagenet,100,3,64\n")
    with pytest.raises(InstanceError, match="does not divide"):
        load_workload(p)


def test_pollux_importer(tmp_path):
    p = tmp_path / "workload-1.csv"
    p.write_text("name,time,application,num_replicas,batch_size\n"
                 "cifar10-0,0,cifar10,1,128\nimagenet-1,120,imagenet,4,3\nbert-2,300,bert,2,12\n")
    warns: list[str] = []
    jobs = import_pollux(p, warnings=warns)
    assert [j.id for j in jobs] == ["cifar10-0", "imagenet-1", "bert-2"]
    assert jobs[0].throughput.name == "t4/cifar10" and jobs[0].total_samples == 100 * 50_000
    assert (jobs[0].submitted_gpus, jobs[0].submitted_batch) == (1, 128)
    assert len(warns) == 1 and "imagenet-1" in warns[0]  # b=3 is below imagenet's batch range
    assert jobs[1].submitted_batch % jobs[1].submitted_gpus == 0
    res = simulate(jobs, "static", SimulationConfig(gpus=8))
    assert res.metrics.completed == 3


def test_records_csv_roundtrip(tmp_path):
    jobs = [toy_job("a"), toy_job("b", arrival_s=5.0)]
    res = simulate(jobs, "static", SimulationConfig(gpus=1, horizon_s=250.0))
    write_jobs_csv(tmp_path / "jobs.csv", res.records)
    assert tuple(read_jobs_csv(tmp_path / "jobs.csv")) == res.records


def test_cli_generate_and_simulate(tmp_path, capsys):
    from elasticopt.cli.simulate import register, run
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    wl = tmp_path / "wl.csv"
    args = parser.parse_args(["simulate", "--generate", str(wl), "--gpus", "8", "--jobs", "12", "--load", "2",
                              "--duration-max-s", "3600"])
    assert run(args) == 0 and wl.is_file()
    out = tmp_path / "out"
    args = parser.parse_args(["simulate", str(wl), "--gpus", "8", "--solver", "numpy-dp", "--policy", "elastic",
                              "--policy", "fixed-batch", "--policy", "static-backfill", "--out", str(out),
                              "--quiet"])
    assert run(args) == 0
    text = capsys.readouterr().out
    assert "elastic" in text and "fixed-batch" in text and "completed_elastic_over_fixed_batch" in text
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["metrics"]) == {"elastic", "fixed-batch", "static-backfill"}
    assert summary["metrics"]["elastic"]["completed"] == 12
    for f in ("jobs-elastic.csv", "timeline-static-backfill.csv", "jct_cdf.png", "timeline.png"):
        assert (out / f).stat().st_size > 0
