"""Run Pollux's own simulator with elasticopt's PolluxPolicy; one table per workload next to the published results.

Pollux (OSDI'21) ships a cluster simulator (petuum/adaptdl, branch ``osdi21-artifact``, folder ``simulator/``;
tried at commit c793c70) that needs its own old environment (Python 3.8, numpy 1.19, pandas 1.1, scipy 1.5,
pymoo 0.4.2).  This script contains and downloads none of it: point it at your checkout and at that
environment's interpreter (absolute or relative paths)::

    python validation/pollux_simulator.py --simulator ~/adaptdl/simulator --python ~/envs/pollux/bin/python

It runs the artifact's 8 workloads (``simulator/workloads/*.csv``) with the drop-in and prints, per workload,
mean / median / p99 JCT, makespan, finished jobs, restarts per job and per-call policy times (median / p99 /
max ms), next to the artifact's published results (``results-jobload/{pollux,optimus,tiresias}-1.0/
summary.json``, found in the checkout; ``--published`` names another folder).  ``--policies
elasticopt,pollux`` reruns Pollux's own policy too (the artifact's README: up to 30 min a workload);
``--workloads 'workload-6.csv'`` picks workloads; ``--jobs N`` cuts each workload to its first N jobs
(then the published rows, of the whole workload, are left out: not comparable).  Pollux's genetic search is random:
``--draws K`` runs each host policy K times per workload, a row per draw and their mean (the rerun's row in
the last table, and the ratio's base where nothing is published).  ``--perturb-arrivals 30 --seeds 1,2,3``
runs each workload as copies whose arrivals are moved by a seeded uniform draw in +-30 s
(``host_workloads.perturb_arrivals``), every policy on the same copy: a paired comparison with the rerun (a moved
copy has no published result), which tells a lead of a few tenths of a percent from the chaos of one run.  ``--parallel N`` runs N simulations at once (each a process busy on one core: with a core per run, the
whole comparison takes as long as its longest run).  The last table puts the drop-in's mean JCT beside the
published and rerun Pollux's on every workload, with how many it is at or below.

How it runs the host: a launcher in a temporary folder imports the host's ``pollux`` module, replaces its
``PolluxPolicy`` by the drop-in (``elasticopt/integrations/pollux.py``, talking to ``elasticopt serve --stdio``
started from this environment) -- the documented registration --, times every ``optimize`` call and runs
``simulator.py --policy pollux --output <log> <workload>`` as ``__main__``, a process per workload and policy (the
artifact's single-workload mode: ``--output`` is a JSON-lines log file, read for JCTs, restarts and makespan).
Nothing in the checkout changes; results go to ``--out`` (default under the system's temporary folder).

Published results are read from the artifact's directory mode outputs: ``summary.json`` with
``{"jcts": {workload: {job: s}}}`` (no restarts recorded: shown n/a) and, where present, ``<workload>.log``;
a flat ``{"jcts": {job: s}}`` or a CSV (``name``/``job``, ``jct`` or ``completion_time`` and
``submission_time``, optional ``num_restarts``) per workload works too.
"""

from __future__ import annotations

import argparse
import csv
import glob
import shlex
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import host_runs as hr  # noqa: E402  (validation/host_runs.py)
import host_workloads as hw  # noqa: E402  (validation/host_workloads.py)

from elasticopt._io import atomic_write_text  # noqa: E402
from elasticopt.errors import ElasticoptError  # noqa: E402
from elasticopt.integrations import pollux as _dropin  # noqa: E402

DROPIN = Path(_dropin.__file__)
POLICIES = ("elasticopt", "pollux", "optimus", "tiresias")
PUBLISHED = ("pollux", "optimus", "tiresias")
DEFAULT_OUT = Path(tempfile.gettempdir()) / "elasticopt-validation" / "pollux"


def check_inputs(simulator: Path, python: str, pattern: str) -> list[Path]:
    """The workload files; a clear error for a checkout or interpreter that is not usable."""
    if not (simulator / "simulator.py").is_file():
        raise ElasticoptError(f"--simulator {simulator}: expected Pollux's simulator folder (with simulator.py), "
                              "e.g. adaptdl/simulator on branch osdi21-artifact")
    if not (simulator / "pollux.py").is_file():
        raise ElasticoptError(f"--simulator {simulator}: no pollux.py there (the module whose PolluxPolicy is "
                              "replaced)")
    hr.check_python(python)
    workloads = sorted(Path(p) for p in glob.glob(str(simulator / "workloads" / pattern)))
    if not workloads:
        raise ElasticoptError(f"--workloads {pattern!r}: no workload matches {simulator / 'workloads' / pattern}")
    return workloads


