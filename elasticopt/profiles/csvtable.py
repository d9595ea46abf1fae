"""Throughput tables from CSV files: your own measurements as a :class:`TabularProfile`.

The file has a header and one row per measured point::

    gpus,global_batch,samples_per_s
    1,64,410.5
    2,128,790.0
    4,256,

``gpus`` is the GPU count; the batch column is ``global_batch`` or
``local_batch`` (per GPU) and sets the profile's batch axis;
``samples_per_s`` is the measured throughput, empty (or 0) where the point was
tried and did not fit in memory.  Other columns are ignored.  Every error
names the file, the line and the column.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from elasticopt.errors import ValidationError
from elasticopt.profiles.tabular import TabularProfile

__all__ = ["read_throughput_csv"]

_BATCH_COLUMNS = {"global_batch": "global", "local_batch": "local"}


def _int(text: str, where: str, column: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise ValidationError(f"{where}, column {column!r}", "an integer >= 1", text)
    return value


def read_throughput_csv(path: str | os.PathLike[str], name: str, *, gpus_per_node: int = 8) -> TabularProfile:
    """Read measured throughputs from a CSV file into a :class:`TabularProfile`.

    Parameters
    ----------
    path
        The CSV file (see the module docstring for its columns).
    name
        The profile's name, e.g. ``"mylab/resnet50"`` (what instance files write).
    gpus_per_node
        Node size of the measured hardware.

    Returns
    -------
    TabularProfile
        Interpolated between measured points, never extrapolated; give it to
        :func:`~elasticopt.profiles.register_profile` to use it by name.

    Raises
    ------
    ValidationError
        Naming the file, line and column of a missing column, a bad value or
        a point measured twice.
    """
    file = str(path)
    try:
        with Path(path).open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            batch_cols = [c for c in header if c in _BATCH_COLUMNS]
            missing = [c for c in ("gpus", "samples_per_s") if c not in header]
            if missing or len(batch_cols) != 1:
                raise ValidationError(
                    f"{file}, line 1 (header)",
                    "columns gpus, samples_per_s and one of global_batch / local_batch",
                    ",".join(header),
                )
            batch_col = batch_cols[0]
            points: dict[tuple[int, int], float | None] = {}
            first_line: dict[tuple[int, int], int] = {}
            for row in reader:
                where = f"{file}, line {reader.line_num}"
                key = (_int(row["gpus"] or "", where, "gpus"), _int(row[batch_col] or "", where, batch_col))
                text = (row["samples_per_s"] or "").strip()
                try:
                    value = float(text) if text else None
                except ValueError:
                    value = math.nan
                if value is not None and not (math.isfinite(value) and value >= 0):
                    raise ValidationError(f"{where}, column 'samples_per_s'",
                                          "a finite number >= 0, or empty for a point that did not fit", text)
                if key in points:
                    raise ValidationError(f"{where}", f"each (gpus, {batch_col}) once (line {first_line[key]} has it too)",
                                          key)
                points[key] = value
                first_line[key] = reader.line_num
    except OSError as exc:
        raise ValidationError(file, "a readable CSV file", f"{type(exc).__name__}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(file, "a UTF-8 CSV file", str(exc)) from None
    if not points:
        raise ValidationError(file, "at least one measured point", "no rows")
    return TabularProfile(name, points, batch_axis=_BATCH_COLUMNS[batch_col], gpus_per_node=gpus_per_node)
