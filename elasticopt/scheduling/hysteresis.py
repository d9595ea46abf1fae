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

**Yielding to queued work.**  A running job's protection (the cool-down of
a shrink, and the policies' rescale penalty λ) shrinks with the queue's
waiting value ``V`` (:func:`queue_value`: per running job, the queued jobs'
weights, each growing by one per restart cost waited): it keeps the fraction
``f = 1 / (1 + queue_yield * V)`` of it (:meth:`Hysteresis.yield_factor`), so a
shrink is allowed once the job has run ``f * min_interval_restarts`` restart
costs, and ``elastic`` / ``fixed-batch`` subtract ``f * λ``.  With nothing
queued, ``f = 1``: the rule as before.  Grows keep the full cool-down, so a job
shrunk for an arrival cannot grow back before it.  Without it, a job that
took the free GPUs of an idle cluster holds them through its cool-down (and
behind λ) while arrivals queue, where the fixed-batch baseline, which cannot
take that many GPUs at its batch, admits them: before this rule the elastic
policy completed 0.89x the jobs of that baseline in one cell of
validation/paper_comparison.py (64 GPUs, load 32, largest submitted batch).

**Rate floors** (``start_floor`` = φ_s, ``due_floor`` = φ_d; 0: none).  A job under
admission control (it is dropped unless it starts by ``JobSpec.start_by_s``)
is admitted only on an option whose rate is at least φ_s times the rate of its
submitted (k, b): admission commits to most of the rate it asked for.  At a
decision where the queue's waiting value is unbounded (a job at its admission
deadline, or one with no restart cost that has waited) the yield stops at φ_d:
a running job may then change only to an option of at least
``min(φ_d * submitted rate, rate now)``
(:meth:`Hysteresis.floor`).  Without them, at the largest submitted batch,
the elastic policy started jobs at a fraction of their rate and shrank running
ones far below it to admit arrivals, and the jobs both policies completed took
longer than under fixed-batch (mean JCT over them 0.85-0.99x fixed-batch's in
the four admission cells of validation/paper_comparison.py at the largest
submitted batch); the elastic policy sets φ_s = 0.75, φ_d = 0.5
(:class:`~elasticopt.scheduling.policies.elastic.ElasticPolicy`), the
fixed-batch baseline neither.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.scheduling.actions import pays_back
from elasticopt.scheduling.state import JobState

