"""The Ray backend: job generations on a Ray cluster, run by warm worker processes (docs/design.md §5).

:class:`RayExecutor` is the launcher's executor on a Ray cluster (one machine
or many): the backend-neutral
:class:`~elasticopt.launcher.generations.GenerationExecutor` with
:class:`RayBackend`.  Driven by the same autoscaler as the simulator and the
torchrun launcher.

- **Devices**: :func:`cluster_pool` turns the cluster's alive nodes into a
  :class:`~elasticopt.launcher.devices.DevicePool` whose ids carry their node
  (GPUs; on a cluster without GPUs, CPU slots).  A job's k devices are chosen
  packed first (one node when one has k free, else as few nodes as possible:
  :meth:`DevicePool.acquire <elasticopt.launcher.devices.DevicePool.acquire>`).
- **Placement**: every generation reserves its devices with a Ray placement
  group of k bundles (``{"GPU": 1}`` or ``{"CPU": 1}``), each bundle pinned to
  its device's node by the ``ray.io/node-id`` label; ``STRICT_PACK`` when all
  are on one node, ``SPREAD`` over the named nodes otherwise.  The group is
  removed when the generation ends.
- **Warm workers**: the ranks run in long-lived actors
  (:class:`~elasticopt.launcher.ray_worker.WarmWorker`, one per device,
  started with the backend, torch imported once).  They hold no Ray
  resources themselves (the placement group holds them) so that they outlive
  the generation: a rescale re-forms the process group among warm processes
  (new rendezvous port each generation; gloo on CPU, nccl on GPU) and the job
  reloads its checkpoint; a rank reuses, where it can, the worker that ran the
  same job before (its model stays constructed).
- **Faults**: a worker that dies (killed, or its node removed) ends the
  generation as a crash: the executor restarts the job from its last
  checkpoint; devices of a node that left are never handed out again.  Ray
  actors die with the driver that owns them, so a restarted launcher finds
  no generation to adopt: each job resumes from its last checkpoint.

The job directory (``--out``) must be on a file system every node sees, as
the checkpoints of any multi-node elastic job must be.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from elasticopt.errors import LauncherError
from elasticopt.launcher.backend import poll_until
from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.generations import GenerationExecutor
from elasticopt.launcher.protocol import GenerationSpec, write_spec
from elasticopt.launcher.ray_worker import WarmWorker

__all__ = ["RayExecutor", "RayBackend", "RayGeneration", "connect", "cluster_pool", "placement_for"]

log = logging.getLogger(__name__)

_NODE_LABEL = "ray.io/node-id"


def _ray() -> Any:
    try:
        import ray  # noqa: PLC0415 - optional extra
    except ImportError:
        raise LauncherError("the ray backend needs Ray, which is not installed; fix: pip install 'elasticopt[ray]'")
    return ray


def connect(address: str | None = None, *, num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Join the Ray cluster at ``address``, or start a local Ray instance when it is None.

    A local instance gets ``num_cpus`` CPUs (default: this machine's) and no
    dashboard.  Nothing happens when this process is already connected.
    """
    ray = _ray()
    if ray.is_initialized():
        return
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        ray.init(address=address, **quiet)
    else:
        # "local": a new instance even where another Ray cluster runs on this machine
        ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False, **quiet)


def cluster_pool(kind: str | None = None, max_devices: int | None = None) -> DevicePool:
    """The devices of the connected Ray cluster: its GPUs, or its CPUs as slots where it has none.

    Parameters
    ----------
    kind
        ``"cuda"`` or ``"cpu"``; default: ``"cuda"`` when any alive node has a GPU.
    max_devices
        Use at most this many (nodes in id order).
    """
    ray = _ray()
    nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
    if kind is None:
        kind = "cuda" if any(n["Resources"].get("GPU", 0) >= 1 for n in nodes) else "cpu"
    resource = "GPU" if kind == "cuda" else "CPU"
    owners = [n["NodeID"] for n in nodes for _ in range(int(n["Resources"].get(resource, 0)))]
    if max_devices is not None:
        owners = owners[:max_devices]
    if not owners:
        raise LauncherError(f"the Ray cluster has no {resource} to run jobs on (nodes: {len(nodes)})")
    return DevicePool(kind, tuple(range(len(owners))), tuple(owners))


