"""What the host-simulator runners share: running a host's script under its own interpreter, reading its logs and
summaries, timing its policy calls, and the side-by-side tables.

The runners (``validation/pollux_simulator.py``, ``validation/sia_simulator.py``) contain none of the hosts'
code: they write a small launcher into a temporary folder, put the user's checkout and that folder on the host
interpreter's ``PYTHONPATH``, register the policy (the documented one-line replacement of the host's class,
or nothing for the host's own policies), wrap the policy's ``optimize`` to time every call, and run the host's
own simulator script as ``__main__``.

Results, as the Pollux and Sia artifacts write them:

- ``--output FILE`` of one workload: JSON lines, one record per scheduling round, the last one listing every
  submitted job with ``name``, ``num_restarts``, ``submission_time``, ``completion_time``;
- ``--output DIR`` of a folder of workloads: ``DIR/<workload>.log`` as above and ``DIR/summary.json`` with
  ``{"jcts": {workload: {job: seconds}}, "avgs": {workload: seconds}, "mean": seconds}``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticopt.errors import ElasticoptError

LAUNCHER = '''\
import atexit, json, os, runpy, sys, time
spec = json.loads(os.environ["EO_HOST_RUN"])
sys.path.insert(0, spec["simulator"])
os.chdir(spec["simulator"])
calls, service, service_seen = [], [], []


def _timed(mod_name, cls_name):
    try:
        cls = getattr(__import__(mod_name), cls_name)
        inner = cls.optimize
    except (ImportError, AttributeError):  # the host has no such policy: nothing to time
        return

    def optimize(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(self, *args, **kwargs)
        finally:
            calls.append(1000.0 * (time.perf_counter() - t0))
            # the service's own split of the call (a drop-in keeps its last response), None for a host policy
            # (a call that failed before its request leaves the previous response: that one is not counted twice)
            resp = getattr(self, "last_response", None)
            fresh = isinstance(resp, dict) and not (service_seen and service_seen[-1] is resp)
            service.append(resp.get("timings") if fresh else None)
            service_seen[:] = [resp]
    cls.optimize = optimize


@atexit.register
def _save():
    for path, xs in ((spec["calls"], calls), (spec.get("service"), service)):
        if path:
            with open(path + ".tmp", "w") as fh:
                json.dump(xs, fh)
            os.replace(path + ".tmp", path)


host = __import__(spec["module"])
if spec.get("dropin"):
    dropin = __import__(spec["dropin"])
    base = getattr(dropin, spec["cls"])
    command, options = spec["command"], spec["options"]

    class Registered(base):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("command", command)
            kwargs.update(options)  # the runner's --dropin-options win over the host's own arguments
            super().__init__(*args, **kwargs)
    Registered.__name__ = Registered.__qualname__ = spec["cls"]
    setattr(host, spec["cls"], Registered)  # the documented registration: the host's name now means the drop-in
for mod_name, cls_name in spec["timed"]:
    _timed(mod_name, cls_name)
sys.argv = [spec["script"]] + spec["args"]
runpy.run_path(spec["script"], run_name="__main__")
'''


@dataclass(frozen=True)
class HostRun:
    """One run of a host's simulator script.

    ``module``/``cls``: the host's policy class the drop-in replaces (``dropin`` the drop-in module's file, None
    to run the host's own); ``timed``: ``(module, class)`` pairs whose ``optimize`` calls are timed;
    ``options``: keyword arguments given to the drop-in's constructor over the host's."""

    simulator: Path
    python: str
    script: str
    args: tuple[str, ...]
    module: str
    cls: str
    dropin: Path | None
    command: tuple[str, ...]
    timed: tuple[tuple[str, str], ...]
    stdout: Path
    calls: Path
    env: dict[str, str] = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    service: Path | None = None


#: The host processes running now (each the leader of its own process group), and whether the runner is stopping.
_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.RLock()  # re-entrant: the signal handler runs in the main thread, which may hold it
_STOPPING = threading.Event()
_STOP_HINT = [""]  # what the stop message adds (hosts_stopped_on_signal)
_STOP_SIGNAL = [0]  # the signal being handled (0: none), so that a second one does not re-enter the handler


def _stop_hosts(signum: int, frame) -> None:
    """SIGTERM / SIGINT to the runner: stop every running host's process group (the host, and the drop-in's
    service), start no more, and exit with 128 + the signal's number.

    A second signal while this runs (``timeout`` forwarding its TERM beside a ``kill``; Ctrl-C twice) returns at
    once: before, it re-entered the handler inside the first one's lock and the runner hung for ever."""
    if _STOP_SIGNAL[0]:
        return
    _STOP_SIGNAL[0] = signum
    _STOPPING.set()
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    sys.stderr.write(f"stopped by {signal.Signals(signum).name}: {len(procs)} running simulation(s) stopped, none "
                     "started after; the finished runs' logs are kept" + _STOP_HINT[0] + "\n")
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def hosts_stopped_on_signal(hint: str = ""):
    """While inside: SIGTERM / SIGINT to the runner stop every host started by :func:`start_host` (its process
    group), start no more, and exit with 128 + the signal's number, saying so (and ``hint``).  Handlers can be set
    in the main thread only; elsewhere nothing is installed."""
    _STOP_HINT[0] = hint
    _STOP_SIGNAL[0] = 0
    _STOPPING.clear()
    main = threading.current_thread() is threading.main_thread()
    before = {sig: signal.signal(sig, _stop_hosts) for sig in (signal.SIGTERM, signal.SIGINT)} if main else {}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def start_host(argv: Sequence[str], **popen: Any) -> subprocess.Popen:
    """Start a host process in its own session (the host and what it starts, e.g. the drop-in's service, are one
    process group, stopped together), known to :func:`hosts_stopped_on_signal`; end it with :func:`wait_host`."""
    with _LIVE_LOCK:
        if _STOPPING.is_set():
            raise ElasticoptError(f"{shlex.join(argv[1:3])}: not started (the runner was stopped)")
        proc = subprocess.Popen(list(argv), start_new_session=True, **popen)
        _LIVE.add(proc)
    return proc


