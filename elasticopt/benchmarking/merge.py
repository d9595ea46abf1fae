"""One benchmark from several runs' ``results.json`` (``elasticopt bench --merge``).

A suite too long for one sitting (the reference suite: about 70 minutes a
seed on 2 cores) runs as several commands -- one seed each, or one family
each, on one machine or several -- and is published as one page.  Runs merge
when they measured the same way: the same solver labels, repeats, warm-up,
time limit, reductions and order; their instances must be distinct, unless
``replace`` is given: then a later run's instance replaces the same instance
of an earlier run (a rerun after a change: the instances a fix affects,
measured again by every solver), and each run's entry names what it
replaced.  The cross-check is per instance, so it carries over unchanged;
the summaries, the performance profile and the page are computed again from
the merged rows.  Each run's start, length, load, package versions and
commit are kept in ``settings["merged"]`` and shown on the page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elasticopt.benchmarking.rows import BenchResult
from elasticopt.errors import ValidationError

__all__ = ["load_result", "merge_results", "isolated_solvers", "MUST_AGREE"]

#: Settings every merged run must share (what makes their times comparable).
MUST_AGREE = ("repeats", "warmup", "time_limit_s", "reduce", "order")


def load_result(path: str | Path) -> BenchResult:
    """The benchmark a ``results.json`` holds (``path`` is the file or the ``--out`` folder that has it).

    Raises
    ------
    ValidationError
        Where the file is missing, is not JSON or is not a benchmark result.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(str(p), "a results.json written by 'elasticopt bench --out DIR' (or its folder)",
                              exc.strerror or str(exc)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{p}: line {exc.lineno}", "JSON", exc.msg) from None
    return BenchResult.from_dict(doc, where=str(p))


def isolated_solvers(settings: dict[str, Any]) -> list[str]:
    """Labels of the solvers a run ran in a forked process under its time limit (``time_limit_overruns``,
    :mod:`elasticopt.solvers.isolation`); none for runs without a limit or from before that existed."""
    if not settings.get("time_limit_s"):
        return []
    return [s.get("label") for s in settings.get("solvers", [])
            if (s.get("capabilities") or {}).get("time_limit_overruns")]


def _labels(result: BenchResult) -> list[str]:
    return [s.get("label") for s in result.settings.get("solvers", [])]


def merge_results(results: Sequence[BenchResult], sources: Sequence[str] | None = None,
                  replace: bool = False) -> BenchResult:
    """One benchmark of every run in ``results`` (module docstring).

    Parameters
    ----------
    results
        Two or more benchmark results (one is returned as it is).
    sources
        A name per result for messages and the page (default ``run 1``, ``run 2``, ...).
    replace
        Whether a later run's instance replaces the same instance of an earlier run (otherwise two runs
        sharing an instance are refused).

    Raises
    ------
    ValidationError
        Where two runs measured differently (a setting of :data:`MUST_AGREE`
        or the solver labels) or share an instance name.
    """
    if not results:
        raise ValidationError("merge", "at least one benchmark result", "none")
    names = list(sources) if sources is not None else [f"run {i + 1}" for i in range(len(results))]
    first, src0 = results[0], names[0]
    for res, src in zip(results[1:], names[1:]):
        if _labels(res) != _labels(first):
            raise ValidationError(f"{src}: settings.solvers", f"the solvers of {src0}: {', '.join(_labels(first))}",
                                  ", ".join(map(str, _labels(res))), "merge runs of the same solvers")
        for key in MUST_AGREE:
            if res.settings.get(key) != first.settings.get(key):
                raise ValidationError(f"{src}: settings.{key}", f"{first.settings.get(key)!r} as in {src0}",
                                      repr(res.settings.get(key)), "merge runs measured with the same settings")
    seen: dict[str, int] = {}  # instance name -> the run it is taken from (the last, with replace)
    replaced: list[list[str]] = [[] for _ in results]
    for i, (res, src) in enumerate(zip(results, names)):
        for rec in res.instances:
            if rec.name in seen:
                if not replace:
                    raise ValidationError(f"{src}: instances", f"instances not in {names[seen[rec.name]]}", rec.name,
                                          "merge runs of distinct instances (e.g. one seed each), or give --replace "
                                          "to let the later run's replace them")
                replaced[i].append(f"{rec.name} (of {names[seen[rec.name]]})")
            seen[rec.name] = i
    runs: list[dict[str, Any]] = []
    for i, (res, src) in enumerate(zip(results, names)):
        st, env = res.settings, res.environment
        runs.append({"source": src, "command": st.get("command"), "started_utc": st.get("started_utc"), "elapsed_s": st.get("elapsed_s"),
                     "instances": len(res.instances), "interrupted": bool(st.get("interrupted")),
                     "isolated": isolated_solvers(dict(st)),
                     "load_average": env.get("load_average"), "commit": env.get("commit"),
                     "packages": env.get("packages"), "replaced": replaced[i]})
    settings = dict(first.settings)
    settings.pop("command", None)  # each run's is in merged[]
    settings.update(
        started_utc=min((r["started_utc"] for r in runs if r["started_utc"]), default=None),
        elapsed_s=sum(float(r["elapsed_s"] or 0.0) for r in runs),
        interrupted=any(r["interrupted"] for r in runs),
        merged=runs,
    )
    keep = [{name for name, run in seen.items() if run == i} for i in range(len(results))]
    return BenchResult(rows=tuple(r for i, res in enumerate(results) for r in res.rows if r.instance in keep[i]),
                       instances=tuple(rec for i, res in enumerate(results) for rec in res.instances
                                       if rec.name in keep[i]),
                       settings=settings, environment=dict(first.environment))
