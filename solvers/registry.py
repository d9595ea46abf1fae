"""Name -> backend registry (cvxpy style: a registry, never an if/elif chain)."""

from __future__ import annotations

from elasticopt.errors import SolverUnavailableError, UnknownSolverError
from elasticopt.solvers.base import Backend, Capabilities

__all__ = ["register", "get_backend", "registered_solvers", "available_solvers", "exact_solvers", "capabilities",
           "placement_solvers"]

_REGISTRY: dict[str, type[Backend]] = {}


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator: register a backend under ``cls.name`` (replaces an older one)."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} has no 'name'")
    _REGISTRY[cls.name] = cls
    return cls


def registered_solvers() -> list[str]:
    """Every registered backend name, installed or not."""
    return list(_REGISTRY)


def available_solvers() -> list[str]:
    """Registered backends whose libraries are installed."""
    return [n for n, c in _REGISTRY.items() if c.available()]


def exact_solvers() -> list[str]:
    """Installed backends that prove optima."""
    return [n for n, c in _REGISTRY.items() if c.exact and c.available()]


def capabilities(name: str) -> Capabilities:
    """What the backend registered as ``name`` can do (:class:`~elasticopt.solvers.base.Capabilities`).

    Raises
    ------
    UnknownSolverError
        Listing the registered and the installed backends.
    """
    cls = _REGISTRY.get(name)
    if cls is None:
        raise UnknownSolverError(name, registered_solvers(), available_solvers())
    return cls.capabilities


def placement_solvers() -> list[str]:
    """Installed backends exact with node variables that may re-solve for placement, by ``fallback_rank``."""
    found = [(c.capabilities.fallback_rank, n) for n, c in _REGISTRY.items()
             if c.capabilities.placement == "exact" and c.capabilities.fallback_rank is not None and c.available()]
    return [n for _, n in sorted(found)]


def get_backend(name: str) -> Backend:
    """A fresh instance of the backend registered as ``name``.

    Raises
    ------
    UnknownSolverError
        Listing the registered and the installed backends.
    SolverUnavailableError
        Naming the missing modules and the pip extra that installs them.
    """
    cls = _REGISTRY.get(name)
    if cls is None:
        raise UnknownSolverError(name, registered_solvers(), available_solvers())
    missing = cls.missing_modules()
    if missing:
        raise SolverUnavailableError(name, missing, cls.extra)
    return cls()
