"""Every file a user hands in, read defensively: every failure is an InstanceError naming the file.

The one loader discipline of elasticopt (docs/design.md §7): instance files
(:func:`elasticopt.models.load_instance`), launch jobs files
(:mod:`elasticopt.launcher.jobsfile`), workload files, JSON and CSV
(:mod:`elasticopt.scheduling.workload`, the Pollux CSV importer), pools files
(``--cluster POOLS.json``) and service requests
(:func:`elasticopt.service.protocol.parse_request`) are all read here:
:func:`read_json` / :func:`parse_json` for JSON, :func:`read_csv` for CSV.

What the standard library lets through or lets escape, and what happens here:

- a missing or unreadable file (``OSError``), bytes that are not UTF-8
  (``UnicodeDecodeError``): an error at ``(file)`` / ``(root)`` naming the
  byte offset;

- nesting deeper than Python's recursion limit (``RecursionError`` from
  :func:`json.loads`): an error at ``(root)``; nesting deeper than
  :data:`MAX_DEPTH` that still parses: an error at the first too-deep path;
- integer literals over Python's 4300-digit limit (``ValueError`` from
  ``int()``): parsed into a :class:`HugeInteger` placeholder, so the error
  names its JSON path;
- integers outside ±(2**53 - 1), the range JSON numbers keep exactly (RFC 7493,
  I-JSON), and ``NaN`` / ``Infinity`` / ``1e999`` (not JSON, but Python reads
  them): an error at their JSON path.

Found values in messages are kept short by :func:`describe`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from elasticopt.errors import InstanceError, format_path

__all__ = ["MAX_DEPTH", "MAX_EXACT_INT", "HugeInteger", "loads", "check_values", "plainly_valid", "describe", "read_bytes", "decode",
           "read_text", "read_csv", "read_json", "parse_json"]

#: Deepest nesting of arrays/objects an instance may have (format 1 needs 5).
MAX_DEPTH = 32

#: Largest integer magnitude JSON numbers carry exactly (RFC 7493 §2.2).
MAX_EXACT_INT = 2**53 - 1

#: Longer integer literals are not converted (Python refuses over 4300 digits; any over 16 is out of range).
_MAX_DIGITS = 100


class HugeInteger:
    """An integer literal too long to convert: kept as its digit count only."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))
        self.negative = text.startswith("-")

    def __repr__(self) -> str:
        return f"an integer literal of {self.digits:,} digits"


def _parse_int(text: str) -> int | HugeInteger:
    return HugeInteger(text) if len(text) > _MAX_DIGITS else int(text)


