"""Small analytic throughput models and jobs, for tests, examples and quick studies."""

from __future__ import annotations

from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.jobspec import JobSpec

__all__ = ["toy_throughput", "toy_job"]


def toy_throughput(
    per_sample_s: float = 0.01,
    overhead_s: float = 0.05,
    sync_s: float = 0.02,
    gpus: tuple[int, ...] = (1, 2, 4, 8),
    local_batches: tuple[int, ...] = (8, 16, 32, 64),
    name: str = "toy",
) -> MeasuredThroughput:
    """Measured points from a data-parallel step-time model.

    Step time on k GPUs at local batch l: ``overhead + per_sample * l +
    sync * log2(2k) * (k > 1)``; samples/s = k * l / step time.  Larger local
    batches are more efficient, more GPUs scale sub-linearly.
    """
    pts = {}
    for k in gpus:
        for lb in local_batches:
            step = overhead_s + per_sample_s * lb + (sync_s * (k.bit_length()) if k > 1 else 0.0)
            pts[(k, k * lb)] = k * lb / step
    return MeasuredThroughput(pts, name=name)


def toy_job(
    job_id: str,
    arrival_s: float = 0.0,
    total_samples: float = 20_000.0,
    submitted_gpus: int = 1,
    submitted_batch: int = 64,
    batch_min: int = 8,
    batch_max: int = 512,
    max_local: int = 64,
    model: MeasuredThroughput | None = None,
    **kw,
) -> JobSpec:
    """A :class:`JobSpec` on :func:`toy_throughput` (or ``model``)."""
    return JobSpec(
        id=job_id,
        throughput=model if model is not None else toy_throughput(),
        batch_min=batch_min,
        batch_max=batch_max,
        max_local=max_local,
        total_samples=total_samples,
        submitted_gpus=submitted_gpus,
        submitted_batch=submitted_batch,
        arrival_s=arrival_s,
        **kw,
    )
