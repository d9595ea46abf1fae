"""Run Blox's own simulator with elasticopt's BloxPolicy and with Blox's policies; print the tables.

Blox (EuroSys'24, msr-fiddle/blox) simulates with two processes talking gRPC
on fixed local ports: ``simulator_simple.py`` (the workload: Philly jobs at a
load of ``--jobs-per-hour``) and ``las_scheduler.py`` (the scheduler loop).
This script contains and downloads none of it: point it at your checkout
(absolute or relative path), at the interpreter of Blox's environment
(Python 3.8, ``pip install matplotlib pandas==1.3.0 'numpy<1.24'
grpcio==1.48.2 grpcio-tools==1.48.2 protobuf==3.20.3``, then ``make grpc`` in
``blox/deployment``: docs/integrations.md §5 says why the pins), and at the Philly trace
that Blox's ``--cluster-job-log`` reads (``cluster_job_log`` of
msr-fiddle/philly-traces, a separate download)::

    python validation/blox_simulator.py --blox ~/blox --python ~/envs/blox/bin/python \\
        --cluster-job-log ~/philly-traces/cluster_job_log

For each load (``--loads``, default ``1``: the Readme's first example) it
runs Blox's two processes once per policy, exactly as the Readme's
"Simulation Mode" does (``simulator_simple.py --cluster-job-log LOG
--sim-type trace-synthetic --jobs-per-hour LOAD --exp-prefix P`` and
``las_scheduler.py --simulate --load LOAD --exp-prefix P``), with the tracked
job window ``--track`` (default ``0:50``: Blox's own default, 3000:4000, is
hours per policy).  Policies: elasticopt's drop-in (``BloxPolicy`` +
``BloxPlacement`` of ``elasticopt/integrations/blox.py``; its tie order
``--dropin-order``, default oldest first as Blox's Fifo) and Blox's own
(``--policies``, default ``Las,Fifo``; the loop's placement stays Blox's
``JobPlacement`` for them).

How a policy is registered (nothing in the checkout changes): a runner script
in a temporary folder sets ``schedulers.Las`` (the class the loop builds) to
the policy asked for, and for the drop-in ``placement.JobPlacement`` to
``BloxPlacement`` (docs/integrations.md), times every ``schedule`` call,
counts each job's suspensions (``place``'s ``to_suspend``: a restart), then
runs ``las_scheduler.py`` as ``__main__``.  JCTs and the makespan are read
from Blox's own ``{P}_{start}_{stop}_Las_load_{LOAD}_job_stats.json``
(``{job: [submit, end]}``), written in a temporary working folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import host_records  # noqa: E402
from host_runs import hosts_stopped_on_signal, serve_command, start_host, stop_host, wait_host  # noqa: E402

from elasticopt._io import atomic_write_text  # noqa: E402
from elasticopt.errors import ElasticoptError  # noqa: E402
from elasticopt.integrations import blox as _dropin  # noqa: E402

DROPIN = Path(_dropin.__file__)
OURS = "elasticopt"

RUNNER = r'''
import json, os, runpy, sys, time
sys.path.insert(0, os.environ["EO_BLOX"])
import schedulers
import placement
from placement import placement as host_placement
import elasticopt_blox

policy = os.environ["EO_POLICY"]
calls, suspended = [], {}


def timed(obj):
    inner = obj.schedule

    def schedule(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            calls.append((time.perf_counter() - t0) * 1000.0)
    obj.schedule = schedule
    return obj


def counted(obj):
    inner = obj.place

    def place(*args, **kwargs):
        out = inner(*args, **kwargs)
        for job in out[0]:
            suspended[str(job)] = suspended.get(str(job), 0) + 1
        return out
    obj.place = place
    return obj


if policy == "elasticopt":
    command = os.environ["ELASTICOPT_COMMAND"].split("\x1f")
    order = os.environ["EO_ORDER"]
    schedulers.Las = lambda args: timed(elasticopt_blox.BloxPolicy(command=command, order=order))
    host_placement.JobPlacement = placement.JobPlacement = lambda args: counted(elasticopt_blox.BloxPlacement())
else:
    host_cls = getattr(schedulers, policy)
    schedulers.Las = lambda args: timed(host_cls(args))
    _host_place = host_placement.JobPlacement
    host_placement.JobPlacement = placement.JobPlacement = lambda args: counted(_host_place(args))

script = os.path.join(os.environ["EO_BLOX"], "las_scheduler.py")
sys.argv = [script] + sys.argv[1:]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    with open(os.environ["EO_RESULT"] + ".tmp", "w") as fh:
        json.dump({"calls_ms": calls, "suspended": suspended}, fh)
    os.replace(os.environ["EO_RESULT"] + ".tmp", os.environ["EO_RESULT"])
'''


def check_checkout(blox: Path) -> Path:
    """The checkout's root; a clear error if it is not Blox's or its gRPC stubs are not built."""
    root = blox.expanduser().absolute()
    for name in ("simulator_simple.py", "las_scheduler.py", "schedulers/__init__.py", "placement/placement.py"):
        if not (root / name).is_file():
            raise ElasticoptError(f"--blox {blox}: no {name} there; expected a checkout of msr-fiddle/blox "
                                  "(its root folder)")
    stubs = root / "blox" / "deployment" / "grpc_stubs"
    if not list(stubs.glob("*_pb2.py")):
        raise ElasticoptError(f"--blox {blox}: {stubs} holds no generated stubs: run `make grpc` in "
                              f"{root / 'blox' / 'deployment'} with Blox's environment first (its Readme)")
    return root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 180.0) -> None:
    """Until the simulator's gRPC server accepts connections on ``port`` (the Readme's "one terminal, then the
    other"); an error if it exits first or never listens."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise ElasticoptError(f"Blox's simulator_simple.py exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.2)
    raise ElasticoptError(f"Blox's simulator_simple.py did not listen on port {port} within {timeout_s:.0f} s")


def run_one(root: Path, python: str, log_file: Path, load: int, track: tuple[int, int], policy: str,
            out: Path, serve: list[str], timeout_s: float, order: str = "arrival") -> dict:
    """Blox's two processes for one policy at one load; the runner script's record plus Blox's job stats."""
    result = out / f"{policy}.calls.json"
    result.unlink(missing_ok=True)
    prefix = f"eo_{policy}"
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="eo-blox-") as tmp:
        work = Path(tmp)
        (work / "elasticopt_blox.py").write_text(DROPIN.read_text())
        (work / "eo_runner.py").write_text(RUNNER)
        env = dict(os.environ, EO_BLOX=str(root), EO_POLICY=policy, EO_ORDER=order, EO_RESULT=str(result),
                   ELASTICOPT_COMMAND="\x1f".join(serve), PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python",
                   PYTHONPATH=os.pathsep.join([str(root), tmp]))
        sim_log = open(out / f"{policy}.simulator.log", "w")
        sched_log = out / f"{policy}.log"
        # both in their own process groups, stopped with the runner (SIGTERM, SIGINT: hosts_stopped_on_signal)
        sim = start_host([python, str(root / "simulator_simple.py"), "--cluster-job-log", str(log_file),
                          "--sim-type", "trace-synthetic", "--jobs-per-hour", str(load),
                          "--start-job-track", str(track[0]), "--end-job-track", str(track[1]),
                          "--exp-prefix", prefix, "--simulator-rpc-port", str(port)],
                         cwd=work, env=env, stdout=sim_log, stderr=subprocess.STDOUT)
        try:
            _wait_listening(port, sim)
            with open(sched_log, "w") as fh:
                try:
                    code = wait_host(start_host([python, str(work / "eo_runner.py"), "--simulate", "--load",
                                                 str(load), "--exp-prefix", prefix, "--simulator-rpc-port", str(port)],
                                                cwd=work, env=env, stdout=fh, stderr=subprocess.STDOUT), timeout_s)
                except subprocess.TimeoutExpired:
                    raise ElasticoptError(f"Blox's las_scheduler.py with {policy} did not end in {timeout_s:.0f} s "
                                          f"(log {sched_log}); raise --timeout-s or narrow --track") from None
        finally:
            stop_host(sim)
            sim_log.close()
        if code != 0:
            raise ElasticoptError(f"Blox's las_scheduler.py exited with {code} for {policy} "
                                  f"(log {sched_log}):\n{sched_log.read_text()[-1500:]}")
        # Blox writes {prefix}_{start}_{stop}_Las_load_{load as float}_job_stats.json, and the same with
        # "_Las_accept_all_" (its acceptance policy) in the name: the first is read
        stats = [p for p in work.glob(f"{prefix}_{track[0]}_{track[1]}_Las_load_*_job_stats.json")]
        if len(stats) != 1:
            raise ElasticoptError(f"{policy}: expected Blox's {prefix}_START_STOP_Las_load_{load}_job_stats.json "
                                  f"in its working folder, found {sorted(p.name for p in work.iterdir())}")
        (out / f"{policy}.job_stats.json").write_text(stats[0].read_text())
        for kind in ("responsivness", "run_time_stats"):  # Blox's spelling; first launch, and each job's record
            for extra in work.glob(f"{prefix}_{track[0]}_{track[1]}_Las_load_*_{kind}.json"):
                (out / f"{policy}.{kind}.json").write_text(extra.read_text())
        done = json.loads(stats[0].read_text())
    rec = host_records.read_record(result, f"las_scheduler.py with {policy}")
    try:
        jct = {str(j): float(v[1]) - float(v[0]) for j, v in done.items()}
        makespan = max(float(v[1]) for v in done.values()) - min(float(v[0]) for v in done.values()) if done else 0.0
    except (TypeError, ValueError, IndexError) as exc:
        raise ElasticoptError(f"{policy}: Blox's job stats: expected {{job: [submit, end]}} ({exc})") from None
    tracked = range(track[0], track[1] + 1)  # Blox's JobState: START..STOP inclusive
    return {"jct_s": {str(j): jct.get(str(j)) for j in tracked}, "makespan_s": makespan,
            "restarts": {str(j): rec["suspended"].get(str(j), 0) for j in tracked}, "calls_ms": rec["calls_ms"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blox", type=Path, required=True, help="your Blox checkout (its root folder)")
    ap.add_argument("--python", required=True, help="the interpreter of Blox's environment")
    ap.add_argument("--cluster-job-log", type=Path, required=True,
                    help="the Philly trace Blox's simulator reads (cluster_job_log of msr-fiddle/philly-traces)")
    ap.add_argument("--loads", default="1", help="comma-separated jobs per hour (default 1)")
    ap.add_argument("--track", default="0:50", help="tracked job ids START:STOP, inclusive as Blox counts them "
                    "(default 0:50; Blox's own 3000:4000)")
    ap.add_argument("--policies", default="Las,Fifo", help="Blox's scheduling policies to compare (default Las,Fifo)")
    ap.add_argument("--dropin-order", default="arrival", choices=_dropin.ORDERS,
                    help="BloxPolicy's tie order (default arrival: Blox's Fifo order; attained_service: Las')")
    ap.add_argument("--timeout-s", type=float, default=1800.0, help="per run (default 1800)")
    ap.add_argument("--out", type=Path, default=None, help="folder for logs and table.md (default: temporary)")
    ap.add_argument("--serve", default=None,
                    help="command of the service (default: this interpreter's `-m elasticopt serve --stdio`, under "
                         "this process's PYTHONPATH)")
    a = ap.parse_args(argv)
    serve = serve_command(a.serve)
    tmp = None
    try:
        root = check_checkout(a.blox)
        python = host_records.resolve_python(a.python)
        log_file = a.cluster_job_log.expanduser().absolute()
        if not log_file.is_file():
            raise ElasticoptError(f"--cluster-job-log {a.cluster_job_log}: no such file (Blox's simulator reads the "
                                  "Philly trace's cluster_job_log JSON; it is not in the Blox repository)")
        try:
            start, stop = (int(x) for x in a.track.split(":"))
            loads = [int(x) for x in a.loads.split(",") if x.strip()]
        except ValueError:
            raise ElasticoptError(f"--track {a.track!r} / --loads {a.loads!r}: expected START:STOP and integers") from None
        if not 0 <= start < stop or not loads:
            raise ElasticoptError(f"--track {a.track!r}: expected 0 <= START < STOP")
        policies = [OURS] + [p.strip() for p in a.policies.split(",") if p.strip() and p.strip() != OURS]
        if a.out is None:
            tmp = tempfile.TemporaryDirectory(prefix="eo-blox-out-")
            out_root = Path(tmp.name)
        else:
            out_root = a.out.expanduser().absolute()
        texts, ours_calls = [], []
        with hosts_stopped_on_signal():
            for load in loads:
                out = out_root / f"load_{load}"
                out.mkdir(parents=True, exist_ok=True)
                rows = []
                for policy in policies:
                    print(f"blox_simulator: load {load}: {policy} ...", file=sys.stderr, flush=True)
                    rec = run_one(root, python, log_file, load, (start, stop), policy, out, serve, a.timeout_s,
                                 a.dropin_order)
                    rows.append(host_records.summarize(policy, rec, str(out / f"{policy}.calls.json")))
                    if policy == OURS:
                        ours_calls.extend(rec["calls_ms"])
                text = host_records.table(f"load {load} jobs/hour, jobs {start}-{stop} tracked", rows, OURS)
                print(text, flush=True)
                texts.append(text)
        line = host_records.latency_line([], OURS, ours_calls)
        print(line, end="")
        if a.out is not None:
            atomic_write_text(out_root / "table.md", "\n".join(texts) + "\n" + line)
    except ElasticoptError as exc:
        print(f"blox_simulator: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
