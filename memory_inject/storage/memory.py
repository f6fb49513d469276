"""``InMemoryStore``: a real, thread-safe store in process memory.

For tests, examples and small agents. It keeps the same :class:`MemoryRecord`
as the persistent stores and has the same write API (``store``), so code
written against it runs unchanged on SQLite. Lexical recall ranks by Okapi
BM25 over key, content and tags and scores each hit as the persistent stores
do: the idf-weighted share of the query's content terms it holds
(:func:`~memory_inject.storage.calibration.coverage`), so the renderer's
relevance floor means the same thing on every store. It answers a recall
plan's entity and plugin queries (``recall_where``, ``known_entities``) as
the persistent stores do. It has no vectors, JSONL, usage counters or
namespaces (see ``docs/storage.md`` for the capabilities of each store).

Ranking is in :mod:`._memory_rank`; this module owns the records, their
statistics and the store's API.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from memory_inject._filter_first import ranked_of
from memory_inject.contract import RecallAnswer, RecallExclusion, RecallQuery
from memory_inject.models import MemoryCategory, MemoryEntry, is_time_only, parse_timestamp
from memory_inject.storage._base import forget_scope, refuse_owned
from memory_inject.storage._memory_answer import memory_answer
from memory_inject.storage._memory_rank import (
    holds,
    in_scope,
    is_live,
    query_words,
    ranked,
    spoken,
    substring_hits,
    terms_of,
)
from memory_inject.storage._plan_rows import entity_names, resolve_mentions
from memory_inject.storage._standing_scope import turn_sees
from memory_inject.storage._store_checks import scope_keeps
from memory_inject.storage.records import MemoryRecord, carry_over, standing_pick, store_draft

__all__ = ["InMemoryStore"]

_NAMESPACE = "default"


class InMemoryStore:
    """A dictionary of records keyed by ``key`` (a write to an existing key updates it).

    A session-scoped recall sees that session's records plus sessionless
    records of the ``shared_categories`` (agent-wide facts), never another
    session's; ``shared_categories=()`` makes the filter strict. ``records``
    seeds the store as given.
    """

    #: Nothing here waits: every answer comes by the deadline.
    honours_deadline = True

    def __init__(
        self,
        records: Iterable[MemoryRecord] = (),
        *,
        name: str = "in_memory",
        shared_categories: Iterable[str] = ("core", "daily"),
    ) -> None:
        """``name`` is the store's name on the recall event.

        ``TypeError`` when ``records`` holds anything but :class:`MemoryRecord` values;
        a key given twice keeps the later record.
        """
        self._name = name
        self._shared = frozenset(str(c) for c in shared_categories)
        self._lock = threading.Lock()
        self._records: dict[str, MemoryRecord] = {}
        self._tokens: dict[str, list[str]] = {}
        # Store-wide statistics, kept on every write: token -> records holding it, and
        # the total token count (BM25's average length).
        self._sets: dict[str, frozenset[str]] = {}
        self._df: Counter[str] = Counter()
        self._length = 0
        self._writes = 0
        for r in records:
            if not isinstance(r, MemoryRecord):
                raise TypeError(f"'records' must hold MemoryRecord values (got {type(r).__name__})")
            self._put(r)

    @property
    def name(self) -> str:
        """The store's name (``name=``), reported on the recall event."""
        return self._name

    # -- writes ---------------------------------------------------------------

    def _put(self, record: MemoryRecord) -> None:
        with self._lock:
            self._put_locked(record)

    def _put_locked(self, record: MemoryRecord) -> None:
        tokens = terms_of(" ".join((record.key, record.content, *record.tags)))
        self._writes += 1
        self._drop(record.key)
        self._records[record.key] = record
        self._tokens[record.key] = tokens
        self._sets[record.key] = held = frozenset(tokens)
        self._df.update(held)
        self._length += len(tokens)

    def _drop(self, key: str) -> MemoryRecord | None:
        """Remove ``key`` and its statistics (the lock is held)."""
        tokens = self._tokens.pop(key, None)
        if tokens is not None:
            self._df.subtract(self._sets.pop(key))
            self._length -= len(tokens)
        return self._records.pop(key, None)

    def store(
        self,
        key: str,
        content: str,
        category: str = MemoryCategory.CORE,
        *,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        importance: float | None = None,
        **fields: Any,
    ) -> MemoryRecord:
        """Create or update the memory under ``key``; ``fields`` are other record fields.

        Updating keeps the record's id, creation time, usage counters and
        supersession links unless they are passed, as the persistent stores do.
        """
        record = store_draft(
            key,
            content,
            category,
            namespace=_NAMESPACE,
            session_id=session_id,
            timestamp=timestamp,
            importance=importance,
            fields=fields,
            now=datetime.now(UTC),
        )
        with self._lock:  # the check and the write, together
            old = self._records.get(key)
            refuse_owned(old, record.session_id, key, "store")
            if old is not None:
                record = carry_over(record, old, fields, timestamp)
            self._put_locked(record)
        return record

    def forget(
        self,
        key: str,
        *,
        sessions: Iterable[str | None] | None = None,
        shared_sources: Iterable[str] | None = None,
    ) -> bool:
        """Remove ``key``; True if it existed (``sessions`` and ``shared_sources`` limit
        which row may go, as on ``SQLiteStore.forget``)."""
        scope = forget_scope(sessions, shared_sources)
        with self._lock:
            old = self._records.get(key)
            if old is None or not scope_keeps(old, scope):
                return False
            self._writes += 1
            return self._drop(key) is not None

    def erase(
        self,
        key: str,
        *,
        sessions: Iterable[str | None] | None = None,
        shared_sources: Iterable[str] | None = None,
    ) -> bool:
        """Remove ``key`` for good, live or forgotten, with :meth:`forget`'s scope rules; here
        that is what a forget does (nothing of a forgotten record is kept)."""
        return self.forget(key, sessions=sessions, shared_sources=shared_sources)

    def erase_forgotten(self) -> int:
        """Remove the records given with ``deleted_at`` (seeded); returns how many."""
        with self._lock:
            gone = [k for k, r in self._records.items() if r.deleted_at is not None]
            for k in gone:
                self._drop(k)
            self._writes += len(gone)
            return len(gone)

    # -- reads ----------------------------------------------------------------

    def get(self, key: str) -> MemoryRecord | None:
        """The record under ``key`` (superseded and expired ones too), or None."""
        with self._lock:
            return self._records.get(key)

    def list(
        self,
        *,
        category: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[MemoryRecord]:
        """All records, newest first by creation time, optionally filtered."""
        with self._lock:
            items = builtins.list(self._records.values())
        out = [
            r
            for r in reversed(items)
            if (category is None or r.category == category)
            and (session_id is None or r.session_id == session_id)
        ]
        out.sort(key=lambda r: r.timestamp, reverse=True)
        return out if limit is None else out[: max(0, int(limit))]

    def count(self) -> int:
        """How many records the store holds (superseded and expired ones too)."""
        with self._lock:
            return len(self._records)

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> Sequence[MemoryEntry]:
        """Entries for ``query``, best first, scores in 0..1; time-only queries newest first.
        Superseded and expired records never come back; ``status`` is left to governance."""
        return self.recall_excluding(query, limit, session_id, since, until, None)

    def recall_excluding(
        self,
        query: str,
        limit: int,
        session_id: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        exclude: RecallExclusion | None,
    ) -> Sequence[MemoryEntry]:
        """``recall`` without the records ``exclude`` names (they never take a slot)."""
        RecallQuery(query, limit, session_id=session_id)  # its arguments checked, as on SQL stores
        if limit <= 0:
            return []
        now = datetime.now(UTC)
        lo = None if since is None else parse_timestamp(since)
        hi = None if until is None else parse_timestamp(until)
        time_only = is_time_only(query)
        terms, groups = ([], None) if time_only else query_words(query)
        with self._lock:
            pool = [
                r
                for r in reversed(self._records.values())
                if is_live(r, now)
                and in_scope(r, session_id, lo, hi, self._shared)
                and (exclude is None or not exclude.drops(r))
            ]
            if time_only:
                pool.sort(key=lambda r: r.updated_at or r.timestamp, reverse=True)
                return [r.to_entry(None) for r in pool[:limit]]
            # Statistics over every stored record, so a score does not depend on the scope.
            rows = len(self._records)
            avgdl = self._length / rows if rows else 1.0
            df = [self._df[t] if not star else self._prefix_df(t) for t, star in terms]
            found = [(r, self._sets[r.key], self._tokens[r.key]) for r in pool]
        asked = spoken(query) if 0 in df else frozenset()  # names matter for absent terms only
        hits = ranked(found, terms, df, rows, avgdl, limit, groups, asked)
        return hits or substring_hits([r for r, _, _ in found], query, limit)

    def recall_where(
        self,
        query: str | None,
        limit: int,
        *,
        session_id: str | None = None,
        mode: str | None = None,
        entity_id: str | None = None,
        source: str | None = None,
        statuses: Sequence[str] | None = None,
    ) -> builtins.list[MemoryEntry]:
        """One query of a recall plan, as the persistent stores answer it.

        With ``entity_id`` or ``source``: the live rows in scope tagged with
        that entity or written by that source, best confidence first (none
        last), then newest update (``score`` None). Otherwise ``recall``: the
        store has only the lexical modality, which serves ``mode`` ``lexical``
        and ``semantic`` alike. ``statuses`` keeps only rows with one of those
        statuses, before the limit.
        """
        if limit <= 0:
            return []
        if entity_id is None and source is None:
            return ranked_of(
                lambda n: self.recall(query or "", n, session_id=session_id), limit, statuses
            )
        now = datetime.now(UTC)
        allowed = None if statuses is None else frozenset(statuses)
        with self._lock:
            pool = [
                r
                for r in reversed(self._records.values())
                if is_live(r, now)
                and in_scope(r, session_id, None, None, self._shared)
                and (entity_id is None or entity_id in r.entity_ids)
                and (source is None or r.source == source)
                and (allowed is None or r.status in allowed)
            ]
        pool.sort(key=lambda r: r.updated_at or r.timestamp, reverse=True)
        pool.sort(key=lambda r: (r.confidence is None, -(r.confidence or 0.0)))
        return [r.to_entry(None) for r in pool[:limit]]

    def known_entities(self) -> dict[str, str]:
        """``{display name: entity id}`` for every entity id in use (see ``SQLiteStore``)."""
        with self._lock:
            ids = [e for r in self._records.values() if r.deleted_at is None for e in r.entity_ids]
        return entity_names(sorted(set(ids)))

    def entities_mentioned(
        self, mentions: Sequence[str], *, prefix: str = "company:"
    ) -> dict[str, str]:
        """``{mention: entity id}`` for the mentions whose rows name them (see ``SQLiteStore``)."""
        with self._lock:
            pairs = [
                (e, r.content)
                for r in self._records.values()
                if r.deleted_at is None
                for e in r.entity_ids
            ]
        return resolve_mentions(mentions, lambda _mention: pairs, prefix)

    def _prefix_df(self, prefix: str) -> int:
        """How many records hold a token starting with ``prefix`` (the lock is held)."""
        return sum(1 for held in self._sets.values() if holds(held, prefix, True))

    @property
    def data_version(self) -> int:
        """A number that changes with every write (the standing-context cache's key)."""
        with self._lock:
            return self._writes

    def standing_records(
        self,
        profile_id: str | None,
        *,
        limit: int,
        min_confidence: float,
        categories: Mapping[str, datetime | None] | None = None,
        sessions: Sequence[str] = (),
        shared_only: bool = False,
    ) -> builtins.list[MemoryEntry]:
        """The profile's standing context, of the rows a turn of ``sessions`` (or a
        ``shared_only`` one) may see (:class:`~memory_inject.contract.SupportsStandingContext`)."""
        now = datetime.now(UTC)
        with self._lock:
            live = [
                r
                for r in self._records.values()
                if is_live(r, now)
                and r.status == "active"
                and (r.profile_id is None or r.profile_id == profile_id)
                and turn_sees(r, sessions, shared_only)
            ]
        picked = standing_pick(live, limit, min_confidence, categories)
        return [r.to_entry(None) for r in picked]

    #: ``answer`` honours ``RecallQuery.exclude`` (``SupportsExcludingRecall``).
    recall_excludes = True

    def answer(self, query: RecallQuery) -> RecallAnswer:
        """One :class:`~memory_inject.contract.RecallQuery`: ``recall`` or ``recall_where``.

        Nothing here degrades (no disk, no embedder), so the answer reports nothing.
        """
        return memory_answer(self, query)

    async def aanswer(self, query: RecallQuery) -> RecallAnswer:
        """``answer``, yielding to the loop once (it never touches a disk)."""
        await asyncio.sleep(0)
        return self.answer(query)

    async def arecall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> Sequence[MemoryEntry]:
        """``recall``, yielding to the loop once (it never touches a disk)."""
        await asyncio.sleep(0)
        return self.recall(query, limit, session_id=session_id, since=since, until=until)
