"""``SQLiteEngine``: what ``SQLiteStore`` asks of its file (read, write, search, close).

The store holds one engine (composition, not a layer it inherits): the engine
holds the :class:`~.connection.SQLiteConnection` (the write connection, the
read pool, locks, the one retry, the closed state), the store's caches (the
keyword mirror and the vector matrices) and the statements of the reads and
writes, and builds the :class:`~.recall.RecallRun` of a scored recall. It
satisfies :class:`~memory_inject.storage._base.StoreEngine`; the checks
(ownership, embeddings) are the store's, done before it asks.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from memory_inject._deadline import in_recall_thread
from memory_inject.contract import RecallAnswer, RecallExclusion, RecallQuery
from memory_inject.embedders import embeds_meaning, reads_script, similarity_calibration
from memory_inject.exceptions import EmbedderError
from memory_inject.models import MemoryEntry, is_time_only
from memory_inject.storage._base import StoreEngine, VectorEmbedder, answer_of, refuse_owned
from memory_inject.storage._jsonl import format_ts
from memory_inject.storage._query_vectors import QueryVectors
from memory_inject.storage.fusion import Fusion, RecallInfo, default_fusion
from memory_inject.storage.records import MemoryRecord, carry_over
from memory_inject.storage.sqlite import erase as erasing
from memory_inject.storage.sqlite import neighbours, queries
from memory_inject.storage.sqlite.changes import log_position
from memory_inject.storage.sqlite.codec import UPSERT, fetch, record_to_row
from memory_inject.storage.sqlite.connection import SQLiteConnection
from memory_inject.storage.sqlite.ddl import scope_tokens
from memory_inject.storage.sqlite.errors import take_damaged, with_damaged
from memory_inject.storage.sqlite.keyword_mirror import KeywordMirror
from memory_inject.storage.sqlite.recall import RecallRun, scored_recall
from memory_inject.storage.sqlite.vectors import VectorCache

__all__ = ["SQLiteEngine"]

T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(UTC)


class SQLiteEngine:
    """The reads, writes and recall of the rows of ``namespace``, over ``connections``.

    ``embedder`` embeds the query of a recall (the records' vectors come from
    the store); ``fusion`` says how keyword and vector hits combine (None:
    :func:`~memory_inject.storage.fusion.default_fusion` of the embedder); a
    session's recall also sees the sessionless rows of ``shared``;
    ``vector_index`` is :class:`~.vectors.VectorCache`'s ``index``.
    """

    def __init__(
        self,
        connections: SQLiteConnection,
        *,
        namespace: str,
        embedder: VectorEmbedder | None,
        fusion: Fusion | None,
        shared: tuple[str, ...],
        vector_index: str = "auto",
    ) -> None:
        self.connections = connections
        self.namespace = namespace
        self.embedder = embedder
        self._prompts = None if embedder is None else QueryVectors(embedder)
        self._calibration = similarity_calibration(embedder)
        self._meaning = embeds_meaning(embedder)
        self._fusion = default_fusion(embedder) if fusion is None else fusion
        self._vectors: VectorCache | None = VectorCache(index=vector_index)
        self._mirror: KeywordMirror | None = KeywordMirror()
        self._shared = shared
        self._writes = 0

    # -- writes ---------------------------------------------------------------

    def write(self, op: Callable[[sqlite3.Connection], T], what: str) -> T:
        """``op`` in a write transaction (:meth:`SQLiteConnection.write`).

        Every commit of this store moves the vector cache's version (a
        ``:memory:`` database reads on the writer's connection, where
        ``data_version`` does not see its own commits).
        """
        try:
            return self.connections.write(op, what)
        finally:
            self._writes += 1
            if self._vectors is not None:
                self._vectors.bump()

    def fetch(
        self, conn: sqlite3.Connection, where: str, params: Sequence[Any]
    ) -> builtins.list[MemoryRecord]:
        """The records of this namespace matching ``where`` on ``conn``."""
        return fetch(conn, self.namespace, where, params)

    def write_draft(
        self, draft: MemoryRecord, fields: Mapping[str, Any], timestamp: datetime | str | None
    ) -> MemoryRecord:
        """Upsert ``draft``, carrying over what ``store`` keeps (see ``carry_over``)."""

        def op(conn: sqlite3.Connection) -> MemoryRecord:
            old = self.fetch(conn, "key = ?", (draft.key,))
            # In the write's own transaction: no other writer can slip in between.
            refuse_owned(old[0] if old else None, draft.session_id, draft.key, "store")
            # A forgotten row belongs to no one: a write of its key is a new row (no usage,
            # links or creation time of the one forgotten), as InMemoryStore's is.
            live = old[0] if old and old[0].deleted_at is None else None
            record = carry_over(draft, live, fields, timestamp) if live else draft
            self._upsert(conn, record)
            return record

        return self.write(op, "store")

    def write_record(self, record: MemoryRecord, move: bool) -> MemoryRecord:
        """Write ``record`` as given (``move``: take the key over from another scope)."""

        def op(conn: sqlite3.Connection) -> None:
            if not move:
                old = self.fetch(conn, "key = ?", (record.key,))
                refuse_owned(old[0] if old else None, record.session_id, record.key, "upsert")
            self._upsert(conn, record)

        self.write(op, "upsert")
        return record

    def forget(
        self, key: str, scope: tuple[builtins.list[str], bool, tuple[str, ...] | None] | None
    ) -> bool:
        """Soft-delete ``key`` within ``scope`` (``forget_scope``'s); True if a row went."""
        statement = queries.forget_statement(self.namespace, key, format_ts(_now()), scope)
        if statement is None:
            return False
        sql, params = statement

        def op(conn: sqlite3.Connection) -> int:
            gone = conn.execute(f"{sql} RETURNING {neighbours.ANCHOR}", params).fetchall()
            # The rows that held its text as context get theirs again, in this transaction.
            neighbours.refresh(conn, self.namespace, gone)
            return len(gone)

        return self.write(op, "forget") > 0

    def erase(
        self, key: str, scope: tuple[builtins.list[str], bool, tuple[str, ...] | None] | None
    ) -> bool:
        """Delete ``key``'s row, live or forgotten, within ``scope`` (``forget_scope``'s), and
        every copy of its text the file holds (:mod:`.erase`); True if a row went."""
        where = erasing.scope_where(key, scope)
        return where is not None and erasing.erase_rows(self, *where, "erase") > 0

    def erase_forgotten(self) -> int:
        """Erase every forgotten row of the namespace (:mod:`.erase`); returns how many."""
        return erasing.erase_rows(self, "deleted_at IS NOT NULL", (), "erase_forgotten")

    def vector_cache(self) -> VectorCache | None:
        """The store's vector matrices (None once dropped)."""
        return self._vectors

    def _upsert(self, conn: sqlite3.Connection, record: MemoryRecord) -> None:
        """Write ``record`` on ``conn``; when its key was held (an update, a revive, a move)
        the row and the rows that took context from it get their context again
        (:func:`.neighbours.refresh`), as an insert computes it."""
        before = neighbours.anchors(conn, self.namespace, (record.key,))
        conn.execute(UPSERT, record_to_row(record))
        if before:
            after = neighbours.anchors(conn, self.namespace, (record.key,))
            neighbours.refresh(conn, self.namespace, [*before, *after])

    def write_superseding(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        """Write ``new`` and mark ``old_key`` superseded by it, in one transaction."""

        def op(conn: sqlite3.Connection) -> MemoryRecord:
            old = self.fetch(conn, "key = ? AND deleted_at IS NULL", (old_key,))
            if not old:
                raise KeyError(old_key)
            refuse_owned(old[0], new.session_id, old_key, "supersede")
            held = self.fetch(conn, "key = ?", (new.key,))
            refuse_owned(held[0] if held else None, new.session_id, new.key, "supersede")
            links = new.supersedes if old[0].id in new.supersedes else (*new.supersedes, old[0].id)
            record = new.evolve(supersedes=links)
            self._upsert(conn, record)
            conn.execute(
                "UPDATE memories SET superseded_by = ? WHERE namespace = ? AND key = ?",
                (record.id, self.namespace, old_key),
            )
            return record

        return self.write(op, "supersede")

    def write_usage(self, ids: builtins.list[str]) -> int:
        """Count one use of each id; returns the live rows touched."""
        params = (format_ts(_now()), self.namespace, json.dumps(ids))
        cur = self.write(lambda c: c.execute(queries.MARK_USED, params), "mark_used")
        return int(cur.rowcount)

    # -- reads ----------------------------------------------------------------

    def get(self, key: str) -> MemoryRecord | None:
        """The live record under ``key``, or None."""
        found = self.connections.read(
            lambda c: self.fetch(c, "key = ? AND deleted_at IS NULL", (key,)), "get"
        )
        return found[0] if found else None

    def list(
        self, category: str | None, session_id: str | None, limit: int | None
    ) -> builtins.list[MemoryRecord]:
        """Live records, newest first by creation time, optionally filtered."""
        sql, params = queries.list_where(category, session_id, limit)
        return self.connections.read(lambda c: self.fetch(c, sql, params), "list")

    def count(self) -> int:
        """How many rows of this namespace are not forgotten."""
        ns = (self.namespace,)
        read = self.connections.read
        return int(read(lambda c: c.execute(queries.COUNT, ns).fetchone()[0], "count"))

    @property
    def data_version(self) -> tuple[tuple[int, int | None], int]:
        """The change log's head and this store's commits (``SQLiteStore.data_version``)."""
        return self.connections.read(log_position, "data_version"), self._writes

    # -- recall ---------------------------------------------------------------

    def ranked(self, q: RecallQuery) -> RecallAnswer:
        """A ranked recall, of one modality when ``q.mode`` says so.

        ``"semantic"`` is the vector stage alone with a sentence model, the keyword
        stage without an embedder, and this store's own recall with an embedder of
        spellings (``embedders.embeds_meaning``), whose vectors alone score 0 a row
        holding the prompt's words.
        """
        forced = {"semantic": "embedding", "lexical": "bm25"}.get(q.mode or "")
        if forced == "embedding" and self.embedder is None:
            forced = "bm25"  # a store without an embedder is keyword-only, semantic asks too
        elif forced == "embedding" and not self._meaning:
            forced = None  # hashed spellings are no meaning: the store's own recall
        fusion = self._fusion
        if forced is not None:
            fusion = Fusion(
                mode=fusion.mode,
                vector_weight=fusion.vector_weight,
                keyword_weight=fusion.keyword_weight,
                rrf_k=fusion.rrf_k,
                search_mode=forced,
            )
        return answer_of(
            *self._recall(
                q.query, q.limit, q.session_id, q.since, q.until, fusion, q.deadline, q.exclude
            )
        )

    async def aranked(self, q: RecallQuery) -> RecallAnswer:
        """The async twin of :meth:`ranked`, on a recall thread (never the host's executor)."""
        return await in_recall_thread(self.connections, partial(self.ranked, q), q.deadline)

    def _recall(
        self,
        query: str,
        limit: int,
        session_id: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        fusion: Fusion,
        deadline: float | None = None,
        exclude: RecallExclusion | None = None,
    ) -> tuple[builtins.list[MemoryEntry], RecallInfo]:
        if limit <= 0:
            return [], RecallInfo()
        scope, params = self._scope(session_id, since, until, exclude)
        take_damaged()  # notes of earlier calls in this thread are not this recall's
        read = self.connections.read
        if is_time_only(query):
            sql = f"{scope} ORDER BY updated_at DESC, rid DESC LIMIT ?"
            rows = read(lambda c: self.fetch(c, sql, (*params, limit)), "recall")
            return [r.to_entry(None) for r in rows], with_damaged(RecallInfo(strategy="recent"))
        query_vec, degraded = self._query_vector(query, fusion, deadline)

        def run(conn: sqlite3.Connection) -> tuple[builtins.list[MemoryEntry], RecallInfo]:
            return scored_recall(
                conn,
                RecallRun(
                    namespace=self.namespace,
                    query=query,
                    limit=limit,
                    scope=scope,
                    params=params,
                    query_vec=query_vec,
                    fusion=fusion,
                    degraded=degraded,
                    # A session alone is in the index (ctx_scope): rank inside it, windowed.
                    # An exclusion (a refill's) leaves out the rows that ranked first: the
                    # join comes first, in one statement, not the mirror's growing batches.
                    narrow=since is not None or until is not None or exclude is not None,
                    calibration=self._calibration,
                    stats=self.connections.stats_of(conn),
                    # The cached matrix knows no exclusion: an excluding query scans the scope.
                    vectors=None
                    if self._vectors is None or query_vec is None or exclude is not None
                    else (
                        self._vectors,
                        queries.vector_scope(params[0], session_id, self._shared, since, until),
                    ),
                    scope_tokens=None
                    if session_id is None
                    else scope_tokens(session_id, self._shared),
                    mirror=self._mirror if exclude is None else None,
                ),
            )

        entries, info = read(run, "recall")
        return entries, with_damaged(info)

    def _query_vector(
        self, query: str, fusion: Fusion, deadline: float | None = None
    ) -> tuple[tuple[float, ...] | None, str | None]:
        # Embedded outside the connection: a slow model must not block writers.
        if self.embedder is None or fusion.search_mode == "bm25":
            return None, None
        if not reads_script(self.embedder, query):
            return None, None  # its vector would say nothing: keywords alone
        try:
            assert self._prompts is not None  # noqa: S101 - made with the embedder
            return self._prompts.vector(query, deadline), None
        except EmbedderError as exc:
            return None, f"embedder_failed: {exc}"

    def _scope(
        self,
        session_id: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        exclude: RecallExclusion | None = None,
    ) -> tuple[str, builtins.list[Any]]:
        ex = None if exclude is None else (self.namespace, exclude)
        return queries.scope_where(_now(), session_id, self._shared, since, until, ex)

    def tagged(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        """A plan's entity or source query: rows by tag (``score`` None)."""
        scope, params = self._scope(q.session_id, None, None, q.exclude)
        sql, args = queries.tagged_where(scope, params, q.entity_id, q.source, q.statuses, q.limit)
        rows = self.connections.read(lambda c: self.fetch(c, sql, args), "recall_where")
        return [r.to_entry(None) for r in rows]

    def close(self) -> None:
        """Close the connections; later calls raise ``StorageError``."""
        self.connections.close()


#: mypy proves the engine is a :class:`StoreEngine`.
_: type[StoreEngine] = SQLiteEngine
