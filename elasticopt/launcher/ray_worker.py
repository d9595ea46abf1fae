"""A warm worker: one long-lived process of a Ray cluster that runs generations of jobs, one rank each.

The Ray backend (:mod:`elasticopt.launcher.ray_backend`) wraps
:class:`WarmWorker` as a Ray actor.  The process imports torch once, when it
is created; then every generation it is given runs the job's own script in
this process (``runpy``, as ``__main__``, with ``sys.argv`` set) under the
environment ``torchrun`` would have set (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, the generation spec), so the
job code is the same as under ``torchrun``.  Modules the script imports stay
imported, and what it keeps with :func:`elasticopt.launcher.trainer.kept` or
:meth:`Trainer.warm_model <elasticopt.launcher.trainer.Trainer.warm_model>`
(data, the constructed model) stays built for the next generation.  The
process group is new every generation (new port): a rescale is a new
rendezvous of warm processes plus a checkpoint load, not a cold start.

Nothing here imports ray (the backend does); torch is imported by the worker
process only.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import runpy
import signal
import socket
import sys
import time
import traceback
from collections.abc import Mapping

from elasticopt.launcher.protocol import ENV_SPEC

__all__ = ["WarmWorker", "free_port", "visible_index"]

_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", ENV_SPEC)


def free_port() -> int:
    """A TCP port the OS says is free now (the next generation's rendezvous store binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def visible_index(gpu_id: int) -> int:
    """The torch device index of physical GPU ``gpu_id`` in this process (``CUDA_VISIBLE_DEVICES`` order)."""
    visible = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    return visible.index(str(gpu_id)) if str(gpu_id) in visible else int(gpu_id)


def _deferred_destroy(group: object = None) -> None:
    """``torch.distributed.destroy_process_group`` while a warm worker runs a script: done by the worker after it."""


class WarmWorker:
    """One warm process (a Ray actor): torch imported at creation, then generation after generation.

    Parameters
    ----------
    threads
        Intra-op threads of torch in this process (CPU slots: 1).
    """

    def __init__(self, threads: int = 1):
        import torch  # noqa: PLC0415 - the point of a warm worker: imported once, here

        faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1 PID: stacks to the worker's Ray log
        torch.set_num_threads(max(1, threads))
        os.environ["OMP_NUM_THREADS"] = str(max(1, threads))
        self.generations = 0
        self.last_job: str | None = None

    def ready(self) -> str:
        """The node this worker runs on (returns once torch is imported)."""
        import ray  # noqa: PLC0415 - present in any process Ray started

        return ray.get_runtime_context().get_node_id()

    def rendezvous(self) -> tuple[str, int]:
        """(address, free port) for a process group whose rank 0 is this worker."""
        import ray  # noqa: PLC0415

        return ray.util.get_node_ip_address(), free_port()

    def run(
        self,
        spec_path: str,
        script: str,
        args: list[str],
        env: Mapping[str, str],
        rank: int,
        world_size: int,
        local_rank: int,
        master: tuple[str, int],
        cuda_device: int | None = None,
        cwd: str | None = None,
    ) -> int:
        """Run one rank of one generation: the job script as ``__main__``; returns its exit code.

        Output goes to the generation's ``log.txt`` (rank 0) or
        ``log-rank<r>.txt``.  A script that raises returns 1 (traceback in
        the log); the process group is always left, so the worker is clean
        for the next generation.
        """
        import torch.distributed as dist  # noqa: PLC0415

        gen_dir = os.path.dirname(spec_path)
        log_path = os.path.join(gen_dir, "log.txt" if rank == 0 else f"log-rank{rank}.txt")
        saved_env = {k: os.environ.get(k) for k in (*_TORCHRUN_ENV, *env)}
        os.environ.update({str(k): str(v) for k, v in env.items()})
        if cuda_device is not None:
            # the GPU Ray reserved for this rank's bundle.  CUDA is initialised once per
            # process, so the worker sees every GPU of its node and LOCAL_RANK names the
            # device (what the trainer and torchrun-style scripts pass to cuda.set_device)
            local_rank = visible_index(cuda_device)
        os.environ.update({
            ENV_SPEC: spec_path, "RANK": str(rank), "WORLD_SIZE": str(world_size),
            "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(world_size),
            "MASTER_ADDR": master[0], "MASTER_PORT": str(master[1]),
        })  # fmt: skip
        saved_argv, saved_cwd = sys.argv, os.getcwd()
        # the worker ends the process group itself, once the script returned: a DDP wrapper
        # freed after its group was destroyed can hang gloo for good, and the script's own
        # destroy_process_group() runs while its locals (the wrapper) are still alive
        real_destroy, dist.destroy_process_group = dist.destroy_process_group, _deferred_destroy
        rc = 0
        with open(log_path, "a", buffering=1) as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            print(f"# elasticopt warm worker pid {os.getpid()} at {time.time():.3f}: rank {rank}/{world_size} "
                  f"(worker's generation {self.generations + 1}): {script} {' '.join(args)}", flush=True)  # fmt: skip
            try:
                sys.argv = [script, *args]
                if cwd:
                    os.chdir(cwd)
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # noqa: BLE001 - the job's failure is its exit code; the worker lives on
                traceback.print_exc()
                rc = 1
            finally:
                sys.argv = saved_argv
                os.chdir(saved_cwd)
                dist.destroy_process_group = real_destroy
                if rc != 0:
                    # a traceback may hold the generation's frames, and with them its DDP wrapper;
                    # a clean return frees it by reference counting (no cycle), so the 0.1-0.4 s
                    # of a full collection is paid only here
                    gc.collect()
                if dist.is_initialized():
                    real_destroy()
                for k, v in saved_env.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                print(f"# elasticopt warm worker: rank {rank} exited with code {rc} at {time.time():.3f}", flush=True)
        self.generations += 1
        self.last_job = os.path.basename(os.path.dirname(gen_dir))
        return int(rc)