def placement_for(pool: DevicePool, devices: list[int]) -> tuple[list[dict[str, float]], str, list[dict[str, str]]]:
    """Bundles, strategy and per-bundle node labels of the placement group of one generation.

    Rank r gets bundle r, on the node of ``devices[r]``: ``STRICT_PACK`` when
    every device is on one node, else ``SPREAD`` with each bundle pinned to
    its node by label.
    """
    resource = "GPU" if pool.kind == "cuda" else "CPU"
    nodes = [pool.node_of(d) for d in devices]
    strategy = "STRICT_PACK" if len(set(nodes)) == 1 else "SPREAD"
    return [{resource: 1.0} for _ in devices], strategy, [{_NODE_LABEL: n} for n in nodes]


def _gpu_ids() -> list[int]:
    """Run inside a bundle: the GPU ids Ray reserved for it."""
    import ray  # noqa: PLC0415

    return [int(g) for g in ray.get_gpu_ids()]


class RayGeneration:
    """One generation on the cluster: placement group, then rendezvous, then one ``run`` per rank.

    Built by :meth:`RayBackend.spawn`; non-blocking: :meth:`poll` moves it on.
    """

    PLACEMENT_TIMEOUT_S = 120.0
    STAGE_WAIT_S = 0.02  # how long one poll waits for a start-up stage (placement, rendezvous)
    RESERVE_WAIT_S = 2.0  # then the placement group is asked for anyway (Ray places it once the devices are free)

    def __init__(self, backend: RayBackend, spec: GenerationSpec, payload: Mapping[str, Any], workers: list[Any]):
        ray = _ray()
        from ray.util.placement_group import placement_group  # noqa: PLC0415

        self.backend, self.spec, self.payload, self.workers = backend, spec, payload, workers
        self.log_path = spec.gen_dir / "log.txt"
        self.started_at = time.time()
        self._placement = placement_for(backend.pool, list(spec.devices))
        self.nodes = [label[_NODE_LABEL] for label in self._placement[2]]
        self._make_group = placement_group
        self.pg: Any = None
        self._waiting: list[Any] = []
        self._stage = "reserving"
        self._refs: list[Any] = []
        self._rc: int | None = None
        self._ray = ray
        self._next_node_check = 2.0  # seconds after the start: look for nodes that left
        self.infrastructure_failure = False  # ended before the job ran, by the cluster (see GenerationHandle)

    def journal_fields(self) -> dict[str, Any]:
        """When it started and where (a restarted launcher cannot adopt actors: they die with their driver)."""
        return {"started_at": self.started_at, "nodes": self.nodes}

    def _bundle(self, i: int) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # noqa: PLC0415

        return PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=i)

    def _resources_free(self) -> bool:
        """Ray shows this generation's devices free on their nodes (those of the last generation came back).

        A placement group asked for before the raylets returned the previous
        group's resources is retried by Ray's control store about a second
        later; asking once they are back places it in milliseconds.
        """
        resource = next(iter(self._placement[0][0]))
        need: dict[str, int] = {}
        for n in self.nodes:
            need[n] = need.get(n, 0) + 1
        try:
            from ray._private.state import available_resources_per_node  # noqa: PLC0415 - no public per-node view

            free = available_resources_per_node()
        except Exception:  # noqa: BLE001 - an optimisation only: ask at once
            return True
        return all(free.get(n, {}).get(resource, 0.0) >= k for n, k in need.items())

    def _advance(self, wait_s: float) -> None:
        ray = self._ray
        if self._stage == "reserving":
            if self._resources_free() or time.time() - self.started_at > self.RESERVE_WAIT_S:
                bundles, strategy, labels = self._placement
                self.pg = self._make_group(bundles, strategy=strategy, bundle_label_selector=labels)
                self._waiting = [self.pg.ready()]
                self._stage = "placing"
            return
        done, _ = ray.wait(self._waiting, num_returns=len(self._waiting), timeout=wait_s)
        if len(done) < len(self._waiting):
            waited = time.time() - self.started_at
            if waited > self.PLACEMENT_TIMEOUT_S:
                self._end(1, f"{self._stage} not done in {self.PLACEMENT_TIMEOUT_S:.0f} s (nodes {self.nodes})")
            elif waited > self._next_node_check:  # a node named by the group may have left meanwhile
                self._next_node_check = waited + 1.0
                gone = self.backend.retire_dead_nodes(self.nodes)
                if gone:
                    self.infrastructure_failure = True
                    self._end(-9, f"node(s) {sorted(gone)} left the cluster before the generation started")
            return
        if self._stage == "placing":
            self._stage = "rendezvous"
            probes = []
            if self.spec.device_kind == "cuda":
                probe = ray.remote(num_gpus=1, num_cpus=0)(_gpu_ids)
                probes = [probe.options(scheduling_strategy=self._bundle(i)).remote() for i in range(self.spec.gpus)]
            self._waiting = [self.workers[0].rendezvous.remote(), *probes]
            return
        try:
            master, *gpus = ray.get(self._waiting)
        except ray.exceptions.RayError as exc:
            self.infrastructure_failure = True  # a worker died before the job ran: not the job's fault
            self.backend.retire_dead_nodes(self.nodes)
            self._end(1, f"rendezvous failed: {exc}")
            return
        p = self.payload
        env = {str(k): str(v) for k, v in dict(p.get("env", {})).items()}
        local: dict[str, int] = {}
        # mode "python": one process plays every worker (reads k from its spec): rank 0 only
        ranks = self.workers if p.get("mode", "torchrun") == "torchrun" else self.workers[:1]
        for rank, worker in enumerate(ranks):
            node = self.nodes[rank]
            local[node] = local.get(node, -1) + 1
            self._refs.append(worker.run.remote(
                str(self.spec.gen_dir / "spec.json"), str(p["script"]), [str(a) for a in p.get("args", [])], env,
                rank, self.spec.gpus, local[node], tuple(master), gpus[rank][0] if gpus else None, p.get("cwd"),
            ))  # fmt: skip
        self._stage = "running"

    def _end(self, rc: int, why: str = "") -> None:
        self._rc = rc
        if why:
            with open(self.log_path, "a") as f:
                f.write(f"# elasticopt ray backend: {why}\n")

    def poll(self) -> int | None:
        """None while it runs; once every rank returned (or one failed), the exit code (0 = all clean)."""
        if self._rc is not None:
            return self._rc
        if self._stage != "running":
            # placement, rendezvous, dispatch: each stage waits briefly for the one before, so a
            # generation starts within one poll of the launcher instead of one stage per poll
            for _ in range(4):
                stage = self._stage
                self._advance(self.STAGE_WAIT_S)
                if self._stage in (stage, "running") or self._rc is not None:
                    break
            return self._rc
        ray = self._ray
        done, pending = ray.wait(self._refs, num_returns=len(self._refs), timeout=0)
        for ref in done:
            rank = self._refs.index(ref)
            try:
                rc = int(ray.get(ref))
            except ray.exceptions.RayError as exc:  # the worker died (killed, its node gone)
                self.backend.lost(self.workers[rank])
                self._end(-9, f"rank {rank} worker died: {type(exc).__name__}")
                return self._rc
            if rc != 0:
                self._end(rc, f"rank {rank} exited with code {rc}")
                return self._rc
        if not pending:
            self._end(0)
        return self._rc

    def kill(self) -> None:
        """End the generation now: workers still running a rank are killed; the others go back warm."""
        ray = self._ray
        busy = []
        if self._refs:
            _, pending = ray.wait(self._refs, num_returns=len(self._refs), timeout=0)
            busy = [self.workers[self._refs.index(r)] for r in pending]
        elif self._stage == "rendezvous":
            busy = list(self.workers)  # killed during the rendezvous: nothing of theirs can be trusted
        for w in busy:
            ray.kill(w, no_restart=True)
            self.backend.lost(w)
        if self._rc is None:
            self._end(-9, "killed by the launcher")
        self.backend.release(self)

    def wait(self, timeout_s: float) -> int | None:
        """Poll until it ends or ``timeout_s`` passes."""
        return poll_until(self.poll, timeout_s, 0.01)


