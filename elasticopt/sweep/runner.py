"""Run a sweep's cells: in this process, in local worker processes, or on a Ray cluster.

Every finished cell is written at once, atomically, by the driver
(``OUT/cells/<key>.json``); a sweep that is killed (even ``kill -9``) and run
again skips the cells already written and runs only the rest.  Workers return
their results to the driver, so Ray nodes need no shared file system, only
elasticopt installed.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from elasticopt.errors import ElasticoptError, InstanceError, ValidationError
from elasticopt.sweep.cells import read_cell, run_cell, write_cell
from elasticopt.sweep.spec import Cell, SweepSpec

__all__ = ["SweepRun", "run_sweep", "pending_cells", "check_cells"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepRun:
    """What a call of :func:`run_sweep` did: cells in the spec, found done, run now, and its wall time."""

    cells: int
    already_done: int
    ran: int
    wall_s: float
    backend: str


def pending_cells(spec: SweepSpec, out_dir: str | os.PathLike[str]) -> list[Cell]:
    """The cells of ``spec`` without a result in ``out_dir``."""
    return [c for c in spec.cells if read_cell(out_dir, c.key, c.as_dict()) is None]


def _check_workload(value: str) -> None:
    from elasticopt.scheduling.traces import TRACE_NAMES, trace_path

    if value in TRACE_NAMES:
        trace_path(value)
    elif value and not Path(value).is_file():
        raise ValidationError("workload", "an existing file", value)


def check_cells(spec: SweepSpec) -> None:
    """Fail before anything runs on a policy, solver (or its options), cluster or workload no cell can use.

    Raises
    ------
    InstanceError
        Naming the spec file, the parameter, what was expected and the value found.
    """
    from elasticopt.scheduling import get_policy
    from elasticopt.solvers import get_backend
    from elasticopt.solvers.options import parse_solver_arg
    from elasticopt.sweep.cells import _cluster

    seen: set[tuple[str, object]] = set()
    for c in spec.cells:
        p = c.as_dict()
        for key, expected, check in (
            ("solver", "an installed solver with valid options",
             lambda v: get_backend(parse_solver_arg(v)[0]).check_options(parse_solver_arg(v)[1])),
            ("policy", "a registered policy or module:Class", lambda v: get_policy(v)),
            ("cluster", "GPUs of one pool or a cluster name (sia-64, gavel-N, TYPE:NODESxGPUS,...)",
             lambda v: _cluster({"cluster": v})),
            ("workload", "an existing workload file or a trace name (philly)", _check_workload),
        ):
            if (key, p[key]) in seen:
                continue
            seen.add((key, p[key]))
            try:
                check(p[key])
            except ElasticoptError as exc:
                raise InstanceError(spec.file, key, expected, p[key], hint=str(exc)) from None


def _watch_parent(parent: int) -> None:  # pragma: no cover - runs in worker processes
    """Worker initialiser: exit when the driver is gone (killed with -9 it cannot tell its workers)."""

    def loop() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=loop, daemon=True).start()


def _local(cells: Sequence[Cell], out_dir: Path, workers: int, on_done: Callable[[dict], None]) -> None:
    if workers <= 1:
        for c in cells:
            doc = run_cell(c.as_dict())
            write_cell(out_dir, doc)
            on_done(doc)
        return
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # jax and numba do not survive fork
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_watch_parent,
                               initargs=(os.getpid(),))
    try:
        futures = {pool.submit(run_cell, c.as_dict()): c for c in cells}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                doc = f.result()  # a cell that failed fails the sweep; the cells written stay written
                write_cell(out_dir, doc)
                on_done(doc)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _ray(cells: Sequence[Cell], out_dir: Path, address: str, on_done: Callable[[dict], None],
         cpus_per_cell: float) -> None:
    try:
        import ray
    except ImportError:
        raise ValidationError("--address", "Ray installed (pip install 'elasticopt[ray]')", "no module 'ray'") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, log_to_driver=False, include_dashboard=False)
    try:
        remote = ray.remote(num_cpus=cpus_per_cell, max_retries=2)(run_cell)
        pending = [remote.remote(c.as_dict()) for c in cells]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                doc = ray.get(ref)
                write_cell(out_dir, doc)
                on_done(doc)
    finally:
        if started:
            ray.shutdown()


def run_sweep(
    spec: SweepSpec,
    out_dir: str | os.PathLike[str],
    *,
    workers: int = 1,
    address: str | None = None,
    cpus_per_cell: float = 1.0,
    on_done: Callable[[dict], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> SweepRun:
    """Run every cell of ``spec`` that has no result in ``out_dir`` yet.

    Parameters
    ----------
    spec
        The parsed spec (:func:`~elasticopt.sweep.spec.load_spec`).
    out_dir
        Results folder; ``cells/`` in it holds one JSON file per finished cell.
    workers
        Local worker processes (1: run in this process).  Ignored with ``address``.
    address
        A Ray cluster (``HOST:PORT``, ``auto``, or ``local`` for a new local
        instance): run the cells as Ray tasks instead.
    cpus_per_cell
        CPUs a Ray task asks for.
    on_done
        Called with each finished cell's document.
    on_start
        Called once as ``on_start(cells_total, cells_already_done)``.
    """
    if workers < 1:
        raise ValidationError("--workers", "an integer >= 1", workers)
    t0 = time.perf_counter()
    out = Path(out_dir)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    check_cells(spec)
    todo = pending_cells(spec, out)
    done_before = len(spec.cells) - len(todo)
    if on_start is not None:
        on_start(len(spec.cells), done_before)
    log.info("sweep %s: %d cells, %d already done, %d to run", spec.name, len(spec.cells), done_before, len(todo))
    callback = on_done or (lambda doc: None)
    if address is not None:
        _ray(todo, out, None if address == "local" else address, callback, cpus_per_cell)
        backend = f"ray ({address})"
    else:
        _local(todo, out, min(workers, max(len(todo), 1)), callback)
        backend = "this process" if workers <= 1 else f"{workers} local processes"
    sys.stdout.flush()
    return SweepRun(cells=len(spec.cells), already_done=done_before, ran=len(todo),
                    wall_s=time.perf_counter() - t0, backend=backend)