__all__ = ["Hysteresis", "DEFAULT_HYSTERESIS", "option_filter", "queue_value"]


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
    queue_yield
        How fast a running job's protection yields to the queue's waiting
        value V (module docstring): it keeps ``1 / (1 + queue_yield * V)`` of
        it; 0 = never (the rule without yielding), +inf = none is left while
        any job is queued.
    start_floor
        φ_s (module docstring): a queued job with an admission deadline starts
        only on an option of at least ``start_floor`` times the rate of its
        submitted (k, b) (0: any).
    due_floor
        φ_d: while the queue's waiting value is unbounded, a running job may
        change only to an option of at least ``min(due_floor * submitted
        rate, rate now)`` (0: any the rest of the rule allows).
    """

    min_gain: float = 0.0
    payback_factor: float = 1.0
    min_interval_restarts: float = 0.0
    queue_yield: float = 3.0
    start_floor: float = 0.0
    due_floor: float = 0.0

    def __post_init__(self) -> None:
        for name in ("min_gain", "payback_factor", "min_interval_restarts", "start_floor", "due_floor"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValidationError(f"hysteresis.{name}", "a finite number >= 0", v)
        v = self.queue_yield
        if not (isinstance(v, (int, float)) and not math.isnan(v) and v >= 0):
            raise ValidationError("hysteresis.queue_yield", "a number >= 0 (inf: yield at once)", v)

    def yield_factor(self, queue: float = 0.0) -> float:
        """``1 / (1 + queue_yield * queue)``: how much of its protection a running job keeps (1: all, 0: none).

        ``queue`` is the queue's waiting value (:func:`queue_value`); 1 when nothing waits.
        """
        if queue <= 0 or self.queue_yield == 0:
            return 1.0
        if math.isinf(self.queue_yield) or math.isinf(queue):
            return 0.0
        return 1.0 / (1.0 + self.queue_yield * queue)

    @property
    def has_floors(self) -> bool:
        """Whether either rate floor is set (0 for both: the rule without floors)."""
        return self.start_floor > 0 or self.due_floor > 0

    def floor(self, state: JobState, queue: float = 0.0, submitted_rate: float | None = None) -> float:
        """The least progress rate of an option the floors allow ``state`` (0: none).

        Queued under admission control (``JobSpec.start_by_s`` set): ``start_floor`` times its submitted
        rate.  Running, while ``queue`` is unbounded: ``min(due_floor * submitted rate, rate now)``.
        Else 0.  ``submitted_rate``: the job's progress
        rate at its submitted (k, b) if the caller has it (None: asked of the job; unknown counts as 0).
        """
        if state.is_running:
            phi = self.due_floor if math.isinf(queue) else 0.0
        else:
            phi = self.start_floor if state.spec.start_by_s is not None else 0.0
        if phi <= 0:
            return 0.0
        if submitted_rate is None:
            spec = state.spec
            submitted_rate = state.progress_per_s(spec.submitted_gpus, spec.batch_submitted, spec.submitted_type)
        if submitted_rate is None or not submitted_rate > 0:
            return 0.0
        low = phi * submitted_rate
        return min(low, state.progress_per_s(state.gpus, state.batch) or 0.0) if state.is_running else low

    def shrink_interval_restarts(self, queue: float = 0.0) -> float:
        """The cool-down of a shrink, in restart costs, while the queue's waiting value is ``queue``."""
        return self.min_interval_restarts * self.yield_factor(queue)

    def allows(self, state: JobState, gpus: int, batch: int, gpu_type: str | None = None,
               queue: float = 0.0) -> bool:
        """Whether the job ``state`` may take (gpus, batch): a running job change to it, a queued one start on it.

        A queued job may take any option at or above its rate floor (:meth:`floor`; any option without one).
        ``gpu_type``: the option's GPU type (None: the type it runs on); a move to another type is a change.
        ``queue``: the queue's waiting value (:func:`queue_value`), which shortens a shrink's cool-down.
        """
        same_type = gpu_type is None or gpu_type == state.gpu_type
        if state.is_running and (gpus, batch) == state.allocation and same_type:
            return True
        low = self.floor(state, queue) if self.has_floors else 0.0
        if low > 0:
            rate = state.progress_per_s(gpus, batch, gpu_type)
            if rate is None or not rate >= low:
                return False
        if not state.is_running:
            return True
        since = state.since_rescale_s
        if gpus < state.gpus:
            return since is None or not since < self.shrink_interval_restarts(queue) * state.restart_cost_s
        if since is not None and since < self.min_interval_restarts * state.restart_cost_s:
            return False
        rate_new = state.progress_per_s(gpus, batch, gpu_type)
        if rate_new is None or rate_new <= 0:
            return False
        rate_now = state.progress_per_s(state.gpus, state.batch) or 0.0
        if rate_now > 0 and rate_new < (1.0 + self.min_gain) * rate_now:
            return False
        return pays_back(state.remaining_samples, rate_now, rate_new, state.restart_cost_s, self.payback_factor)

    def allows_array(self, gpus: np.ndarray, rate: np.ndarray, gpus_now: np.ndarray, remaining: np.ndarray,
                     cost_s: np.ndarray, rate_now: np.ndarray, running: np.ndarray,
                     since_s: np.ndarray, queue: float = 0.0, floor: np.ndarray | None = None) -> np.ndarray:
        """:meth:`allows` for every option of many jobs at once (the same float operations).

        Per job j (arrays ``[n]``): its GPUs now ``gpus_now`` (0: queued), ``remaining`` work,
        restart cost ``cost_s``, progress rate now ``rate_now`` (0 where unknown), ``running``,
        seconds since its last start or rescale ``since_s`` (inf: never); per option (``[n, K]``)
        ``gpus`` and progress ``rate`` (> 0: the job's valid options); ``queue`` the queue's waiting
        value (:func:`queue_value`), which shortens a shrink's cool-down.  A job's current option is the
        caller's to keep (:meth:`allows` always allows it).  ``floor`` (``[n]``, None: none): each job's
        :meth:`floor`; an option below it is not allowed.

        The per-job parts are folded into per-job thresholds, so that each option costs a few
        comparisons: a queued job may take any option (k below +inf); a running job in its cool-down
        none but its current one (k below 0, and no rate reaches +inf), except shrinks past the shrink
        cool-down (:meth:`shrink_interval_restarts`); past it a shrink, or an option
        whose rate reaches ``(1 + min_gain)`` times the current one (any rate where that is unknown) and
        saves more than ``payback_factor`` restart costs on the remaining work.  Valid options have a
        positive rate, so the rule's ``rate > 0`` needs no test of its own: a zero rate fails both.
        """
        has_rate = rate_now > 0
        cool = ~(since_s < self.min_interval_restarts * cost_s)
        cool_shrink = ~(since_s < self.shrink_interval_restarts(queue) * cost_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate_min = np.where(has_rate, (1.0 + self.min_gain) * rate_now, -np.inf)
            t_now = np.where(has_rate, remaining / rate_now, np.inf)  # seconds left at the current rate
            k_below = np.where(running, np.where(cool_shrink, gpus_now, 0.0), np.inf)
            rate_min = np.where(running & ~cool, np.inf, rate_min)
            saved = t_now[:, None] - remaining[:, None] / rate
        ok = (gpus < k_below[:, None]) | ((rate >= rate_min[:, None]) & (saved > (self.payback_factor * cost_s)[:, None]))
        if floor is not None:
            ok &= (rate >= floor[:, None]) | (floor <= 0)[:, None]
        return ok


#: The default rule: a cool-down of 15 restart costs (7.5 min at 30 s), payback at factor 1, no rate margin.
#: Chosen from measurements with the elastic policy's rescale penalty 0.3 (benchmarks/bench_simulator.py,
#: 10,000 jobs, 1024 GPUs, load 1.5): without any rule (and penalty 0.01) 12.64 rescales per job;
#: cool-down 10: 3.44 per job, mean JCT 0.975x; cool-down 15: 2.69 per job, mean JCT 0.976x.  On
#: 600 jobs / 128 GPUs (two seeds) cool-down 15 gave 2.23 / 2.44 per job at +1.5 % / +2.9 % mean JCT;
#: a rate margin (min_gain) of 20-30 % changed little: the grows that happen at all are large.
#: ``queue_yield`` 3 (the yield to queued work), from one run each on the shared 2-core machine
#: (``bench_simulator.py --jobs 2000 --gpus 256 --no-compare --queue-yield Q``; rescales per job, mean JCT):
#: Q = 0 (no yield) 1.93, 0.697 h; Q = 1: 2.00, 0.707 h; Q = 3: 2.22, 0.712 h; and on the seven cells of
#: validation/paper_comparison.py's sensitivity grid where elastic completed fewest jobs against
#: fixed-batch (64 GPUs, loads 8 and 32, restarts 0-300 s, largest or random submitted batch, three seeds),
#: Q = 3 was the one of Q = 1, 3 with elastic at least as good on jobs done and mean JCT in all seven (Q = 1:
#: one short by 5 of 221 jobs).  Without the per-running-job normalisation of V (Q = 1), 3.05 rescales
#: per job and 0.747 h on the 2000-job run.
DEFAULT_HYSTERESIS = Hysteresis(min_gain=0.0, payback_factor=1.0, min_interval_restarts=15.0, queue_yield=3.0)


def option_filter(state: JobState, rule: Hysteresis = DEFAULT_HYSTERESIS,
                  queue: float = 0.0) -> Callable[..., bool] | None:
    """The options of a job that ``rule`` allows, as a filter ``(k, b[, gpu_type])``.

    None where it allows all: a queued job without a start floor (``rule.start_floor`` 0 or its rate unknown).
    ``queue``: the queue's waiting value at the decision (:func:`queue_value`).
    """
    if not state.is_running and not rule.floor(state, queue) > 0:
        return None
    return lambda k, b, gpu_type=None: rule.allows(state, k, b, gpu_type, queue)


def queue_value(jobs: Iterable[JobState], now_s: float) -> float:
    """The queue's waiting value at ``now_s``, per running job.

    Σ over queued jobs of ``weight * (1 + waited / restart cost)``, divided by the number of running
    jobs (at least 1): the pressure on each job that could make room.  A job queued since its arrival
    ``arrival_s`` has waited ``now_s - arrival_s``; a job with no restart cost counts +inf once it has
    waited at all, and so does a job at or past its admission deadline (``JobSpec.start_by_s``: it is
    dropped unless it starts now).  0 when nothing is queued.

    Parameters
    ----------
    jobs
        The active jobs (queued and running).
    now_s
        The decision's time.
    """
    total = 0.0
    running = 0
    for st in jobs:
        if st.is_running:
            running += 1
            continue
        if st.spec.start_by_s is not None and now_s >= st.spec.start_by_s:
            return math.inf
        waited = max(now_s - st.spec.arrival_s, 0.0)
        cost = st.restart_cost_s
        total += st.spec.weight * (1.0 + (waited / cost if cost > 0 else (math.inf if waited > 0 else 0.0)))
    return total / max(running, 1)
