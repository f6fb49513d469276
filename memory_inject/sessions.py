"""Session records: what PI's Today's Sessions shows, written one turn at a time.

PI indexes each session of the coding agent (its project, its name or first
message, the tools it called, the ``#decision`` / ``#key`` lines its user
wrote) and shows today's last three under ``## Today's Sessions``. Here a
session is one row of category ``session`` under the key
``session:<session id>``, upserted at each turn: :func:`record_session` (and
its async twin :func:`arecord_session`) merges the turn into the row, so two
turns of one session stay one row, one line. The fields live in the row's
``metadata``:

=============  ==============================================================
``project``    the project the session works on (no bracket when empty)
``name``       the session's first user message, at most 80 characters
``tools``      tool names, de-duplicated in first-use order, at most 10 (of 64 characters)
``decisions``  ``#decision`` / ``#key`` lines, in order, at most 20
``started_at`` the first turn's time (also the row's ``timestamp``)
``ended_at``   the last turn's time
=============  ==============================================================

:func:`session_fields` is the pure part: it takes the row as it is and the
turn, and returns the ``store(...)`` arguments. The adapters call the writer
at each turn when ``memory.sessions.record`` is true (``preset: pi`` sets it);
``docs/adapters.md`` says how.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from memory_inject._text import SUMMARY_WINDOW, scrubbed_summary
from memory_inject.contract import SupportsAsyncWrite, SupportsWrite
from memory_inject.models import parse_timestamp
from memory_inject.profile import resolve_profile
from memory_inject.records import MemoryRecord

__all__ = [
    "MAX_SESSION_DECISIONS",
    "MAX_SESSION_TOOLS",
    "SESSION_CATEGORY",
    "SESSION_KEY_PREFIX",
    "SESSION_NAME_CHARS",
    "arecord_session",
    "decision_lines",
    "project_name",
    "record_session",
    "session_fields",
    "session_key",
]

SESSION_CATEGORY = "session"
#: Every session row's key starts with this (:func:`session_key`).
SESSION_KEY_PREFIX = "session:"
#: PI keeps a session's first 10 tools and first 20 decisions, and shows 80 characters of
#: its first message.
MAX_SESSION_TOOLS = 10
MAX_SESSION_DECISIONS = 20
SESSION_NAME_CHARS = 80
_DECISION_CHARS = 400  # a decision line longer than this is cut (PI keeps the whole line)
_TOOL_CHARS = 64  # a tool name a model chose is cut here (a 10 MB name was kept whole)
_MARKERS = ("#decision", "#key")


def session_key(session_id: str) -> str:
    """The key of a session's row: stable, so every turn of the session updates one row."""
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"'session_id' must be a non-empty string (got {session_id!r})")
    return f"{SESSION_KEY_PREFIX}{session_id}"


def decision_lines(text: str) -> tuple[str, ...]:
    """The lines of ``text`` holding ``#decision`` or ``#key``, stripped (PI's session parser)."""
    return tuple(line.strip() for line in text.splitlines() if any(m in line for m in _MARKERS))


@lru_cache(maxsize=256)
def _project_at(where: str) -> str:
    identity = resolve_profile(where)
    root = identity.git_root if identity.git_root is not None else Path(where)
    return identity.package_name or root.name or identity.project_id


def project_name(cwd: str | os.PathLike[str] | None = None) -> str:
    """The project a session in ``cwd`` works on: its package name, else the repository's
    (or the directory's) name. Read once per directory."""
    return _project_at(os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()))


