"""The (k, b) grid a profile offers as candidate options.

GPU counts are powers of two that divide the node size or are multiples of it
(so every allocation packs onto nodes, docs/design.md §2); global batches are powers of
two in the job's range plus the range ends; k divides b and the local batch
b / k stays within ``[min_local, max_local]``.
"""

from __future__ import annotations

from elasticopt.profiles.throughput import power_of_two_grid

__all__ = ["gpu_grid", "grid_candidates"]


def gpu_grid(gpus_max: int, gpus_per_node: int) -> list[int]:
    """Powers of two up to ``gpus_max`` that divide, or are multiples of, ``gpus_per_node``."""
    if gpus_max < 1:
        return []
    out = []
    k = 1
    while k <= gpus_max:
        if gpus_per_node % k == 0 or k % gpus_per_node == 0:
            out.append(k)
        k *= 2
    return out


def grid_candidates(
    gpus_max: int,
    batch_min: int,
    batch_max: int,
    *,
    gpus_per_node: int,
    max_local: float | None = None,
    min_local: float = 1,
) -> list[tuple[int, int]]:
    """Candidate (k, b) pairs, sorted by k then b.

    Parameters
    ----------
    gpus_max
        Largest GPU count (already capped by the caller to what the profile covers).
    batch_min, batch_max
        Global batch range.
    gpus_per_node
        Node size of the hardware.
    max_local, min_local
        Range of the per-GPU batch b / k (None = no upper limit).
    """
    batch_min = max(int(batch_min), 1)
    batches = power_of_two_grid(batch_min, int(batch_max))
    out = []
    for k in gpu_grid(int(gpus_max), gpus_per_node):
        for b in batches:
            if b % k:
                continue
            local = b // k
            if local < min_local or (max_local is not None and local > max_local):
                continue
            out.append((k, b))
    return out
