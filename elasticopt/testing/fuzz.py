"""Mutation fuzzing of the files users hand in, and of ``elasticopt solve`` / ``simulate`` / ``launch`` (in-process).

:func:`mutate_text` turns a valid instance document into the text of a broken
(or sometimes still valid) one, changing its structure and its values:
values replaced by edge cases (NaN, inf, huge integer literals, floats where
integers belong, wrong types), keys deleted or added, list items duplicated or
dropped, nesting 100,000 deep, a top-level list, long ``priority`` lists with
duplicates, truncated text.  The randomness comes from a :class:`random.Random`,
so a seed reproduces a file, and hypothesis can drive it (``st.randoms()``).

:func:`run_solve` runs ``elasticopt solve FILE`` through
:func:`elasticopt.cli.main` in this process and :func:`classify` sorts the
outcome: ``solved`` (exit 0), ``infeasible`` (exit 1), ``disagree`` (exit 3),
``clean error`` (exit 2, the message names the file and a JSON path),
``error without file or path`` (exit 2 otherwise) and ``crash`` (an exception
escaped, a traceback was printed, or another exit code).

The same for every file a user hands in (docs/design.md §7, one loader
discipline): :func:`mutate_bytes` adds byte-level damage (non-UTF-8 bytes, a
NUL, a BOM) to any JSON file (jobs files, workloads, pools files),
:func:`mutate_csv` mutates a CSV workload (cells, rows, header), and
:func:`run_cli` runs any ``elasticopt`` command in this process under a wall
clock limit (a run past it is a ``hang``), classified by :func:`classify_cli`.

``validation/fuzz_cli.py`` runs a seeded batch and prints the counts.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import random
import re
import signal
import threading
from dataclasses import dataclass
from collections.abc import Iterator
from typing import Any

__all__ = ["MUTATIONS", "mutate_text", "mutate_bytes", "mutate_csv", "run_solve", "run_cli", "run_request", "SolveRun",
           "classify", "classify_cli", "names_file_and_path", "OUTCOMES"]

#: The outcome classes of :func:`classify`, in report order.
OUTCOMES: tuple[str, ...] = (
    "clean error",
    "solved",
    "infeasible",
    "disagree",
    "crash",
    "error without file or path",
    "hang",
)

#: Depth of the deeply nested values (deeper than Python's recursion limit).
DEEP = 100_000

_RAW = "@@raw{}@@"

#: Raw JSON texts placed where a value was (they cannot be made by json.dumps).
RAW_VALUES: tuple[str, ...] = (
    "1" + "0" * 4400,  # an integer literal over Python's 4300-digit limit
    "-" + "9" * 5000,
    "1e999",  # parses to inf
    "-1e999",
    "NaN",
    "Infinity",
    "-Infinity",
    "[" * DEEP + "]" * DEEP,
    '{"a":' * DEEP + "1" + "}" * DEEP,
)

#: Edge-case values put in place of an existing value.
VALUES: tuple[Any, ...] = (
    -1, 0, 1, 2, 3, 7, 2**31, 2**53 + 1, 2**63, 10**30,
    0.5, 1.0, 4.0, 8.5, -0.0, 1e-300, 1e18, 1e300,
    "", "x", "a" * 5000, None, True, False, [], {}, [1, 32, 1e18], [[1, 32, 1e18]],
)


def _nodes(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys/indices) in ``doc``, root included, iteratively."""
    out, stack = [], [(path, doc)]
    while stack:
        p, node = stack.pop()
        out.append(p)
        if isinstance(node, dict):
            stack.extend((p + (k,), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((p + (i,), v) for i, v in enumerate(node))
    out.reverse()
    return out


def _get(doc: Any, path: tuple) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


class _Raw:
    """A placeholder for raw JSON text, substituted after ``json.dumps``."""

    def __init__(self, text: str):
        self.text = text


def _dumps(doc: Any) -> str:
    raws: list[str] = []

    def enc(o: Any) -> Any:
        if isinstance(o, _Raw):
            raws.append(o.text)
            return _RAW.format(len(raws) - 1)
        raise TypeError(type(o).__name__)

    text = json.dumps(doc, default=enc)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(_RAW.format(i)), raw, 1)
    return text


def _replace_value(doc: Any, rng: random.Random) -> Any:
    path = rng.choice(_nodes(doc))
    value = _Raw(rng.choice(RAW_VALUES)) if rng.random() < 0.3 else copy.deepcopy(rng.choice(VALUES))
    return _set(doc, path, value)


def _numeric_value(doc: Any, rng: random.Random) -> Any:
    """A number somewhere replaced by an edge-case number (a throughput, a GPU count...)."""
    nums = [p for p in _nodes(doc) if isinstance(_get(doc, p), (int, float)) and not isinstance(_get(doc, p), bool)]
    if not nums:
        return _replace_value(doc, rng)
    choices = [v for v in VALUES if isinstance(v, (int, float)) and not isinstance(v, bool)]
    value = _Raw(rng.choice(RAW_VALUES[:7])) if rng.random() < 0.3 else rng.choice(choices)
    return _set(doc, rng.choice(nums), value)


def _delete_key(doc: Any, rng: random.Random) -> Any:
    dicts = [p for p in _nodes(doc) if isinstance(_get(doc, p), dict) and _get(doc, p)]
    if dicts:
        d = _get(doc, rng.choice(dicts))
        del d[rng.choice(sorted(d))]
    return doc


def _add_key(doc: Any, rng: random.Random) -> Any:
    dicts = [p for p in _nodes(doc) if isinstance(_get(doc, p), dict)]
    if dicts:
        d = _get(doc, rng.choice(dicts))
        d[rng.choice(["extra", "gpus", "min", "id", "batch", "throughput", "profile", "weight"])] = copy.deepcopy(
            rng.choice(VALUES)
        )
    return doc


def _edit_list(doc: Any, rng: random.Random) -> Any:
    lists = [p for p in _nodes(doc) if isinstance(_get(doc, p), list)]
    if not lists:
        return doc
    lst = _get(doc, rng.choice(lists))
    op = rng.randrange(5)
    if op == 0 and lst:
        lst.append(copy.deepcopy(rng.choice(lst)))  # duplicate an item (a job id, a point)
    elif op == 4 and lst:
        # grow it past what the model allows (a running job's nodes beyond its GPU count): distinct integers
        # where it holds integers (a schema may ask for unique items), else copies of its last item
        n = rng.choice([2, 3, 9])
        if all(type(x) is int for x in lst):
            lst.extend(range(max(lst) + 1, max(lst) + 1 + n))
        else:
            lst.extend(copy.deepcopy(lst[-1]) for _ in range(n))
    elif op == 1 and lst:
        del lst[rng.randrange(len(lst))]
    elif op == 2:
        lst.clear()
    else:
        rng.shuffle(lst)
    return doc


def _deep(doc: Any, rng: random.Random) -> Any:
    return _set(doc, rng.choice(_nodes(doc)), _Raw(rng.choice(RAW_VALUES[-2:])))


def _top_level(doc: Any, rng: random.Random) -> Any:
    jobs = doc.get("jobs", []) if isinstance(doc, dict) else []
    return rng.choice([[doc], jobs if isinstance(jobs, list) else [], 42, "instance", None])


def _priority(doc: Any, rng: random.Random) -> Any:
    if not isinstance(doc, dict):
        return doc
    jobs = doc.get("jobs")
    ids = [j.get("id") for j in (jobs if isinstance(jobs, list) else []) if isinstance(j, dict)] or ["a"]
    doc["priority"] = [rng.choice(ids) for _ in range(rng.choice([3, 50, 2000]))]
    return doc


def _throughput(doc: Any, rng: random.Random) -> Any:
    rows = [p for p in _nodes(doc) if len(p) >= 2 and p[-2] == "throughput" and isinstance(_get(doc, p), list)]
    if not rows:
        return _numeric_value(doc, rng)
    row = _get(doc, rng.choice(rows))
    if len(row) == 3:
        row[rng.randrange(3)] = rng.choice([1e18, 1e300, 1e-300, 10**400, 0.5, 2**63, -1.0])
    return doc


def _cluster(doc: Any, rng: random.Random) -> Any:
    if isinstance(doc, dict) and isinstance(doc.get("cluster"), dict):
        key = rng.choice(["gpus", "gpus_per_node"])
        doc["cluster"][key] = rng.choice([4.0, 8.5, 1e18, 2**63, 10**30, -0.0, 1e300])
    return doc


#: Name -> mutation of a parsed document (returns the new document).
MUTATIONS = {
    "replace value": _replace_value,
    "numeric value": _numeric_value,
    "delete key": _delete_key,
    "add key": _add_key,
    "edit list": _edit_list,
    "deep nesting": _deep,
    "top level": _top_level,
    "priority": _priority,
    "throughput": _throughput,
    "cluster": _cluster,
}


def mutate_text(text: str, rng: random.Random, rounds: int | None = None) -> str:
    """A mutated copy of the instance file ``text``.

    Parameters
    ----------
    text
        A valid instance file.
    rng
        The source of randomness (seeded ``random.Random``, or hypothesis' ``st.randoms()``).
    rounds
        How many mutations to apply (default 1 to 3, drawn from ``rng``).
    """
    doc: Any = json.loads(text)
    for _ in range(rounds if rounds is not None else rng.choice([1, 1, 1, 2, 3])):
        if isinstance(doc, (dict, list)):
            doc = MUTATIONS[rng.choice(sorted(MUTATIONS))](doc, rng)
    out = _dumps(doc)
    r = rng.random()
    if r < 0.03:
        out = out[: rng.randrange(len(out) + 1)]  # truncated
    elif r < 0.04:
        out = ""
    return out


def mutate_bytes(text: str, rng: random.Random) -> bytes:
    """A mutated copy of any JSON file ``text`` (:func:`mutate_text`), sometimes with byte-level damage.

    Damage (about one file in six): a byte that is not UTF-8, a NUL, a UTF-8 BOM in front, or
    the text in UTF-16.
    """
    raw = mutate_text(text, rng).encode("utf-8")
    r = rng.random()
    if r < 0.05 and raw:
        i = rng.randrange(len(raw))
        raw = raw[:i] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]) + raw[i:]
    elif r < 0.08:
        i = rng.randrange(len(raw) + 1)
        raw = raw[:i] + b"\x00" + raw[i:]
    elif r < 0.11:
        raw = b"\xef\xbb\xbf" + raw
    elif r < 0.13:
        raw = raw.decode("utf-8", "replace").encode("utf-16")
    return raw


