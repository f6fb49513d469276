"""``InMemoryStore``: a real, thread-safe store in process memory.

For tests, examples and small agents. Lexical recall is Okapi BM25 over key and
content, normalised to 0..1 by the batch maximum exactly as the SQLite store
does, so the renderer's relevance floor means the same thing on both.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from memory_inject.models import MemoryCategory, MemoryEntry, is_time_only, parse_timestamp
from memory_inject.storage._lexical import bm25_scores, normalize_batch, tokenize

__all__ = ["InMemoryStore"]


class InMemoryStore:
    """A dictionary of entries keyed by ``key`` (a write to an existing key replaces it).

    A session-scoped recall sees that session's entries plus sessionless
    entries of the ``shared_categories`` (agent-wide facts), never another
    session's; ``shared_categories=()`` makes the filter strict.
    """

    def __init__(
        self,
        entries: Iterable[MemoryEntry] = (),
        *,
        name: str = "in_memory",
        shared_categories: Iterable[str] = ("core", "daily"),
    ) -> None:
        self._name = name
        self._shared = frozenset(shared_categories)
        self._lock = threading.Lock()
        self._entries: dict[str, MemoryEntry] = {}
        self._tokens: dict[str, list[str]] = {}
        for e in entries:
            self.put(e)

    @property
    def name(self) -> str:
        return self._name

    # -- writes ---------------------------------------------------------------

    def put(self, entry: MemoryEntry) -> MemoryEntry:
        """Store an entry as is (its score is dropped: scores belong to a recall)."""
        if not isinstance(entry, MemoryEntry):
            raise TypeError(f"'entry' must be a MemoryEntry (got {type(entry).__name__})")
        if entry.score is not None:
            entry = attrs.evolve(entry, score=None)
        with self._lock:
            self._entries.pop(entry.key, None)
            self._entries[entry.key] = entry
            self._tokens[entry.key] = tokenize(f"{entry.key} {entry.content}")
        return entry

    def write(
        self,
        key: str,
        content: str,
        category: str = MemoryCategory.CORE,
        *,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        importance: float | None = None,
        **extra: Any,
    ) -> MemoryEntry:
        """Create or replace the entry under ``key``; ``timestamp`` defaults to now."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"'key' must be a non-empty string (got {key!r})")
        ts = datetime.now(UTC) if timestamp is None else parse_timestamp(timestamp)
        entry = MemoryEntry(
            key=key,
            content=content,
            category=category,
            timestamp=ts,
            session_id=session_id,
            importance=importance,
            extra=dict(extra),
        )
        return self.put(entry)

    store = write

    def forget(self, key: str) -> bool:
        """Remove ``key``; True if it existed."""
        with self._lock:
            self._tokens.pop(key, None)
            return self._entries.pop(key, None) is not None

    # -- reads ----------------------------------------------------------------

    def get(self, key: str) -> MemoryEntry | None:
        with self._lock:
            return self._entries.get(key)

    def list(
        self, *, category: str | None = None, session_id: str | None = None
    ) -> list[MemoryEntry]:
        """All entries, newest first, optionally filtered."""
        with self._lock:
            items = list(self._entries.values())
        out = [
            e
            for e in items
            if (category is None or e.category == category)
            and (session_id is None or e.session_id == session_id)
        ]
        out.sort(key=_newest_first)
        return out

    def count(self) -> int:
        with self._lock:
            return len(self._entries)

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Sequence[MemoryEntry]:
        if limit <= 0:
            return []
        with self._lock:
            pool = [
                (e, self._tokens[e.key])
                for e in self._entries.values()
                if _in_scope(e, session_id, since, until, self._shared)
            ]
        if is_time_only(query):
            pool.sort(key=lambda p: _newest_first(p[0]))
            return [e for e, _ in pool[:limit]]
        terms = tokenize(query, drop_stopwords=True)
        raw = bm25_scores(terms, [toks for _, toks in pool])
        hits = [(e, s) for (e, _), s in zip(pool, raw, strict=True) if s > 0.0]
        norm = normalize_batch(s for _, s in hits)
        ranked = sorted(
            ((e, n) for (e, _), n in zip(hits, norm, strict=True)),
            key=lambda p: (-p[1], p[0].id),
        )
        return [e.with_score(s) for e, s in ranked[:limit]]

    async def arecall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Sequence[MemoryEntry]:
        await asyncio.sleep(0)
        return self.recall(query, limit, session_id=session_id, since=since, until=until)


def _newest_first(e: MemoryEntry) -> tuple[float, str]:
    ts = e.timestamp.timestamp() if e.timestamp is not None else float("-inf")
    return (-ts, e.key)


def _in_scope(
    e: MemoryEntry,
    session_id: str | None,
    since: datetime | None,
    until: datetime | None,
    shared: frozenset[str] = frozenset(),
) -> bool:
    if (
        session_id is not None
        and e.session_id != session_id
        and not (e.session_id is None and e.category in shared)
    ):
        return False
    if since is not None and (e.timestamp is None or e.timestamp < parse_timestamp(since)):
        return False
    return not (until is not None and (e.timestamp is None or e.timestamp > parse_timestamp(until)))