def stop_host(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """Stop a host's process group: SIGTERM, then SIGKILL after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    with _LIVE_LOCK:
        _LIVE.discard(proc)


def wait_host(proc: subprocess.Popen, timeout_s: float | None = None) -> int:
    """Wait for a host started by :func:`start_host`; its exit code.  Past ``timeout_s`` it is stopped
    (:func:`stop_host`) and :class:`subprocess.TimeoutExpired` raised."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_host(proc)
        raise
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)


def run_host(run: HostRun) -> None:
    """Run it; its stdout and stderr go to ``run.stdout``; raises with the log's tail if it fails."""
    run.stdout.parent.mkdir(parents=True, exist_ok=True)
    run.calls.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eo-host-") as tmp:
        spec = {"simulator": str(run.simulator), "script": str(run.simulator / run.script), "args": list(run.args),
                "module": run.module, "cls": run.cls, "command": list(run.command), "calls": str(run.calls),
                "timed": [list(t) for t in run.timed], "dropin": None, "options": dict(run.options),
                "service": str(run.service) if run.service is not None else None}
        if run.dropin is not None:
            spec["dropin"] = "elasticopt_" + run.dropin.stem
            (Path(tmp) / f"elasticopt_{run.dropin.stem}.py").write_text(run.dropin.read_text())
        (Path(tmp) / "eo_launcher.py").write_text(LAUNCHER)
        env = dict(os.environ, EO_HOST_RUN=json.dumps(spec), PYTHONPATH=os.pathsep.join([str(run.simulator), tmp]),
                   PYTHONUNBUFFERED="1", **run.env)
        with open(run.stdout, "w") as out:
            try:
                proc = start_host([run.python, str(Path(tmp) / "eo_launcher.py")], cwd=run.simulator, env=env,
                                  stdout=out, stderr=subprocess.STDOUT)
            except ElasticoptError:
                raise ElasticoptError(f"{run.script} {shlex.join(run.args)}: not started (the runner was "
                                      "stopped)") from None
            wait_host(proc)
    if proc.returncode != 0:
        tail = run.stdout.read_text(errors="replace")[-2000:]
        raise ElasticoptError(f"{run.script} {shlex.join(run.args)} exited with {proc.returncode} "
                              f"(its output: {run.stdout}); last lines:\n{tail}")


def serve_command(serve: str | None = None) -> list[str]:
    """The command a drop-in starts its service with: ``serve`` (``--serve``, shell-quoted) where given, else
    this interpreter's ``-m elasticopt serve --stdio`` under this process's ``PYTHONPATH`` (through ``env``).

    The drop-in starts it from inside the host, whose ``PYTHONPATH`` is the host checkout and the launcher's
    folder: inherited, an elasticopt run from a checkout on ``PYTHONPATH`` would start the service of whatever
    copy the interpreter has installed (found running a copy while the service came from another checkout)."""
    if serve:
        return shlex.split(serve)
    cmd = [sys.executable, "-m", "elasticopt", "serve", "--stdio"]
    env = shutil.which("env")
    if env is None:
        return cmd
    path = os.environ.get("PYTHONPATH")
    return [env, f"PYTHONPATH={path}", *cmd] if path else [env, "-u", "PYTHONPATH", *cmd]


