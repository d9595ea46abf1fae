"""The cluster of the allocation problem (docs/design.md §2): node pools, one per GPU type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from elasticopt.errors import ValidationError

__all__ = ["Cluster", "Pool", "DEFAULT_TYPE", "POOL_FIELDS", "check_int", "pool_from_dict", "pool_to_dict",
           "MAX_NODES", "MAX_GPUS_PER_NODE", "MAX_POOL_GPUS"]

#: The GPU type of a cluster given as ``Cluster(gpus, gpus_per_node)`` (one pool).
DEFAULT_TYPE = "gpu"

#: Size limits of a pool (docs/design.md §2).  Placement, verification and the simulator keep per-node and
#: per-GPU state, so a pool costs memory in proportion to its nodes and GPUs: a size beyond these is refused
#: with a message naming the limit (a 10**9-GPU cluster of 8-GPU nodes would need gigabytes), never left to
#: grow until memory runs out.  The solvers themselves see at most the GPUs the jobs can use.
MAX_NODES = 2**20
MAX_GPUS_PER_NODE = 2**16
MAX_POOL_GPUS = 2**24


def check_int(path: str, value: object, lo: int, hi: int | None = None, limit: str = "") -> None:
    """Raise :class:`ValidationError` at ``path`` unless ``value`` is an int (not a bool) in ``lo..hi``.

    ``limit`` names the constant ``hi`` comes from, for the message.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValidationError(path, f"an integer >= {lo}", value)
    if hi is not None and value > hi:
        raise ValidationError(path, f"an integer <= {hi:,} ({limit or 'the limit'})", value,
                              "elasticopt refuses larger sizes: see docs/design.md §2, size limits")


@dataclass(frozen=True)
class Pool:
    """The nodes of one GPU type: ``nodes`` nodes of ``gpus_per_node`` GPUs each.

    Every attribute of a GPU type is a field here (with a default, so that
    files without it still load): instance files, service requests and the
    simulator's pool files are read by :func:`pool_from_dict` and written by
    :func:`pool_to_dict`, field by field (docs/design.md §9 "add a GPU-type attribute").

    Parameters
    ----------
    nodes
        Number of nodes (>= 0).
    gpus_per_node
        GPUs per node g (>= 1).
    free
        Per node, the indices (0..g-1) of the GPUs available to the problem's jobs
        (fragmented nodes: GPUs held by work outside the problem are left out);
        None = every GPU of every node.  A running job's own GPUs are free: it is
        being re-decided.
    """

    nodes: int
    gpus_per_node: int = 8
    free: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        check_int("pool.nodes", self.nodes, 0, MAX_NODES, "MAX_NODES, nodes per pool")
        check_int("pool.gpus_per_node", self.gpus_per_node, 1, MAX_GPUS_PER_NODE, "MAX_GPUS_PER_NODE")
        if self.nodes * self.gpus_per_node > MAX_POOL_GPUS:
            raise ValidationError("pool.nodes", f"at most {MAX_POOL_GPUS:,} GPUs in a pool (MAX_POOL_GPUS): nodes x "
                                  f"gpus_per_node = {self.nodes:,} x {self.gpus_per_node:,}", self.nodes,
                                  "elasticopt refuses larger sizes: see docs/design.md §2, size limits")
        if self.free is not None:
            free = tuple(tuple(sorted(int(g) for g in node)) for node in self.free)
            object.__setattr__(self, "free", free)
            if len(free) != self.nodes:
                raise ValidationError("pool.free", f"one list of free GPU indices per node ({self.nodes})", len(free))
            for i, node in enumerate(free):
                if len(set(node)) != len(node) or any(not 0 <= g < self.gpus_per_node for g in node):
                    raise ValidationError(f"pool.free[{i}]", f"distinct GPU indices in 0..{self.gpus_per_node - 1}", node)

    def free_gpus(self) -> tuple[tuple[int, ...], ...]:
        """Per node the free GPU indices (all of them where ``free`` is None)."""
        if self.free is not None:
            return self.free
        return (tuple(range(self.gpus_per_node)),) * self.nodes

    def free_per_node(self) -> tuple[int, ...]:
        """Per node the number of free GPUs."""
        if self.free is None:
            return (self.gpus_per_node,) * self.nodes
        return tuple(len(n) for n in self.free)

    @cached_property
    def gpus(self) -> int:
        """Free GPUs of the pool, all nodes together (no per-node list is built for wholly free nodes)."""
        if self.free is None:
            return self.nodes * self.gpus_per_node
        return sum(len(n) for n in self.free)