def _strings(value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        return []
    return [v for v in value if isinstance(v, str) and v]


def _merged(old: Iterable[str], new: Iterable[str], cap: int) -> list[str]:
    out: list[str] = []
    for item in (*old, *new):
        if item and item not in out and len(out) < cap:
            out.append(item)
    return out


def session_fields(
    existing: MemoryRecord | None,
    *,
    session_id: str,
    project: str | None = None,
    name: str = "",
    tools: Iterable[str] = (),
    decisions: Iterable[str] = (),
    now: datetime,
    profile_id: str | None = None,
) -> dict[str, Any]:
    """The ``store(...)`` keyword arguments that record one turn of a session.

    ``existing`` is the session's row (None: the first turn). Its name,
    project and start time are kept; tools and decisions are appended,
    without duplicates, up to :data:`MAX_SESSION_TOOLS` and
    :data:`MAX_SESSION_DECISIONS` (the first ones stay, as in PI). The name
    and decisions are scrubbed of credentials. A row of another profile is a
    ``ValueError``: a session never borrows another profile's record.
    """
    key = session_key(session_id)
    meta: Mapping[str, Any] = {}
    started = now
    if existing is not None:
        if existing.profile_id != profile_id:
            raise ValueError(f"the session row {key!r:.80} belongs to another profile")
        meta = existing.metadata or {}
        started = existing.timestamp
    old_name = meta.get("name")
    # A bounded prefix is scrubbed (a 10 MB first message took 4 s, past any deadline).
    first = " ".join(scrubbed_summary(name, SUMMARY_WINDOW).split())[:SESSION_NAME_CHARS]
    old_project = meta.get("project")
    cleaned = [scrubbed_summary(d.strip(), SUMMARY_WINDOW)[:_DECISION_CHARS] for d in decisions]
    metadata = {
        "project": old_project if isinstance(old_project, str) and old_project else project or "",
        "name": old_name if isinstance(old_name, str) and old_name else first,
        "tools": _merged(
            _strings(meta.get("tools")),
            (t[:_TOOL_CHARS] if isinstance(t, str) else t for t in tools),
            MAX_SESSION_TOOLS,
        ),
        "decisions": _merged(_strings(meta.get("decisions")), cleaned, MAX_SESSION_DECISIONS),
        "started_at": started.isoformat(),
        "ended_at": now.isoformat(),
    }
    fields: dict[str, Any] = {
        "key": key,
        "content": metadata["name"],
        "category": SESSION_CATEGORY,
        "session_id": session_id,
        "timestamp": started,
        "metadata": metadata,
    }
    if profile_id is not None:
        fields["profile_id"] = profile_id
    return fields


def _clock(now: datetime | None) -> datetime:
    return datetime.now(UTC) if now is None else parse_timestamp(now)


def _existing(store: object, key: str) -> MemoryRecord | None:
    get = getattr(store, "get", None)
    found = get(key) if callable(get) else None
    return found if isinstance(found, MemoryRecord) else None


def record_session(
    store: object,
    *,
    session_id: str,
    project: str | None = None,
    name: str = "",
    tools: Iterable[str] = (),
    decisions: Iterable[str] = (),
    now: datetime | None = None,
    profile_id: str | None = None,
) -> str:
    """Upsert one turn of ``session_id`` into its row (:func:`session_fields`); returns the key.

    ``store`` needs ``store(...)`` (:class:`~memory_inject.contract.SupportsWrite`)
    and, to merge with earlier turns, ``get(key)``. Errors propagate: the
    adapters catch and report them, so a failed write never fails a turn.
    """
    if not isinstance(store, SupportsWrite):
        raise TypeError(f"'store' must have a store() method (got {type(store).__name__})")
    key = session_key(session_id)
    # The row is read, merged and written again: turns of one session in this process take
    # turns (12 concurrent turns kept 2 to 5 of their 12 decisions). Another process's turn
    # of the same session at the same moment can still write over this one's merge.
    with _LOCKS[hash((id(store), key)) % len(_LOCKS)]:
        fields = session_fields(
            _existing(store, key),
            session_id=session_id,
            project=project,
            name=name,
            tools=tuple(tools),
            decisions=tuple(decisions),
            now=_clock(now),
            profile_id=profile_id,
        )
        store.store(**fields)
    return str(fields["key"])


#: Striped locks for :func:`record_session`'s read-merge-write (one per key would grow).
_LOCKS = tuple(threading.Lock() for _ in range(64))


def _after_fork_in_child() -> None:
    global _LOCKS  # noqa: PLW0603 - a new set in a child of fork()
    _LOCKS = tuple(threading.Lock() for _ in range(64))  # a parent's thread may hold one


os.register_at_fork(after_in_child=_after_fork_in_child)


async def arecord_session(
    store: object,
    *,
    session_id: str,
    project: str | None = None,
    name: str = "",
    tools: Iterable[str] = (),
    decisions: Iterable[str] = (),
    now: datetime | None = None,
    profile_id: str | None = None,
) -> str:
    """The async twin of :func:`record_session`: an ``astore`` is awaited, else the sync
    writer runs in a worker thread."""
    args: dict[str, Any] = {
        "session_id": session_id,
        "project": project,
        "name": name,
        "tools": tuple(tools),
        "decisions": tuple(decisions),
        "now": _clock(now),
        "profile_id": profile_id,
    }
    if not isinstance(store, SupportsAsyncWrite):
        return await asyncio.to_thread(record_session, store, **args)
    key = session_key(session_id)
    lock = _LOCKS[hash((id(store), key)) % len(_LOCKS)]
    await _acquire(lock)  # the sync writer's lock: turns of one session take turns
    try:
        existing = await asyncio.to_thread(_existing, store, key)
        fields = session_fields(existing, **args)
        await store.astore(**fields)
    finally:
        lock.release()
    return str(fields["key"])


async def _acquire(lock: threading.Lock) -> None:
    """Take ``lock`` without blocking the event loop; a task cancelled while it waits
    releases the lock once its thread has it (a ``threading.Lock`` may be released by
    any thread)."""
    if lock.acquire(blocking=False):
        return
    waiting = asyncio.ensure_future(asyncio.to_thread(lock.acquire))
    try:
        await asyncio.shield(waiting)
    except asyncio.CancelledError:
        waiting.add_done_callback(lambda f: lock.release() if f.result() else None)
        raise
