"""``PostgresStore``: memories in PostgreSQL.

Lexical recall ranks with ``ts_rank_cd`` over a generated, weighted tsvector
(key A, content B, tags C) and an OR of the prompt's sanitised tokens, then
normalises by the batch maximum as the SQLite store does, so the renderer's
relevance floor means the same thing on both. With pgvector and an embedder,
an HNSW cosine search runs too and the two lists are fused
(:func:`memory_inject.storage.fusion.fuse`). Without pgvector the store is
lexical only and still keeps every embedding exactly (rounded to float32 on
write, as on SQLite: see ``_base``).

Sync and async share one private core: each operation is a generator that
yields statements and receives their results; :meth:`PostgresStore._run` drives
it on a ``ConnectionPool`` connection and :meth:`PostgresStore._arun` on an
``AsyncConnectionPool`` one. Every driver error leaves as a
:class:`~memory_inject.exceptions.StorageError` (``from`` the original).
"""

from __future__ import annotations

import asyncio
import builtins
import math
import os
import threading
import time
from collections.abc import (
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from types import TracebackType
from typing import IO, Any, Self, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from memory_inject.exceptions import (
    EmbedderError,
    StorageError,
)
from memory_inject.models import MemoryEntry, is_time_only, parse_timestamp
from memory_inject.storage import _pg_recall as rq
from memory_inject.storage._base import PersistentStore, RecallQuery, check_namespace
from memory_inject.storage._base import VectorEmbedder as _Embedder
from memory_inject.storage._jsonl import read_jsonl, write_jsonl
from memory_inject.storage._pg_conn import close_async_pool, translate_errors
from memory_inject.storage._pg_recall import Stmt
from memory_inject.storage._pg_schema import (
    TableNames,
    ensure_vectors,
    migrate,
    record_params,
    row_to_record,
)
from memory_inject.storage.fusion import Fusion, RecallInfo
from memory_inject.storage.records import CARRIED_ON_STORE, MemoryRecord

__all__ = ["PostgresStore"]

T = TypeVar("T")
Steps = Generator[Stmt, Any, T]

_BATCH = 1000
#: How long the keyword stage trusts its copy of the table's word statistics.
_TERMS_TTL_S = 60.0


class PostgresStore(PersistentStore):
    """A memory store in one PostgreSQL table, shared by any number of namespaces.

    ``vectors``: ``None`` uses pgvector when the server has it and an embedder
    is given; ``False`` stays lexical only; ``True`` fails when pgvector is
    missing. ``timeout`` bounds how long a call waits for a connection or a
    lock (a recall during an outage fails in that time instead of hanging the
    turn).
    A recall for a session also sees the sessionless rows of
    ``shared_categories`` (durable facts); ``()`` makes the filter strict.
    ``rank_budget`` caps the keyword stage's work: by the planner's statistics,
    the query's commonest words stop selecting candidates once its rarer words
    reach about 3% of the table, and never more than ``rank_budget`` rows
    (they still count in the rank); ``None`` ranks every match.

    ``arecall`` opens an ``AsyncConnectionPool`` on the running loop at first
    use. Like any psycopg async pool it must be closed on that loop: ``await
    store.aclose()`` (or ``async with store``) before the loop ends, because
    psycopg_pool can swallow the shutdown cancellation of a connection attempt
    still in flight and ``asyncio.run`` then waits forever.
    """

    #: The smallest import that rebuilds the HNSW index instead of inserting into it.
    _hnsw_rebuild_at = 20_000

    def __init__(
        self,
        dsn: str,
        *,
        namespace: str = "default",
        embedder: _Embedder | None = None,
        fusion: Fusion | None = None,
        min_size: int = 1,
        max_size: int = 8,
        name: str = "postgres",
        table: str = "memories",
        vectors: bool | None = None,
        timeout: float = 5.0,
        shared_categories: Sequence[str] = ("core", "daily"),
        rank_budget: int | None = 2000,
    ) -> None:
        """Connect to ``dsn``, create or migrate ``table``, and open a pool of connections.

        The pool holds ``min_size`` to ``max_size`` connections. ``namespace`` is
        this agent's share of the table and ``name`` the store's
        name on the recall event; ``embedder`` gives each record a vector, and
        ``fusion`` says how keyword and vector hits combine (default :class:`Fusion`).
        ``ValueError`` for a bad ``namespace`` or ``table``; a :class:`StorageError`
        when the server cannot be reached, the table is not ours or is newer, or
        ``vectors=True`` finds no pgvector; :class:`PgvectorUnusableError` when
        pgvector is there but broken.
        """
        self._names = TableNames(table)
        self._namespace = check_namespace(namespace)
        self._name = name
        self._embedder = embedder
        self._fusion = fusion if fusion is not None else Fusion()
        self._dsn = dsn
        self._timeout = timeout
        self._min_size, self._max_size = min_size, max_size
        self._connect_kwargs: dict[str, Any] = {}
        if "connect_timeout" not in conninfo_to_dict(dsn):
            self._connect_kwargs["connect_timeout"] = max(2, math.ceil(timeout))
        self._closed = False
        self._apool: AsyncConnectionPool[Any] | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._alock = threading.Lock()
        self._last = RecallInfo()
        self._rank_budget = rank_budget
        self._terms: tuple[float, rq.TermStats] | None = None

        with translate_errors("open"), psycopg.connect(dsn, **self._connect_kwargs) as conn:
            migrate(conn, self._names)
            self._vectors = (
                embedder is not None
                and vectors is not False
                and ensure_vectors(conn, self._names, int(embedder.dim))
            )
        if vectors and embedder is not None and not self._vectors:
            raise StorageError("'vectors=True' but the server has no pgvector extension")
        # Session settings travel in the startup packet, not in a configure
        # callback: a pool then never runs a query of its own in the background.
        # lock_timeout plays SQLite's busy_timeout: a locked row or table fails
        # the call (StoreLockedError) instead of hanging the turn.
        options = [
            str(conninfo_to_dict(dsn).get("options") or ""),
            "-c TimeZone=UTC",
            f"-c lock_timeout={max(1, round(timeout * 1000))}",
        ]
        if self._vectors:
            options.append("-c hnsw.iterative_scan=relaxed_order")
        self._connect_kwargs["options"] = " ".join(o for o in options if o)
        self._q = rq.Queries(self._names, namespace, tuple(str(c) for c in shared_categories))
        self._pool: ConnectionPool[Any] = ConnectionPool(
            dsn,
            kwargs=self._connect_kwargs,
            min_size=min_size,
            max_size=max_size,
            open=True,
            check=ConnectionPool.check_connection,
            timeout=timeout,
            name=f"memory_inject.{table}",
        )

    # -- lifecycle --------------------------------------------------------------

    @property
    def vectors_enabled(self) -> bool:
        """True when recall runs the pgvector stage."""
        return self._vectors

    def __repr__(self) -> str:
        return f"PostgresStore(table={self._names.table!r}, namespace={self._namespace!r})"

    def close(self) -> None:
        """Close both pools. After an ``arecall``, prefer ``await aclose()``."""
        super().close()
        self._pool.close()
        with self._alock:
            apool, loop, self._apool, self._aloop = self._apool, self._aloop, None, None
        if apool is not None and loop is not None:
            close_async_pool(apool, loop)

    async def aclose(self) -> None:
        """Close both pools, awaiting the async pool's close on the loop ``arecall`` opened it on.

        Awaited on another loop, it closes that pool as :meth:`close` does.
        """
        with self._alock:
            apool, loop, self._apool, self._aloop = self._apool, self._aloop, None, None
        if apool is not None:
            if loop is asyncio.get_running_loop():
                await apool.close()
            elif loop is not None:
                close_async_pool(apool, loop)
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- writes -----------------------------------------------------------------

    def _write_draft(
        self, draft: MemoryRecord, fields: Mapping[str, Any], timestamp: datetime | str | None
    ) -> MemoryRecord:
        keep = [c for c in CARRIED_ON_STORE if c not in fields]
        if timestamp is None:
            keep.append("timestamp")
        return self._run("store", self._upsert_steps(draft, keep))

    def _write_record(self, record: MemoryRecord) -> MemoryRecord:
        return self._run("upsert", self._upsert_steps(record, ()))

    def forget(self, key: str) -> bool:
        """Soft-delete ``key``; True if a live row was forgotten."""
        return self._run("forget", _rowcount(self._q.forget(key))) > 0

    def _write_superseding(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        return self._run("supersede", self._supersede_steps(old_key, new))

    def _write_usage(self, ids: builtins.list[str]) -> int:
        return self._run("mark_used", _rowcount(self._q.mark_used(ids)))

    # -- reads ------------------------------------------------------------------

    def _get(self, key: str) -> MemoryRecord | None:
        rows = self._run("get", _rows(self._q.get(key)))
        return row_to_record(rows[0]) if rows else None

    def _list(
        self, category: str | None, session_id: str | None, limit: int | None
    ) -> builtins.list[MemoryRecord]:
        rows = self._run("list", _rows(self._q.listing(category, session_id, limit)))
        return [row_to_record(r) for r in rows]

    def count(self) -> int:
        """How many rows of this namespace are not forgotten (superseded and expired ones count)."""
        rows = self._run("count", _rows(self._q.count()))
        return int(rows[0][0])

    def _search(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        plan = self._plan(q)
        if plan is None:
            return []
        entries, self._last = self._run("recall", rq.recall_steps(plan))
        self._keep_terms(plan)
        return entries

    async def _asearch(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        # On an AsyncConnectionPool of the running loop (see the class docstring).
        plan = self._plan(q)
        if plan is None:
            return []
        entries, self._last = await self._arun("recall", rq.recall_steps(plan))
        self._keep_terms(plan)
        return entries

    # -- JSONL ------------------------------------------------------------------

    def export_jsonl(self, dst: str | os.PathLike[str] | IO[str]) -> int:
        """Write every row of this namespace, forgotten and superseded ones included."""
        stmt = self._q.export()
        with (
            translate_errors("export"),
            self._connection() as conn,
            conn.cursor(name="memory_inject_export") as cur,
        ):
            cur.itersize = _BATCH
            cur.execute(stmt.query, stmt.params)
            return write_jsonl(dst, (row_to_record(row) for row in cur))

    def import_jsonl(
        self,
        src: str | os.PathLike[str] | IO[str],
        *,
        progress: Callable[[int], object] | None = None,
        batch_size: int = _BATCH,
        rebuild_index: bool | None = None,
    ) -> int:
        """Upsert one record per JSON line into this namespace; returns how many.

        All or nothing: rows are COPYed into a temporary table ``batch_size``
        at a time and merged by one ``INSERT ... ON CONFLICT`` at the end, so a
        bad line (``ValueError`` with its line number) leaves the table as it
        was. A key repeated in the file keeps its last line; each line's
        ``namespace`` is replaced by this store's.

        With vectors, an import of at least 20,000 rows into an empty table
        (the initial load) drops the HNSW index and builds it after the merge,
        several times faster than inserting into it; other sessions' reads of
        the table then wait (up to ``timeout``) until the import commits.
        ``rebuild_index`` forces that choice either way.
        """
        n = 0
        lines = read_jsonl(src)
        with translate_errors("import"), self._connection() as conn, conn.cursor() as cur:
            for stmt in self._q.stage_create():
                cur.execute(stmt)
            for batch in _batched((r for _, r in lines), max(1, batch_size)):
                records = self._embedded([r.evolve(namespace=self._namespace) for r in batch])
                with cur.copy(self._q.stage_copy()) as copy:
                    for i, record in enumerate(records, start=n):
                        copy.write_row([*record_params(record), i])
                n += len(records)
                if progress is not None:
                    progress(n)
            rebuild = self._vectors and self._rebuild_wanted(cur, n, rebuild_index)
            if rebuild:
                cur.execute(self._q.hnsw_drop())
            cur.execute(self._q.stage_merge())
            if rebuild:
                for stmt in self._q.hnsw_rebuild():
                    cur.execute(stmt)
        return n

    def _rebuild_wanted(self, cur: psycopg.Cursor[Any], n: int, wanted: bool | None) -> bool:
        if wanted is False or (wanted is None and n < self._hnsw_rebuild_at):
            return False
        cur.execute(self._q.hnsw_present())
        present = cur.fetchone()
        if not present or not present[0]:
            return False
        if wanted:
            return True
        stmt = self._q.any_rows()
        cur.execute(stmt.query, stmt.params)
        row = cur.fetchone()
        return row is not None and not row[0]

    # -- the shared core ----------------------------------------------------------

    def _plan(self, q: RecallQuery) -> rq.Plan | None:
        query, limit, since, until = q.query, q.limit, q.since, q.until
        if not isinstance(query, str):
            raise TypeError(f"'query' must be a string (got {type(query).__name__})")
        if limit <= 0:
            self._last = RecallInfo()
            return None
        scope = rq.Scope(
            session_id=q.session_id,
            since=None if since is None else parse_timestamp(since),
            until=None if until is None else parse_timestamp(until),
        )
        if is_time_only(query):
            return rq.Plan(self._q, scope, int(limit), self._fusion)
        cached = self._terms
        terms = cached[1] if cached is not None and cached[0] > time.monotonic() else None
        vector: tuple[float, ...] | None = None
        degraded: str | None = None
        # Embedded before a connection is taken: a slow model must not hold one.
        if self._embedder is not None and self._fusion.search_mode != "bm25":
            try:
                vector = self._embed([query])[0]
            except EmbedderError as exc:
                degraded = f"embedder_failed: {exc}"
        return rq.Plan(
            self._q,
            scope,
            int(limit),
            self._fusion,
            query=query,
            vector=vector if self._vectors else None,
            degraded=degraded,
            rank_budget=self._rank_budget,
            terms=terms,
        )

    def _keep_terms(self, plan: rq.Plan) -> None:
        if plan.terms_read and plan.terms is not None:
            self._terms = (time.monotonic() + _TERMS_TTL_S, plan.terms)

    def _upsert_steps(self, record: MemoryRecord, keep: Sequence[str]) -> Steps[MemoryRecord]:
        rows = yield self._q.upsert(record_params(record), keep)
        return row_to_record(rows[0])

    def _supersede_steps(self, old_key: str, new: MemoryRecord) -> Steps[MemoryRecord]:
        rows = yield self._q.lock_live(old_key)
        if not rows:
            raise KeyError(old_key)
        old_id = str(rows[0][0])
        new = new.evolve(supersedes=tuple(dict.fromkeys((*new.supersedes, old_id))))
        written = yield from self._upsert_steps(new, ())
        yield self._q.set_superseded_by(old_id, written.id)
        return written

    def _run(self, action: str, steps: Steps[T]) -> T:
        """Drive ``steps`` in one transaction on a pooled connection."""
        self._check_open(action)
        with translate_errors(action), self._connection() as conn, conn.cursor() as cur:
            try:
                stmt = next(steps)
                while True:
                    cur.execute(stmt.query, stmt.params)
                    result = cur.fetchall() if stmt.rows else cur.rowcount
                    stmt = steps.send(result)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]

    async def _arun(self, action: str, steps: Steps[T]) -> T:
        """The async twin of :meth:`_run`."""
        with translate_errors(action):
            async with self._aconnection() as conn, conn.cursor() as cur:
                try:
                    stmt = next(steps)
                    while True:
                        await cur.execute(stmt.query, stmt.params)
                        result = await cur.fetchall() if stmt.rows else cur.rowcount
                        stmt = steps.send(result)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction (committed on success, rolled back on error).

        After an outage the pool reconnects with growing back-off, so it can
        lag a restarted server by seconds; when it has nothing to give within
        ``timeout``, one direct connection tells at once whether the server is back.
        """
        try:
            conn = self._pool.getconn()
        except PoolTimeout:
            with psycopg.connect(self._dsn, **self._connect_kwargs) as direct:
                yield direct
            return
        try:
            with conn:
                yield conn
        finally:
            self._pool.putconn(conn)

    @asynccontextmanager
    async def _aconnection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The async twin of :meth:`_connection`."""
        pool = await self._async_pool()
        try:
            conn = await pool.getconn()
        except PoolTimeout:
            async with await psycopg.AsyncConnection.connect(
                self._dsn, **self._connect_kwargs
            ) as direct:
                yield direct
            return
        try:
            async with conn:
                yield conn
        finally:
            await pool.putconn(conn)

    async def _async_pool(self) -> AsyncConnectionPool[Any]:
        """The async pool of the running loop, opened on first use.

        A pool belongs to one event loop; when a later call comes from a new
        loop (a second ``asyncio.run``), the old loop's pool is abandoned. The
        first call waits for ``min_size`` connections, so sequential recalls
        never leave a connection attempt running when their loop ends.
        """
        self._check_open("recall")
        loop = asyncio.get_running_loop()
        with self._alock:
            pool = self._apool
            if pool is not None and self._aloop is loop:
                fresh = False
            else:
                fresh = True
                stale, stale_loop = self._apool, self._aloop
                pool = AsyncConnectionPool(
                    self._dsn,
                    kwargs=self._connect_kwargs,
                    min_size=max(1, self._min_size),
                    max_size=max(1, self._min_size, self._max_size),
                    open=False,
                    check=AsyncConnectionPool.check_connection,
                    timeout=self._timeout,
                    name=f"memory_inject.{self._names.table}.async",
                )
                self._apool, self._aloop = pool, loop
                if stale is not None and stale_loop is not None:
                    close_async_pool(stale, stale_loop)
        if not fresh:
            await pool.open()  # a no-op once open; waits if another task is opening it
            return pool
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except BaseException:
            with self._alock:
                if self._apool is pool:
                    self._apool = self._aloop = None
            raise
        return pool


# -- helpers ----------------------------------------------------------------------


def _rows(stmt: Stmt) -> Steps[list[tuple[Any, ...]]]:
    rows = yield stmt
    return list(rows)


def _rowcount(stmt: Stmt) -> Steps[int]:
    n = yield stmt
    return int(n)


def _batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
