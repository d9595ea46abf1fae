"""Bad instance files found by mutation fuzzing (issue 16): one regression test per class,
and a hypothesis test that mutates valid files and runs ``elasticopt solve`` in-process.

Every bad file exits 2 with a message that names the file and a JSON path in the
``jobs[i].field`` form, never a traceback; found values are cut short.
"""

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.errors import InstanceError, ValidationError, short_repr
from elasticopt.models import load_instance, problem_from_dict
from elasticopt.models.jsontext import MAX_DEPTH
from elasticopt.testing.fuzz import classify, mutate_bytes, mutate_text, names_file_and_path, run_solve

GOOD = {
    "format": "elasticopt-instance/1",
    "cluster": {"gpus": 8, "gpus_per_node": 4},
    "objective": "throughput",
    "jobs": [
        {"id": "a", "throughput": [[1, 32, 100.0], [2, 64, 180.0]], "batch": {"min": 32, "max": 64, "max_local": 32}},
        {"id": "b", "throughput": [[1, 16, 50.0]], "running": {"gpus": 1, "batch": 16}},
    ],
}
HEAD = '{"format": "elasticopt-instance/1", "cluster": {"gpus": %s, "gpus_per_node": 4}, "jobs": []}'


def solve_text(tmp_path, text: str):
    """``elasticopt solve`` on a file holding ``text``: (exit code, stderr, path); asserts no crash."""
    f = tmp_path / "bad.json"
    f.write_text(text)
    run = run_solve(str(f))
    assert classify(run, str(f)) != "crash", run
    return run.code, run.stderr, str(f)


def solve_doc(tmp_path, edit):
    doc = json.loads(json.dumps(GOOD))
    edit(doc)
    return solve_text(tmp_path, json.dumps(doc))


def assert_clean(code, err, path, json_path, *words):
    assert code == 2, err
    assert names_file_and_path(err, path), err
    assert f"{path}: {json_path}: expected" in err, err
    for w in words:
        assert w in err, err
    assert "Traceback" not in err and len(err) < 1000, err


@pytest.mark.parametrize("deep", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000])
def test_nesting_100000_deep_is_an_error_not_a_recursion_error(tmp_path, deep):
    code, err, path = solve_text(tmp_path, HEAD.replace("%s", deep))
    assert_clean(code, err, path, "(root)", "nested")


def test_nesting_that_parses_but_is_too_deep_is_named_where_it_is(tmp_path):
    code, err, path = solve_doc(tmp_path, lambda d: d["jobs"][0].update(id=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]))
    assert MAX_DEPTH < 40
    assert_clean(code, err, path, "jobs[0].id" + "[0]" * (MAX_DEPTH - 3), "levels of nesting")


@pytest.mark.parametrize("literal", ["1" + "0" * 4400, "-" + "9" * 5000])
def test_integer_literal_over_4300_digits(tmp_path, literal):
    code, err, path = solve_text(tmp_path, HEAD % literal)
    assert_clean(code, err, path, "cluster.gpus", "digits", "2**53")
    assert literal[:50] not in err


def test_integer_beyond_the_exact_range_of_json(tmp_path):
    code, err, path = solve_doc(tmp_path, lambda d: d["jobs"][1]["gpus"].update(max=10**30) if "gpus" in d["jobs"][1]
                                else d["jobs"][1].update(gpus={"max": 10**30}))
    assert_clean(code, err, path, "jobs[1].gpus.max", "2**53")


def test_huge_throughput_blames_the_throughput_of_the_right_job(tmp_path):
    def edit(d):
        d["jobs"][1]["throughput"] = [[1, 16, 50.0], [1, 32, 1e18]]
        d["jobs"][1]["batch"] = {"max": 32}

    code, err, path = solve_doc(tmp_path, edit)
    assert_clean(code, err, path, "jobs[1].throughput", "1e+18", "job 'b'")
    assert "weight" not in err.split("expected")[0]


