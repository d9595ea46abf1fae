"""Run Gavel's own simulator with elasticopt's GavelPolicy and with Gavel's policies; print the tables.

Gavel (OSDI'20, stanford-futuredata/gavel) ships a round-based simulator in
``scheduler/`` (Python 3.8, cvxpy).  This script contains and downloads none
of it: point it at your checkout (the repository root or its ``scheduler/``
folder, an absolute or relative path) and at the interpreter of Gavel's
environment (``pip install -r scheduler/requirements.txt; cd scheduler;
make`` as Gavel's EXPERIMENTS.md says)::

    python validation/gavel_simulator.py --gavel ~/gavel --python ~/envs/gavel/bin/python

For each workload it runs Gavel's own driver once per policy: elasticopt's
drop-in (``elasticopt/integrations/gavel.py``, registered under the policy
name ``elasticopt``, talking to ``elasticopt serve --stdio`` started from
this environment) and Gavel's policies (``--policies``), and prints one
table per workload: mean / median / p99 JCT, makespan, finished jobs,
restarts per job, micro-tasks on a worker type the policy gave share 0,
answers after which the policy's name started with ``FIFO`` (Gavel then
gives no spare workers to jobs of share 0: every answer of ``fifo_perf``,
the drop-in's answers that ran every job under its default
``refuse_spare="auto"``), jobs Gavel itself ended as failed (after repeated
micro-tasks without progress; Gavel leaves them out of its mean, and they
are not "finished"), allocation calls and their median / p99 / max wall
time.

Workloads (``--workloads``, default ``artifact,static-multiple``):

- ``artifact``: ``scripts/drivers/simulate_scheduler_with_trace.py`` on
  ``traces/physical_cluster/artifact_evaluation.trace`` with
  ``physical_cluster_throughputs.json`` on 2 V100 + 4 K80 (the artifact
  evaluation of EXPERIMENTS.md); ``trace:NAME`` runs another trace of
  ``traces/physical_cluster/`` on ``--cluster-spec``;
- ``static-multiple``: ``scripts/drivers/simulate_scheduler_with_generated_jobs.py``
  with Gavel's generated multi-GPU jobs (Philly-like sizes and durations),
  all submitted at time 0 (``-l 0``: Gavel's static trace of its makespan
  experiment, smaller): ``--generated-args`` (default ``-c 8:8:8 -m -s 0
  -e 30 -l 0 --seed 0``, 1-2 minutes per policy; EXPERIMENTS.md sweeps up to
  500 jobs on ``-c 36:36:36``);
- ``continuous-multiple``: the same driver with Poisson arrivals (Figure 9:
  ``-c 36:36:36 -m -s 4000 -e 5000 -l 3600/rate``, hours per policy): give
  ``--generated-args`` with a ``-l`` > 0.

How the policy is registered (nothing in the checkout changes): a runner
script in a temporary folder puts ``scheduler/`` and the drop-in on
``sys.path``, wraps Gavel's ``utils.get_policy`` so that ``elasticopt``
returns the drop-in's ``GavelPolicy`` (the one line of
``docs/integrations.md``) and ``utils.get_available_policies`` lists it,
times every ``get_allocation`` call, records each round's micro-tasks
(``Scheduler._schedule_jobs_on_workers``) and reads the JCTs from the
scheduler's own ``_job_completion_times`` when the driver asks for the
average JCT; then it runs the driver as ``__main__``.  A restart is a
micro-task on other workers than the job's micro-task of the previous round
(or after a round without one), the job's first excepted.  Gavel publishes
no per-trace figures for these settings: the published column stays empty.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import host_records  # noqa: E402
from host_runs import hosts_stopped_on_signal, parse_options, serve_command, start_host, wait_host  # noqa: E402

from elasticopt._io import atomic_write_text  # noqa: E402
from elasticopt.errors import ElasticoptError  # noqa: E402
from elasticopt.integrations import gavel as _dropin  # noqa: E402

DROPIN = Path(_dropin.__file__)
OURS = "elasticopt"
DEFAULT_POLICIES = "max_min_fairness_perf,max_sum_throughput_perf,finish_time_fairness_perf,min_total_duration_perf,fifo_perf"
DEFAULT_GENERATED = "-c 8:8:8 -m -s 0 -e 30 -l 0 --seed 0"
TRACE_DRIVER = "scripts/drivers/simulate_scheduler_with_trace.py"
GENERATED_DRIVER = "scripts/drivers/simulate_scheduler_with_generated_jobs.py"

RUNNER = r'''
import json, os, runpy, sys, time
import utils, scheduler
import elasticopt_gavel

command = os.environ["ELASTICOPT_COMMAND"].split("\x1f")
options = json.loads(os.environ.get("EO_DROPIN_OPTIONS") or "{}")
calls, rounds, fifo_after = [], [], []
_get_policy = utils.get_policy


def timed(policy):
    inner = policy.get_allocation

    def get_allocation(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            calls.append((time.perf_counter() - t0) * 1000.0)
            fifo_after.append(policy.name.startswith("FIFO"))  # the name this answer's rounds read
    policy.get_allocation = get_allocation
    return policy


def get_policy(policy_name, solver=None, seed=None, priority_reweighting_policies=None):
    if policy_name == "elasticopt":  # the registration of docs/integrations.md
        return timed(elasticopt_gavel.GavelPolicy(command=command, **options))
    return timed(_get_policy(policy_name, solver=solver, seed=seed,
                             priority_reweighting_policies=priority_reweighting_policies))


_available = utils.get_available_policies
utils.get_policy = get_policy
utils.get_available_policies = lambda: _available() + ["elasticopt"]

_schedule = scheduler.Scheduler._schedule_jobs_on_workers


def _schedule_jobs_on_workers(self):
    out = _schedule(self)
    alloc = self._allocation or {}
    rounds.append([(str(j), list(w), self._worker_id_to_worker_type_mapping[w[0]],
                    float(alloc.get(j, {}).get(self._worker_id_to_worker_type_mapping[w[0]], 0.0)))
                   for j, w in out.items()])
    return out


scheduler.Scheduler._schedule_jobs_on_workers = _schedule_jobs_on_workers
_average = scheduler.Scheduler.get_average_jct


def get_average_jct(self, job_ids=None, verbose=True):
    measured = sorted(job_ids) if job_ids is not None else sorted(self._job_completion_times)
    jct = dict((str(j), self._job_completion_times.get(j)) for j in measured)
    last, restarts, share0, tasks = {}, {}, 0, 0
    for r, tasks_r in enumerate(rounds):
        for job, workers, wtype, share in tasks_r:
            tasks += 1
            share0 += share == 0.0
            prev = last.get(job)
            if prev is not None and (prev[0] != r - 1 or prev[1] != workers):
                restarts[job] = restarts.get(job, 0) + 1
            restarts.setdefault(job, 0)
            last[job] = (r, workers)
    record = {"jct_s": jct, "makespan_s": float(self._current_timestamp),
              "restarts": dict((j, restarts.get(j, 0)) for j in jct), "calls_ms": calls,
              "extra": {"micro-tasks": tasks, "on share 0": share0, "policy name": self._policy.name,
                        "answers then FIFO-named": sum(fifo_after),
                        "failed by Gavel": sum(1 for v in jct.values() if v is None)}}
    tmp = os.environ["EO_RESULT"] + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(record, fh)
    os.replace(tmp, os.environ["EO_RESULT"])
    return _average(self, job_ids, verbose)


scheduler.Scheduler.get_average_jct = get_average_jct
driver = os.environ["EO_DRIVER"]
sys.argv = [driver] + sys.argv[1:]
runpy.run_path(driver, run_name="__main__")
'''


def scheduler_dir(gavel: Path) -> Path:
    """Gavel's ``scheduler/`` folder of a checkout (given as the repository root or that folder)."""
    gavel = gavel.expanduser().resolve()
    for cand in (gavel / "scheduler", gavel):
        if (cand / "scheduler.py").is_file() and (cand / "utils.py").is_file():
            if not (cand / TRACE_DRIVER).is_file():
                raise ElasticoptError(f"--gavel {gavel}: no {TRACE_DRIVER} in {cand}")
            if not list((cand / "runtime" / "rpc_stubs").glob("*_pb2.py")):
                raise ElasticoptError(f"--gavel {gavel}: {cand / 'runtime/rpc_stubs'} holds no generated stubs: "
                                      f"run `make` in {cand} with Gavel's environment first (EXPERIMENTS.md)")
            return cand
    raise ElasticoptError(f"--gavel {gavel}: expected a checkout of stanford-futuredata/gavel "
                          "(a folder with scheduler/scheduler.py, or that scheduler/ folder)")


