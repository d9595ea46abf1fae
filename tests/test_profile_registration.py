"""Your own throughput data (issue 16): a CSV table read into a TabularProfile, then registered by name."""

import json

import pytest

import elasticopt
from elasticopt.errors import InstanceError, ValidationError
from elasticopt.models import load_instance
from elasticopt.profiles import (
    TabularProfile,
    get_profile,
    profile_names,
    read_throughput_csv,
    register_profile,
    unregister_profile,
)

CSV = """gpus,global_batch,samples_per_s,note
1,64,400.0,
1,128,450.0,
2,128,780.0,
2,256,850.0,
4,256,1500.0,
4,512,,did not fit
"""


@pytest.fixture
def csv_file(tmp_path):
    f = tmp_path / "mine.csv"
    f.write_text(CSV)
    return f


@pytest.fixture
def registered(csv_file):
    prof = register_profile(read_throughput_csv(csv_file, "lab/mine", gpus_per_node=4))
    yield prof
    unregister_profile("lab/mine")


def test_csv_points_axis_and_unfit_cells(csv_file):
    p = read_throughput_csv(csv_file, "lab/mine")
    assert isinstance(p, TabularProfile) and p.batch_axis == "global" and p.name == "lab/mine"
    assert p.samples_per_s(2, 128) == 780.0 and p.samples_per_s(4, 256) == 1500.0
    assert p.points[(4, 512)] is None  # tried, did not fit
    assert (p.batch_min, p.batch_max, p.gpus_max) == (64, 256, 4)
    local = csv_file.with_name("local.csv")
    local.write_text("gpus,local_batch,samples_per_s\n1,32,100\n2,32,190\n")
    q = read_throughput_csv(local, "lab/local")
    assert q.batch_axis == "local" and q.samples_per_s(2, 64) == 190.0


@pytest.mark.parametrize("text, words", [
    ("gpus,samples_per_s\n1,2\n", ["line 1", "global_batch"]),
    ("gpus,global_batch,local_batch,samples_per_s\n1,2,2,3\n", ["one of global_batch / local_batch"]),
    ("gpus,global_batch,samples_per_s\n1,64,400\nx,64,3\n", ["line 3", "'gpus'", "an integer >= 1", "'x'"]),
    ("gpus,global_batch,samples_per_s\n1,64,400\n1,0,3\n", ["line 3", "'global_batch'"]),
    ("gpus,global_batch,samples_per_s\n1,64,-4\n", ["line 2", "samples_per_s", "'-4'"]),
    ("gpus,global_batch,samples_per_s\n1,64,nan\n", ["line 2", "'nan'"]),
    ("gpus,global_batch,samples_per_s\n1,64,4\n1,64,5\n", ["line 3", "line 2 has it too"]),
    ("gpus,global_batch,samples_per_s\n", ["at least one measured point"]),
])
def test_csv_errors_name_file_line_and_column(tmp_path, text, words):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(ValidationError) as ei:
        read_throughput_csv(f, "lab/bad")
    msg = str(ei.value)
    assert str(f) in msg
    for w in words:
        assert w in msg, msg


def test_missing_csv(tmp_path):
    with pytest.raises(ValidationError, match="readable CSV"):
        read_throughput_csv(tmp_path / "nope.csv", "lab/x")


def test_registered_profile_is_found_by_name_everywhere(registered, tmp_path):
    assert get_profile("lab/mine") is registered
    assert "lab/mine" in profile_names() and "lab/mine" in elasticopt.profile_names()
    doc = {"format": "elasticopt-instance/1", "cluster": {"gpus": 4, "gpus_per_node": 4}, "objective": "throughput",
           "jobs": [{"id": "a", "profile": "lab/mine"}, {"id": "b", "profile": "lab/mine"}]}
    f = tmp_path / "inst.json"
    f.write_text(json.dumps(doc))
    problem = load_instance(f)
    sol = elasticopt.solve(problem, "dp")
    assert elasticopt.verify(problem, sol).ok
    # by hand, 4 GPUs for two jobs: 2+2 GPUs at batch 256 give 850 + 850 = 1700; 4+0 give 1500; 2+1 give 850 + 450
    assert sol.objective_value == pytest.approx(1700.0)
    assert sol.allocation == {"a": (2, 256), "b": (2, 256)}


def test_register_rules(registered, csv_file):
    with pytest.raises(ValidationError, match="not registered yet"):
        register_profile(read_throughput_csv(csv_file, "lab/mine"))
    again = register_profile(read_throughput_csv(csv_file, "lab/mine"), replace=True)
    assert get_profile("lab/mine") is again
    assert register_profile(again) is again  # the same object again is fine
    with pytest.raises(ValidationError, match="no shipped profile"):
        register_profile(read_throughput_csv(csv_file, "a100/resnet50"))
    with pytest.raises(ValidationError, match="without spaces"):
        register_profile(read_throughput_csv(csv_file, "my lab"))
    with pytest.raises(ValidationError, match="ThroughputModel"):
        register_profile(object())


def test_unregistered_profile_is_unknown_again(csv_file, tmp_path):
    register_profile(read_throughput_csv(csv_file, "lab/gone"))
    unregister_profile("lab/gone")
    assert "lab/gone" not in profile_names()
    doc = {"format": "elasticopt-instance/1", "cluster": {"gpus": 4}, "jobs": [{"id": "a", "profile": "lab/gone"}]}
    f = tmp_path / "inst.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.profile"):
        load_instance(f)
