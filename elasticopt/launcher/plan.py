"""Pure arithmetic of elastic data-parallel training (no torch).

- :func:`split_batch`: a global batch b on k workers with a per-worker memory
  limit ``max_local`` -> local batch and gradient-accumulation micro-batches.
- :func:`scaled_lr` / :class:`LRRamp`: the learning-rate rule when the global
  batch changes (linear or square-root scaling, with a short linear ramp).
- :func:`rank_slice`: which samples of the global stream a rank reads at a
  given sample position, so that the data seen depends only on the position
  (never on k) and a resumed job neither repeats nor skips a sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from elasticopt.errors import ValidationError

__all__ = ["BatchPlan", "split_batch", "scaled_lr", "LRRamp", "rank_slice", "epoch_and_offset"]


@dataclass(frozen=True)
class BatchPlan:
    """How one rank processes its share of a global batch.

    Attributes
    ----------
    global_batch, world_size
        b and k.
    local_batch
        b / k samples per rank and step.
    micro_batches
        Sizes of the micro-batches a rank runs before one optimizer step
        (all <= ``max_local``, summing to ``local_batch``, as even as possible).
    """

    global_batch: int
    world_size: int
    local_batch: int
    micro_batches: tuple[int, ...]

    @property
    def accumulation_steps(self) -> int:
        """Forward/backward passes per optimizer step (1 = no accumulation)."""
        return len(self.micro_batches)


def split_batch(global_batch: int, world_size: int, max_local: int) -> BatchPlan:
    """Split a global batch over ``world_size`` ranks under a memory limit.

    Parameters
    ----------
    global_batch
        b, a multiple of ``world_size``.
    world_size
        k >= 1.
    max_local
        Largest micro-batch one rank can hold.

    Returns
    -------
    BatchPlan
        ``local_batch = b // k`` split into ``ceil(local / max_local)``
        micro-batches whose sizes differ by at most one.
    """
    if world_size < 1:
        raise ValidationError("world_size", "an integer >= 1", world_size)
    if max_local < 1:
        raise ValidationError("max_local", "an integer >= 1", max_local)
    if global_batch < world_size or global_batch % world_size:
        raise ValidationError("global_batch", f"a positive multiple of world_size={world_size}", global_batch)
    local = global_batch // world_size
    n = -(-local // max_local)
    base, extra = divmod(local, n)
    micro = tuple(base + 1 if i < extra else base for i in range(n))
    return BatchPlan(global_batch, world_size, local, micro)


def scaled_lr(base_lr: float, base_batch: int, batch: int, rule: str = "linear") -> float:
    """Learning rate for global batch ``batch`` given ``base_lr`` tuned at ``base_batch``.

    ``rule`` is ``"linear"`` (lr ∝ b, Goyal et al.), ``"sqrt"`` (lr ∝ √b) or
    ``"none"`` (lr unchanged).
    """
    if batch < 1 or base_batch < 1:
        raise ValidationError("batch", "integers >= 1", (base_batch, batch))
    ratio = batch / base_batch
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    if rule == "none":
        return base_lr
    raise ValidationError("lr_rule", "one of 'linear', 'sqrt', 'none'", rule)


@dataclass(frozen=True)
class LRRamp:
    """A linear ramp from ``lr_from`` to ``lr_to`` over ``ramp_steps`` optimizer steps.

    Started at optimizer step ``start_step`` (the first step of the generation
    that changed the batch); before the first batch change it is a constant.
    """

    lr_from: float
    lr_to: float
    start_step: int = 0
    ramp_steps: int = 0

    def lr_at(self, step: int) -> float:
        """Learning rate for optimizer step ``step`` (0-based, global count)."""
        if self.ramp_steps <= 0 or step >= self.start_step + self.ramp_steps:
            return self.lr_to
        t = max(0, step - self.start_step + 1) / self.ramp_steps
        return self.lr_from + (self.lr_to - self.lr_from) * t

    def retarget(self, step: int, lr_to: float, ramp_steps: int) -> "LRRamp":
        """The ramp after the batch changes at ``step``: from the current lr to ``lr_to``."""
        current = self.lr_at(step - 1) if step > 0 else self.lr_to
        if math.isclose(current, lr_to, rel_tol=0, abs_tol=0) or ramp_steps <= 0:
            return LRRamp(lr_to, lr_to, step, 0)
        return LRRamp(current, lr_to, step, ramp_steps)


def epoch_and_offset(position: int, dataset_size: int) -> tuple[int, int]:
    """Sample position in the infinite stream -> (epoch, offset within the epoch)."""
    if dataset_size < 1:
        raise ValidationError("dataset_size", "an integer >= 1", dataset_size)
    return divmod(position, dataset_size)


def rank_slice(position: int, global_batch: int, world_size: int, rank: int) -> tuple[int, int]:
    """Stream positions ``[start, stop)`` rank ``rank`` reads for the step starting at ``position``.

    The global batch is the contiguous block ``[position, position + b)`` of
    the stream; rank r gets the r-th of k equal parts.  So the samples of a
    step depend only on (position, b), whatever k is.
    """
    if not 0 <= rank < world_size:
        raise ValidationError("rank", f"an integer in [0, {world_size})", rank)
    local = global_batch // world_size
    start = position + rank * local
    return start, start + local