#: Edge-case cells of a CSV workload.
CSV_CELLS: tuple[str, ...] = (
    "", "-1", "0", "0.5", "1e308", "1e999", "nan", "inf", "-inf", "NaN", "1" + "0" * 5000, "9" * 30, "x",
    "t4/imagenet", "no/such-profile", "1e-300", "2e18", '"', "a" * 200_000,
)


def mutate_csv(text: str, rng: random.Random) -> bytes:
    """A mutated copy of the CSV workload ``text``: cells, rows and header changed, bytes damaged.

    Parameters
    ----------
    text
        A valid CSV file (header first).
    rng
        The source of randomness.
    """
    rows = [line.split(",") for line in text.splitlines()]
    for _ in range(rng.choice([1, 1, 2, 3])):
        op = rng.randrange(7)
        if op <= 2 and len(rows) > 1:  # a cell of a data row
            r = rng.randrange(1, len(rows))
            if rows[r]:
                rows[r][rng.randrange(len(rows[r]))] = rng.choice(CSV_CELLS)
        elif op == 3 and len(rows) > 1:  # a row duplicated, dropped, cut or grown
            r = rng.randrange(1, len(rows))
            what = rng.randrange(4)
            if what == 0:
                rows.append(list(rows[r]))
            elif what == 1:
                del rows[r]
            elif what == 2:
                rows[r] = rows[r][: rng.randrange(len(rows[r]) + 1)]
            else:
                rows[r] = rows[r] + ["1", "extra"]
        elif op == 4 and rows:  # a header column renamed or dropped
            c = rng.randrange(len(rows[0]))
            if rng.random() < 0.5:
                rows[0][c] = rng.choice(["", "id", "extra", "total_samples", " arrival_s"])
            else:
                del rows[0][c]
        elif op == 5:  # many rows
            if len(rows) > 1:
                rows += [list(rows[1]) for _ in range(rng.choice([10, 200]))]
        else:  # only the header, or nothing
            rows = rows[:1] if rng.random() < 0.7 else []
    out = "\n".join(",".join(r) for r in rows) + ("\n" if rows else "")
    raw = out.encode("utf-8")
    r = rng.random()
    if r < 0.06 and raw:
        i = rng.randrange(len(raw))
        raw = raw[:i] + rng.choice([b"\xff", b"\x00", b"\r", b'"']) + raw[i:]
    elif r < 0.08:
        raw = b"\xef\xbb\xbf" + raw
    return raw


