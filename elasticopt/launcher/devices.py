"""The devices of this machine that the launcher hands out to jobs.

On a GPU machine the pool holds GPU ids (from ``CUDA_VISIBLE_DEVICES``, else
``nvidia-smi``, else ``torch.cuda`` imported lazily); without GPUs it holds CPU
slots (cores from this process's affinity mask), so everything runs, and is
tested, on a CPU-only machine.  A job's processes are pinned to the devices it
holds: ``CUDA_VISIBLE_DEVICES`` for GPUs, CPU affinity for CPU slots.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from elasticopt.errors import ElasticoptError, ValidationError
from elasticopt.models.placement import pack
from elasticopt.models.problem import Pool

__all__ = ["DevicePool", "detect_gpus", "cpu_slots"]


def detect_gpus() -> list[int]:
    """Ids of the GPUs this process may use (empty list when there are none).

    ``CUDA_VISIBLE_DEVICES`` wins when set (an empty value means no GPU);
    otherwise ``nvidia-smi -L``; otherwise ``torch.cuda.device_count()``
    when torch is installed.  Ids are the indices seen by child processes.
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        items = [x.strip() for x in env.split(",") if x.strip()]
        if not items or items == ["-1"]:
            return []
        out = []
        for x in items:
            if x.isdigit():
                out.append(int(x))
            else:  # UUIDs / MIG ids: address them by position
                out.append(len(out))
        return out
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            res = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            n = sum(1 for line in res.stdout.splitlines() if line.startswith("GPU "))
            if res.returncode == 0:
                return list(range(n))
        except (OSError, subprocess.SubprocessError):
            pass
    try:  # lazy: torch is optional
        import torch  # noqa: PLC0415

        return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    except ImportError:
        return []


def cpu_slots() -> list[int]:
    """CPU cores this process may run on (its affinity mask)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


@dataclass
class DevicePool:
    """A set of identical devices handed out to jobs by id.

    Parameters
    ----------
    kind
        ``"cuda"`` (GPUs) or ``"cpu"`` (CPU slots: one core per worker).
    ids
        Device ids (GPU indices or CPU core numbers; on a cluster, numbers
        unique over the cluster).
    nodes
        The node of every id (same order), for a pool spanning several
        machines; empty: every device is on this machine.
    """

    kind: str
    ids: tuple[int, ...]
    nodes: tuple[str, ...] = ()
    retired: set[str] = field(default_factory=set)
    _owner: dict[int, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in ("cuda", "cpu"):
            raise ValidationError("device kind", "'cuda' or 'cpu'", self.kind)
        self.ids = tuple(self.ids)
        if len(set(self.ids)) != len(self.ids) or not self.ids:
            raise ValidationError("device ids", "a non-empty list of distinct ids", self.ids)
        self.nodes = tuple(self.nodes) or ("local",) * len(self.ids)
        if len(self.nodes) != len(self.ids):
            raise ValidationError("device nodes", f"one node per device id ({len(self.ids)})", len(self.nodes))
        self._node_of = dict(zip(self.ids, self.nodes))

    @classmethod
    def detect(cls, gpus: int | None = None, cpu_slots_n: int | None = None) -> "DevicePool":
        """The pool of this machine.

        Parameters
        ----------
        gpus
            Use the first ``gpus`` GPUs (an error when there are fewer).
        cpu_slots_n
            Use ``cpu_slots_n`` CPU slots instead of GPUs.  More slots than
            cores is allowed (slots then share cores round-robin).
        With neither, all GPUs when there are some, else one slot per core.
        """
        if gpus is not None and cpu_slots_n is not None:
            raise ValidationError("devices", "either gpus or cpu slots, not both", (gpus, cpu_slots_n))
        if cpu_slots_n is None:
            found = detect_gpus()
            if gpus is not None:
                if gpus < 1 or gpus > len(found):
                    raise ElasticoptError(
                        f"--gpus {gpus}: this machine has {len(found)} usable GPU(s)"
                        + ("; use --cpu-slots N to run on CPU cores" if not found else "")
                    )
                return cls("cuda", tuple(found[:gpus]))
            if found:
                return cls("cuda", tuple(found))
        cores = cpu_slots()
        n = cpu_slots_n if cpu_slots_n is not None else len(cores)
        if n < 1:
            raise ValidationError("--cpu-slots", "an integer >= 1", n)
        return cls("cpu", tuple(range(n)))

    @property
    def size(self) -> int:
        """Number of devices."""
        return len(self.ids)

    def free(self) -> list[int]:
        """Ids not held by any job (on nodes still there)."""
        return [i for i in self.ids if i not in self._owner and self._node_of[i] not in self.retired]

    def retire(self, node: str) -> None:
        """``node`` left the cluster: its devices are never handed out again."""
        self.retired.add(node)

    def held_by(self, owner: str) -> list[int]:
        """Ids held by ``owner``."""
        return [i for i in self.ids if self._owner.get(i) == owner]

    @property
    def gpus_per_node(self) -> int:
        """Devices of the largest node."""
        return max(self.nodes.count(n) for n in set(self.nodes))

    def node_of(self, device: int) -> str:
        """The node holding ``device``."""
        return self._node_of[device]

    def acquire(self, owner: str, n: int) -> list[int] | None:
        """Give ``n`` free devices to ``owner``, packed first; None when too few are free.

        By the model's one placer (:func:`elasticopt.models.placement.pack`,
        its greedy rule): all on the node with the fewest free devices that
        still has ``n`` (best fit, lowest ids first); when no node has ``n``
        free, the nodes with the most free devices whole and the remainder on
        the fullest node that holds it, so the job spans as few nodes as the
        greedy finds.  Devices are listed node by node, most devices first.
        """
        names = list(dict.fromkeys(self.nodes))  # nodes in order of their first device
        members: dict[str, list[int]] = {m: [] for m in names}
        for i in self.ids:
            members[self._node_of[i]].append(i)
        free = set(self.free())
        if n > len(free):
            return None
        pool = Pool(len(names), max(len(v) for v in members.values()),
                    tuple(tuple(p for p, i in enumerate(members[m]) if i in free) for m in names))
        res = pack(pool, [(n, False)])
        if res.status != "placed":  # pragma: no cover - the greedy never fails when the total fits
            return None
        got = []
        for node, pos in sorted(res.nodes[0].items(), key=lambda e: (-len(e[1]), e[0])):
            got.extend(members[names[node]][p] for p in pos)
        for i in got:
            self._owner[i] = owner
        return got

    def claim(self, owner: str, ids: list[int]) -> bool:
        """Mark specific ids as held by ``owner`` (recovery); False if one is taken by another."""
        if any(self._owner.get(i, owner) != owner or i not in self.ids for i in ids):
            return False
        for i in ids:
            self._owner[i] = owner
        return True

    def release(self, owner: str) -> None:
        """Return every device ``owner`` holds."""
        for i in self.held_by(owner):
            del self._owner[i]

    def cpu_cores_for(self, ids: list[int]) -> set[int]:
        """The cores a job holding CPU slots ``ids`` is pinned to (slot i -> core i mod cores)."""
        cores = cpu_slots()
        return {cores[i % len(cores)] for i in ids}