#: The fields of a pool, as files name them: :class:`Pool`'s own (a new GPU-type attribute is a new field of
#: ``Pool``; the instance loader and writer, the service and the simulator's pool files read them from here).
POOL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Pool))


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def pool_from_dict(d: Mapping[str, Any], where: str = "pool") -> Pool:
    """The :class:`Pool` a file describes: its fields by name (``free``: per node GPU indices, or their number).

    Raises :class:`ValidationError` at ``where.FIELD`` for an unknown field (listing the known ones) or a
    value a pool refuses.
    """
    unknown = [k for k in d if k not in POOL_FIELDS]
    if unknown:
        raise ValidationError(f"{where}.{unknown[0]}", "a pool field: " + ", ".join(POOL_FIELDS), unknown[0],
                              hint="a new GPU-type attribute is a field of models.cluster.Pool")
    for req in ("nodes", "gpus_per_node"):
        if req not in d:
            raise ValidationError(f"{where}.{req}", "this field to be present", "nothing")
    kw = dict(d)
    free, g = kw.get("free"), kw["gpus_per_node"]
    if free is not None:
        ok = isinstance(free, (list, tuple)) and all(
            _is_int(f) or (isinstance(f, (list, tuple)) and all(_is_int(x) and x >= 0 for x in f)) for f in free)
        if not ok:
            raise ValidationError(f"{where}.free", "per node a list of free GPU indices, or their number", free)
        if len(free) != kw["nodes"]:
            raise ValidationError(f"{where}.free", f"one entry per node ({kw['nodes']})", f"{len(free)} entries")
        out = []
        for i, f in enumerate(free):
            if isinstance(f, int):
                if f > g:
                    raise ValidationError(f"{where}.free[{i}]", f"at most gpus_per_node ({g}) free GPUs", f)
                out.append(tuple(range(f)))
            else:
                if len(set(f)) != len(f) or any(x >= g for x in f):
                    raise ValidationError(f"{where}.free[{i}]", f"distinct GPU indices in 0..{g - 1}", f)
                out.append(tuple(f))
        kw["free"] = tuple(out)
    try:
        return Pool(**kw)
    except ValidationError as exc:
        path = exc.path[len("pool"):] if exc.path.startswith("pool") else "." + exc.path
        raise ValidationError(where + path, exc.expected, exc.found, exc.hint) from None


def pool_to_dict(pool: Pool) -> dict[str, Any]:
    """A pool as files write it: ``nodes``, ``gpus_per_node``, and every other field not at its default."""
    out: dict[str, Any] = {"nodes": pool.nodes, "gpus_per_node": pool.gpus_per_node}
    for f in fields(Pool):
        v = getattr(pool, f.name)
        if f.name in out or (f.default is not MISSING and v == f.default):
            continue
        out[f.name] = [list(ix) for ix in v] if f.name == "free" else v
    return out


def _single_pool(gpus: int, gpus_per_node: int) -> Pool:
    """``gpus`` GPUs as full nodes of ``gpus_per_node`` (the last one partly free if g does not divide G)."""
    full, rest = divmod(gpus, gpus_per_node)
    if not rest:
        return Pool(full, gpus_per_node)
    free = (tuple(range(gpus_per_node)),) * full + (tuple(range(rest)),)
    return Pool(full + 1, gpus_per_node, free)


@dataclass(frozen=True)
class Cluster:
    """GPUs in node pools, one pool per GPU type (docs/design.md §2).

    ``Cluster(64, 8)`` is one pool of identical GPUs (type ``"gpu"``), as in
    format 1; ``Cluster(pools={"a100": Pool(2, 8), "t4": Pool(6, 4)})`` is a
    heterogeneous cluster.

    Parameters
    ----------
    gpus
        Total GPUs G of a one-pool cluster (>= 0); derived from ``pools`` when given.
    gpus_per_node
        GPUs per node g of a one-pool cluster (>= 1).
    pools
        GPU type -> :class:`Pool`, in a fixed order (the order of the option table's types).
    """

    gpus: int | None = None
    gpus_per_node: int = 8
    pools: Mapping[str, Pool] | None = None

    def __post_init__(self) -> None:
        if self.pools is None:
            check_int("cluster.gpus_per_node", self.gpus_per_node, 1, MAX_GPUS_PER_NODE, "MAX_GPUS_PER_NODE")
            check_int("cluster.gpus", self.gpus, 0, min(MAX_POOL_GPUS, MAX_NODES * self.gpus_per_node),
                      "MAX_POOL_GPUS" if MAX_POOL_GPUS <= MAX_NODES * self.gpus_per_node
                      else f"MAX_NODES = {MAX_NODES:,} nodes of gpus_per_node GPUs")
            pools = {DEFAULT_TYPE: _single_pool(self.gpus, self.gpus_per_node)}
        else:
            if not isinstance(self.pools, Mapping) or not self.pools:
                raise ValidationError("cluster.pools", "a non-empty mapping GPU type -> Pool", self.pools)
            pools = {}
            for t, pool in self.pools.items():
                if not isinstance(t, str) or not t:
                    raise ValidationError("cluster.pools", "GPU type names as non-empty strings", t)
                if not isinstance(pool, Pool):
                    raise ValidationError(f"cluster.pools.{t}", "a Pool(nodes, gpus_per_node, free)", pool)
                pools[t] = pool
            object.__setattr__(self, "gpus", sum(p.gpus for p in pools.values()))
            if len(pools) == 1:
                object.__setattr__(self, "gpus_per_node", next(iter(pools.values())).gpus_per_node)
        object.__setattr__(self, "pools", MappingProxyType(pools))

    @property
    def types(self) -> tuple[str, ...]:
        """The GPU types, in pool order."""
        return tuple(self.pools)  # type: ignore[arg-type]

    def capacity(self, gpu_type: str) -> int:
        """Free GPUs of one type."""
        return self.pools[gpu_type].gpus  # type: ignore[index]

    @cached_property
    def capacities(self) -> np.ndarray:
        """Free GPUs per type, in pool order (read-only int64 array)."""
        caps = np.array([pool.gpus for pool in self.pools.values()], dtype=np.int64)  # type: ignore[union-attr]
        caps.setflags(write=False)
        return caps

    @cached_property
    def pool_list(self) -> tuple[Pool, ...]:
        """The pools, in type order."""
        return tuple(self.pools.values())  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash((self.gpus, self.gpus_per_node, tuple(self.pools.items())))  # type: ignore[union-attr]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cluster):
            return NotImplemented
        return dict(self.pools) == dict(other.pools)  # type: ignore[arg-type]
