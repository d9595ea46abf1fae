"""Run Sia's own simulator with elasticopt's SiaPolicy and with Sia's own policies; one table per workload.

Sia (SOSP'23) ships a heterogeneous-cluster simulator (siasosp23/artifacts, folder ``sia-simulator/``; tried
at commit aaf7a0d) that needs its own environment (Python 3.10, numpy 1.23, cvxpy with CBC/GLPK, pymoo 0.4,
pandas, rich, psutil).  This script contains and downloads none of it: point it at your checkout and at that
environment's interpreter::

    python validation/sia_simulator.py --simulator ~/artifacts/sia-simulator --python ~/envs/sia/bin/python

By default it runs the first 8 jobs of ``workloads/saturn/workload-1.csv`` (a few minutes on 2 cores) with
elasticopt's drop-in and with Sia's own policy, each with the settings of the artifact's ``run_experiment.sh``
(``--policy_p_val=-0.5 --mip_lambda_a=0.01 --mip_lambda_n=1.1 --interval=60 --project_throughputs
--share_max_replicas``), and prints mean / median / p99 JCT, makespan, finished jobs, restarts per job and
per-call policy times (median / p99 / max ms).  The full workloads::

    python validation/sia_simulator.py --simulator ... --python ... --workloads 'saturn/*.csv' --jobs 0 --parallel 4

``--parallel N`` runs N simulations at once (each a process busy on one core; a Saturn workload took 8-15 min
a policy on this project's 2-core machine).  The last table puts the drop-in's mean JCT beside each other
policy's on every workload, with how many it is at or below.

Both policies are deterministic here, yet one run says little about a lead of 1-2 %: which round a job arrives
in moves a few long jobs, and with them the mean.  ``--perturb-arrivals 30 --seeds 1,2,3,4`` runs every
workload as copies whose arrivals are moved by a seeded uniform draw in +-30 s (``host_workloads.perturb_arrivals``;
both policies see the same copy, written under ``--out``/workloads), one table per copy and the summary over
them: a paired comparison.

How it runs the host: a launcher in a temporary folder imports the host's ``sia`` module, replaces its
``SiaPolicy`` by the drop-in (``elasticopt/integrations/sia.py``, which subclasses the host's class and talks to
``elasticopt serve --stdio`` started from this environment) -- the documented registration -- times every
``optimize`` call, and runs the host's ``multi_simulator.py`` as ``__main__`` on one workload, writing its log
to ``--out``.  Sia's own policies run the same way without the replacement.  Nothing in the checkout changes.
Sia's artifact publishes no per-job results files; ``--published DIR`` reads a folder of the artifact's own
outputs (``<workload>.log`` files or its ``summary.json``) as an extra row.
"""

from __future__ import annotations

import argparse
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
from elasticopt.integrations import sia as _dropin  # noqa: E402

DROPIN = Path(_dropin.__file__)
SIA_ARGS = ("--policy_p_val=-0.5 --mip_lambda_a=0.01 --mip_lambda_n=1.1 --interval=60 --project_throughputs "
            "--share_max_replicas")
POLICIES = {  # name -> (the simulator's --policy, arguments from run_experiment.sh, drop-in?)
    "elasticopt": ("sia", SIA_ARGS, True),
    "sia": ("sia", SIA_ARGS, False),
    "gavel": ("gavel", "--interval=360", False),
}
DEFAULT_OUT = Path(tempfile.gettempdir()) / "elasticopt-validation" / "sia"


def check_inputs(simulator: Path, python: str, patterns: list[str]) -> list[Path]:
    """The workload files; a clear error for a checkout or interpreter that is not usable."""
    for name, why in (("multi_simulator.py", "the simulator's entry point"), ("sia.py", "whose SiaPolicy is replaced"),
                      ("cluster.py", "the simulated cluster")):
        if not (simulator / name).is_file():
            raise ElasticoptError(f"--simulator {simulator}: no {name} there ({why}); expected the "
                                  "sia-simulator/ folder of siasosp23/artifacts")
    hr.check_python(python)
    found: list[Path] = []
    for pat in patterns:
        hits = sorted(Path(p) for p in glob.glob(str(simulator / "workloads" / pat)))
        if not hits:
            raise ElasticoptError(f"--workloads {pat!r}: nothing matches {simulator / 'workloads' / pat}")
        found.extend(h for h in hits if h not in found)
    return found


def run_policy(simulator: Path, python: str, name: str, workload: Path, log: Path, serve: list[str],
               extra: str, options: dict | None = None, record: bool = False) -> None:
    """One policy on one workload; the artifact's log goes to ``log``, its stdout next to it."""
    policy, args, dropin = POLICIES[name]
    argv = [str(workload), f"--policy={policy}", *shlex.split(args), *shlex.split(extra), f"--output={log}"]
    keep: tuple[str, ...] = ()
    if record:  # the service's own record, which appends: a run again starts it afresh
        log.with_suffix(".requests.jsonl").unlink(missing_ok=True)
        keep = ("--record", str(log.with_suffix(".requests.jsonl")))
    hr.run_host(hr.HostRun(
        simulator=simulator, python=python, script="multi_simulator.py", args=tuple(argv), module="sia",
        cls="SiaPolicy", dropin=DROPIN if dropin else None, command=tuple(serve) + keep,
        timed=(("sia", "SiaPolicy"), ("gavel", "GavelPolicy")), stdout=log.with_suffix(".stdout"),
        calls=log.with_suffix(".calls.json"), options=options or {}, service=log.with_suffix(".service.json")))