def loads(text: str, file: str) -> Any:
    """Parse ``text`` as JSON; errors become :class:`InstanceError` naming ``file``."""
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise InstanceError(file, "(root)", "valid JSON", f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InstanceError(
            file, "(root)", f"JSON nested at most {MAX_DEPTH} levels deep", "nesting too deep to parse"
        ) from None


def check_values(data: Any, file: str) -> None:
    """Reject too-deep nesting, non-finite numbers and integers JSON cannot carry exactly.

    Walks the document without recursion, in document order.

    Raises
    ------
    InstanceError
        Naming ``file`` and the JSON path of the first offending value.
    """
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, (dict, list)):
            if len(path) >= MAX_DEPTH:
                raise InstanceError(file, format_path(path), f"at most {MAX_DEPTH} levels of nesting",
                                    "deeper nesting", "elasticopt's file formats need far fewer")
            items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            stack.extend((path + (k,), v) for k, v in reversed(items))
        elif isinstance(value, HugeInteger) or (
            isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INT
        ):
            raise InstanceError(file, format_path(path), "an integer within ±(2**53 - 1) (RFC 7493)", value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise InstanceError(file, format_path(path), "a finite number (JSON has no NaN or Infinity)", value)


def plainly_valid(data: Any) -> bool:
    """Whether :func:`check_values` accepts ``data`` as orjson parsed it, answered without paths (a fast
    path's check: ``False`` sends the text to :func:`loads` and :func:`check_values`, which word the error).

    orjson refuses NaN, Infinity and numbers that overflow to infinity itself; what is left of
    :func:`check_values` is checked here: no array or object :data:`MAX_DEPTH` or more levels deep, no
    integer beyond ±(2**53 - 1), and no float of magnitude 2**63 or more (orjson reads an integer literal
    past 64 bits as a float: such a float may have been one).
    """
    stack: list[tuple[Any, int]] = [(data, 0)] if type(data) is dict or type(data) is list else []
    while stack:
        value, depth = stack.pop()
        if depth >= MAX_DEPTH:
            return False
        for item in (value.values() if type(value) is dict else value):
            kind = type(item)
            if kind is dict or kind is list:
                stack.append((item, depth + 1))
            elif kind is int:
                if item > MAX_EXACT_INT or item < -MAX_EXACT_INT:
                    return False
            elif kind is float and not -_FLOAT_FROM_INT < item < _FLOAT_FROM_INT:
                return False
    if type(data) is int and not -MAX_EXACT_INT <= data <= MAX_EXACT_INT:
        return False
    return not (type(data) is float and not -_FLOAT_FROM_INT < data < _FLOAT_FROM_INT)


#: Floats at least this large may be integer literals past 64 bits as orjson reads them.
_FLOAT_FROM_INT = 2.0**63


def read_bytes(path: str | os.PathLike[str], what: str = "file") -> bytes:
    """The bytes of ``path``; a missing, unreadable or non-regular file is an :class:`InstanceError` at ``(file)``.

    Parameters
    ----------
    path
        The file.
    what
        What the file should be, for the message ("an instance file", "a jobs file").
    """
    name = str(path)
    p = Path(path)
    try:
        if not p.is_file():
            found = "a directory" if p.is_dir() else "No such file or directory"
            raise InstanceError(name, "(file)", f"an existing {what}", found)
        return p.read_bytes()
    except OSError as exc:
        raise InstanceError(name, "(file)", f"a readable {what}", f"{type(exc).__name__}: {exc.strerror or exc}") from None


def decode(raw: bytes, file: str) -> str:
    """``raw`` as UTF-8 text; other bytes are an :class:`InstanceError` at ``(root)`` naming the byte offset."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InstanceError(file, "(root)", "UTF-8 text", _Described(f"byte 0x{raw[exc.start]:02x} at byte offset "
                            f"{exc.start} ({exc.reason})"), "save the file as UTF-8") from None


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """The UTF-8 text of ``path`` (:func:`read_bytes`, then :func:`decode`); a leading BOM is dropped."""
    text = decode(read_bytes(path, what), str(path))
    return text[1:] if text.startswith("\ufeff") else text


def read_csv(path: str | os.PathLike[str], what: str = "file") -> list[list[str]]:
    """The records of the UTF-8 CSV file ``path`` (header first), blank lines dropped.

    A malformed record (a NUL byte, a field over the csv module's size limit, an unclosed
    quote) is an :class:`InstanceError` naming the file and its line.
    """
    import csv
    import io

    file = str(path)
    reader = csv.reader(io.StringIO(read_text(path, what), newline=""), strict=True)
    rows: list[list[str]] = []
    try:
        for row in reader:
            if row:
                rows.append(row)
    except csv.Error as exc:
        raise InstanceError(file, f"line {reader.line_num}", "a CSV record", str(exc)) from None
    return rows


def parse_json(data: bytes | str, file: str) -> Any:
    """Parse JSON text or UTF-8 bytes with every check of this module; errors name ``file`` and a JSON path.

    Non-UTF-8 bytes, invalid JSON, nesting deeper than :data:`MAX_DEPTH`, integers beyond
    ±(2**53 - 1) and NaN / Infinity are refused (:func:`loads`, :func:`check_values`).
    """
    text = decode(data, file) if isinstance(data, (bytes, bytearray)) else data
    doc = loads(text, file)
    check_values(doc, file)
    return doc


def read_json(path: str | os.PathLike[str], what: str = "file") -> Any:
    """Read and parse the JSON file ``path`` (:func:`read_bytes`, :func:`parse_json`).

    Raises
    ------
    InstanceError
        Naming the file and, for a value, its JSON path.
    """
    return parse_json(read_bytes(path, what), str(path))


def describe(value: Any, limit: int = 80) -> Any:
    """A short stand-in for a found value: containers and long strings summarised.

    Scalars that print short are returned as they are (so messages show
    ``-3`` or ``'abc'``); lists, objects and long text become a description.
    """
    if isinstance(value, dict):
        keys = ", ".join(repr(k) for k in list(value)[:5])
        more = ", ..." if len(value) > 5 else ""
        return _Described(f"an object with {len(value)} key(s) ({keys}{more})" if value else "an empty object")
    if isinstance(value, list):
        return _Described(f"a list of {len(value)} item(s)" if value else "an empty list")
    if isinstance(value, str) and len(value) > limit:
        return _Described(f"a string of {len(value):,} characters starting {value[:20]!r}")
    return value


class _Described(str):
    """A description printed without quotes."""

    def __repr__(self) -> str:
        return str(self)