@dataclass(frozen=True)
class SolveRun:
    """What one in-process ``elasticopt solve`` did."""

    code: int | None  # exit code; None when an exception escaped
    stdout: str
    stderr: str
    exception: str = ""  # "Type: message" of an escaped exception


class _Hang(BaseException):
    """Raised in the main thread when a run passes its wall clock limit (not an Exception: the CLI lets it by)."""


@contextlib.contextmanager
def _limited(timeout_s: float | None, clock: str = "cpu") -> Iterator[None]:
    """Raise :class:`_Hang` in the main thread after ``timeout_s`` seconds of ``clock`` (``"cpu"``: the process's
    CPU seconds, ``ITIMER_PROF``, so a loaded machine does not make a slow run look hung; ``"wall"``:
    ``ITIMER_REAL``); elsewhere, or with None, no limit."""
    timed = timeout_s is not None and threading.current_thread() is threading.main_thread()

    def _alarm(_sig: int, _frame: Any) -> None:
        raise _Hang(f"no exit after {timeout_s} s ({clock} time)")

    sig, timer = (signal.SIGPROF, signal.ITIMER_PROF) if clock == "cpu" else (signal.SIGALRM, signal.ITIMER_REAL)
    old = signal.signal(sig, _alarm) if timed else None
    try:
        if timed:
            signal.setitimer(timer, float(timeout_s))  # type: ignore[arg-type]
        yield
    finally:
        if timed:
            signal.setitimer(timer, 0)
            signal.signal(sig, old)