def load_csv(path: Path) -> hr.Results:
    """A per-workload CSV of results."""
    jct, restarts = {}, {}
    with open(path, newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            job = row.get("job") or row.get("name") or f"row {i + 2}"
            try:
                if row.get("jct"):
                    jct[job] = float(row["jct"])
                elif row.get("completion_time") and row.get("submission_time"):
                    jct[job] = float(row["completion_time"]) - float(row["submission_time"])
                else:
                    raise ValueError
                if row.get("num_restarts"):
                    restarts[job] = float(row["num_restarts"])
            except ValueError:
                raise ElasticoptError(f"{path}: row {i + 2}: expected a number in 'jct' or in 'completion_time' "
                                      "and 'submission_time'") from None
    return hr.Results(jct, restarts or None, len(jct), None)


def load_results(path: Path, workload: str) -> hr.Results | None:
    """One workload's results in a results folder or file (see the module docstring), None if it has none."""
    if path.is_file():
        if path.suffix == ".csv":
            return load_csv(path)
        if path.suffix == ".log":
            return hr.read_log(path)
        return hr.read_summary(path, workload)
    for cand in (path / f"{workload}.log", path / workload / "summary.json", path / f"{workload}.csv",
                 path / f"{workload}.json"):
        if cand.is_file():
            return load_results(cand, workload)
    if (path / "summary.json").is_file():
        try:
            return hr.read_summary(path / "summary.json", workload)
        except ElasticoptError:
            return None
    return None


def published_sources(simulator: Path, published: Path | None) -> list[tuple[str, Path]]:
    """``[(row name, folder)]``: the artifact's ``results-jobload/{policy}-1.0`` folders, or ``--published``."""
    if published is not None:
        if not published.exists():
            raise ElasticoptError(f"--published {published}: no such file or folder")
        sub = [(f"published {p}", published / f"{p}-1.0") for p in PUBLISHED if (published / f"{p}-1.0").is_dir()]
        return sub or [("published", published)]
    base = simulator / "results-jobload"
    return [(f"published {p}", base / f"{p}-1.0") for p in PUBLISHED if (base / f"{p}-1.0").is_dir()]


def run_policy(simulator: Path, python: str, name: str, workload: Path, log: Path, serve: list[str],
               extra: str, options: dict | None = None, record: bool = False) -> None:
    """One policy on one workload in the artifact's single-workload mode; its log goes to ``log``."""
    policy = "pollux" if name == "elasticopt" else name
    argv = ["--policy", policy, *shlex.split(extra), "--output", str(log), str(workload)]
    keep: tuple[str, ...] = ()
    if record:  # the service's own record, which appends: a run again starts it afresh
        log.with_suffix(".requests.jsonl").unlink(missing_ok=True)
        keep = ("--record", str(log.with_suffix(".requests.jsonl")))
    hr.run_host(hr.HostRun(
        simulator=simulator, python=python, script="simulator.py", args=tuple(argv), module="pollux",
        cls="PolluxPolicy", dropin=DROPIN if name == "elasticopt" else None, command=tuple(serve) + keep,
        timed=(("pollux", "PolluxPolicy"),) if policy == "pollux" else (),
        stdout=log.with_suffix(".stdout"), calls=log.with_suffix(".calls.json"), options=options or {},
        service=log.with_suffix(".service.json")))


def row_name(policy: str, draws: int) -> str:
    """The table row of a policy's result: its one run, or the mean of its draws."""
    return policy if draws <= 1 else f"{policy} (mean of {draws} draws)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulator", type=Path, required=True, help="your checkout's simulator/ folder")
    ap.add_argument("--python", required=True, help="the interpreter of the simulator's environment")
    ap.add_argument("--workloads", default="*.csv", help="glob inside simulator/workloads (default *.csv: all 8)")
    ap.add_argument("--jobs", type=int, default=0, help="the first N jobs of each workload (default 0: all)")
    ap.add_argument("--policies", default="elasticopt",
                    help=f"comma-separated, of {', '.join(POLICIES)} (default elasticopt; the others are rerun)")
    ap.add_argument("--published", type=Path, default=None,
                    help="published results (default: the checkout's results-jobload/{pollux,optimus,tiresias}-1.0)")
    ap.add_argument("--sim-args", default="", help="extra simulator.py arguments (e.g. '--interval 60')")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})")
    ap.add_argument("--reuse", action="store_true", help="read existing logs in --out instead of running again")
    ap.add_argument("--dropin-options", default="{}", metavar="JSON",
                    help=f"keyword arguments of the drop-in's constructor, over the host's, e.g. "
                         f"'{{\"p_fairness\": -1}}' (default none)")
    ap.add_argument("--parallel", type=int, default=1,
                    help="simulations run at once, each a host process (and a service for the drop-in; default 1)")
    ap.add_argument("--serve", default=None,
                    help="command of the service the drop-in starts (default: this interpreter's `-m elasticopt "
                         "serve --stdio`, under this process's PYTHONPATH)")
    ap.add_argument("--record", action="store_true",
                    help="keep the drop-in's requests of each run (<log>.requests.jsonl, elasticopt serve --record): "
                         "'elasticopt serve --stdio < FILE' answers them again")
    ap.add_argument("--draws", type=int, default=1,
                    help="runs of each host policy per workload (Pollux's genetic search is random): a row per "
                         "draw and their mean, the rerun's row in the last table (default 1)")
    hw.add_perturb_arguments(ap)
    a = ap.parse_args(argv)
    simulator, out = a.simulator.resolve(), a.out.resolve()
    try:
        options = hr.parse_options(a.dropin_options)
        names = [p.strip() for p in a.policies.split(",") if p.strip()]
        bad = [p for p in names if p not in POLICIES]
        if bad or not names:
            raise ElasticoptError(f"--policies {a.policies!r}: unknown {bad}; expected some of {list(POLICIES)}")
        if a.draws < 1:
            raise ElasticoptError(f"--draws {a.draws}: expected at least 1 run of each host policy")
        workloads = check_inputs(simulator, a.python, a.workloads)
        sources = published_sources(simulator, a.published.resolve() if a.published else None)
        serve = hr.serve_command(a.serve)
        plan, tasks = [], []
        seeds = hw.perturb_seeds(a)
        for w, seed in ((w, seed) for w in workloads for seed in seeds):
            tag = w.stem + (f"-first{a.jobs}" if a.jobs > 0 else "")
            wl = hw.head_workload(w, out / "workloads" / f"{tag}.csv", a.jobs)
            wl, tag = hw.moved_copy(wl, out, tag, a.perturb_arrivals, seed)
            logs = {name: [hr.draw_log(out / name / f"{tag}.log", d)
                           for d in range(1, (1 if name == "elasticopt" else a.draws) + 1)] for name in names}
            plan.append((w, tag, logs, seed))
            for name, paths in logs.items():
                for d, log in enumerate(paths, 1):
                    if not (a.reuse and log.is_file()):
                        label = f"{name} on {tag}" + (f" (draw {d} of {len(paths)})" if len(paths) > 1 else "")
                        tasks.append((label, partial(run_policy, simulator, a.python, name, wl, log, serve,
                                                     a.sim_args, options, a.record)))
        hr.run_all(tasks, a.parallel, "pollux_simulator")
        text, calls, slow, per_workload = "", {n: [] for n in names}, {n: [] for n in names}, []
        for w, tag, logs, seed in plan:
            rows = []
            for name, paths in logs.items():
                draws, draw_calls = [], []
                for log in paths:
                    res = hr.read_log(log)
                    xs = hr.read_calls(log.with_suffix(".calls.json"))
                    calls[name].extend(xs)
                    slow[name].append((xs, hr.read_service(log.with_suffix(".service.json"))))
                    draws.append(hr.summarize(hr.Results(res.jct_s, res.restarts, res.submitted, res.makespan_s, xs)))
                    draw_calls.append(xs)
                if len(draws) > 1:
                    rows += [(f"{name} draw {d}", s) for d, s in enumerate(draws, 1)]
                rows.append((row_name(name, len(draws)),
                             draws[0] if len(draws) == 1 else hr.mean_of_draws(draws, draw_calls)))
            for label, folder in sources if seed is None and a.jobs <= 0 else ():  # a cut or moved copy never was
                pub = load_results(folder, w.stem)
                if pub is not None:
                    rows.append((label, hr.summarize(pub)))
            rerun = row_name("pollux", a.draws)
            ref = "published pollux" if any(r[0] == "published pollux" for r in rows) else \
                (rerun if "pollux" in names else None)
            text += hr.table(tag, rows, reference=ref) + "\n"
            per_workload.append((tag, rows))
        text += hr.summary_table(per_workload, "elasticopt", ["published pollux", row_name("pollux", a.draws)])
        text += hr.all_calls_line(calls)
        text += hr.slow_calls_text(slow)
    except ElasticoptError as exc:
        print(f"pollux_simulator: error: {exc}", file=sys.stderr)
        return 2
    print(text, end="")
    atomic_write_text(out / "table.md", text)
    print(f"(written to {out / 'table.md'})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
