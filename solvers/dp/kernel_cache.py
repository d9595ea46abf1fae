"""The dp's compiled kernels kept on disk between processes (jax's persistent compilation cache).

A long-lived caller (``elasticopt serve`` under a host's simulator) meets a kernel shape the warm-up did not
compile at its n-th request: 0.4-1.4 s for that call (on Sia's cluster, 13 new shapes in the first 220 requests of
a workload).  With the cache, each shape is compiled once per machine: the next run of the service, and its
warm-up, load it (warm-up 8.6 -> 3.8 s measured on 2 loaded cores).  XLA keys each entry by the program, jax's
version, the backend and its flags, so a stale entry is never loaded.
"""

from __future__ import annotations

import os
from pathlib import Path

from elasticopt.errors import ElasticoptError

__all__ = ["default_kernel_cache", "use_kernel_cache", "KERNEL_CACHE_ENV"]

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
    return path