def run_cli(argv: list[str], timeout_s: float | None = 10.0, clock: str = "cpu") -> SolveRun:
    """``elasticopt *argv`` in this process, output captured, stopped after ``timeout_s`` seconds.

    A run past ``timeout_s`` ends with ``code`` None and ``exception`` ``"hang: ..."``.  ``clock``
    ``"cpu"`` (default) counts the process's CPU seconds, ``"wall"`` wall seconds (see :func:`_limited`).
    Main thread only; elsewhere the run is not limited.
    """
    from elasticopt.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with _limited(timeout_s, clock), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code: int | None = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except _Hang as exc:
        return SolveRun(None, out.getvalue(), err.getvalue(), f"hang: {exc}")
    except BaseException as exc:  # noqa: BLE001 - that is what is being looked for
        if isinstance(exc, KeyboardInterrupt):
            raise
        return SolveRun(None, out.getvalue(), err.getvalue(), f"{type(exc).__name__}: {str(exc)[:300]}")
    return SolveRun(code, out.getvalue(), err.getvalue())


def run_request(service: Any, data: bytes, timeout_s: float | None = 10.0) -> tuple[str, str]:
    """``(outcome, message)`` of one request's bytes answered by an in-process
    :class:`~elasticopt.service.AllocationService` (one of :data:`OUTCOMES`): ``clean error`` (a structured
    error at a JSON path), ``solved`` / ``infeasible`` (answered), ``crash`` (an ``internal`` answer, a bug's,
    or an exception out of ``handle``, which never raises), ``error without file or path``, ``hang`` (past
    ``timeout_s`` CPU seconds)."""
    try:
        with _limited(timeout_s):
            resp = service.handle(data)
    except _Hang as exc:
        return "hang", f"hang: {exc}"
    except Exception as exc:  # noqa: BLE001 - handle() must not raise
        return "crash", f"{type(exc).__name__}: {str(exc)[:300]}"
    if resp.get("ok"):
        return ("infeasible" if resp.get("status") == "infeasible" else "solved"), ""
    err = resp.get("error") or {}
    message = f"{err.get('code')}: {err.get('message', '')}"[:400]
    if err.get("code") == "internal":
        return "crash", message
    return ("clean error" if err.get("path") else "error without file or path"), message


