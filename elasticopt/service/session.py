"""Sessions: a host sends its whole state once, then only what changed (docs/integrations.md §1 "Sessions").

A request with ``"session": NAME`` and its ``jobs`` is answered as any request and kept, once answered, as
the session's state at revision 1 (a later whole request with the same name starts it again).  A request
with ``"session": NAME`` and ``"base": R`` sends the changes since revision ``R``: ``upsert`` (whole jobs,
replacing the state's job of the same id where it stands, new ids appended) and ``remove`` (ids that left);
any other request field it holds (``cluster``, ``objective``, ``priority``, ``solver``, ...) replaces the
state's for this request and the later ones; ``id`` is the request's own.  The service answers the whole
request so formed, exactly as if it had been sent whole (a test checks the answers equal, request for
request), and keeps it as revision ``R + 1``.  A request that fails leaves the state as it was.

What a session saves is what a host's whole state costs at every event -- encoding it (host side), sending
and parsing it, looking up every job in the job cache -- not the solve, ``verify`` or placement.  A request
whose ``base`` is not the session's revision (the service restarted, dropped the session as the
``max_sessions`` least recently used were kept, or answered a later request of it) is refused with the code
``session_unknown``: the host sends its whole state again.

:func:`session_update` writes the changes between two whole requests (what a host's client sends).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from elasticopt.service.protocol import ServiceError

__all__ = ["Sessions", "SessionState", "Merged", "session_update", "SESSION_FIELDS"]

#: The request fields of a session: its name, the revision changes build on, and the changes.
SESSION_FIELDS: tuple[str, ...] = ("session", "base", "upsert", "remove")

#: Fields a session does not keep from one request to the next: the request's own id and op.
_OWN_FIELDS = ("id", "op")


@dataclass(frozen=True)
class SessionState:
    """A session's whole request as last answered.

    Attributes
    ----------
    revision
        1 for the whole request that started it, + 1 per answered change.
    doc
        The whole request (``jobs`` included; no session fields, ``id`` or ``op``).
    index
        Job id -> its index in ``doc["jobs"]``.
    encoded
        Each job's JSON as the job cache keys it (:meth:`JobCache.encode`), or None (no cache).
    screened
        Every value of ``doc`` is plain (the model loader's screen; see
        :func:`~elasticopt.service.protocol.parse_request_cached`).
    translation
        What ``doc`` translated to (:class:`~elasticopt.service.translate.Translation`), None if not kept.
    marks
        What of ``doc``'s jobs decides its context (:class:`~elasticopt.service.translate_changes.Marks`), None
        until a request of changes counted them.
    """

    revision: int
    doc: dict[str, Any]
    index: dict[str, int]
    encoded: list[bytes | None] | None
    screened: bool
    translation: Any = None
    marks: Any = None


@dataclass(frozen=True)
class Merged:
    """A session request made whole: the request, how it was screened, each job's JSON and whether it is
    known to pass the schema, for each job of ``doc["jobs"]`` the index in ``upsert`` it came from (None:
    kept from the state) and its index in the state's jobs (None: new), the state it was made from and the
    indices there of the jobs removed."""

    doc: dict[str, Any]
    screened: bool
    encoded: list[bytes | None] | None
    known: list[bool] | None
    origin: list[int | None]
    source: list[int | None]
    state: SessionState
    removed: tuple[int, ...]


class Sessions:
    """The sessions a service holds, the ``max_sessions`` least recently used (thread-safe).

    Requests of one session are answered one at a time (:meth:`hold`); those of different sessions, and
    requests without one, as the service answers any two requests.  A session's lock lives while a request
    holds or waits for it, even where the session itself is dropped meanwhile (else a request that came then
    would take a new lock and run beside the one being answered).
    """

    def __init__(self, max_sessions: int = 64):
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError(f"max_sessions: expected an integer >= 1, found {max_sessions!r}")
        self.max_sessions = max_sessions
        self._states: OrderedDict[str, SessionState] = OrderedDict()
        self._locks: dict[str, list[Any]] = {}  # name -> [its lock, how many requests hold or wait for it]
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """Hold session ``name``'s lock while a request of it is answered (waiting for the one before)."""
        with self._lock:
            entry = self._locks.setdefault(name, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0 and name not in self._states:  # dropped (or never kept): nothing to lock
                    self._locks.pop(name, None)

    def state(self, name: str) -> SessionState | None:
        """The session's state, or None where none is held."""
        with self._lock:
            return self._states.get(name)

    def merge(self, doc: dict[str, Any], screened: bool, upsert_encoded: list[bytes | None] | None) -> Merged:
        """The whole request of a schema-valid request with ``base`` (module docstring); ``upsert_encoded``: its
        upserted jobs' JSON as the job cache keys it, from the fast parse (None: those jobs are not cached).

        Raises
        ------
        ServiceError
            ``session_unknown`` (no such session, or ``base`` is not its revision); ``invalid_request``
            (an id upserted twice, removed twice, both upserted and removed, or removed but not held).
        """
        name, base = doc["session"], doc["base"]
        state = self.state(name)
        if state is None or state.revision != base:
            held = "holds no such session" if state is None else f"holds it at revision {state.revision}"
            raise ServiceError(
                "session_unknown",
                f"base: session {name!r} at revision {base} is not held here (the service {held}: it restarted, "
                f"kept only the {self.max_sessions} sessions used last, or answered a later request of this "
                "one); send the whole state again (its 'jobs', with 'session' and no 'base')",
                "base", f"the session's revision ({'none' if state is None else state.revision})", base)
        upsert, remove = doc.get("upsert", []), doc.get("remove", [])
        new_at: dict[str, int] = {}
        for u, jd in enumerate(upsert):
            first = new_at.setdefault(jd["id"], u)
            if first != u:
                raise ServiceError("invalid_request", f"upsert[{u}].id: expected a unique id (upsert[{first}] has "
                                   "it too)", f"upsert[{u}].id", f"a unique id (upsert[{first}] has it too)", jd["id"])
        gone: dict[str, int] = {}
        for r, jid in enumerate(remove):
            where = f"remove[{r}]"
            if jid in new_at:
                raise ServiceError("invalid_request", f"{where}: {jid!r} is also upserted (upsert[{new_at[jid]}]); "
                                   "send a job in one of the two", where, "an id not upserted by the same request", jid)
            if jid not in state.index:
                raise ServiceError("invalid_request", f"{where}: expected the id of a job of session {name!r}",
                                   where, f"one of the session's {len(state.index)} job ids", jid)
            first = gone.setdefault(jid, r)
            if first != r:
                raise ServiceError("invalid_request", f"{where}: expected each id once (remove[{first}] has it too)",
                                   where, "each id at most once", jid)
        old_jobs = state.doc.get("jobs", [])
        jobs: list[Any] = list(old_jobs)
        encoded = None if state.encoded is None else list(state.encoded)
        origin: list[int | None] = [None] * len(jobs)
        source: list[int | None] = list(range(len(jobs)))
        new_encoded = upsert_encoded if encoded is not None else None
        for u, jd in enumerate(upsert):
            i = state.index.get(jd["id"])
            if i is None:
                i = len(jobs)
                jobs.append(jd)
                origin.append(u)
                source.append(None)
                if encoded is not None:
                    encoded.append(None)
            else:
                jobs[i], origin[i] = jd, u
            if encoded is not None:
                encoded[i] = None if new_encoded is None else new_encoded[u]
        removed = tuple(sorted(state.index[jid] for jid in gone))
        if gone:
            keep = [i for i, jd in enumerate(jobs) if jd["id"] not in gone]
            jobs = [jobs[i] for i in keep]
            origin = [origin[i] for i in keep]
            source = [source[i] for i in keep]
            if encoded is not None:
                encoded = [encoded[i] for i in keep]
        whole = {k: v for k, v in state.doc.items() if k != "jobs"}
        whole.update((k, v) for k, v in doc.items() if k not in SESSION_FIELDS and k not in _OWN_FIELDS)
        if gone and "priority" not in doc and "priority" in whole:  # a job that left leaves the kept order too
            whole["priority"] = [j for j in whole["priority"] if j not in gone]
        whole["jobs"] = jobs
        for key in _OWN_FIELDS:
            if key in doc:
                whole[key] = doc[key]
        # the state's jobs passed the schema when it was kept; the upserted ones in this request's check
        known = None if encoded is None else [True] * len(jobs)
        return Merged(whole, screened and state.screened, encoded, known, origin, source, state, removed)

    def keep(self, name: str, doc: dict[str, Any], encoded: list[bytes | None] | None, screened: bool,
             merged: Merged | None, translation: Any = None, marks: Any = None) -> int:
        """Keep an answered whole request as the session's state (``merged``: what it was made whole from, for
        a request with ``base``; None: sent whole) and what it translated to; returns its revision."""
        kept = {k: v for k, v in doc.items() if k not in SESSION_FIELDS and k not in _OWN_FIELDS}
        jobs = kept.get("jobs", [])
        if merged is not None and not merged.removed and len(jobs) == len(merged.state.index):
            index = merged.state.index  # every job where it stood (ids replaced in place): the same index
        else:
            index = {jd["id"]: i for i, jd in enumerate(jobs)}
        with self._lock:
            old = self._states.get(name)
            revision = old.revision + 1 if merged is not None and old is not None else 1
            self._states[name] = SessionState(revision, kept, index, encoded, screened, translation, marks)
            self._states.move_to_end(name)
            while len(self._states) > self.max_sessions:
                dropped, _ = self._states.popitem(last=False)
                entry = self._locks.get(dropped)
                if entry is not None and entry[1] == 0:  # a held lock goes when its last request is answered
                    del self._locks[dropped]
        return revision


def session_error(exc: ServiceError, merged: Merged, session: str) -> ServiceError:
    """``exc``, raised for the whole request of a session's changes, at the paths of the request that was sent:
    ``jobs[i]`` is ``upsert[u]`` for a job it upserted; a job kept from the state is named by its id."""
    jobs = merged.doc["jobs"]

    def path(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            i = int(m.group(1))
            if i >= len(jobs):
                return m.group(0)
            u = merged.origin[i]
            return f"upsert[{u}]" if u is not None else m.group(0)
        return re.sub(r"\bjobs\[(\d+)\]", one, text)

    message = path(str(exc))
    m = re.match(r"jobs\[(\d+)\]", exc.path)
    if m and int(m.group(1)) < len(jobs) and merged.origin[int(m.group(1))] is None:
        message += f" (job {jobs[int(m.group(1))]['id']!r} of session {session!r}, kept from an earlier request)"
    return ServiceError(exc.code, message, path(exc.path), exc.expected, exc.found)


def session_update(previous: Mapping[str, Any], current: Mapping[str, Any], session: str,
                   base: int) -> dict[str, Any]:
    """The request that turns ``previous``'s whole request into ``current``'s in session ``session`` at revision
    ``base``: the jobs that are new or differ (``upsert``), those that left (``remove``), and every other field
    whose value differs or is new.  A field ``current`` drops, or a job id that is not a string or not unique,
    cannot be sent as a change: ValueError (send ``current`` whole).  What a host's client sends after its first, whole request of a session."""
    old = {jd["id"]: jd for jd in previous.get("jobs", [])}
    ids: set[str] = set()
    for i, jd in enumerate(current.get("jobs", [])):
        jid = jd.get("id") if isinstance(jd, Mapping) else None
        if not isinstance(jid, str) or jid in ids:
            raise ValueError(f"jobs[{i}].id: {jid!r} is not a string or not unique, which changes cannot say; send "
                             "the request whole (the service words its error)")
        ids.add(jid)
    for key in previous:
        if key not in current and key not in SESSION_FIELDS and key not in _OWN_FIELDS and key != "jobs":
            raise ValueError(f"{key}: dropped from the request, which a change cannot say; send the request whole")
    out: dict[str, Any] = {k: v for k, v in current.items()
                           if k != "jobs" and k not in SESSION_FIELDS and (k in _OWN_FIELDS or k == "format"
                                                                           or k not in previous or previous[k] != v)}
    out["session"], out["base"] = session, base
    out["upsert"] = [jd for jd in current.get("jobs", []) if old.get(jd["id"]) != jd]
    out["remove"] = [jid for jid in old if jid not in ids]
    return out