def check_python(python: str) -> str:
    """The interpreter's version 'X.Y'; a clear error if it cannot run."""
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise ElasticoptError(f"--python {python}: cannot run it ({exc.strerror})") from None
    if out.returncode != 0:
        raise ElasticoptError(f"--python {python}: exited with {out.returncode}: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


@dataclass(frozen=True)
class Results:
    """One workload's results: JCT per finished job (s), restarts per job (None: not recorded), jobs submitted,
    makespan (s, None: not recorded), per-call policy times (ms)."""

    jct_s: dict[str, float]
    restarts: dict[str, float] | None
    submitted: int
    makespan_s: float | None
    calls_ms: tuple[float, ...] = ()


def read_log(path: Path) -> Results:
    """The artifact's JSON-lines log of one workload (its last record)."""
    last = None
    try:
        with open(path) as fh:
            for i, line in enumerate(fh):
                if line.strip():
                    last = (i, line)
    except OSError as exc:
        raise ElasticoptError(f"{path}: cannot read it ({exc.strerror})") from None
    if last is None:
        raise ElasticoptError(f"{path}: empty log (expected one JSON record per scheduling round)")
    try:
        rec = json.loads(last[1])
        jobs = rec["submitted_jobs"]
    except (ValueError, KeyError, TypeError):
        raise ElasticoptError(f"{path}: line {last[0] + 1}: expected a JSON record with 'submitted_jobs'") from None
    jct, restarts, ends = {}, {}, []
    for j in jobs:
        name = str(j["name"])
        restarts[name] = float(j.get("num_restarts") or 0)
        if j.get("completion_time") is not None:
            jct[name] = float(j["completion_time"]) - float(j["submission_time"])
            ends.append(float(j["completion_time"]))
    starts = [float(j["submission_time"]) for j in jobs]
    makespan = (max(ends) - min(starts)) if ends and starts else None
    return Results(jct, restarts, len(jobs), makespan)


def read_summary(path: Path, workload: str | None = None) -> Results:
    """A ``summary.json``: flat ``{"jcts": {job: s}}`` or the artifacts' nested ``{"jcts": {workload: {job: s}}}``
    (then ``workload`` picks one); restarts where it records ``num_restarts``/``restarts``."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise ElasticoptError(f"{path}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise ElasticoptError(f"{path}: not JSON ({exc})") from None
    jcts = doc.get("jcts") if isinstance(doc, dict) else None
    if not isinstance(jcts, dict):
        raise ElasticoptError(f"{path}: expected an object with 'jcts': {{job: seconds}} or {{workload: {{job: s}}}}")
    restarts = doc.get("num_restarts", doc.get("restarts"))
    if jcts and all(isinstance(v, dict) for v in jcts.values()):
        if workload is None or workload not in jcts:
            raise ElasticoptError(f"{path}: jcts holds workloads {sorted(jcts)}; no {workload!r} among them")
        jcts = jcts[workload]
        restarts = restarts.get(workload) if isinstance(restarts, dict) else None
    try:
        jct = {str(k): float(v) for k, v in jcts.items()}
        rs = {str(k): float(v) for k, v in restarts.items()} if isinstance(restarts, dict) else None
    except (TypeError, ValueError):
        raise ElasticoptError(f"{path}: jcts/restarts of {workload or 'the file'}: expected numbers per job") from None
    return Results(jct, rs, len(jct), None)


def read_calls(path: Path) -> tuple[float, ...]:
    """Per-call policy times (ms) the launcher saved; () if none were."""
    try:
        return tuple(float(x) for x in json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return ()


def percentile(values, q: float) -> float:
    """The q-th percentile, linear interpolation between closest ranks (numpy's default); nan when empty."""
    xs = sorted(values)
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(res: Results) -> dict[str, float]:
    """The figures of one table row (nan where not recorded)."""
    jcts = list(res.jct_s.values())
    rs = list(res.restarts.values()) if res.restarts is not None else []
    calls = list(res.calls_ms)
    return {
        "finished": len(jcts), "submitted": res.submitted,
        "mean_jct_s": sum(jcts) / len(jcts) if jcts else math.nan,
        "median_jct_s": percentile(jcts, 50), "p99_jct_s": percentile(jcts, 99),
        "makespan_s": res.makespan_s if res.makespan_s is not None else math.nan,
        "restarts": sum(rs) / len(rs) if rs else math.nan,
        "calls": len(calls), "call_median_ms": percentile(calls, 50), "call_p99_ms": percentile(calls, 99),
        "call_max_ms": max(calls) if calls else math.nan,
    }


def _cell(x: float, fmt: str) -> str:
    return "n/a" if x != x else format(x, fmt)


def table(workload: str, rows: list[tuple[str, dict[str, float]]], reference: str | None = None) -> str:
    """One markdown table of a workload: a row per policy; ``reference``'s mean JCT is the ratio's base."""
    base = dict(rows).get(reference, {}).get("mean_jct_s", math.nan) if reference else math.nan
    out = [f"### {workload}", "",
           "| policy | finished | mean JCT s | median JCT s | p99 JCT s | makespan s | restarts/job | calls "
           "| call median ms | call p99 ms | call max ms | mean JCT / " + (reference or "-") + " |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in rows:
        ratio = s["mean_jct_s"] / base if base == base and base else math.nan
        out.append(f"| {name} | {s['finished']}/{s['submitted']} | {_cell(s['mean_jct_s'], '.0f')} | "
                   f"{_cell(s['median_jct_s'], '.0f')} | {_cell(s['p99_jct_s'], '.0f')} | "
                   f"{_cell(s['makespan_s'], '.0f')} | {_cell(s['restarts'], '.2f')} | {s['calls'] or 'n/a'} | "
                   f"{_cell(s['call_median_ms'], '.1f')} | {_cell(s['call_p99_ms'], '.1f')} | "
                   f"{_cell(s['call_max_ms'], '.1f')} | {_cell(ratio, '.3f')} |")
    return "\n".join(out) + "\n"


def all_calls_line(calls: dict[str, list[float]]) -> str:
    """Per policy: median / p99 / max ms over every call of every workload."""
    parts = [f"{name}: {len(xs)} calls, median {percentile(xs, 50):.1f} ms, p99 {percentile(xs, 99):.1f} ms, "
             f"max {max(xs):.1f} ms" for name, xs in calls.items() if xs]
    return ("Policy calls over all workloads: " + "; ".join(parts) + "\n") if parts else ""


def parse_options(text: str) -> dict:
    """``--dropin-options``: a JSON object."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ElasticoptError(f"--dropin-options {text!r}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ElasticoptError(f"--dropin-options {text!r}: expected a JSON object of keyword arguments")
    return doc


def read_service(path: Path) -> tuple[dict | None, ...]:
    """Per call, the service's own ``timings`` (seconds) the launcher saved beside ``read_calls``; () if none."""
    try:
        xs = json.loads(path.read_text())
    except (OSError, ValueError):
        return ()
    return tuple(x if isinstance(x, dict) else None for x in xs) if isinstance(xs, list) else ()


def slow_calls_line(name: str, calls_ms, service, over_ms: float = 100.0) -> str:
    """Where the time of a policy's calls over ``over_ms`` went, by the service's own split of each call.

    A call is put down to what took at least half of it: building the option table (``compile_s``), the
    backend's solve (``solve_s``, with any kernel it compiles on first meeting a shape), the rest of the service
    (parse, validate, translate, verify, place), or outside the service (the round trip, the drop-in's own
    request building, the host's objects); "mixed" where no part took half; "no split" where the call has no
    service timings (a host policy's, or a call that did not reach the service)."""
    slow = [(ms, service[i] if i < len(service) else None) for i, ms in enumerate(calls_ms) if ms > over_ms]
    if not slow:
        return f"{name}: no call over {over_ms:.0f} ms\n"
    counts = {"table": 0, "solve": 0, "service": 0, "outside": 0, "mixed": 0, "no split": 0}
    for ms, t in slow:
        if not t:
            counts["no split"] += 1
            continue
        comp, solve = 1000.0 * float(t.get("compile_s") or 0), 1000.0 * float(t.get("solve_s") or 0)
        rest = 1000.0 * float(t.get("total_s") or 0) - comp - solve
        outside = ms - 1000.0 * float(t.get("total_s") or 0)
        part = max((comp, "table"), (solve, "solve"), (rest, "service"), (outside, "outside"))
        counts[part[1] if part[0] >= ms / 2 else "mixed"] += 1
    said = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    return f"{name}: {len(slow)} calls over {over_ms:.0f} ms (the largest part of each: {said})\n"


def slow_calls_text(runs: dict[str, list[tuple[tuple[float, ...], tuple[dict | None, ...]]]],
                    over_ms: float = 100.0) -> str:
    """``slow_calls_line`` per policy over all its workloads' ``(read_calls, read_service)`` pairs."""
    out = ""
    for name, pairs in runs.items():
        ms = [m for xs, _ in pairs for m in xs]
        split = [t for xs, ts in pairs for t in (list(ts) + [None] * len(xs))[:len(xs)]]
        if ms:
            out += slow_calls_line(name, ms, split, over_ms)
    return out


def run_all(tasks: Sequence[tuple[str, Callable[[], None]]], parallel: int, tool: str) -> None:
    """Run each ``(label, run)``, ``parallel`` at a time (each run is a host process: threads only wait on it).

    Every task runs even where another fails; then the failures are raised together, each with its label (a
    failed run's error names its log), and the finished runs' logs stay in place for ``--reuse``.  A SIGTERM or
    SIGINT to the runner stops every running host with the service it started (each runs in its own process
    group) and starts no more; without this a ``kill`` of the runner left the simulations running.
    """
    if parallel < 1:
        raise ElasticoptError(f"--parallel {parallel}: expected at least 1 simulation at a time")

    def one(label: str, run: Callable[[], None]) -> str | None:
        if _STOPPING.is_set():
            return f"{label}: not started (the runner was stopped)"
        sys.stderr.write(f"{tool}: {label} ...\n")  # one write: the threads' lines do not interleave
        sys.stderr.flush()
        try:
            run()
        except ElasticoptError as exc:
            return f"{label}: {exc}"
        return None

    with hosts_stopped_on_signal(" (--reuse reads them)"), ThreadPoolExecutor(max_workers=parallel) as pool:
        errors = [e for e in pool.map(lambda t: one(*t), tasks) if e]
    if errors:
        raise ElasticoptError(f"{len(errors)} of {len(tasks)} runs failed (the others' logs are kept: add "
                              "--reuse to read them without running them again):\n" + "\n".join(errors))


def draw_log(log: Path, draw: int) -> Path:
    """The log of a policy's ``draw``-th run (1: ``log`` itself, so that one draw is read as before)."""
    return log if draw <= 1 else log.with_name(f"{log.stem}.draw{draw}{log.suffix}")


def mean_of_draws(draws: Sequence[dict[str, float]], calls_ms: Sequence[Sequence[float]]) -> dict[str, float]:
    """One row for several runs of a random policy: the mean of each draw's JCT figures, makespan and restarts;
    the fewest finished jobs; the call figures over every call of every draw."""
    pooled = [x for xs in calls_ms for x in xs]
    out = {k: sum(d[k] for d in draws) / len(draws)
           for k in ("mean_jct_s", "median_jct_s", "p99_jct_s", "makespan_s", "restarts")}
    out.update(finished=min(d["finished"] for d in draws), submitted=max(d["submitted"] for d in draws),
               calls=len(pooled), call_median_ms=percentile(pooled, 50), call_p99_ms=percentile(pooled, 99),
               call_max_ms=max(pooled) if pooled else math.nan)
    return out


def summary_table(per_workload: Sequence[tuple[str, Sequence[tuple[str, dict[str, float]]]]], subject: str,
                  references: Sequence[str]) -> str:
    """Mean JCT of ``subject`` against each of ``references`` on every workload, and how often it is at or below.

    A reference no workload has is left out; "" where neither ``subject`` nor any reference was run."""
    refs = [r for r in references if any(r in dict(rows) for _, rows in per_workload)]
    if not refs or not any(subject in dict(rows) for _, rows in per_workload):
        return ""
    out = ["### Mean JCT over the workloads", "",
           f"| workload | {subject} s | " + " | ".join(f"{r} s | {subject} / {r}" for r in refs) + " |",
           "|---|---|" + "---|---|" * len(refs)]
    ratios: dict[str, list[float]] = {r: [] for r in refs}
    for workload, rows in per_workload:
        d = dict(rows)
        mine = d.get(subject, {}).get("mean_jct_s", math.nan)
        cells = [workload, _cell(mine, ".0f")]
        for r in refs:
            theirs = d.get(r, {}).get("mean_jct_s", math.nan)
            ratio = mine / theirs if theirs == theirs and theirs and mine == mine else math.nan
            if ratio == ratio:
                ratios[r].append(ratio)
            cells += [_cell(theirs, ".0f"), _cell(ratio, ".3f")]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for r, xs in ratios.items():
        if xs:
            at_or_below = sum(x <= 1.0 for x in xs)
            gmean = math.exp(sum(math.log(x) for x in xs) / len(xs))
            out.append(f"{subject} / {r}: at or below on {at_or_below} of {len(xs)} workloads; ratios "
                       f"{min(xs):.3f}-{max(xs):.3f}, geometric mean {gmean:.3f}")
    return "\n".join(out) + "\n\n"
