"""``SQLiteStore``: the default persistent store, one file, FTS5 plus optional vectors.

Recall follows zeroclaw's SQLite scoring (spec 7.4): an FTS5 keyword stage
with a query built by :func:`~memory_inject.storage.fusion.build_fts_query`
(never the raw prompt), an optional cosine stage over stored embeddings, the
shared :func:`~memory_inject.storage.fusion.fuse`, and a ``LIKE`` fallback when
both find nothing. Writes run in ``BEGIN IMMEDIATE`` transactions under WAL
with ``synchronous=FULL`` by default, so a write that returned survives a
power cut. A locked database is retried once after 300 ms (founder-os), then
reported as :class:`~memory_inject.exceptions.StoreLockedError`.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, Any, TypeVar

from memory_inject.embedders import Embedder
from memory_inject.exceptions import EmbedderError
from memory_inject.models import MemoryEntry, is_time_only, parse_timestamp
from memory_inject.storage import _sqlite_schema as schema
from memory_inject.storage._base import PersistentStore, RecallQuery, check_namespace
from memory_inject.storage._jsonl import format_ts, read_jsonl, write_jsonl
from memory_inject.storage._sqlite_recall import scored_recall
from memory_inject.storage.fusion import Fusion, RecallInfo
from memory_inject.storage.records import MemoryRecord, carry_over

__all__ = ["LOCK_RETRY_DELAY_S", "SQLiteStore"]

T = TypeVar("T")

#: One retry after this pause when the database is locked (founder-os's rule).
LOCK_RETRY_DELAY_S = 0.3

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_LIVE = "deleted_at IS NULL AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > ?)"


def _now() -> datetime:
    return datetime.now(UTC)


class SQLiteStore(PersistentStore):
    """Memories in one SQLite file, scoped to ``namespace``.

    One connection guarded by a lock serves every thread (``arecall`` runs
    ``recall`` in a worker thread). ``create=False`` refuses to create a
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
        fusion: Fusion = Fusion(),  # noqa: B008 - frozen, so one shared default is safe
        busy_timeout_ms: int = 5000,
        name: str = "sqlite",
        create: bool = True,
        synchronous: str = "FULL",
        shared_categories: Sequence[str] = ("core", "daily"),
    ) -> None:
        """Open the database at ``path`` (created unless ``create=False``) and migrate it.

        ``name`` is the store's name on the recall event; ``embedder`` gives each
        record a vector, and ``fusion`` says how keyword and vector hits combine.
        ``busy_timeout_ms`` is how long SQLite waits for a lock before the one retry.
        A session's recall also sees the sessionless rows of ``shared_categories``.
        ``ValueError`` for a bad ``synchronous`` or ``namespace``; the
        :class:`StorageError` subclasses when the file is missing, locked, not a
        database, not ours or newer than this library.
        """
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"'synchronous' must be one of {_SYNCHRONOUS} (got {synchronous!r})")
        self._path = str(path)
        self._namespace = check_namespace(namespace)
        self._embedder = embedder
        self._fusion = fusion
        self._shared = tuple(str(c) for c in shared_categories)
        self._name = name
        self._lock = threading.RLock()
        self._last = RecallInfo()
        self._conn = schema.connect(self._path, create=create, busy_timeout_ms=busy_timeout_ms)
        try:
            self._retry(self._prepare_schema(create, synchronous.upper()), "open")
        except BaseException:
            self._conn.close()
            raise
        # Reads get a connection of their own: under WAL they never wait for a
        # writer, so a write stuck behind another process's lock cannot stall
        # the renders of this store. (":memory:" has one database per
        # connection, so there reads share the writer's.)
        self._rlock = threading.RLock() if self._path != ":memory:" else self._lock
        self._rconn = (
            self._conn
            if self._path == ":memory:"
            else schema.connect(self._path, create=False, busy_timeout_ms=busy_timeout_ms)
        )

    # -- opening --------------------------------------------------------------

    def _prepare_schema(self, create: bool, synchronous: str) -> Callable[[], None]:
        def run() -> None:
            self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
            schema.prepare(self._conn, create=create, label=self._path)

        return run

    # -- plumbing -------------------------------------------------------------

    @property
    def path(self) -> str:
        """The database file (``:memory:`` for a private in-process database)."""
        return self._path

    def _retry(self, op: Callable[[], T], what: str, *, read: bool = False) -> T:
        lock = self._rlock if read else self._lock
        for attempt in (1, 2):
            try:
                with lock:
                    self._check_open(what)
                    return op()
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"{what}: {exc}") from exc
            except sqlite3.Error as exc:
                if attempt == 1 and schema.is_locked(exc):
                    time.sleep(LOCK_RETRY_DELAY_S)
                    continue
                raise schema.wrap_error(exc, f"{self._path}: {what}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(self, op: Callable[[sqlite3.Connection], T], what: str) -> T:
        def run() -> T:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = op(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        return self._retry(run, what)

    def _read(self, op: Callable[[sqlite3.Connection], T], what: str) -> T:
        return self._retry(lambda: op(self._rconn), what, read=True)

    def close(self) -> None:
        """Close the connections; later calls raise :class:`StorageError`."""
        with self._lock:
            super().close()
            conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is not None:
            with self._rlock:
                rconn = self._rconn
                if rconn is not conn:
                    rconn.close()
            conn.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r}, namespace={self._namespace!r})"

    # -- writes ---------------------------------------------------------------

    def _write_draft(
        self, draft: MemoryRecord, fields: Mapping[str, Any], timestamp: datetime | str | None
    ) -> MemoryRecord:
        def op(conn: sqlite3.Connection) -> MemoryRecord:
            old = self._fetch(conn, "key = ?", (draft.key,))
            record = carry_over(draft, old[0], fields, timestamp) if old else draft
            conn.execute(schema.UPSERT, schema.record_to_row(record))
            return record

        return self._write(op, "store")

    def _write_record(self, record: MemoryRecord) -> MemoryRecord:
        self._write(
            lambda conn: conn.execute(schema.UPSERT, schema.record_to_row(record)), "upsert"
        )
        return record

    def forget(self, key: str) -> bool:
        """Soft-delete ``key`` (the row stays for export); True if a live row was forgotten."""
        stamp = format_ts(_now())
        sql = (
            "UPDATE memories SET deleted_at = ? "
            "WHERE namespace = ? AND key = ? AND deleted_at IS NULL"
        )
        cur = self._write(lambda c: c.execute(sql, (stamp, self._namespace, key)), "forget")
        return cur.rowcount > 0

    def _write_superseding(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        def op(conn: sqlite3.Connection) -> MemoryRecord:
            old = self._fetch(conn, "key = ? AND deleted_at IS NULL", (old_key,))
            if not old:
                raise KeyError(old_key)
            links = new.supersedes if old[0].id in new.supersedes else (*new.supersedes, old[0].id)
            record = new.evolve(supersedes=links)
            conn.execute(schema.UPSERT, schema.record_to_row(record))
            conn.execute(
                "UPDATE memories SET superseded_by = ? WHERE namespace = ? AND key = ?",
                (record.id, self._namespace, old_key),
            )
            return record

        return self._write(op, "supersede")

    def _write_usage(self, ids: builtins.list[str]) -> int:
        sql = (
            "UPDATE memories SET times_used = times_used + 1, last_used_at = ? "
            "WHERE namespace = ? AND deleted_at IS NULL "
            "AND id IN (SELECT value FROM json_each(?))"
        )
        params = (format_ts(_now()), self._namespace, json.dumps(ids))
        return int(self._write(lambda c: c.execute(sql, params), "mark_used").rowcount)

    def import_jsonl(
        self,
        src: str | os.PathLike[str] | IO[str],
        *,
        progress: Callable[[int], object] | None = None,
        batch_size: int = 1000,
    ) -> int:
        """Upsert one record per JSON line into this namespace; returns how many.

        Rows are committed ``batch_size`` at a time, so a bad line (reported as
        ``ValueError`` with its line number) leaves the earlier batches in
        place; re-running the fixed file is safe because writes are upserts.
        Each line's ``namespace`` is replaced by this store's, so an export of
        one agent can seed another.
        """
        done = 0
        batch: builtins.list[MemoryRecord] = []
        last_line = 0
        for lineno, record in read_jsonl(src):
            batch.append(record.evolve(namespace=self._namespace))
            last_line = lineno
            if len(batch) >= batch_size:
                done += self._import_batch(batch, last_line)
                batch = []
                if progress is not None:
                    progress(done)
        if batch:
            done += self._import_batch(batch, last_line)
            if progress is not None:
                progress(done)
        return done

    def _import_batch(self, batch: builtins.list[MemoryRecord], last_line: int) -> int:
        try:
            return self._upsert_many(self._embedded(batch), "import")
        except ValueError as exc:
            raise ValueError(f"import batch ending at line {last_line}: {exc}") from exc

    def _upsert_many(self, records: Sequence[MemoryRecord], what: str) -> int:
        rows = [schema.record_to_row(r) for r in records]
        self._write(lambda c: c.executemany(schema.UPSERT, rows), what)
        return len(rows)

    def export_jsonl(self, dst: str | os.PathLike[str] | IO[str]) -> int:
        """Write every row of this namespace, forgotten and superseded ones included."""
        records = self._read(lambda c: self._fetch(c, "1 = 1", ()), "export")
        return write_jsonl(dst, records)

    def embed_missing(self, *, batch_size: int = 256) -> int:
        """Embed the live rows that have no vector yet (written before an embedder was set)."""
        if self._embedder is None:
            return 0
        done = 0
        while True:
            todo = self._read(
                lambda c: self._fetch(
                    c,
                    "embedding IS NULL AND deleted_at IS NULL ORDER BY rid LIMIT ?",
                    (batch_size,),
                ),
                "embed_missing",
            )
            if not todo:
                return done
            done += self._upsert_many(self._embedded(todo), "embed_missing")

    # -- reads ----------------------------------------------------------------

    def _fetch(
        self, conn: sqlite3.Connection, where: str, params: Sequence[Any]
    ) -> builtins.list[MemoryRecord]:
        return schema.fetch(conn, self._namespace, where, params)

    def _get(self, key: str) -> MemoryRecord | None:
        found = self._read(
            lambda c: self._fetch(c, "key = ? AND deleted_at IS NULL", (key,)), "get"
        )
        return found[0] if found else None

    def _list(
        self, category: str | None, session_id: str | None, limit: int | None
    ) -> builtins.list[MemoryRecord]:
        where, params = ["deleted_at IS NULL"], builtins.list[Any]()
        if category is not None:
            where.append("category = ?")
            params.append(str(category))
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        sql = " AND ".join(where) + " ORDER BY timestamp DESC, rid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(0, int(limit)))
        return self._read(lambda c: self._fetch(c, sql, params), "list")

    def count(self) -> int:
        """How many rows of this namespace are not forgotten (superseded and expired ones count)."""
        sql = "SELECT count(*) FROM memories WHERE namespace = ? AND deleted_at IS NULL"
        return int(self._read(lambda c: c.execute(sql, (self._namespace,)).fetchone()[0], "count"))

    # -- recall ---------------------------------------------------------------

    def _search(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        return self._recall(q.query, q.limit, q.session_id, q.since, q.until, self._fusion)

    async def _asearch(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        # A worker thread, so the event loop never waits on the disk.
        return await asyncio.to_thread(self._search, q)

    def _recall(
        self,
        query: str,
        limit: int,
        session_id: str | None,
        since: datetime | str | None,
        until: datetime | str | None,
        fusion: Fusion,
    ) -> builtins.list[MemoryEntry]:
        if limit <= 0:
            self._last = RecallInfo()
            return []
        scope, params = self._scope(session_id, since, until)
        if is_time_only(query):
            sql = f"{scope} ORDER BY updated_at DESC, rid DESC LIMIT ?"
            rows = self._read(lambda c: self._fetch(c, sql, (*params, limit)), "recall")
            self._last = RecallInfo(strategy="recent")
            return [r.to_entry(None) for r in rows]
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
                narrow=session_id is not None or since is not None or until is not None,
            ),
            "recall",
        )
        self._last = info
        return entries

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

    def _scope(
        self, session_id: str | None, since: datetime | str | None, until: datetime | str | None
    ) -> tuple[str, builtins.list[Any]]:
        where, params = [_LIVE], builtins.list[Any]([format_ts(_now())])
        if session_id is not None:
            if self._shared:
                marks = ", ".join("?" * len(self._shared))
                where.append(f"(session_id = ? OR (session_id IS NULL AND category IN ({marks})))")
                params.extend([session_id, *self._shared])
            else:
                where.append("session_id = ?")
                params.append(session_id)
        if since is not None:
            where.append("timestamp >= ?")
            params.append(format_ts(parse_timestamp(since)))
        if until is not None:
            where.append("timestamp <= ?")
            params.append(format_ts(parse_timestamp(until)))
        return " AND ".join(where), params

    # -- multi-source recall (founder-os plans) ---------------------------------

    def recall_where(
        self,
        query: str | None,
        limit: int,
        *,
        session_id: str | None = None,
        mode: str | None = None,
        entity_id: str | None = None,
        source: str | None = None,
    ) -> builtins.list[MemoryEntry]:
        """One query of a recall plan.

        With ``entity_id`` or ``source``: the live rows tagged with that entity
        or written by that source, best confidence first, then newest
        (``score`` None). Otherwise ``recall`` restricted to one modality:
        ``mode="semantic"`` (vectors only) or ``"lexical"`` (BM25 only).
        """
        if entity_id is None and source is None:
            forced = {"semantic": "embedding", "lexical": "bm25"}.get(mode or "")
            if forced is None or (forced == "embedding" and self._embedder is None):
                if forced == "embedding":
                    self._last = RecallInfo(degraded="embedder_failed: no embedder configured")
                    return []
                return self.recall(query or "", limit, session_id=session_id)
            f = self._fusion
            fusion = Fusion(
                mode=f.mode,
                vector_weight=f.vector_weight,
                keyword_weight=f.keyword_weight,
                rrf_k=f.rrf_k,
                search_mode=forced,
            )
            return self._recall(query or "", limit, session_id, None, None, fusion)
        scope, params = self._scope(session_id, None, None)
        if entity_id is not None:
            scope += " AND EXISTS (SELECT 1 FROM json_each(entity_ids) WHERE value = ?)"
            params.append(entity_id)
        if source is not None:
            scope += " AND source = ?"
            params.append(source)
        sql = (
            f"{scope} ORDER BY confidence IS NULL, confidence DESC, updated_at DESC, rid DESC "
            "LIMIT ?"
        )
        rows = self._read(lambda c: self._fetch(c, sql, (*params, limit)), "recall_where")
        return [r.to_entry(None) for r in rows]

    def known_entities(self) -> dict[str, str]:
        """``{display name: entity id}`` for every entity id in use.

        The name is the part after the last ``:`` with ``-``/``_`` read as
        spaces (``company:acme-corp`` -> ``acme corp``), which is what entity
        extraction matches against the turn's input.
        """
        sql = (
            "SELECT DISTINCT j.value FROM memories AS m, json_each(m.entity_ids) AS j "
            "WHERE m.namespace = ? AND m.deleted_at IS NULL"
        )
        rows = self._read(lambda c: c.execute(sql, (self._namespace,)).fetchall(), "entities")
        out: dict[str, str] = {}
        for (eid,) in rows:
            name = str(eid).rsplit(":", 1)[-1].replace("-", " ").replace("_", " ").strip()
            if name:
                out[name] = str(eid)
        return out
