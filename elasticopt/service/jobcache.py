"""Per-job translations kept between requests: :class:`JobCache`.

A host sends its whole state at every event, and from one request to the next
most jobs are the same JSON object.  Translating a job (its rows or caller
values onto the model's :class:`~elasticopt.models.Job`, the model's checks
included) is the bulk of a request's cost at 1,000 jobs, and depends on the
job's JSON and on a few request-level fields only (the *context*: the cluster,
the objective, the preemption flags, whether rows are format 2, the rescale
penalty, how often profiles were registered in the process).
:class:`JobCache` keeps, by (context, the job's JSON bytes), what
:func:`~elasticopt.service.translate.translate` built for a job that passed
every check: the next request that holds the same bytes in the same context
reuses it, and the same :class:`~elasticopt.models.Job` and
:class:`~elasticopt.models.Cluster` objects let ``verify`` reuse what it
enumerated for them (``solvers/verify.py``).

It is a cache, not state: a request is answered exactly as without it (the
same problem, the same response; ``tests/service/test_service_jobcache.py``
checks it on random request sequences), a miss only costs the translation, and
a request whose jobs it cannot key (a parsed object holding values JSON cannot
hold) is translated as without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from elasticopt.models import Job, Problem

__all__ = ["CachedJob", "JobCache"]


@dataclass(frozen=True)
class CachedJob:
    """What one job of a request translated to.

    Attributes
    ----------
    job
        The model's job; None for a job left out (no option it may use).
    value_job
        Its caller-values mapping (``Translation.value_jobs``), None for a throughput job.
    current
        Its pool and current nodes ``(pool, [(global node, gpus), ...])`` (``Translation.current``), None if
        the request gives none.
    """

    job: Job | None
    value_job: Any = None
    current: tuple[str, list[tuple[int, int]]] | None = None


class JobCache:
    """Translated jobs by (context, job JSON), least recently used dropped first.

    Parameters
    ----------
    max_jobs
        How many translated jobs are kept (5 KiB a job of a paper request, 11 KiB a 16-option caller-values
        job, measured with tracemalloc: 16,384 by default, 80-180 MB at most, enough for a host's whole
        state at 10,000 jobs and its churn).  0 keeps none.

    Thread-safe: requests of different threads may look up and add at once.
    """

    def __init__(self, max_jobs: int = 16384):
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 0:
            raise ValueError(f"max_jobs: expected an integer >= 0, found {max_jobs!r}")
        self.max_jobs = max_jobs
        self._jobs: OrderedDict[tuple[bytes, bytes], CachedJob] = OrderedDict()
        self._templates: OrderedDict[bytes, Problem] = OrderedDict()
        self._valid: OrderedDict[bytes, None] = OrderedDict()  # job JSON that passed the request schema
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._jobs)

    @staticmethod
    def context(*fields: Any) -> bytes | None:
        """The key of a request's context (its request-level fields that a job's translation reads); None if
        they cannot be serialised (then nothing is cached for the request)."""
        try:
            return orjson.dumps(fields)
        except TypeError:
            return None

    def encode(self, jobs: list[Any]) -> list[bytes | None] | None:
        """Each job's JSON bytes (None for one that JSON cannot hold: never cached); None when nothing is kept."""
        if self.max_jobs == 0:
            return None
        dumps = orjson.dumps
        out: list[bytes | None] = []
        for jd in jobs:
            try:
                out.append(dumps(jd))
            except TypeError:
                out.append(None)
        return out

    def known_valid(self, encoded: list[bytes | None]) -> list[bool]:
        """Per job, whether the same JSON passed the request schema before (:meth:`add_valid`)."""
        with self._lock:
            valid = self._valid
            return [b is not None and b in valid for b in encoded]

    def add_valid(self, encoded: list[bytes | None]) -> None:
        """Remember the jobs of a request that passed the request schema."""
        with self._lock:
            valid = self._valid
            for b in encoded:
                if b is not None:
                    valid[b] = None
                    valid.move_to_end(b)
            while len(valid) > self.max_jobs:
                valid.popitem(last=False)

    def get(self, key: tuple[bytes, bytes]) -> CachedJob | None:
        """The job's translation in this context, or None."""
        with self._lock:
            hit = self._jobs.get(key)
            if hit is None:
                self.misses += 1
                return None
            self._jobs.move_to_end(key)
            self.hits += 1
            return hit

    def get_many(self, context: bytes, encoded: list[bytes | None]) -> list[CachedJob | None]:
        """:meth:`get` of every job's ``(context, encoded[i])`` under one hold of the lock (None: not held, or a job
        that cannot be keyed)."""
        with self._lock:
            jobs = self._jobs
            found = [None if e is None else jobs.get((context, e)) for e in encoded]
            move = jobs.move_to_end
            hits = 0
            for e, hit in zip(encoded, found):
                if hit is not None:
                    move((context, e))
                    hits += 1
            self.hits += hits
            self.misses += len(found) - hits
            return found

    def put(self, key: tuple[bytes, bytes], entry: CachedJob) -> None:
        """Keep a job that passed every check of its request."""
        if self.max_jobs == 0:
            return
        with self._lock:
            self._jobs[key] = entry
            self._jobs.move_to_end(key)
            while len(self._jobs) > self.max_jobs:
                self._jobs.popitem(last=False)

    def template(self, context: bytes) -> Problem | None:
        """The problem-level fields (cluster, objective, flags) the model's loader built in this context."""
        with self._lock:
            return self._templates.get(context)

    def put_template(self, context: bytes, problem: Problem) -> None:
        """Keep ``problem``'s problem-level fields for ``context`` (its jobs are not kept)."""
        if self.max_jobs == 0:
            return
        with self._lock:
            self._templates[context] = Problem.assembled(problem.cluster, (), problem.objective,
                                                         problem.allow_preemption, problem.rescale_penalty,
                                                         None, problem.node_aware)
            self._templates.move_to_end(context)
            while len(self._templates) > 64:
                self._templates.popitem(last=False)
