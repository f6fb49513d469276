"""``SQLiteStore``: the default persistent store, one file, FTS5 plus optional vectors.

Recall follows zeroclaw's SQLite scoring (spec 7.4): an FTS5 keyword stage
with a query built by :func:`~memory_inject.storage.fusion.build_fts_query`
(never the raw prompt), an optional cosine stage over stored embeddings, the
shared :func:`~memory_inject.storage.fusion.fuse`, and a ``LIKE`` fallback when
both find nothing. Writes run in ``BEGIN IMMEDIATE`` transactions under WAL
with ``synchronous=FULL`` by default, so a write that returned survives a
power cut. A locked database is retried once after 300 ms (founder-os), then
reported as :class:`~memory_inject.exceptions.StoreLockedError`.

The store is built in layers: the connections, locks and that retry live in
:mod:`.connection` (the read connections in :mod:`.pool`); JSONL import/export
and the embedding back-fill in :mod:`.bulk`; the scored recall in
:mod:`.recall`; the statements of the reads and writes in :mod:`.queries`;
the entity and standing-context reads in :mod:`.context`. This module has the
constructor, reads, writes and recall.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.embedders import Embedder, similarity_calibration
from memory_inject.exceptions import EmbedderError
from memory_inject.models import MemoryEntry, is_time_only
from memory_inject.storage._base import answer_of, check_namespace, forget_scope, refuse_owned
from memory_inject.storage._jsonl import format_ts
from memory_inject.storage.fusion import Fusion, RecallInfo, default_fusion
from memory_inject.storage.records import MemoryRecord, carry_over
from memory_inject.storage.sqlite import context, queries
from memory_inject.storage.sqlite.bulk import SQLiteBulk
from memory_inject.storage.sqlite.changes import log_position
from memory_inject.storage.sqlite.codec import UPSERT, record_to_row
from memory_inject.storage.sqlite.connection import DEFAULT_READERS, LOCK_RETRY_DELAY_S
from memory_inject.storage.sqlite.ddl import scope_tokens
from memory_inject.storage.sqlite.errors import take_damaged, with_damaged
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror
from memory_inject.storage.sqlite.recall import scored_recall
from memory_inject.storage.sqlite.vectors import VectorCache

__all__ = ["LOCK_RETRY_DELAY_S", "SQLiteStore"]

T = TypeVar("T")

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


def _now() -> datetime:
    return datetime.now(UTC)


class SQLiteStore(SQLiteBulk):
    """Memories in one SQLite file, scoped to ``namespace``.

    One object serves any number of threads and tasks at once: reads run side
    by side on a small pool of read connections (``readers``), writes one at a
    time on a connection of their own. ``create=False`` refuses to create a
    missing or empty database, like founder-os's skip guard. ``synchronous``
    may be lowered to ``"NORMAL"`` for speed: under WAL that keeps the file
    consistent but may lose the last writes on power loss.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ".memory/memory.db",
        *,
        namespace: str = "default",
        embedder: Embedder | None = None,
        fusion: Fusion | None = None,
        busy_timeout_ms: int = 5000,
        name: str = "sqlite",
        create: bool = True,
        synchronous: str = "FULL",
        shared_categories: Sequence[str] = ("core", "daily"),
        readers: int | None = None,
    ) -> None:
        """Open the database at ``path`` (created unless ``create=False``) and migrate it.

        ``name`` is the store's name on the recall event; ``embedder`` gives each
        record a vector, and ``fusion`` says how keyword and vector hits combine
        (by default :func:`~memory_inject.storage.fusion.default_fusion` of the embedder).
        ``busy_timeout_ms`` is how long SQLite waits for a lock before the one retry.
        A session's recall also sees the sessionless rows of ``shared_categories``.
        ``readers`` is how many read connections may be open at once (reads run
        side by side on them; writes are serialised on one more); None: one per
        core, at least 2 and at most 8 (:data:`DEFAULT_READERS`).
        ``ValueError`` for a bad ``synchronous``, ``namespace`` or ``readers``; the
        :class:`StorageError` subclasses when the file is missing, locked, not a
        database, not ours or newer than this library.
        """
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"'synchronous' must be one of {_SYNCHRONOUS} (got {synchronous!r})")
        if readers is None:
            readers = DEFAULT_READERS
        if isinstance(readers, bool) or not isinstance(readers, int) or readers < 1:
            raise ValueError(f"'readers' must be an integer >= 1 or None (got {readers!r})")
        self._path = str(path)
        self._namespace = check_namespace(namespace)
        self._embedder = embedder
        self._calibration = similarity_calibration(embedder)
        self._fusion = default_fusion(embedder) if fusion is None else fusion
        self._vectors: VectorCache | None = VectorCache()
        self._mirror: KeywordMirror | None = KeywordMirror()
        self._shared = tuple(str(c) for c in shared_categories)
        self._name = name
        self._writes = 0
        self._open(
            create=create,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=synchronous.upper(),
            readers=readers,
        )

    # -- plumbing -------------------------------------------------------------

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r}, namespace={self._namespace!r})"

    # -- writes ---------------------------------------------------------------

    def _write(self, op: Callable[[sqlite3.Connection], T], what: str) -> T:
        # Every commit of this store moves the vector cache's version (a
        # ":memory:" database reads on the writer's connection, where
        # ``data_version`` does not see its own commits).
        try:
            return super()._write(op, what)
        finally:
            self._writes += 1
            if self._vectors is not None:
                self._vectors.bump()

    def _write_draft(
        self, draft: MemoryRecord, fields: Mapping[str, Any], timestamp: datetime | str | None
    ) -> MemoryRecord:
        def op(conn: sqlite3.Connection) -> MemoryRecord:
            old = self._fetch(conn, "key = ?", (draft.key,))
            # In the write's own transaction: no other writer can slip in between.
            refuse_owned(old[0] if old else None, draft.session_id, draft.key, "store")
            record = carry_over(draft, old[0], fields, timestamp) if old else draft
            conn.execute(UPSERT, record_to_row(record))
            return record

        return self._write(op, "store")

    def _write_record(self, record: MemoryRecord, move: bool = False) -> MemoryRecord:
        def op(conn: sqlite3.Connection) -> None:
            if not move:
                old = self._fetch(conn, "key = ?", (record.key,))
                refuse_owned(old[0] if old else None, record.session_id, record.key, "upsert")
            conn.execute(UPSERT, record_to_row(record))

        self._write(op, "upsert")
        return record

    def forget(
        self,
        key: str,
        *,
        sessions: Iterable[str | None] | None = None,
        shared_sources: Iterable[str] | None = None,
    ) -> bool:
        """Soft-delete ``key`` (the row stays for export); True if a live row was forgotten.

        With ``sessions``, only a row of one of those scopes goes (None among them:
        a shared row, and then only one whose ``source`` is in ``shared_sources``
        when that is given): one statement, so a row written under the key by
        another scope meanwhile is never the one forgotten.
        """
        scope = forget_scope(sessions, shared_sources)
        statement = queries.forget_statement(self._namespace, key, format_ts(_now()), scope)
        if statement is None:
            return False
        sql, params = statement
        cur = self._write(lambda c: c.execute(sql, params), "forget")
        return cur.rowcount > 0

    def _write_superseding(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        def op(conn: sqlite3.Connection) -> MemoryRecord:
            old = self._fetch(conn, "key = ? AND deleted_at IS NULL", (old_key,))
            if not old:
                raise KeyError(old_key)
            refuse_owned(old[0], new.session_id, old_key, "supersede")
            held = self._fetch(conn, "key = ?", (new.key,))
            refuse_owned(held[0] if held else None, new.session_id, new.key, "supersede")
            links = new.supersedes if old[0].id in new.supersedes else (*new.supersedes, old[0].id)
            record = new.evolve(supersedes=links)
            conn.execute(UPSERT, record_to_row(record))
            conn.execute(
                "UPDATE memories SET superseded_by = ? WHERE namespace = ? AND key = ?",
                (record.id, self._namespace, old_key),
            )
            return record

        return self._write(op, "supersede")

    def _write_usage(self, ids: builtins.list[str]) -> int:
        params = (format_ts(_now()), self._namespace, json.dumps(ids))
        cur = self._write(lambda c: c.execute(queries.MARK_USED, params), "mark_used")
        return int(cur.rowcount)

    # -- reads ----------------------------------------------------------------

    def _get(self, key: str) -> MemoryRecord | None:
        found = self._read(
            lambda c: self._fetch(c, "key = ? AND deleted_at IS NULL", (key,)), "get"
        )
        return found[0] if found else None

    def _list(
        self, category: str | None, session_id: str | None, limit: int | None
    ) -> builtins.list[MemoryRecord]:
        sql, params = queries.list_where(category, session_id, limit)
        return self._read(lambda c: self._fetch(c, sql, params), "list")

    def count(self) -> int:
        """How many rows of this namespace are not forgotten (superseded and expired ones count)."""
        ns = (self._namespace,)
        return int(self._read(lambda c: c.execute(queries.COUNT, ns).fetchone()[0], "count"))

    # -- recall ---------------------------------------------------------------

    def answer(self, query: RecallQuery) -> RecallAnswer:
        """See :meth:`PersistentStore.answer`; every read stops at ``query.deadline``."""
        if query.deadline is None:
            return super().answer(query)
        with self.interrupt_at(query.deadline):
            return super().answer(query)

    def _ranked(self, q: RecallQuery) -> RecallAnswer:
        forced = {"semantic": "embedding", "lexical": "bm25"}.get(q.mode or "")
        if forced == "embedding" and self._embedder is None:
            return RecallAnswer(degraded=("embedder_failed: no embedder configured",))
        fusion = self._fusion
        if forced is not None:
            fusion = Fusion(
                mode=fusion.mode,
                vector_weight=fusion.vector_weight,
                keyword_weight=fusion.keyword_weight,
                rrf_k=fusion.rrf_k,
                search_mode=forced,
            )
        return answer_of(*self._recall(q.query, q.limit, q.session_id, q.since, q.until, fusion))

    def _recall(
        self,
        query: str,
        limit: int,
        session_id: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        fusion: Fusion,
    ) -> tuple[builtins.list[MemoryEntry], RecallInfo]:
        if limit <= 0:
            return [], RecallInfo()
        scope, params = self._scope(session_id, since, until)
        take_damaged()  # notes of earlier calls in this thread are not this recall's
        if is_time_only(query):
            sql = f"{scope} ORDER BY updated_at DESC, rid DESC LIMIT ?"
            rows = self._read(lambda c: self._fetch(c, sql, (*params, limit)), "recall")
            return [r.to_entry(None) for r in rows], with_damaged(RecallInfo(strategy="recent"))
        query_vec, degraded = self._query_vector(query, fusion)
        entries, info = self._read(
            lambda c: scored_recall(
                c,
                namespace=self._namespace,
                query=query,
                limit=limit,
                scope=scope,
                params=params,
                query_vec=query_vec,
                fusion=fusion,
                degraded=degraded,
                # A session alone is in the index (ctx_scope): rank inside it, windowed.
                narrow=since is not None or until is not None,
                scope_tokens=None if session_id is None else scope_tokens(session_id, self._shared),
                mirror=self._mirror,
                calibration=self._calibration,
                stats=self._stats_of(c),
                vectors=None
                if self._vectors is None
                else (
                    self._vectors,
                    queries.vector_scope(params[0], session_id, self._shared, since, until),
                ),
            ),
            "recall",
        )
        return entries, with_damaged(info)

    def _query_vector(
        self, query: str, fusion: Fusion
    ) -> tuple[tuple[float, ...] | None, str | None]:
        # Embedded outside the lock: a slow model must not block writers.
        if self._embedder is None or fusion.search_mode == "bm25":
            return None, None
        try:
            return self._embed([query])[0], None
        except EmbedderError as exc:
            return None, f"embedder_failed: {exc}"

    @property
    def interrupts_in_place(self) -> bool:
        """True only for a private ``:memory:`` database without an embedder.

        :meth:`interrupt_at` stops SQLite's statements and lock waits at the
        deadline, but not the wait for a file's WAL-index lock (another process
        in WAL recovery, a backup tool, a stuck file system), which SQLite
        retries for about ten seconds outside its busy and progress handlers;
        nor a model's query embedding. So a file's recalls run on a recall
        thread, which the render leaves at its deadline (:meth:`stall_note`
        then says why).
        """
        return self._embedder is None and self._path == ":memory:"

    def _scope(
        self, session_id: str | None, since: datetime | str | None, until: datetime | str | None
    ) -> tuple[str, builtins.list[Any]]:
        return queries.scope_where(_now(), session_id, self._shared, since, until)

    # -- multi-source recall (founder-os plans) ---------------------------------

    def _tagged(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        scope, params = self._scope(q.session_id, None, None)
        sql, args = queries.tagged_where(scope, params, q.entity_id, q.source, q.statuses, q.limit)
        rows = self._read(lambda c: self._fetch(c, sql, args), "recall_where")
        return [r.to_entry(None) for r in rows]

    def known_entities(self) -> dict[str, str]:
        """``{display name: entity id}`` for every entity id in use.

        The name is the part after the last ``:`` with ``-``/``_`` read as
        spaces (``company:acme-corp`` -> ``acme corp``), which is what entity
        extraction matches against the turn's input.
        """
        return context.known_entities(self._read, self._namespace)

    def entities_mentioned(
        self, mentions: Sequence[str], *, prefix: str = "company:"
    ) -> dict[str, str]:
        """``{mention: entity id}``: each mention of the input resolved by the rows naming it.

        founder-os's company resolution by content, made exact: the live rows
        whose entity ids start with ``prefix`` and whose content names the
        mention as whole words, with its capitals; one id must hold more than
        half of them (:func:`~memory_inject.storage._plan_rows.mentioned_entity`).
        A mention no row names, or an ambiguous one, is left out.
        """
        return context.entities_mentioned(self._read, self._namespace, mentions, prefix)

    # -- standing context (PI's hard rules and L1, every turn) ----------------

    @property
    def data_version(self) -> tuple[tuple[int, int | None], int]:
        """Changes whenever the rows do: the change log's head and this store's commits.

        ``memories_log`` (schema 6) logs every row any connection or process
        inserts, updates or deletes, so its head moves with every write
        wherever it came from; unlike ``PRAGMA data_version`` it is the same
        number on every read connection. The write count covers this store's
        own commits. The head entry's random stamp (schema 7) tells a restored
        copy of the file whose history diverged from the one it replaced.
        """
        return self._read(log_position, "data_version"), self._writes

    def standing_records(
        self,
        profile_id: str | None,
        *,
        limit: int,
        min_confidence: float,
        categories: Mapping[str, datetime | None] | None = None,
    ) -> builtins.list[MemoryEntry]:
        """The profile's active L1 records (insertion order) and most confident L2 hard rules.

        One statement on the ``memories_standing`` partial index; at most
        ``limit`` of each. See
        :class:`~memory_inject.contract.SupportsStandingContext`.
        """
        return context.standing_entries(
            self._read,
            self._namespace,
            _now(),
            profile_id,
            limit=limit,
            min_confidence=min_confidence,
            categories=categories,
        )