def test_huge_weight_blames_the_weight(tmp_path):
    code, err, path = solve_doc(tmp_path, lambda d: d["jobs"][0].update(weight=1e300))
    assert_clean(code, err, path, "jobs[0].weight", "1e+300")


def test_huge_throughput_through_the_python_api_names_the_job():
    doc = json.loads(json.dumps(GOOD))
    doc["jobs"][0]["throughput"][0][2] = 1e18
    import elasticopt

    with pytest.raises(ValidationError, match=r"^jobs\[0\]\.throughput: expected values small enough"):
        elasticopt.solve(problem_from_dict(doc), "numpy-dp")


@pytest.mark.parametrize("top", [[GOOD] * 200, 42, "instance", None])
def test_top_level_not_an_object_does_not_dump_the_document(tmp_path, top):
    code, err, path = solve_text(tmp_path, json.dumps(top))
    assert_clean(code, err, path, "(root)", "a JSON object")
    assert "throughput" not in err


def test_long_priority_with_duplicates_names_the_first_duplicate(tmp_path):
    code, err, path = solve_doc(tmp_path, lambda d: d.update(priority=["a", "b"] * 2000))
    assert_clean(code, err, path, "priority[2]", "at most once", "priority[0] has it too", "'a'")


def test_priority_naming_an_unknown_job(tmp_path):
    code, err, path = solve_doc(tmp_path, lambda d: d.update(priority=["a", "zz" * 500]))
    assert_clean(code, err, path, "priority[1]", "the id of a job", "1,000 characters")


@pytest.mark.parametrize("field, value", [("gpus", 4.0), ("gpus", 1e18), ("gpus_per_node", 8.5), ("gpus_per_node", 4.0)])
def test_floats_in_cluster_integers(tmp_path, field, value):
    code, err, path = solve_doc(tmp_path, lambda d: d["cluster"].update({field: value}))
    assert_clean(code, err, path, f"cluster.{field}", "type integer", repr(value))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_throughput(tmp_path, literal):
    text = json.dumps(GOOD).replace("180.0", literal)
    code, err, path = solve_text(tmp_path, text)
    assert_clean(code, err, path, "jobs[0].throughput[1][2]", "finite")


def test_float_in_a_job_integer_is_named_in_the_file_form(tmp_path):
    code, err, path = solve_doc(tmp_path, lambda d: d["jobs"][1]["running"].update(gpus=4.0))
    assert_clean(code, err, path, "jobs[1].running.gpus", "type integer")


def test_long_string_values_are_cut_short(tmp_path):
    code, err, path = solve_doc(tmp_path, lambda d: d.update(objective="x" * 10_000))
    assert_clean(code, err, path, "objective", "10,000 characters")


def test_errors_from_memory_name_memory():
    doc = json.loads(json.dumps(GOOD))
    doc["jobs"][0]["weight"] = float("nan")
    with pytest.raises(InstanceError, match=r"^<memory>: jobs\[0\]\.weight: expected a finite number"):
        problem_from_dict(doc)


def test_short_repr_cuts_long_values():
    assert short_repr("abc") == "'abc'"
    long = short_repr(tuple(range(10_000)))
    assert len(long) < 250 and "characters in all" in long


def test_valid_instances_still_load():
    for f in sorted(Path("instances").glob("*.json")):
        assert load_instance(f).jobs


# --- hypothesis: mutate valid files, run the CLI in-process ---------------------------------

SOURCES = {name: Path("instances", name).read_text() for name in ("tiny.json", "mixed.json", "infeasible.json",
                                                                   "paper-small.json", "hetero-sia-12.json",
                                                                   "placement-fragmented-12.json")}