def published_row(path: Path, workload: str, tag: str, whole: bool = True) -> dict[str, float] | None:
    """The artifact's outputs of one workload in ``path`` (``<workload>.log`` as the artifact's directory mode
    names it, or this script's ``<tag>.log``, or summary.json), or None.  Of a cut or moved copy (not ``whole``)
    only ``<tag>.log`` counts: the others are of the whole workload as published, not comparable."""
    for log in (path / f"{workload}.log", path / f"{tag}.log") if whole else (path / f"{tag}.log",):
        if log.is_file():
            return hr.summarize(hr.read_log(log))
    if whole and (path / "summary.json").is_file():
        try:
            return hr.summarize(hr.read_summary(path / "summary.json", workload))
        except ElasticoptError:
            return None
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulator", type=Path, required=True, help="your checkout's sia-simulator/ folder")
    ap.add_argument("--python", required=True, help="the interpreter of the simulator's environment")
    ap.add_argument("--workloads", action="append", default=None,
                    help="glob inside sia-simulator/workloads, repeatable (default saturn/workload-1.csv)")
    ap.add_argument("--jobs", type=int, default=8, help="the first N jobs of each workload (0: all; default 8)")
    ap.add_argument("--policies", default="elasticopt,sia",
                    help=f"comma-separated, of {', '.join(POLICIES)} (default elasticopt,sia)")
    ap.add_argument("--sim-args", default="", help="extra arguments for multi_simulator.py (e.g. '--cluster_scale 2')")
    ap.add_argument("--published", type=Path, default=None,
                    help="a folder of the artifact's own outputs (<workload>.log or summary.json), shown as a row")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT})")
    ap.add_argument("--reuse", action="store_true", help="read existing logs in --out instead of running again")
    ap.add_argument("--dropin-options", default="{}", metavar="JSON",
                    help=f"keyword arguments of the drop-in's constructor, over the host's, e.g. "
                         f"'{{\"p_fairness\": -1}}' (default none)")
    ap.add_argument("--parallel", type=int, default=1,
                    help="simulations run at once, each a host process (and a service for the drop-in; default 1)")
    hw.add_perturb_arguments(ap)
    ap.add_argument("--serve", default=None,
                    help="command of the service the drop-in starts (default: this interpreter's `-m elasticopt "
                         "serve --stdio`, under this process's PYTHONPATH)")
    ap.add_argument("--record", action="store_true",
                    help="keep the drop-in's requests of each run (<log>.requests.jsonl, elasticopt serve --record): "
                         "'elasticopt serve --stdio < FILE' answers them again")
    a = ap.parse_args(argv)
    simulator, out = a.simulator.resolve(), a.out.resolve()
    try:
        options = hr.parse_options(a.dropin_options)
        names = [p.strip() for p in a.policies.split(",") if p.strip()]
        bad = [p for p in names if p not in POLICIES]
        if bad or not names:
            raise ElasticoptError(f"--policies {a.policies!r}: unknown {bad}; expected some of {sorted(POLICIES)}")
        workloads = check_inputs(simulator, a.python, a.workloads or ["saturn/workload-1.csv"])
        seeds = hw.perturb_seeds(a)
        serve = hr.serve_command(a.serve)
        plan, tasks = [], []
        for w, seed in ((w, seed) for w in workloads for seed in seeds):
            tag = f"{w.parent.name}-{w.stem}" + (f"-first{a.jobs}" if a.jobs > 0 else "")
            wl = hw.head_workload(w, out / "workloads" / f"{tag}.csv", a.jobs)
            wl, tag = hw.moved_copy(wl, out, tag, a.perturb_arrivals, seed)
            plan.append((w, tag, a.jobs <= 0 and seed is None))
            for name in names:
                log = out / name / f"{tag}.log"
                if not (a.reuse and log.is_file()):
                    tasks.append((f"{name} on {tag}", partial(run_policy, simulator, a.python, name, wl, log, serve,
                                                              a.sim_args, options, a.record)))
        hr.run_all(tasks, a.parallel, "sia_simulator")
        text, calls, slow, per_workload = "", {n: [] for n in names}, {n: [] for n in names}, []
        for w, tag, whole in plan:
            rows = []
            for name in names:
                log = out / name / f"{tag}.log"
                res = hr.read_log(log)
                xs = hr.read_calls(log.with_suffix(".calls.json"))
                calls[name].extend(xs)
                slow[name].append((xs, hr.read_service(log.with_suffix(".service.json"))))
                rows.append((name, hr.summarize(hr.Results(res.jct_s, res.restarts, res.submitted,
                                                           res.makespan_s, xs))))
            if a.published is not None:
                pub = published_row(a.published, w.stem, tag, whole)
                if pub is not None:
                    rows.append(("published", pub))
            text += hr.table(tag, rows, reference="sia" if "sia" in names else None) + "\n"
            per_workload.append((tag, rows))
        text += hr.summary_table(per_workload, "elasticopt", ["sia", "gavel", "published"])
        text += hr.all_calls_line(calls)
        text += hr.slow_calls_text(slow)
    except ElasticoptError as exc:
        print(f"sia_simulator: error: {exc}", file=sys.stderr)
        return 2
    print(text, end="")
    atomic_write_text(out / "table.md", text)
    print(f"(written to {out / 'table.md'})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
