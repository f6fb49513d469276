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
import weakref
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from memory_inject._store_capabilities import store_identity
from memory_inject._text import SUMMARY_WINDOW, scrubbed_summary
from memory_inject._workers import in_worker
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
    args = _turn_args(session_id, project, name, tools, decisions, now, profile_id)
    # The row is read, merged and written again: turns of one session in this process take
    # turns (12 concurrent turns kept 2 to 5 of their 12 decisions). Another process's turn
    # of the same session at the same moment can still write over this one's merge.
    with _LOCKS[_stripe(store, key)]:
        return _write_turn(store, key, args)


def _turn_args(
    session_id: str,
    project: str | None,
    name: str,
    tools: Iterable[str],
    decisions: Iterable[str],
    now: datetime | None,
    profile_id: str | None,
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "project": project,
        "name": name,
        "tools": tuple(tools),
        "decisions": tuple(decisions),
        "now": _clock(now),
        "profile_id": profile_id,
    }


def _write_turn(store: SupportsWrite, key: str, args: dict[str, Any]) -> str:
    """Read, merge and write the row (the caller holds the key's lock)."""
    fields = session_fields(_existing(store, key), **args)
    store.store(**fields)
    return str(fields["key"])


def _stripe(store: object, key: str) -> int:
    return hash((store_identity(store), key)) % _STRIPES


#: Striped locks for the read-merge-write (one per key would grow): threads take them.
_STRIPES = 64
_LOCKS = tuple(threading.Lock() for _ in range(_STRIPES))
#: Per event loop, an asyncio lock per stripe: the loop's tasks line up there, and only
#: the first of them asks for the stripe's thread lock.
_LOOP_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)
_LOOP_LOCKS_GUARD = threading.Lock()
#: How long a task waits between tries of a stripe's thread lock held by another thread
#: (or loop): at first, and at most.
_POLL_S = (0.0005, 0.02)


def _after_fork_in_child() -> None:
    global _LOCKS, _LOOP_LOCKS_GUARD  # noqa: PLW0603 - a new set in a child of fork()
    _LOCKS = tuple(threading.Lock() for _ in range(_STRIPES))  # a parent's thread may hold one
    _LOOP_LOCKS_GUARD = threading.Lock()
    _LOOP_LOCKS.clear()


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
    writer runs on one of the library's worker threads.

    Turns of one session take turns with those of other tasks, loops and threads. A
    waiting task never holds a thread: it waits on the event loop (an asyncio lock per
    loop, then tries of the thread lock), so the turn holding the lock always has the
    threads it needs (7 waiting turns had blocked asyncio's default executor, which the
    holder's read needed: a deadlock). A task cancelled once it holds the lock leaves the
    read and write to finish; the lock is released when they do.
    """
    args = _turn_args(session_id, project, name, tools, decisions, now, profile_id)
    if not isinstance(store, SupportsAsyncWrite) and not isinstance(store, SupportsWrite):
        raise TypeError(f"'store' must have a store() method (got {type(store).__name__})")
    key = session_key(session_id)
    stripe = _stripe(store, key)
    lock = _LOCKS[stripe]
    async with _loop_lock(stripe):
        delay = _POLL_S[0]
        while not lock.acquire(blocking=False):
            await asyncio.sleep(delay)
            delay = min(delay * 2, _POLL_S[1])
        try:
            held = asyncio.ensure_future(_locked_turn(store, key, args))
        except BaseException:
            lock.release()
            raise
        held.add_done_callback(lambda f: _released(lock, f))
        return await asyncio.shield(held)


async def _locked_turn(store: object, key: str, args: dict[str, Any]) -> str:
    """The read, merge and write of a turn under its lock, all off the event loop."""
    if not isinstance(store, SupportsAsyncWrite):
        return await in_worker(_write_turn, store, key, args)
    existing = await in_worker(_existing, store, key)
    fields = session_fields(existing, **args)
    await store.astore(**fields)
    return str(fields["key"])


def _released(lock: threading.Lock, done: asyncio.Future[str]) -> None:
    lock.release()
    if not done.cancelled():
        done.exception()  # read: a turn cancelled meanwhile cannot, and asyncio would log it


def _loop_lock(stripe: int) -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    with _LOOP_LOCKS_GUARD:
        locks = _LOOP_LOCKS.get(loop)
        if locks is None:
            locks = _LOOP_LOCKS[loop] = {}
        lock = locks.get(stripe)
        if lock is None:
            lock = locks[stripe] = asyncio.Lock()
    return lock