def run_solve(path: str, *extra: str, timeout_s: float | None = None) -> SolveRun:
    """``elasticopt solve PATH --json *extra`` in this process, output captured (see :func:`run_cli`)."""
    return run_cli(["solve", path, "--json", *extra], timeout_s=timeout_s)


#: A JSON path as the messages write it: ``(root)``, ``(file)``, ``cluster.gpus``, ``jobs[3].batch.max_local``,
#: ``[0].jobs`` (a document that is a list),
#: or a place in a CSV file: ``row 3.duration_s``, ``line 7``.
JSON_PATH = (r"(?:\((?:root|file)\)|(?:row|line) \d+(?:\.\w+)?|"
             r"(?:[A-Za-z_][\w-]*|\[\d+\])(?:\[\d+\])*(?:\.[\w-]+(?:\[\d+\])*)*)")


def names_file_and_path(message: str, path: str) -> bool:
    """Whether an error message reads ``... error: FILE: JSON_PATH: expected ...``."""
    return re.search(re.escape(path) + ": " + JSON_PATH + ": expected ", message) is not None


def classify(run: SolveRun, path: str) -> str:
    """The outcome class of ``run`` (one of :data:`OUTCOMES`)."""
    if run.exception.startswith("hang"):
        return "hang"
    if run.code is None or run.code not in (0, 1, 2, 3) or "Traceback" in run.stderr + run.stdout:
        return "crash"
    if run.code == 2:
        return "clean error" if names_file_and_path(run.stderr, path) else "error without file or path"
    return {0: "solved", 1: "infeasible", 3: "disagree"}[run.code]


def classify_cli(run: SolveRun, path: str, codes: tuple[int, ...] = (0, 1, 2, 3), accepted: str | None = None) -> str:
    """The outcome class of any command's ``run`` (one of :data:`OUTCOMES`).

    Parameters
    ----------
    run
        What :func:`run_cli` returned.
    path
        The file the command read.
    codes
        The exit codes the command documents; any other is a crash.
    accepted
        A regular expression: an exit-2 message matching it counts as ``solved`` (the file was
        read; e.g. the unknown-solver error a fuzz run uses to stop ``launch`` after loading).
    """
    if run.exception.startswith("hang"):
        return "hang"
    if run.code is None or run.code not in codes or "Traceback" in run.stderr + run.stdout:
        return "crash"
    if run.code == 2:
        if accepted is not None and re.search(accepted, run.stderr):
            return "solved"
        return "clean error" if names_file_and_path(run.stderr, path) else "error without file or path"
    return {0: "solved", 1: "infeasible", 3: "disagree"}.get(run.code, "solved")
