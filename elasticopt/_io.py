"""Atomic file writes: nothing is ever left half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from elasticopt.errors import OutputError

__all__ = ["atomic_path", "atomic_write_text", "atomic_write_bytes"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it to ``path``.

    For writers that insist on a file name (Pyomo's LP/MPS writers, torch.save):
    the destination only ever holds a complete file, and a failure removes the
    temporary file and leaves any previous ``path`` untouched.

    Parameters
    ----------
    path
        Destination; its folder is created if missing.
    suffix
        Suffix of the temporary file (some writers pick the format from it).
    """
    dest = Path(path)
    if dest.is_dir():
        raise OutputError(str(dest), "it is a directory", f"name a file, e.g. {dest / ('output' + _ext(suffix))}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix, dir=dest.parent)
    except OSError as exc:
        blocked = next((a for a in dest.parents if a.exists()), None)
        reason = f"{blocked} is a file, not a folder" if blocked is not None and not blocked.is_dir() else \
            exc.strerror or type(exc).__name__
        raise OutputError(str(dest), reason, "name a file in a folder this user can create and write") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.close(fd)
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError) and exc.filename in (tmp, str(dest)):
            raise OutputError(str(dest), exc.strerror or type(exc).__name__,
                              "free some space or name a file where this user may write") from None
        raise


def _ext(suffix: str) -> str:
    return suffix if suffix != ".tmp" else ".json"


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder, fsync, rename.

    Parameters
    ----------
    path
        Destination; its folder is created if missing.
    data
        The bytes to write.

    Returns
    -------
    Path
        The destination path.
    """
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` atomically (see :func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode(encoding))
