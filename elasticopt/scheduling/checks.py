"""What the autoscaler checks of a policy's answer before acting on it.

Every job with GPUs must get a feasible option of its type (docs/design.md §2)
within that type's free GPUs; on a cluster of several GPU types a policy must
name each job's type (``Allocation.gpu_types``): a policy that cannot reason
about types is refused here, with the policy's name, unless it names them.
"""

from __future__ import annotations

from elasticopt.errors import ValidationError
from elasticopt.scheduling.state import Allocation, Snapshot, option_error

__all__ = ["check_allocation", "target_types"]


def target_types(snapshot: Snapshot, allocation: Allocation, policy_name: str = "policy") -> dict[str, str]:
    """The GPU type of every job the allocation gives GPUs (the only type of a one-pool cluster).

    Raises
    ------
    ValidationError
        On a cluster of several types, for a job without a type or with one the cluster lacks.
    """
    types = snapshot.cluster.types
    only = types[0] if len(types) == 1 else None
    out = {}
    for jid, kb in allocation.assignments.items():
        if kb is None:
            continue
        t = allocation.gpu_types.get(jid, only)
        if t is None:
            raise ValidationError(
                f"{policy_name}.gpu_types[{jid!r}]", "the GPU type of every job with GPUs", None,
                hint=f"the cluster has several GPU types ({', '.join(types)}); policy {policy_name!r} gave none: "
                "use a policy that chooses types (elastic, elastic-goodput, fixed-batch, static, tiresias)",
            )
        if t not in types:
            raise ValidationError(f"{policy_name}.gpu_types[{jid!r}]", "a GPU type of the cluster: "
                                  + ", ".join(types), t)
        out[jid] = t
    return out


def check_allocation(snapshot: Snapshot, allocation: Allocation, policy_name: str = "policy") -> None:
    """Raise ValidationError unless the allocation fits every GPU type and every option is feasible."""
    active = {j.id: j for j in snapshot.jobs}
    for jid in allocation.assignments:
        if jid not in active:
            raise ValidationError(f"{policy_name}.allocation[{jid!r}]", "an active job id", jid)
    cluster = snapshot.cluster
    types = target_types(snapshot, allocation, policy_name)
    one = len(cluster.types) == 1
    used = dict.fromkeys(cluster.types, 0)
    for jid, t in types.items():
        k, b = allocation.assignments[jid]  # type: ignore[misc]
        cap = cluster.capacity(t)
        why = option_error(active[jid].spec, k, b, cap, None if one else t)
        if why is not None:
            raise ValidationError(f"{policy_name}.allocation[{jid!r}]", "a feasible option", (k, b), hint=why)
        used[t] += k
    for t, n in used.items():
        if n > cluster.capacity(t):
            where = f"{policy_name}.allocation" if one else f"{policy_name}.allocation[{t!r}]"
            raise ValidationError(where, f"at most {cluster.capacity(t)} GPUs" + ("" if one else f" of type {t!r}")
                                  + (" in total" if one else ""), n)
