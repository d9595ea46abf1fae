"""``elastic``: the paper's policy — (k, b) of every job chosen by an exact solver."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping

from elasticopt.errors import SolverError
from elasticopt.models import Problem
from elasticopt.scheduling.hysteresis import DEFAULT_HYSTERESIS, Hysteresis, option_filter, queue_value
from elasticopt.scheduling.policies.base import priority_order, register_policy
from elasticopt.scheduling.actions import Placed
from elasticopt.scheduling.state import Allocation, JobState, Snapshot, to_model_job
from elasticopt.scheduling.typedcompile import TypedCompile
from elasticopt.solvers import Status, solve

__all__ = ["ElasticPolicy", "payback_filter", "solution_nodes"]


def payback_filter(state: JobState, margin: float = 1.0) -> Callable[[int, int], bool] | None:
    """Options of a running job that do not thrash (None for a queued job).

    The autoscaler's rule (:class:`~elasticopt.scheduling.hysteresis.Hysteresis`)
    with payback factor ``margin``, as an option filter, so the solver does not
    plan GPUs that the autoscaler would then veto.
    """
    return option_filter(state, dataclasses.replace(DEFAULT_HYSTERESIS, payback_factor=margin))


def solution_nodes(placement: Mapping[str, Mapping[str, tuple[int, ...]]],
                   gpu_types: Mapping[str, str]) -> dict[str, Placed]:
    """A solution's placement (job -> {"type/node": GPU indices}) as ``job -> (type, ((node, GPUs), ...))``."""
    out = {}
    for jid, by_node in placement.items():
        nodes = tuple(sorted((int(name.rsplit("/", 1)[1]), tuple(ix)) for name, ix in by_node.items()))
        out[jid] = (gpu_types[jid], nodes)
    return out


