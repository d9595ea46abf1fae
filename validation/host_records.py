"""Records and tables of the runners whose host scripts write one JSON record per run (``gavel_simulator.py``,
``blox_simulator.py``); launching and log reading of the Pollux / Sia artifacts is in ``host_runs.py``.

Each runner writes a small runner script into a temporary folder, runs the
host's own simulator with the host's interpreter, and reads back one JSON
record per (workload, policy) that the runner script wrote from the host's
own state at the end of the run:

``{"jct_s": {job: seconds or null}, "makespan_s": s, "restarts": {job: n},
"calls_ms": [ms, ...], "extra": {...}}``

(``null``: a measured job that did not finish.)  This module turns records
into the side-by-side table; it knows nothing about any host.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from elasticopt.errors import ElasticoptError

try:  # as a script's neighbour (validation/ on sys.path) or as a package module
    from host_runs import check_python, percentile
except ImportError:  # pragma: no cover
    from validation.host_runs import check_python, percentile


@dataclass(frozen=True)
class RunSummary:
    """One policy on one workload, from the host's own records."""

    policy: str
    measured_jobs: int
    finished_jobs: int
    mean_jct_s: float
    median_jct_s: float
    p99_jct_s: float
    makespan_s: float
    restarts_per_job: float
    calls: int
    call_median_ms: float
    call_p99_ms: float
    call_max_ms: float
    extra: dict
    #: Each finished measured job's JCT (s), by job id: for the comparison over the jobs both policies finished.
    jct_by_job: dict | None = None


