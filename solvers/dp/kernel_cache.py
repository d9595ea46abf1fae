"""The dp's compiled kernels kept on disk between processes (jax's persistent compilation cache).

A long-lived caller (``elasticopt serve`` under a host's simulator) meets a kernel shape the warm-up did not
compile at its n-th request: 0.4-1.4 s for that call (on Sia's cluster, 17 new shapes in the 938 requests of
its workload-3).  With the cache, each shape is compiled once per machine: the next run of the service, and its
warm-up, load it (warm-up 8.6 -> 3.8 s measured on 2 loaded cores).  XLA keys each entry by the program, jax's
version, the backend and its flags, so a stale entry is never loaded.

Loading still traces the kernel in the new process (0.1-0.4 s at its first use), so the folder also keeps an
index of the shapes met (:data:`INDEX`: each kernel's key and its arguments' shapes and dtypes, written when a
process first meets one; the last :data:`MAX_INDEX`), and :func:`prewarm` -- the service's warm-up -- runs every kernel of the index once on
zeros, before the first request.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from elasticopt.errors import ElasticoptError

__all__ = ["default_kernel_cache", "use_kernel_cache", "KERNEL_CACHE_ENV", "INDEX", "MAX_INDEX", "note", "prewarm",
           "unindexed"]

#: The index of kernel shapes met, in the cache folder.
INDEX = "elasticopt-kernels.json"
#: The index keeps the shapes met last, at most this many (each costs a warm-up 0.1-0.4 s).
MAX_INDEX = 64

_folder: Path | None = None  # the cache folder this process writes to (use_kernel_cache), None: no cache
_noted: set[tuple[str, tuple]] = set()  # (kind, key) of every kernel this process has run or pre-warmed
_quiet = [False]  # True while the service's own warm-up runs: its shapes are compiled at every start anyway


@contextlib.contextmanager
def unindexed() -> Iterator[None]:
    """Kernels met inside are not added to the index (the warm-up's own: it compiles them at every start)."""
    _quiet[0] = True
    try:
        yield
    finally:
        _quiet[0] = False

#: Environment variable naming the cache folder ("none": no cache) where the caller passes none.
KERNEL_CACHE_ENV = "ELASTICOPT_KERNEL_CACHE"


def default_kernel_cache() -> Path | None:
    """``$ELASTICOPT_KERNEL_CACHE`` (None where it says ``none``), else ``$XDG_CACHE_HOME/elasticopt/xla``, else
    ``~/.cache/elasticopt/xla``."""
    env = os.environ.get(KERNEL_CACHE_ENV)
    if env is not None:
        return None if env.strip().lower() in ("", "none") else Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "elasticopt" / "xla"


def use_kernel_cache(folder: str | os.PathLike[str] | None) -> Path | None:
    """Keep every kernel jax compiles from now on in ``folder`` and load it from there (None: no cache).

    Call it before the first solve: kernels compiled before it are not written.  Every kernel is kept, however
    fast its compile (jax keeps only those over 1 s by default; the dp's take 0.2-1.4 s).

    Raises
    ------
    ElasticoptError
        The folder cannot be made or written to (names it, and how to choose another or none).
    """
    if folder is None:
        return None
    path = Path(folder).expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ElasticoptError(
            f"kernel cache {path}: cannot write there ({exc.strerror}); choose another folder with --kernel-cache "
            f"DIR or ${KERNEL_CACHE_ENV}, or none with --kernel-cache none") from None
    import jax

    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    global _folder
    _folder = path
    return path


def _read_index(folder: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads((folder / INDEX).read_text())
    except (OSError, ValueError):  # none yet, or not ours: start again (the entries are only a speed-up)
        return []
    return [e for e in doc.get("kernels", []) if isinstance(e, dict)] if isinstance(doc, dict) else []


def note(kind: str, key: tuple, args: tuple) -> None:
    """A kernel about to run with ``args``: the first time this process meets ``(kind, key)`` with a cache
    folder in use, add it to the folder's index (merged with what other processes wrote; atomic rename).

    ``kind`` is ``"one"`` (:func:`~elasticopt.solvers.dp.jax_kernels._kernels`) or ``"multi"``
    (``_kernels_multi``); ``key`` the builder's arguments, the value type last."""
    if (kind, key) in _noted:
        return
    _noted.add((kind, key))
    if _folder is None or _quiet[0]:
        return
    import jax

    vt = key[-1]
    entry = {"kind": kind, "key": list(key[:-1]), "value_type": [vt.dtype, vt.shift_bits, vt.reset],
             "args": [[list(a.shape), str(a.dtype), isinstance(a, jax.Array)] for a in args]}
    entries = _read_index(_folder)
    if entry in entries:
        return
    entries = (entries + [entry])[-MAX_INDEX:]
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=_folder, prefix=".index-")
        with os.fdopen(fd, "w") as fh:
            json.dump({"format": "elasticopt-kernel-index/1", "kernels": entries}, fh)
        os.replace(tmp, _folder / INDEX)
    except OSError:  # a full or read-only disk: the index is only a speed-up; no half-written file is left
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def prewarm() -> int:
    """Run every kernel of the cache folder's index once on zeros (traced, and loaded from the cache or
    compiled); returns how many.  Nothing without a cache folder."""
    if _folder is None:
        return 0
    import jax
    import numpy as np

    from elasticopt.solvers.dp.jax_kernels import _kernels, _kernels_multi
    from elasticopt.solvers.dp.value_type import ValueType

    done = 0
    with jax.enable_x64(True):
        for e in _read_index(_folder):
            try:
                key = tuple(e["key"]) + (ValueType(str(e["value_type"][0]), int(e["value_type"][1]),
                                                   bool(e["value_type"][2])),)
                kind = str(e["kind"])
                if (kind, key) in _noted:
                    continue
                build = {"one": _kernels, "multi": _kernels_multi}[kind]
                args = [np.zeros(tuple(shape), dtype=dtype) for shape, dtype, _ in e["args"]]
                args = [jax.device_put(a) if dev else a for a, (_, _, dev) in zip(args, e["args"])]
                jax.block_until_ready(build(*key)(*args))
            except Exception:  # an entry this version cannot build (another elasticopt wrote it): skip it
                continue
            _noted.add((kind, key))
            done += 1
    return done