@register_policy("elastic")
class ElasticPolicy:
    """Build the allocation problem (docs/design.md §2) from the snapshot and solve it.

    Parameters
    ----------
    solver
        Any registered solver backend (``dp`` by default).
    objective
        ``speedup`` (default), ``throughput`` or ``completion``.
    priority
        Tie-break among equal-value choices: ``arrival`` (FIFO, default) or
        ``srpt`` (shortest remaining work first); passed as
        ``Problem(priority=...)``, never left to the backend.
    rescale_penalty
        λ subtracted from every non-current option of a running job
        (objective units: effective GPUs for ``speedup``): a change must
        gain more than λ.  Default 0.3, measured with the hysteresis
        (:data:`~elasticopt.scheduling.hysteresis.DEFAULT_HYSTERESIS`): from
        0.01 to 0.3 cut rescales by a third at equal or better mean JCT.
    payback
        Drop the options of running jobs that the anti-thrashing rule does
        not allow (``hysteresis``).
    hysteresis
        The rule (default
        :data:`~elasticopt.scheduling.hysteresis.DEFAULT_HYSTERESIS`); pass
        the autoscaler's, so the solver does not plan changes it would veto.
    incremental
        Compile the option table with
        :class:`~elasticopt.scheduling.typedcompile.TypedCompile`: the model's
        compiler with its per-model blocks kept across decisions and the
        policy's restriction (anti-thrashing rule, fixed batch) passed as a
        mask; the same table as compiling the problem from scratch, faster at
        every event, on any cluster.  Used only where ``option_filter`` is
        this class's or the fixed-batch one.
    allow_preemption
        Whether running jobs may be sent back to the queue.
    time_limit_s
        Passed to the solver.
    solver_options
        Extra keyword options for :func:`elasticopt.solvers.solve` (e.g.
        ``reduce=False``).
    due_weight
        A queued job at or past its admission deadline (``JobSpec.start_by_s``:
        it is dropped unless it starts now) counts this many times its weight
        in the decision, so that a job about to be lost outweighs the marginal
        GPUs of running jobs (1: no boost).  None: the class's ``DUE_WEIGHT``
        (5 here, with the rate floors; 10 before them, and for
        ``fixed-batch``, ``elastic-goodput`` and ``pollux``).
    start_floor, due_floor
        The anti-thrashing rule's rate floors (``Hysteresis.start_floor`` /
        ``due_floor``, set on ``hysteresis``; None: the class's
        ``START_FLOOR`` / ``DUE_FLOOR``, here 0.75 and 0.5, 0 for the
        subclasses above): a job under admission control starts only at
        >= 0.75x the rate of its submitted (k, b), and a job at its admission
        deadline shrinks running jobs only down to 0.5x theirs.  Without them,
        in the four admission cells of validation/paper_comparison.py at the
        largest submitted batch (64 GPUs, loads 8 and 32, deadlines 0 and
        600 s, three seeds), mean JCT over the jobs both completed was
        0.85-0.99x fixed-batch's; with them (and ``due_weight`` 5)
        1.02-1.24x, with more jobs done in each (0, 0: no floors).
    node_aware
        Offer node-aware profiles packed (fewest nodes) and spread, each at
        its own throughput (``Problem.node_aware``); the allocation then says
        which jobs are packed.

    On a cluster of several GPU types the problem is compiled with the pools,
    the jobs' models per type (``JobSpec.throughputs``) and the running jobs'
    types and nodes; the allocation names every job's type, whether it is
    packed, and the solver's placement (``Allocation.nodes``), which the
    autoscaler uses where keeping running jobs on their GPUs would spread a
    packed job.
    """

    name = "elastic"

    def __init__(
        self,
        solver: str = "dp",
        objective: str = "speedup",
        priority: str = "arrival",
        rescale_penalty: float = 0.3,
        payback: bool = True,
        allow_preemption: bool = False,
        time_limit_s: float | None = None,
        solver_options: dict | None = None,
        hysteresis: Hysteresis | None = None,
        incremental: bool = True,
        node_aware: bool = False,
        due_weight: float | None = None,
        start_floor: float | None = None,
        due_floor: float | None = None,
    ):
        self.solver = solver
        self.objective = objective
        self.priority = priority
        self.rescale_penalty = float(rescale_penalty)
        self.payback = payback
        self.allow_preemption = allow_preemption
        self.time_limit_s = time_limit_s
        self.solver_options = dict(solver_options or {})
        rule = DEFAULT_HYSTERESIS if hysteresis is None else hysteresis
        floors = (self.START_FLOOR if start_floor is None else start_floor,
                  self.DUE_FLOOR if due_floor is None else due_floor)
        self.hysteresis = dataclasses.replace(rule, start_floor=float(floors[0]), due_floor=float(floors[1]))
        self.incremental = incremental
        self.node_aware = bool(node_aware)
        self.due_weight = float(self.DUE_WEIGHT if due_weight is None else due_weight)
        self._queue = 0.0  # the queue's waiting value at the decision being built (hysteresis.queue_value)
        self._typed = TypedCompile()

    #: Whether every job keeps its submitted batch (the fixed-batch baseline).
    fixed_batch = False
    #: The defaults of ``due_weight``, ``start_floor`` and ``due_floor`` (a subclass sets its own).
    DUE_WEIGHT, START_FLOOR, DUE_FLOOR = 5.0, 0.75, 0.5

    def option_filter(self, state: JobState) -> Callable[[int, int], bool] | None:
        """Restriction on a job's options (None = all); subclasses extend it.

        Under ``payback``, the hysteresis with the queue's waiting value of the snapshot being built
        (:func:`~elasticopt.scheduling.hysteresis.queue_value`: a shrink yields to queued work).
        """
        return option_filter(state, self.hysteresis, self._queue) if self.payback else None

    option_filter.standard = True  # type: ignore[attr-defined]

    def _due_boosted(self, snapshot: Snapshot) -> tuple[JobState, ...]:
        """The snapshot's jobs, a queued job at its admission deadline weighted ``due_weight`` times.

        Called after ``self._queue`` is set for the snapshot: a due job makes it +inf, so any other value
        means there is none (one pass over the jobs per decision, not two).
        """
        now = snapshot.time_s
        if self.due_weight == 1.0 or not math.isinf(self._queue):
            return snapshot.jobs
        return tuple(
            dataclasses.replace(st, spec=dataclasses.replace(st.spec, weight=st.spec.weight * self.due_weight))
            if not st.is_running and st.spec.start_by_s is not None and now >= st.spec.start_by_s else st
            for st in snapshot.jobs)

    def penalty_now(self) -> float:
        """λ at the decision being built: ``rescale_penalty`` times the rule's yield factor of the queue.

        :meth:`~elasticopt.scheduling.hysteresis.Hysteresis.yield_factor` of the queue's waiting value
        (1 while nothing waits), so that a running job's hold on its option yields to queued work.
        """
        return self.rescale_penalty * self.hysteresis.yield_factor(self._queue)

    def _standard_filter(self) -> bool:
        return bool(getattr(type(self).option_filter, "standard", False))

    def _uses_cache(self, cluster=None) -> bool:
        """Whether the table is compiled incrementally (``incremental`` and this class's or fixed-batch's filter)."""
        return self.incremental and self._standard_filter()

    @staticmethod
    def _places_itself(cluster) -> bool:
        """One pool without node-aware options: any allocation within the GPU total can be placed
        (docs/design.md §2) and the autoscaler places the jobs itself, keeping running ones on their GPUs."""
        return len(cluster.types) == 1

    def build_table(self, snapshot: Snapshot, nodes: bool = True, reduced: bool = False):
        """The option table of the snapshot's problem, compiled incrementally (see ``incremental``).

        ``nodes=False`` leaves out the cluster's nodes (``OptionTable.pools``) of a one-pool table
        without node-aware options: see :meth:`allocate`.  ``reduced``: the reduced table
        (``compile_reduced``, what ``solve`` builds from :meth:`build_problem`).
        """
        self._queue = queue_value(snapshot.jobs, snapshot.time_s)
        table = self._typed.table(
            self._due_boosted(snapshot),
            snapshot.cluster,
            objective=self.objective,
            hysteresis=self.hysteresis if self.payback else None,
            fixed_batch=self.fixed_batch,
            rescale_penalty=self.penalty_now(),
            queue=self._queue,
            priority=priority_order(snapshot, self.priority),
            allow_preemption=self.allow_preemption,
            node_aware=self.node_aware,
            reduced=reduced,
        )
        if not nodes and not self.node_aware and self._places_itself(snapshot.cluster):
            table = dataclasses.replace(table, pools=None)
        return table

    def build_problem(self, snapshot: Snapshot) -> Problem:
        """The allocation problem of a snapshot."""
        self._queue = queue_value(snapshot.jobs, snapshot.time_s)
        jobs = tuple(to_model_job(st, self.option_filter(st), nodes=self.node_aware)
                     for st in self._due_boosted(snapshot))
        return Problem(
            cluster=snapshot.cluster,
            jobs=jobs,
            objective=self.objective,
            allow_preemption=self.allow_preemption,
            rescale_penalty=self.penalty_now(),
            priority=priority_order(snapshot, self.priority),
            node_aware=self.node_aware,
        )

    def allocate(self, snapshot: Snapshot) -> Allocation:
        """Solve the snapshot's problem; raise SolverError if no allocation comes back.

        On one pool (incremental, no node-aware options) any allocation that fits the
        GPU total can be placed (docs/design.md §2), and the autoscaler places the jobs itself,
        keeping running ones on their GPUs: the table is solved without its nodes, so no
        placement is computed that nobody reads.  Elsewhere the allocation carries each job's
        type, packing and the solver's placement (class docstring); with ``incremental`` the
        table solved there is the reduced one ``TypedCompile`` builds, the table ``solve`` would
        compile and reduce from :meth:`build_problem` (so ``problem_build_s`` includes the
        reductions and the solver's ``compile_s`` is ~0).
        """
        if not snapshot.jobs:
            return Allocation({}, info={"solver": self.solver})
        t0 = time.perf_counter()
        cached = self._uses_cache(snapshot.cluster)
        totals_only = cached and not self.node_aware and self._places_itself(snapshot.cluster)
        options = self.solver_options
        if cached:  # the reduced table solve would compile from the problem (one pool: without its nodes)
            reduce = bool(options.get("reduce", True))
            problem = self.build_table(snapshot, nodes=not totals_only, reduced=reduce)
            options = {**options, "reduce": False}
        else:
            problem = self.build_problem(snapshot)
        build_s = time.perf_counter() - t0
        sol = solve(problem, self.solver, time_limit_s=self.time_limit_s, **options)
        if sol.status not in (Status.OPTIMAL, Status.FEASIBLE) and not (
            sol.status is Status.LIMIT and sol.allocation
        ):
            raise SolverError(
                f"policy {self.name}: solver {self.solver!r} returned {sol.status.name} at "
                f"t={snapshot.time_s:.1f}s ({sol.message}; infeasible jobs: {', '.join(sol.infeasible_jobs) or '-'})"
            )
        where = {} if totals_only else {"gpu_types": dict(sol.gpu_types), "packed": dict(sol.packed),
                                   "nodes": solution_nodes(sol.placement, sol.gpu_types)}
        return Allocation(
            dict(sol.allocation),  # job -> (k, b) as Python ints, or None (Backend.solve builds it)
            **where,
            solver_s=float(sol.build_s + sol.solve_s),
            info={
                "solver": sol.solver,
                "status": sol.status.name,
                "objective_value": sol.objective_value,
                "problem_build_s": build_s,
                "reduce_s": float(sol.stats.get("compile_s", 0.0)),
            },
        )
