"""Write the Philly trace of ``ELASTICOPT_DATA/traces/philly.csv`` in the schema of Blox's ``--cluster-job-log``.

Blox's simulator reads Philly's ``cluster_job_log`` (msr-fiddle/philly-traces,
a separate download, not in the Blox repository); its parser
(``workload/parse_philly_jobs.py``) uses, per job, ``jobid``,
``submitted_time``, ``vc`` and the ``attempts`` (``start_time``,
``end_time``, ``detail[].gpus``).  ``traces/philly.csv`` (the Pollux
artifact's processed copy of the same trace: submission time, duration, GPUs,
virtual cluster; docs/data.md) holds exactly those quantities, so each row
becomes one job with one attempt that starts at submission and runs for its
duration on ``num_gpus`` GPUs (one ``detail`` entry per 8 GPUs).  What it
cannot carry: Philly's failed / retried attempts and queueing delays (Blox's
``trace-synthetic`` mode replaces arrivals by its own Poisson process at the
chosen load anyway)::

    python validation/philly_to_blox.py OUT.json [--data DIR]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import sys
from pathlib import Path

from elasticopt._io import atomic_write_text
from elasticopt.errors import ElasticoptError

FMT = "%Y-%m-%d %H:%M:%S"


def convert(csv_path: Path) -> list[dict]:
    """The cluster_job_log records of the rows of ``philly.csv``."""
    out = []
    with open(csv_path, newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            try:
                t0 = dt.datetime.strptime(row["timestamp"], FMT)
                dur, gpus = float(row["duration"]), int(float(row["num_gpus"]))
            except (KeyError, ValueError) as exc:
                raise ElasticoptError(f"{csv_path}: row {i + 2}: expected timestamp ({FMT}), duration, num_gpus "
                                      f"({exc})") from None
            t1 = t0 + dt.timedelta(seconds=dur)
            detail = [{"ip": f"node{n}", "gpus": [f"gpu{g}" for g in range(min(8, gpus - 8 * n))]}
                      for n in range(-(-gpus // 8))]
            out.append({"jobid": f"philly-{i}", "vc": row.get("cluster", ""), "user": "", "status": "Pass",
                        "submitted_time": t0.strftime(FMT),
                        "attempts": [{"start_time": t0.strftime(FMT), "end_time": t1.strftime(FMT), "detail": detail}]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the cluster_job_log JSON to write")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("ELASTICOPT_DATA", "data")),
                    help="the public data folder (default $ELASTICOPT_DATA)")
    a = ap.parse_args(argv)
    src = a.data / "traces" / "philly.csv"
    try:
        if not src.is_file():
            raise ElasticoptError(f"{src}: no such file (set --data or ELASTICOPT_DATA; docs/data.md)")
        atomic_write_text(a.out, json.dumps(convert(src)))
    except ElasticoptError as exc:
        print(f"philly_to_blox: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
