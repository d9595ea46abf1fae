"""The policy interface and registry.

A policy is any object with a ``name`` and one method,
``allocate(snapshot) -> Allocation``.  To plug in a research scheduler::

    from elasticopt.scheduling import Allocation, register_policy

    class MyPolicy:
        name = "mine"
        def __init__(self, solver="dp"):  # keyword options the CLI may pass
            ...
        def allocate(self, snapshot):
            return Allocation({j.id: None for j in snapshot.jobs})

    register_policy("mine", MyPolicy)

or, without registering, name it ``my_module:MyPolicy`` on the command line
(``elasticopt simulate W --policy my_module:MyPolicy``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from elasticopt.errors import DuplicateNameError, ValidationError
from elasticopt.scheduling.state import Allocation, JobState, Snapshot

__all__ = ["Policy", "register_policy", "get_policy", "available_policies", "priority_order", "require_one_type",
           "submitted_type"]


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy: the target allocation for a snapshot."""

    name: str

    def allocate(self, snapshot: Snapshot) -> Allocation:
        """Target (k, b) or None for every job of ``snapshot``."""
        ...


_REGISTRY: dict[str, Callable[..., Policy]] = {}


def register_policy(name: str, factory: Callable[..., Policy] | None = None, *, replace: bool = False):
    """Register a policy class (or factory) under ``name``; usable as a decorator.

    Parameters
    ----------
    name
        The name ``--policy`` accepts.
    factory
        A callable taking keyword options and returning a :class:`Policy`.
    replace
        Replace a different factory already registered under ``name`` (the
        same one again is a no-op).

    Raises
    ------
    DuplicateNameError
        If ``name`` is taken by another factory and ``replace`` is False.
    """

    def _register(f: Callable[..., Policy]) -> Callable[..., Policy]:
        old = _REGISTRY.get(name)
        if old is not None and old is not f and not replace:
            raise DuplicateNameError("policy", name, old)
        _REGISTRY[name] = f
        return f

    return _register(factory) if factory is not None else _register


def available_policies() -> list[str]:
    """Names of the registered policies, sorted."""
    return sorted(_REGISTRY)


def _load_factory(spec: str) -> Callable[..., Policy]:
    if spec in _REGISTRY:
        return _REGISTRY[spec]
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValidationError("policy", "an importable 'module:Class'", spec, hint=str(exc)) from exc
        try:
            return getattr(module, attr)
        except AttributeError as exc:
            raise ValidationError("policy", f"a class named {attr!r} in module {module_name!r}", spec) from exc
    raise ValidationError(
        "policy", f"one of {', '.join(available_policies())} or 'module:Class'", spec
    )


def get_policy(spec: str, **options: Any) -> Policy:
    """Build a policy from a registered name or ``module:Class``.

    Options the policy's constructor does not accept are ignored (so one
    command line can pass ``solver=`` to every policy); options it accepts are
    passed as keywords.

    Parameters
    ----------
    spec
        Registered name (see :func:`available_policies`) or ``module:Class``.
    **options
        Keyword options (``solver``, ``rescale_penalty``, ``priority``...).
    """
    factory = _load_factory(spec)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = dict(options)
    else:
        kwargs = {k: v for k, v in options.items() if k in params}
    policy = factory(**kwargs)
    if not isinstance(policy, Policy):
        raise ValidationError("policy", "an object with a name and allocate(snapshot)", type(policy).__name__)
    return policy


def priority_order(snapshot: Snapshot, rule: str = "arrival") -> tuple[str, ...]:
    """Job ids in tie-break order (earlier = preferred among ties, docs/design.md §2).

    Parameters
    ----------
    snapshot
        The snapshot.
    rule
        ``"arrival"``: running jobs first, then by submission time (FIFO);
        ``"srpt"``: shortest remaining work first, the work being remaining
        samples over the job's best per-GPU rate (GPU-seconds).
    """
    jobs = list(snapshot.jobs)
    if rule == "arrival":
        key = lambda j: (not j.is_running, j.spec.arrival_s, j.id)  # noqa: E731
    elif rule == "srpt":

        def key(j):
            rate = _best_per_gpu_rate(j)
            return (j.remaining_samples / rate if rate > 0 else float("inf"), j.spec.arrival_s, j.id)

    else:
        raise ValidationError("priority", "'arrival' or 'srpt'", rule)
    return tuple(j.id for j in sorted(jobs, key=key))


def _best_per_gpu_rate(state) -> float:
    spec = state.spec
    best = 0.0
    for k, b in spec.throughput.candidates(spec.gpus_max or (1 << 30), spec.batch_min, spec.batch_max):
        t = spec.throughput.samples_per_s(k, b)
        if t and k >= 1:
            best = max(best, t / k)
    return best


def require_one_type(snapshot: Snapshot, policy_name: str) -> None:
    """Refuse a cluster of several GPU types, for a policy that cannot choose types (ValidationError)."""
    types = snapshot.cluster.types
    if len(types) > 1:
        raise ValidationError(
            f"policy {policy_name!r}", "a cluster of one GPU type", ", ".join(types),
            hint="it cannot choose GPU types; on several types use elastic, elastic-goodput, fixed-batch, "
            "static, static-backfill or tiresias",
        )


def submitted_type(state: JobState, cluster_types: tuple[str, ...]) -> str | None:
    """The GPU type a type-blind policy runs a job on: the one it runs on, else the one it was submitted for.

    The submitted type is ``JobSpec.submitted_type``, or the first type of the cluster the job may use.
    """
    return state.gpu_type if state.is_running and state.gpu_type else state.spec.type_on(cluster_types)
