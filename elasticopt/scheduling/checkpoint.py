"""Checkpoints of a running simulation: a killed replay resumes where it was.

:func:`~elasticopt.scheduling.simulator.simulate` hands its whole state to a
``checkpoint`` callback between events; :func:`Checkpointer` pickles it to a
file atomically (temp file + rename), tagged with a fingerprint of the
workload, the config and the policy, and :func:`load_checkpoint` gives it back
for ``simulate(..., resume=state)`` only when the fingerprint matches.  A
resumed run ends with the same records and metrics as an uninterrupted one
(the simulation is deterministic); only its wall time differs.

The file is a Python pickle: load only checkpoints you wrote yourself.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from elasticopt._io import atomic_write_bytes
from elasticopt.errors import InstanceError

__all__ = ["CHECKPOINT_FORMAT", "fingerprint", "Checkpointer", "load_checkpoint"]

CHECKPOINT_FORMAT = "elasticopt-sim-checkpoint/1"
_RLOCK = type(threading.RLock())


def _mapping_proxy(d: dict) -> types.MappingProxyType:
    return types.MappingProxyType(d)


class _Pickler(pickle.Pickler):
    """Pickles the simulator's state: read-only mappings as dicts, locks as new locks."""

    def reducer_override(self, obj):  # noqa: D102
        if isinstance(obj, types.MappingProxyType):
            return _mapping_proxy, (dict(obj),)
        if isinstance(obj, _RLOCK):
            return threading.RLock, ()
        return NotImplemented


def fingerprint(workload: Sequence, config, policy: str, policy_options: dict | None = None) -> str:
    """A hash of what a run depends on: its jobs (ids, arrivals, sizes, work), its config and its policy."""
    h = hashlib.sha256()
    for j in workload:
        h.update(f"{j.id}|{j.arrival_s!r}|{j.submitted_gpus}|{j.submitted_batch}|{j.total_samples!r}\n".encode())
    h.update(repr(config).encode())
    h.update(f"{policy}|{sorted((policy_options or {}).items())!r}".encode())
    return h.hexdigest()[:24]


@dataclass
class Checkpointer:
    """A ``checkpoint`` callback for :func:`~elasticopt.scheduling.simulate` that writes ``path``.

    Parameters
    ----------
    path
        The checkpoint file (written atomically each time).
    key
        :func:`fingerprint` of the run.
    """

    path: Path
    key: str
    saves: int = 0

    def __call__(self, state: dict) -> None:
        buf = io.BytesIO()
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump({"format": CHECKPOINT_FORMAT, "key": self.key,
                                                               "state": state})
        atomic_write_bytes(self.path, buf.getvalue())
        self.saves += 1


def load_checkpoint(path: str | os.PathLike[str], key: str) -> dict | None:
    """The state saved at ``path`` for the run ``key``; None if there is no file.

    Raises
    ------
    InstanceError
        When the file is not a checkpoint, or one of another run (other
        workload, config or policy): delete it or give another path.
    """
    p = Path(path)
    if not p.is_file():
        return None
    try:
        doc = pickle.loads(p.read_bytes())
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not a checkpoint"
        raise InstanceError(str(p), "(file)", f"a {CHECKPOINT_FORMAT} file", type(exc).__name__,
                            hint="delete it to start the run afresh") from None
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
        raise InstanceError(str(p), "format", repr(CHECKPOINT_FORMAT), type(doc).__name__,
                            hint="delete it to start the run afresh")
    if doc.get("key") != key:
        raise InstanceError(str(p), "key", f"the checkpoint of this run ({key})", doc.get("key"),
                            hint="it belongs to another workload, config or policy: delete it or use another "
                                 "--checkpoint path")
    return doc["state"]
