"""A session's request translated from its last one: the jobs it keeps are not looked at again.

A request of a session's changes (:mod:`elasticopt.service.session`) is answered as its whole request; its
translation (:func:`~elasticopt.service.translate.translate`) is the same as the whole request's where only
the upserted jobs are translated (through the job cache, in the whole request's context) and every kept job
is what it was in the session's last translation (``Translation.pieces``).  That holds while the context --
the request fields a job's translation reads (cluster, objective, ``allow_preemption``, ``rescale_penalty``,
the profile registry; not ``priority``, which is taken from the whole request) and the model's
``allow_preemption`` and format, which the running jobs' ``preemptible`` flags and pool-named throughput rows
decide -- is the last one's: the flags and rows are counted (:class:`Marks`) and updated by the jobs that
came, changed and left.  Anywhere else, and for any
error (worded by the whole request's translation), :func:`translate_changes` returns None and the whole
request is translated.  The reference is :func:`translate` of the whole request: a test compares the two
translations over random sessions (``tests/service/test_translate_changes.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from elasticopt.errors import ValidationError
from elasticopt.models import Problem
from elasticopt.profiles.registry import registry_changes
from elasticopt.service.jobcache import JobCache
from elasticopt.service.protocol import ServiceError
from elasticopt.service.session import Merged
from elasticopt.service.translate import VALUES, Translation, translate

__all__ = ["Marks", "marks_of", "translate_changes", "CONTEXT_FIELDS"]

#: The request fields a job's translation reads besides its own: one of them in a request of changes (even
#: with its value unchanged) and the whole request is translated.  (``priority`` is not one: it is read
#: from the whole request here, as ``translate`` reads it, less the jobs left out.)
CONTEXT_FIELDS: tuple[str, ...] = ("cluster", "objective", "allow_preemption", "rescale_penalty")


@dataclass(frozen=True)
class Marks:
    """What of a request's jobs decides its model's ``allow_preemption`` and format (``translate``).

    Attributes
    ----------
    preemptible, fixed
        Running jobs that may / may not be preempted (``preemptible``, default the request's
        ``allow_preemption``).
    pool_rows
        Jobs with a throughput row that is not ``[gpus, batch, samples_per_s]``.
    """

    preemptible: int = 0
    fixed: int = 0
    pool_rows: int = 0

    def moved(self, gone: Iterable[Mapping[str, Any]], came: Iterable[Mapping[str, Any]], allow: bool) -> "Marks":
        """The marks once the jobs ``gone`` left and those of ``came`` came."""
        counts = [self.preemptible, self.fixed, self.pool_rows]
        for sign, jobs in ((-1, gone), (1, came)):
            for jd in jobs:
                if "running" in jd:
                    counts[0 if jd.get("preemptible", allow) else 1] += sign
                if any(len(row) != 3 for row in jd.get("throughput", ())):
                    counts[2] += sign
        return Marks(*counts)


def marks_of(jobs: Iterable[Mapping[str, Any]], allow: bool) -> Marks:
    """The marks of a request's jobs (``allow``: its ``allow_preemption``)."""
    return Marks().moved((), jobs, allow)


def translate_changes(merged: Merged, sent: Mapping[str, Any], screened: bool,
                      cache: JobCache) -> tuple[Translation, Marks] | None:
    """The translation of ``merged.doc`` (a session's request made whole from ``sent``, its changes) from the
    session's last translation, and its marks; None where the whole request must be translated (module
    docstring).  ``screened``: as for :func:`translate`."""
    state = merged.state
    prev: Translation | None = state.translation
    if prev is None or prev.pieces is None or prev.context is None or any(k in sent for k in CONTEXT_FIELDS):
        return None
    whole = merged.doc
    old_jobs, jobs = state.doc.get("jobs", []), whole.get("jobs", [])
    allow = whole.get("allow_preemption", False)
    objective = whole.get("objective", "speedup")
    penalty = whole.get("rescale_penalty", 0.0)
    ups = [i for i, u in enumerate(merged.origin) if u is not None]  # the jobs translated now
    source = merged.source
    marks = state.marks if state.marks is not None else marks_of(old_jobs, allow)
    gone = [old_jobs[i] for i in merged.removed] + [old_jobs[source[i]] for i in ups if source[i] is not None]
    marks = marks.moved(gone, (jobs[i] for i in ups), allow)
    mixed = marks.preemptible > 0 and marks.fixed > 0
    if mixed and penalty:
        return None  # unsupported: worded by translate
    model_allow = not mixed and (marks.preemptible > 0 if marks.preemptible + marks.fixed else bool(allow))
    general = objective == VALUES or len(prev.pools) > 1 or marks.pool_rows > 0
    ctx = cache.context(whole["cluster"], objective, allow, model_allow, general, penalty, registry_changes())
    if ctx is None or ctx != prev.context:
        return None
    pieces = [None if s is None else prev.pieces[s] for s in source]
    if ups:
        sub = {k: v for k, v in whole.items() if k != "jobs" and k != "priority"}
        sub["jobs"] = [jobs[i] for i in ups]
        enc = None if merged.encoded is None else [merged.encoded[i] for i in ups]
        try:
            new = translate(sub, screened, cache, enc, context=(model_allow, general))
        except (ServiceError, ValidationError):
            return None
        if new.pieces is None or new.context != ctx:
            return None
        for i, piece in zip(ups, new.pieces):
            pieces[i] = piece
    jobs_of = [p.job for p in pieces]  # type: ignore[union-attr]
    request_index = [i for i, j in enumerate(jobs_of) if j is not None]
    if len(request_index) == len(jobs_of):
        model_jobs, left_out = tuple(jobs_of), ()  # type: ignore[arg-type]
    else:
        model_jobs = tuple(jobs_of[i] for i in request_index)  # type: ignore[misc]
        left_out = tuple(jd["id"] for jd, j in zip(jobs, jobs_of) if j is None)
    # (in the request's order, as translate writes them: the placer reads the current nodes in that order)
    value_jobs: dict[str, Any] = {}
    if objective == VALUES:  # every job has one: the last ones less those gone, with the new ones where they
        value_jobs = dict(prev.value_jobs)  # stand (a replaced job keeps its place, new ones come last, as in
        for i in merged.removed:  # the request; offset_total sums them in this order)
            del value_jobs[old_jobs[i]["id"]]
        for i in ups:
            value_jobs[jobs[i]["id"]] = pieces[i].value_job  # type: ignore[union-attr]
    current = {jd["id"]: p.current for jd, p in zip(jobs, pieces) if p.current is not None} \
        if prev.current or any(pieces[i].current is not None for i in ups) else {}  # type: ignore[union-attr]
    priority = None
    if "priority" in whole:
        skip = set(left_out)
        priority = tuple(j for j in whole["priority"] if j not in skip)
    t = prev.problem
    # every job passed the model's per-job checks in this context (kept ones in earlier requests), ids are
    # distinct in a session: what is left of Problem's checks is the priority list's (as translate does)
    if priority is None or (len(set(priority)) == len(priority) and set(priority) <= {j.id for j in model_jobs}):
        problem = Problem.assembled(t.cluster, model_jobs, t.objective, t.allow_preemption, t.rescale_penalty,
                                    priority, t.node_aware)
    else:
        return None  # an invalid priority: worded by translate
    out = Translation(problem, prev.pools, current, value_jobs, left_out, tuple(request_index),
                      tuple(pieces), ctx)  # type: ignore[arg-type]
    return out, marks