def workload_args(name: str, sched: Path, cluster_spec: str, generated: str) -> tuple[str, list[str]]:
    """The driver and its arguments (without ``--policy``) of one workload name."""
    if name == "artifact":
        return TRACE_DRIVER, ["-t", "traces/physical_cluster/artifact_evaluation.trace",
                              "--throughputs_file", "physical_cluster_throughputs.json", "-c", "2:0:4", "--seed", "0"]
    if name.startswith("trace:"):
        trace = sched / "traces" / "physical_cluster" / name[len("trace:"):]
        if not trace.is_file():
            raise ElasticoptError(f"--workloads {name}: no trace {trace}")
        return TRACE_DRIVER, ["-t", str(trace), "--throughputs_file", "physical_cluster_throughputs.json",
                              "-c", cluster_spec, "--seed", "0"]
    if name in ("static-multiple", "continuous-multiple"):
        args = shlex.split(generated)
        lam = args[args.index("-l") + 1] if "-l" in args[:-1] else None
        if lam is None or (float(lam) == 0) != (name == "static-multiple"):
            raise ElasticoptError(f"--workloads {name} needs --generated-args with "
                                  f"{'-l 0' if name == 'static-multiple' else '-l SECONDS (> 0)'}; got {generated!r}")
        return GENERATED_DRIVER, [*args, "-v"]
    raise ElasticoptError(f"--workloads {name}: expected artifact, static-multiple, continuous-multiple or trace:FILE")