def summarize(policy: str, record: dict, where: str) -> RunSummary:
    """A :class:`RunSummary` of one record (``where`` names its file in errors)."""
    try:
        jct = record["jct_s"]
        done = [float(v) for v in jct.values() if v is not None]
        restarts = [float(v) for v in (record.get("restarts") or {}).values()]
        calls = [float(v) for v in record.get("calls_ms") or []]
        makespan = float(record["makespan_s"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ElasticoptError(f"{where}: expected a record with jct_s {{job: s}}, makespan_s, restarts, calls_ms "
                              f"(written by the runner script); {type(exc).__name__}: {exc}") from None
    return RunSummary(
        policy=policy, measured_jobs=len(jct), finished_jobs=len(done),
        mean_jct_s=sum(done) / len(done) if done else math.nan,
        median_jct_s=percentile(done, 50), p99_jct_s=percentile(done, 99), makespan_s=makespan,
        restarts_per_job=sum(restarts) / len(restarts) if restarts else math.nan,
        calls=len(calls), call_median_ms=percentile(calls, 50), call_p99_ms=percentile(calls, 99),
        call_max_ms=max(calls) if calls else math.nan, extra=dict(record.get("extra") or {}),
        jct_by_job=dict((str(k), float(v)) for k, v in jct.items() if v is not None))


def failed(policy: str, reason: str) -> RunSummary:
    """The row of a host policy whose run stopped before its end (``reason``: the last line of its log); it is
    never the best host policy."""
    nan = math.nan
    return RunSummary(policy=policy, measured_jobs=0, finished_jobs=0, mean_jct_s=nan, median_jct_s=nan,
                      p99_jct_s=nan, makespan_s=nan, restarts_per_job=nan, calls=0, call_median_ms=nan,
                      call_p99_ms=nan, call_max_ms=nan, extra={"failed": reason})


def _f(x: float, digits: int = 0) -> str:
    return "—" if x != x else f"{x:,.{digits}f}"


def table(workload: str, rows: list[RunSummary], ours: str, extra_cols: tuple[str, ...] = (),
          published: dict[str, float] | None = None) -> str:
    """Markdown table of one workload: a row per policy, and ours / best host policy on mean JCT.

    The best host policy is taken among the host policies that finished at least as many of the measured
    jobs as ours (a run that stopped early, or left jobs unfinished where ours finished them, is not
    compared; one whose host dropped as many jobs as it dropped ours is -- Gavel ends a job after repeated
    failed micro-tasks and leaves it out of its own mean).  Where any policy left some measured job
    unfinished, each host policy is also compared over the jobs it and ours both finished, and the one ours
    gains least on there is named (it may be one the first line leaves out).
    ``published``: the host's published mean JCT (s) per policy, where it exists.
    """
    head = ["policy", "finished", "mean JCT s", "median JCT s", "p99 JCT s", "makespan s", "restarts/job",
            *extra_cols, "calls", "call median ms", "call p99 ms", "call max ms", "published mean JCT s"]
    lines = [f"**{workload}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        pub = (published or {}).get(r.policy, math.nan)
        done = f"failed: {r.extra['failed'][:160]}" if r.extra.get("failed") else f"{r.finished_jobs}/{r.measured_jobs}"
        cells = [r.policy, done.replace("|", "/"), _f(r.mean_jct_s), _f(r.median_jct_s),
                 _f(r.p99_jct_s), _f(r.makespan_s), _f(r.restarts_per_job, 2),
                 *[str(r.extra.get(c, "—")) for c in extra_cols],
                 str(r.calls), _f(r.call_median_ms, 1), _f(r.call_p99_ms, 1), _f(r.call_max_ms, 1), _f(pub)]
        lines.append("| " + " | ".join(cells) + " |")
    mine = [r for r in rows if r.policy == ours]
    hosts = [r for r in rows if r.policy != ours and r.measured_jobs and not r.extra.get("failed")
             and mine and r.finished_jobs >= mine[0].finished_jobs]
    if mine and hosts and not mine[0].extra.get("failed"):
        best = min(hosts, key=lambda r: r.mean_jct_s)
        lines.append("")
        lines.append(f"{ours} / best host policy ({best.policy}) on mean JCT: "
                     f"{mine[0].mean_jct_s / best.mean_jct_s:.3f}; on makespan: "
                     f"{mine[0].makespan_s / best.makespan_s:.3f}")
    paired = []  # (ours / host policy on the mean JCT of the jobs both finished, policy, jobs, whether sets differ)
    for r in rows:
        if r.policy == ours or not mine or not mine[0].jct_by_job or not r.jct_by_job or r.extra.get("failed"):
            continue
        both = [j for j in r.jct_by_job if j in mine[0].jct_by_job]
        if both:
            ratio = sum(mine[0].jct_by_job[j] for j in both) / sum(r.jct_by_job[j] for j in both)
            paired.append((ratio, r.policy, len(both),
                           len(both) < len(mine[0].jct_by_job) or len(both) < len(r.jct_by_job)))
    if any(differ for *_, differ in paired):
        lines.append("")
        lines.append(f"{ours} / host policy on the mean JCT of the measured jobs both finished (where either left "
                     "some unfinished): " + ", ".join(f"{p} {x:.3f} ({n} jobs)" for x, p, n, d in paired if d))
        ratio, policy, n, _ = max(paired)  # the host policy ours gains least on, over the jobs both finished
        lines.append(f"closest host policy on the jobs both finished: {policy} ({ours} / it {ratio:.3f}, {n} jobs)")
    return "\n".join(lines) + "\n"


def latency_line(rows: list[RunSummary], ours: str, calls_ms: list[float]) -> str:
    """Per-call latency of the drop-in over every call of every workload."""
    n = len(calls_ms)
    return (f"{ours}: {n} calls over every workload: median {_f(percentile(calls_ms, 50), 1)} ms, "
            f"p99 {_f(percentile(calls_ms, 99), 1)} ms, max {_f(max(calls_ms) if calls_ms else math.nan, 1)} ms\n")


def resolve_python(python: str) -> str:
    """An absolute path of ``--python`` (a path, relative or not, or a name on PATH); a clear error if it
    cannot run."""
    if os.sep in python or Path(python).exists():
        found = str(Path(python).expanduser().absolute()) if Path(python).expanduser().exists() else None
    else:
        found = shutil.which(python)
    if not found:
        raise ElasticoptError(f"--python {python}: no such interpreter (give the path of the host's "
                              "environment's python, e.g. ~/envs/gavel/bin/python)")
    check_python(found)  # it runs (host_runs: one check for every runner)
    return found


def read_record(path: Path, what: str) -> dict:
    """The JSON record a runner script wrote; an error naming the run if it is missing or not JSON."""
    if not path.is_file():
        raise ElasticoptError(f"{what}: the simulator ended without writing its results ({path}); "
                              "see its output above")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise ElasticoptError(f"{path}: not JSON ({exc})") from None