class RayBackend:
    """Starts generations on the connected Ray cluster with warm workers (see the module docstring).

    Parameters
    ----------
    pool
        The cluster's devices (:func:`cluster_pool`).
    threads_per_worker
        torch intra-op threads of every worker (CPU slots: 1).
    """

    name = "ray"

    def __init__(self, pool: DevicePool, threads_per_worker: int = 1):
        ray = _ray()
        if not ray.is_initialized():
            raise LauncherError("the ray backend needs a connection to a Ray cluster: call ray_backend.connect() first")
        self.pool = pool
        self.threads = threads_per_worker
        self._actor = ray.remote(WarmWorker)
        self.idle: dict[str, list[Any]] = {}  # node id -> warm workers not running a rank
        self.last_job: dict[Any, str] = {}  # worker -> the job it ran last (its kept model)
        self.busy: dict[Any, RayGeneration] = {}
        self._generations: set[RayGeneration] = set()
        for node in dict.fromkeys(pool.nodes):
            for _ in range(pool.nodes.count(node)):
                self.idle.setdefault(node, []).append(self._new_worker(node))

    def _new_worker(self, node: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415

        return self._actor.options(
            num_cpus=0, num_gpus=0, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote(self.threads)  # fmt: skip

    def warm_up(self, timeout_s: float = 300.0) -> None:
        """Wait until every warm worker has imported torch (optional: a generation waits for its own)."""
        ray = _ray()
        ray.get([w.ready.remote() for ws in self.idle.values() for w in ws], timeout=timeout_s)

    def _take(self, node: str, job_id: str) -> Any:
        ws = self.idle.setdefault(node, [])
        for w in ws:  # the worker that ran this job last: its model is still constructed
            if self.last_job.get(w) == job_id:
                ws.remove(w)
                return w
        return ws.pop(0) if ws else self._new_worker(node)

    def spawn(self, spec: GenerationSpec, payload: Mapping[str, Any]) -> RayGeneration:
        """Reserve the generation's placement group and hand its ranks to warm workers on those nodes."""
        write_spec(spec)
        workers = [self._take(self.pool.node_of(d), spec.job_id) for d in spec.devices]
        gen = RayGeneration(self, spec, payload, workers)
        for w in workers:
            self.busy[w] = gen
            self.last_job[w] = spec.job_id
        self._generations.add(gen)
        return gen

    def adopt(self, spec: GenerationSpec, event: Mapping[str, Any]) -> None:
        """Nothing to adopt: a generation's actors died with the launcher that owned them."""
        return None

    def retire_dead_nodes(self, nodes: list[str]) -> set[str]:
        """Those of ``nodes`` Ray no longer shows alive: retired from the pool, their warm workers dropped."""
        alive = {n["NodeID"] for n in _ray().nodes() if n.get("Alive")}
        gone = set(nodes) - alive
        for node in gone - self.pool.retired:
            log.warning("Ray node %s left the cluster: its devices are retired", node)
            self.pool.retire(node)
            self.idle.pop(node, None)
        return gone

    def lost(self, worker: Any) -> None:
        """A worker died or was killed: forget it; a node that left the cluster is retired."""
        gen = self.busy.pop(worker, None)
        self.last_job.pop(worker, None)
        if gen is not None and worker in gen.workers:
            node = gen.nodes[gen.workers.index(worker)]
            # Ray may not know yet that the node left (its health check takes seconds): then the
            # replacement waits for a node that never comes back, and the next generation placed
            # there finds the node gone (retire_dead_nodes) and is placed again elsewhere
            if not self.retire_dead_nodes([node]):
                self.idle.setdefault(node, []).append(self._new_worker(node))  # one warm worker per device

    def release(self, gen: RayGeneration) -> None:
        """The generation ended: its placement group goes, its living workers wait warm for the next."""
        if gen not in self._generations:
            return
        self._generations.discard(gen)
        from ray.util.placement_group import remove_placement_group  # noqa: PLC0415

        try:
            if gen.pg is not None:
                remove_placement_group(gen.pg)
        except Exception as exc:  # noqa: BLE001 - a group already gone with its node
            log.debug("placement group of %s not removed: %s", gen.spec.job_id, exc)
        for w, node in zip(gen.workers, gen.nodes):
            if self.busy.pop(w, None) is gen and node not in self.pool.retired:
                self.idle.setdefault(node, []).append(w)

    def close(self) -> None:
        """Kill every warm worker and remove every placement group left."""
        ray = _ray()
        for gen in list(self._generations):
            gen.kill()
        for w in [w for ws in self.idle.values() for w in ws] + list(self.busy):
            ray.kill(w, no_restart=True)
        self.idle.clear()
        self.busy.clear()


class RayExecutor(GenerationExecutor):
    """The launcher's executor on a Ray cluster (see the module docstring).

    Parameters
    ----------
    out_dir
        Run directory, on a file system every node sees.
    pool
        The cluster's devices (:func:`cluster_pool`); Ray must be connected (:func:`connect`).
    threads_per_worker
        torch threads of every warm worker.
    **kwargs
        As for :class:`~elasticopt.launcher.generations.GenerationExecutor`;
        ``exit_grace_s`` defaults to 10 s here (the ranks of a generation
        return by themselves within milliseconds of rank 0's final status,
        and a worker killed for being late is no longer warm).
    """

    def __init__(self, out_dir: str | os.PathLike[str], pool: DevicePool, *, threads_per_worker: int = 1,
                 **kwargs: Any):  # fmt: skip
        kwargs.setdefault("exit_grace_s", 10.0)
        super().__init__(Path(out_dir), pool, RayBackend(pool, threads_per_worker), **kwargs)
