"""The anti-thrashing rule, defined once: which changes of a running job are worth a restart.

A running job's change to (k, b) is *allowed* only after a **cool-down**:
the job has run at least ``min_interval_restarts`` times its restart cost
since its last start or rescale (so restarts take at most about
``1 / min_interval_restarts`` of its time).  Past it, a shrink (it releases
GPUs others need) is allowed, and any other change when both hold:

- **gain**: its rate rises by at least ``min_gain`` (``rate_new >=
  (1 + min_gain) * rate_now``), and
- **payback**: the time it saves on its remaining work exceeds
  ``payback_factor`` times its restart cost
  (:func:`~elasticopt.scheduling.actions.pays_back`).

Rates are the job's believed *progress* rates (:meth:`JobState.progress_per_s`:
samples/s, or effective samples/s under goodput accounting).  Policies drop
disallowed options before solving (:func:`option_filter`), shrinks included,
so the solver plans neither GPUs that would stay unused nor churn; the
autoscaler vetoes any non-shrinking change that breaks it
(:meth:`Hysteresis.allows`) whatever the policy (a shrink it cannot veto: the
target's GPUs may depend on it).  :meth:`Hysteresis.allows_array` is the same
rule for many jobs' options at once (the incremental table's filter); a
property test checks that the two agree (``tests/test_hysteresis_forms.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.scheduling.actions import pays_back
from elasticopt.scheduling.state import JobState

__all__ = ["Hysteresis", "DEFAULT_HYSTERESIS", "option_filter"]


@dataclass(frozen=True)
class Hysteresis:
    """The rule's two knobs.

    Parameters
    ----------
    min_gain
        Fraction by which a non-shrinking rescale must raise the job's rate
        (0.2 = at least 20 % faster).
    payback_factor
        The time saved must exceed this many restart costs.
    min_interval_restarts
        Cool-down: no change before the job has run this many restart costs
        since its last start or rescale (0: none).
    """

    min_gain: float = 0.0
    payback_factor: float = 1.0
    min_interval_restarts: float = 0.0

    def __post_init__(self) -> None:
        for name in ("min_gain", "payback_factor", "min_interval_restarts"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValidationError(f"hysteresis.{name}", "a finite number >= 0", v)

    def allows(self, state: JobState, gpus: int, batch: int, gpu_type: str | None = None) -> bool:
        """Whether the running job ``state`` may change to (gpus, batch) (always True for a queued job).

        ``gpu_type``: the option's GPU type (None: the type it runs on); a move to another type is a change.
        """
        same_type = gpu_type is None or gpu_type == state.gpu_type
        if not state.is_running or ((gpus, batch) == state.allocation and same_type):
            return True
        since = state.since_rescale_s
        if since is not None and since < self.min_interval_restarts * state.restart_cost_s:
            return False
        if gpus < state.gpus:
            return True
        rate_new = state.progress_per_s(gpus, batch, gpu_type)
        if rate_new is None or rate_new <= 0:
            return False
        rate_now = state.progress_per_s(state.gpus, state.batch) or 0.0
        if rate_now > 0 and rate_new < (1.0 + self.min_gain) * rate_now:
            return False
        return pays_back(state.remaining_samples, rate_now, rate_new, state.restart_cost_s, self.payback_factor)

    def allows_array(self, gpus: np.ndarray, rate: np.ndarray, gpus_now: np.ndarray, remaining: np.ndarray,
                     cost_s: np.ndarray, rate_now: np.ndarray, running: np.ndarray,
                     since_s: np.ndarray) -> np.ndarray:
        """:meth:`allows` for every option of many jobs at once (the same float operations).

        Per job j (arrays ``[n]``): its GPUs now ``gpus_now`` (0: queued), ``remaining`` work,
        restart cost ``cost_s``, progress rate now ``rate_now`` (0 where unknown), ``running``,
        seconds since its last start or rescale ``since_s`` (inf: never); per option (``[n, K]``)
        ``gpus`` and progress ``rate`` (> 0: the job's valid options).  A job's current option is the
        caller's to keep (:meth:`allows` always allows it).

        The per-job parts are folded into per-job thresholds, so that each option costs a few
        comparisons: a queued job may take any option (k below +inf); a running job in its cool-down
        none but its current one (k below 0, and no rate reaches +inf); past it a shrink, or an option
        whose rate reaches ``(1 + min_gain)`` times the current one (any rate where that is unknown) and
        saves more than ``payback_factor`` restart costs on the remaining work.  Valid options have a
        positive rate, so the rule's ``rate > 0`` needs no test of its own: a zero rate fails both.
        """
        has_rate = rate_now > 0
        cool = ~(since_s < self.min_interval_restarts * cost_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate_min = np.where(has_rate, (1.0 + self.min_gain) * rate_now, -np.inf)
            t_now = np.where(has_rate, remaining / rate_now, np.inf)  # seconds left at the current rate
            k_below = np.where(running, np.where(cool, gpus_now, 0.0), np.inf)
            rate_min = np.where(running & ~cool, np.inf, rate_min)
            saved = t_now[:, None] - remaining[:, None] / rate
        return (gpus < k_below[:, None]) | ((rate >= rate_min[:, None]) & (saved > (self.payback_factor * cost_s)[:, None]))


#: The default rule: a cool-down of 15 restart costs (7.5 min at 30 s), payback at factor 1, no rate margin.
#: Chosen from measurements with the elastic policy's rescale penalty 0.3 (benchmarks/bench_simulator.py,
#: 10,000 jobs, 1024 GPUs, load 1.5): without any rule (and penalty 0.01) 12.64 rescales per job;
#: cool-down 10: 3.44 per job, mean JCT 0.975x; cool-down 15: 2.69 per job, mean JCT 0.976x.  On
#: 600 jobs / 128 GPUs (two seeds) cool-down 15 gave 2.23 / 2.44 per job at +1.5 % / +2.9 % mean JCT;
#: a rate margin (min_gain) of 20-30 % changed little: the grows that happen at all are large.
DEFAULT_HYSTERESIS = Hysteresis(min_gain=0.0, payback_factor=1.0, min_interval_restarts=15.0)


def option_filter(state: JobState, rule: Hysteresis = DEFAULT_HYSTERESIS) -> Callable[..., bool] | None:
    """The options of a running job that ``rule`` allows, as a filter ``(k, b[, gpu_type])`` (None if queued)."""
    if not state.is_running:
        return None
    return lambda k, b, gpu_type=None: rule.allows(state, k, b, gpu_type)
