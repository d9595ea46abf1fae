"""The torchrun backend: one generation of a job = a process group running ``torchrun`` (or a plain script).

:class:`TorchrunExecutor` is the launcher's executor on one machine: the
backend-neutral :class:`~elasticopt.launcher.generations.GenerationExecutor`
with :class:`TorchrunBackend`, which starts every generation as new processes
(:class:`GenerationProcess`) and adopts those a killed launcher left running.

A generation is started with ``start_new_session=True`` so that it is its own
process group: :meth:`GenerationProcess.kill` stops ``torchrun`` and every worker
at once (``killpg``).  Its processes are pinned to the devices it holds: GPUs
through ``CUDA_VISIBLE_DEVICES``, CPU slots through CPU affinity set in the child
before ``exec``.  Everything it prints goes to one log file per generation.

``mode="torchrun"`` runs ``python -m torch.distributed.run --standalone
--nproc-per-node=k SCRIPT ARGS`` (``--standalone`` binds its rendezvous store
to a port the OS picks, so concurrent jobs never collide); ``mode="python"``
runs ``python SCRIPT ARGS`` once (the fake worker of the tests, or a
single-process job that reads k from its spec).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticopt.launcher.backend import poll_until
from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.generations import GenerationExecutor
from elasticopt.launcher.protocol import ENV_SPEC, GenerationSpec, write_spec

__all__ = ["TorchrunExecutor", "TorchrunBackend", "GenerationProcess", "build_command", "process_start_time",
           "tagged_pids"]


def tagged_pids(spec_path: str | os.PathLike[str]) -> list[int]:
    """Pids of every live process of a generation, wherever it sits in the process tree.

    ``torchrun`` starts each worker in a session of its own, so the agent's
    process group does not hold them, and a worker outlives an agent that is
    killed.  Every process of a generation inherits ``ELASTICOPT_GENERATION_SPEC=<its
    spec.json>`` from the launcher: that tag finds them all (Linux ``/proc``).
    """
    tag = f"{ENV_SPEC}={spec_path}".encode() + b"\0"
    me = os.getpid()
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for d in entries:
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if (b"\0" + env).find(b"\0" + tag) >= 0:
            out.append(int(d))
    return out


def build_command(mode: str, script: str, args: list[str], nproc: int) -> list[str]:
    """The argv that runs one generation."""
    if mode == "torchrun":
        return [
            sys.executable, "-m", "torch.distributed.run",
            "--standalone", f"--nproc-per-node={nproc}", "--max-restarts=0",
            script, *args,
        ]  # fmt: skip
    if mode == "python":
        return [sys.executable, script, *args]
    raise ValueError(f"unknown launch mode {mode!r} (expected 'torchrun' or 'python')")


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (Linux), None if unknown/gone.

    Recorded with the pid so a recovered launcher never mistakes a recycled pid
    for its job.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        # the command name may hold spaces: fields after the last ')'
        rest = data[data.rindex(b")") + 2 :].split()
        return int(rest[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class GenerationProcess:
    """A running (or finished) generation.

    Build with :meth:`spawn` (a new child) or :meth:`adopt` (a process group
    left behind by a launcher that died).
    """

    spec: GenerationSpec
    pid: int
    start_ticks: int | None
    log_path: Path
    started_at: float
    _popen: subprocess.Popen[bytes] | None = None
    _returncode: int | None = None

    @classmethod
    def spawn(
        cls,
        spec: GenerationSpec,
        script: str,
        args: list[str],
        *,
        mode: str = "torchrun",
        cpu_cores: set[int] | None = None,
        extra_env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> "GenerationProcess":
        """Write the spec and start the generation's process group."""
        spec_path = write_spec(spec)
        log_path = spec.gen_dir / "log.txt"
        env = dict(os.environ)
        env.update(extra_env or {})
        env[ENV_SPEC] = str(spec_path)
        env["PYTHONUNBUFFERED"] = "1"
        if spec.device_kind == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in spec.devices)
        else:
            env["CUDA_VISIBLE_DEVICES"] = ""
        threads = max(1, len(cpu_cores) // max(1, spec.gpus)) if cpu_cores else 1
        env.setdefault("OMP_NUM_THREADS", str(threads))
        cmd = build_command(mode, script, args, spec.gpus)
        cores = sorted(cpu_cores) if cpu_cores else None
        preexec = None
        taskset = shutil.which("taskset")
        if cores is not None and taskset:
            # taskset rather than a preexec function: no fork() of a multithreaded launcher
            cmd = [taskset, "-c", ",".join(str(c) for c in cores), *cmd]
        elif cores is not None and hasattr(os, "sched_setaffinity"):

            def preexec() -> None:  # runs in the child, before exec
                os.sched_setaffinity(0, cores)

        with open(log_path, "ab") as log:
            log.write(f"# elasticopt generation {spec.generation}: {' '.join(cmd)}\n".encode())
            log.flush()
            popen = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=preexec,
            )
        return cls(spec, popen.pid, process_start_time(popen.pid), log_path, time.time(), popen)

    @classmethod
    def adopt(cls, spec: GenerationSpec, pid: int, start_ticks: int | None, started_at: float) -> "GenerationProcess":
        """Watch a generation started by an earlier launcher (not our child)."""
        return cls(spec, pid, start_ticks, spec.gen_dir / "log.txt", started_at, None)

    def journal_fields(self) -> dict[str, Any]:
        """What the journal keeps to find the generation again after a launcher restart."""
        return {"pid": self.pid, "start_ticks": self.start_ticks, "started_at": self.started_at}

    @property
    def gen_dir(self) -> Path:
        """The generation's directory."""
        return self.spec.gen_dir

    def poll(self) -> int | None:
        """None while running; the exit code when it ended (-1 for an adopted process whose code is unknown)."""
        if self._returncode is not None:
            return self._returncode
        if self._popen is not None:
            rc = self._popen.poll()
            if rc is not None:
                self._returncode = rc
                self._reap_group()
            return rc
        if self._alive_adopted():
            return None
        self._returncode = -1
        return -1

    def _alive_adopted(self) -> bool:
        ticks = process_start_time(self.pid)
        if ticks is None:
            return False
        if self.start_ticks is not None and ticks != self.start_ticks:
            return False  # pid recycled
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            return state != b"Z"
        except (OSError, IndexError):
            return True

    @property
    def spec_path(self) -> Path:
        """The generation's ``spec.json`` (its processes' tag)."""
        return self.spec.gen_dir / "spec.json"

    def _reap_group(self) -> None:
        """The agent exited: make sure no worker of the generation survives it."""
        self._signal_all(signal.SIGKILL)

    def _signal_all(self, sig: int) -> None:
        if self._returncode is None:  # the agent's group; after its exit its pid may be reused
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in tagged_pids(self.spec_path):
            for fn in (os.killpg, os.kill):
                try:
                    fn(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal every process of the generation: the agent's group and each worker's session."""
        if self._returncode is not None and sig != signal.SIGKILL:
            return
        self._signal_all(sig)

    def wait(self, timeout_s: float) -> int | None:
        """Poll until the generation exits or ``timeout_s`` passes."""
        return poll_until(self.poll, timeout_s, 0.02)


class TorchrunBackend:
    """Runs each generation as new local processes (``torchrun``, or one plain ``python`` process).

    Parameters
    ----------
    pool
        The devices of this machine; a generation on CPU slots is pinned to their cores.

    Notes
    -----
    Job payload keys used: ``script`` (path), ``args`` (list of str), ``mode``
    (``"torchrun"`` default or ``"python"``), ``env`` (dict), ``cwd``.
    """

    name = "torchrun"

    def __init__(self, pool: DevicePool):
        self.pool = pool

    def spawn(self, spec: GenerationSpec, payload: Mapping[str, Any]) -> GenerationProcess:
        """Start the generation ``spec`` (its devices are ``spec.devices``)."""
        cores = self.pool.cpu_cores_for(list(spec.devices)) if spec.device_kind == "cpu" else None
        return GenerationProcess.spawn(
            spec, str(payload["script"]), [str(a) for a in payload.get("args", [])],
            mode=str(payload.get("mode", "torchrun")), cpu_cores=cores,
            extra_env={str(k): str(v) for k, v in dict(payload.get("env", {})).items()},
            cwd=payload.get("cwd"),
        )  # fmt: skip

    def adopt(self, spec: GenerationSpec, event: Mapping[str, Any]) -> GenerationProcess | None:
        """The generation a killed launcher started (its ``generation_start`` journal event): watched by pid.

        None when another backend started it (no process of ours to watch).
        """
        if event.get("backend", self.name) != self.name or "pid" not in event:
            return None
        return GenerationProcess.adopt(spec, int(event["pid"]), event.get("start_ticks"), float(event["started_at"]))

    def close(self) -> None:
        """Nothing to release: every generation is reaped by the executor."""


class TorchrunExecutor(GenerationExecutor):
    """The launcher's executor on this machine: every generation is a new ``torchrun`` process group.

    Parameters are those of :class:`~elasticopt.launcher.generations.GenerationExecutor`
    (``out_dir``, ``pool``, then keywords).
    """

    def __init__(self, out_dir: str | os.PathLike[str], pool: DevicePool, **kwargs: Any):
        super().__init__(out_dir, pool, TorchrunBackend(pool), **kwargs)