@settings(max_examples=max(200, settings().max_examples))  # the "ci" profile's 60 rarely reach every class
@given(source=st.sampled_from(sorted(SOURCES)), rng=st.randoms(use_true_random=False))
def test_mutated_instance_files_never_crash_the_cli(source, rng: random.Random):
    raw = mutate_bytes(SOURCES[source], rng)  # mutate_text's document, sometimes with bytes that are not UTF-8
    text = raw[:300]
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / f"mutated-{source}")
        Path(path).write_bytes(raw)
        run = run_solve(path, timeout_s=10.0)  # CPU seconds: past them the run counts as a hang
    assert run.exception == "", (run.exception, text[:300])
    assert run.code in (0, 1, 2, 3), run
    assert "Traceback" not in run.stderr
    if run.code == 2:
        assert names_file_and_path(run.stderr, path), run.stderr
    assert classify(run, path) not in ("crash", "error without file or path")


# --- a document built in Python takes the file's fast path: the same answers as the slow path ----------------


def _outcome(doc):
    try:
        return ("problem", problem_from_dict(doc))
    except (InstanceError, ValidationError) as exc:
        return ("error", str(exc))


@settings(max_examples=max(150, settings().max_examples))
@given(source=st.sampled_from(sorted(SOURCES)), rng=st.randoms(use_true_random=False),
       python_only=st.sampled_from([None, float("nan"), float("inf"), 2**60, (1, 2), -0.0]))
def test_documents_built_in_python_load_as_the_slow_path_loads_them(source, rng, python_only):
    """``problem_from_dict`` of a dict: the compiled schema's fast path where the dict is plain JSON
    (``fastload.plain_json``: 3.2 s -> 0.29 s for a 1,000-job caller-values document, all in jsonschema
    before), the same problem or the same error, word for word, as the slow path (jsonschema) gives it.
    Values JSON has no text for (NaN, infinity, a long integer, a tuple) must take the slow path."""
    import elasticopt.models.instance as instance

    text = mutate_text(SOURCES[source], rng)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's parser (the file tests' case)
        return
    if python_only is not None and isinstance(doc, dict) and isinstance(doc.get("jobs"), list) and doc["jobs"]:
        job = doc["jobs"][rng.randrange(len(doc["jobs"]))]
        if isinstance(job, dict):
            job[rng.choice(["weight", "remaining_samples", "id"])] = python_only
    fast = _outcome(doc)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(instance, "plain_json", lambda data: False)
        slow = _outcome(doc)
    assert slow == fast


def test_plain_json_refuses_what_json_text_cannot_hold():
    from elasticopt.models.fastload import plain_json

    assert plain_json(json.loads(json.dumps(GOOD)))
    for bad in (float("nan"), float("inf"), 2**60, 10**15, (1, 2), {1: 2}):
        assert not plain_json({"a": [bad]}), bad
    assert plain_json({"a": [10**14, 1.5, True, None, "x"]})


# Bytes that can make or break a match of the loader's screen, with a few that cannot.
_SCREEN_ALPHABET = b"0123456789eE+-.NaIinfty \"x,[]{}:\xc3\xa9"


@settings(max_examples=max(500, settings().max_examples))
@given(raw=st.lists(st.sampled_from([bytes([c]) for c in _SCREEN_ALPHABET]) | st.sampled_from(
    [b"NaN", b"Infinity", b"1e999", b"E+10", b"e-300", b"9" * 15, b"9" * 16, b"0.1234567890123456"]),
    max_size=60).map(b"".join))
def test_the_loader_screen_answers_as_its_regular_expression(raw):
    """``fastload.needs_slow_parse`` (translate + substrings) is the regular expression ``_SLOW``, sped up."""
    from elasticopt.models.fastload import _SLOW, needs_slow_parse

    assert needs_slow_parse(raw) == (_SLOW.search(raw) is not None)


@pytest.mark.parametrize("text, slow", [
    (b'{"a": 123456789012345}', False), (b'{"a": 1234567890123456}', True), (b'[1E+999]', True),
    (b'[1e-05, 2.5e+10]', False), (b'[1e-300]', True), (b'["NaN"]', True), (b'[-Infinity]', True),
    (b'[0.30000000000000004]', True), (b'{"id": "E000"}', True), (b'{"id": "e00"}', False),
])
def test_the_loader_screen_by_hand(text, slow):
    from elasticopt.models.fastload import needs_slow_parse

    assert needs_slow_parse(text) is slow