def run_one(sched: Path, python: str, driver: str, args: list[str], policy: str, out: Path,
            serve: list[str], quiet: bool, options: dict | None = None, timeout_s: float | None = None) -> dict:
    """Gavel's driver on one workload with one policy; the record the runner script wrote.  Past ``timeout_s``
    the simulation is stopped and :class:`HostPolicyFailed` raised (for the drop-in too: a row, not an error)."""
    result = out / f"{policy}.json"
    result.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="eo-gavel-") as tmp:
        (Path(tmp) / "elasticopt_gavel.py").write_text(DROPIN.read_text())
        (Path(tmp) / "eo_runner.py").write_text(RUNNER)
        env = dict(os.environ, EO_DRIVER=str(sched / driver), EO_RESULT=str(result),
                   ELASTICOPT_COMMAND="\x1f".join(serve), EO_DROPIN_OPTIONS=json.dumps(options or {}),
                   PYTHONPATH=os.pathsep.join([str(sched), tmp]))
        log = out / f"{policy}.log"
        with open(log, "w") as fh:  # stopped with the runner (SIGTERM, SIGINT): hosts_stopped_on_signal in main
            try:
                code = wait_host(start_host([python, str(Path(tmp) / "eo_runner.py"), *args, "-p", policy],
                                            cwd=sched, env=env, stdout=fh, stderr=subprocess.STDOUT), timeout_s)
            except subprocess.TimeoutExpired:
                raise HostPolicyFailed(policy, f"did not end within --timeout-s {timeout_s:g} s (stopped)",
                                       log) from None
    if code != 0:
        text = log.read_text()
        tail = text[-1500:]
        if code == 2 or policy == OURS:  # its arguments refused (argparse), or the drop-in failed: the run's error
            raise ElasticoptError(f"Gavel's {driver} exited with {code} for policy {policy} "
                                  f"(log {log}):\n{tail}")
        last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), f"exit status {code}")
        raise HostPolicyFailed(policy, last, log)
    return host_records.read_record(result, f"{driver} -p {policy}")


class HostPolicyFailed(ElasticoptError):
    """A policy's simulation ended early -- one of Gavel's own policies stopped it (e.g. its LP solver failed),
    or it ran past ``--timeout-s`` -- : a result, not the run's error; the table shows the policy as failed,
    with the last line of its log or the time limit."""

    def __init__(self, policy: str, reason: str, log: Path):
        self.policy, self.reason, self.log = policy, reason, log
        super().__init__(f"{policy}: the simulation stopped early: {reason} (log {log})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gavel", type=Path, required=True, help="your Gavel checkout (root or scheduler/)")
    ap.add_argument("--python", required=True, help="the interpreter of Gavel's environment")
    ap.add_argument("--workloads", default="artifact,static-multiple",
                    help="comma-separated: artifact, static-multiple, continuous-multiple, trace:FILE "
                         "(default: artifact,static-multiple)")
    ap.add_argument("--policies", default=DEFAULT_POLICIES, help=f"Gavel's policies to compare (default {DEFAULT_POLICIES})")
    ap.add_argument("--generated-args", default=DEFAULT_GENERATED,
                    help=f"arguments of the generated-jobs driver (default {DEFAULT_GENERATED!r})")
    ap.add_argument("--cluster-spec", default="2:0:4", help="V100:P100:K80 GPUs for trace:FILE workloads")
    ap.add_argument("--out", type=Path, default=None,
                    help="folder for logs, records and table.md (default: a temporary folder, removed)")
    ap.add_argument("--serve", default=None,
                    help="command of the service (default: this interpreter's `-m elasticopt serve --stdio`, under "
                         "this process's PYTHONPATH)")
    ap.add_argument("--timeout-s", type=float, default=None,
                    help="stop a policy's simulation after this many seconds and show it as not ended (default: "
                    "none; Gavel's policies can run for hours where they starve a job)")
    ap.add_argument("--dropin-options", default="{}", metavar="JSON",
                    help='keyword arguments of GavelPolicy, a JSON object, e.g. \'{"patience_calls": 8}\'')
    a = ap.parse_args(argv)
    if a.timeout_s is not None and not (a.timeout_s > 0 and math.isfinite(a.timeout_s)):
        print(f"gavel_simulator: error: --timeout-s {a.timeout_s:g}: expected a number of seconds > 0",
              file=sys.stderr)
        return 2
    serve = serve_command(a.serve)
    tmp = None
    try:
        options = parse_options(a.dropin_options)
        sched = scheduler_dir(a.gavel)
        python = host_records.resolve_python(a.python)
        names = [w.strip() for w in a.workloads.split(",") if w.strip()]
        policies = [OURS] + [p.strip() for p in a.policies.split(",") if p.strip() and p.strip() != OURS]
        plan = [(n, *workload_args(n, sched, a.cluster_spec, a.generated_args)) for n in names]
        if a.out is None:
            tmp = tempfile.TemporaryDirectory(prefix="eo-gavel-out-")
            out_root = Path(tmp.name)
        else:
            out_root = a.out.expanduser().resolve()
        texts, ours_calls = [], []
        with hosts_stopped_on_signal():
            for name, driver, args in plan:
                out = out_root / name.replace(":", "_")
                out.mkdir(parents=True, exist_ok=True)
                rows = []
                for policy in policies:
                    print(f"gavel_simulator: {name}: {policy} ...", file=sys.stderr, flush=True)
                    try:
                        rec = run_one(sched, python, driver, args, policy, out, serve, quiet=True,
                                      options=options if policy == OURS else None, timeout_s=a.timeout_s)
                    except HostPolicyFailed as exc:  # the other policies still run; the row says why not this
                        print(f"gavel_simulator: {exc}", file=sys.stderr, flush=True)
                        rows.append(host_records.failed(policy, exc.reason))
                        continue
                    rows.append(host_records.summarize(policy, rec, str(out / f"{policy}.json")))
                    if policy == OURS:
                        ours_calls.extend(rec.get("calls_ms") or [])
                text = host_records.table(f"{name} ({driver} {' '.join(args)})", rows, OURS,
                                       extra_cols=("micro-tasks", "on share 0", "answers then FIFO-named",
                                                   "failed by Gavel"))
                print(text, flush=True)
                texts.append(text)
        line = host_records.latency_line([], OURS, ours_calls)
        print(line, end="")
        if a.out is not None:
            atomic_write_text(out_root / "table.md", "\n".join(texts) + "\n" + line)
    except ElasticoptError as exc:
        print(f"gavel_simulator: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
