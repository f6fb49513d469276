"""``PostgresStore``: memories in PostgreSQL.

Lexical recall ranks with ``ts_rank`` over a generated, weighted tsvector
(key A; content, tags and the day words B; the session's previous record C
and the one before it D: ``context``) and an OR of the prompt's content
words. A hit's score is its calibrated coverage of the query (``terms``),
the same number the SQLite store gives the same memory and prompt, so the
renderer's relevance floor means the same thing on both. With pgvector and an embedder,
an HNSW cosine search runs too and the two lists are fused
(:func:`memory_inject.storage.fusion.fuse`). Without pgvector the store is
lexical only and still keeps every embedding exactly (rounded to float32 on
write, as on SQLite: see ``_base``).

Sync and async share one private core: each operation is a generator that
yields statements and receives their results;
:meth:`~memory_inject.storage.postgres.connection.PostgresConnections.run`
drives it on a ``ConnectionPool`` connection and ``arun`` on an
``AsyncConnectionPool`` one. Every driver error leaves as a
:class:`~memory_inject.exceptions.StorageError` (``from`` the original).

The store holds an engine, it does not inherit one: ``PostgresStore`` is
:class:`~memory_inject.storage._base.PersistentStore` (the checks and the
write path's front half) over a
:class:`~memory_inject.storage.postgres.engine.PostgresEngine` (the table,
its connections, reads, writes and recall) that its constructor builds. This
module owns the constructor's argument checks and the public extras, each
forwarded to the engine or to the bulk functions of ``bulk``.
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import IO, Self

from memory_inject.exceptions import StorageError
from memory_inject.models import MemoryEntry
from memory_inject.storage import _forks
from memory_inject.storage._base import PersistentStore, check_namespace, forget_scope
from memory_inject.storage._base import VectorEmbedder as _Embedder
from memory_inject.storage.fusion import Fusion, default_fusion
from memory_inject.storage.postgres import backfill, bulk, standing
from memory_inject.storage.postgres.engine import PostgresEngine
from memory_inject.storage.postgres.erase import erase_steps, vacuum
from memory_inject.storage.postgres.schema import TableNames
from memory_inject.storage.records import is_text

_log = logging.getLogger("memory_inject")

__all__ = ["PostgresStore"]


def _reopened(engine: PostgresEngine, open_: Callable[[], PostgresEngine]) -> PostgresEngine:
    """The engine a child of ``fork()`` uses in place of its parent's ``engine``: its own
    pool, unless the store was closed. The parent's is kept, never closed, in the child."""
    _forks.keep(engine)
    return engine if engine.connections.closed else open_()


class PostgresStore(PersistentStore):
    """A memory store in one PostgreSQL table, shared by any number of namespaces.

    ``vectors``: ``None`` uses pgvector when the server has it and an embedder
    is given; ``False`` stays lexical only; ``True`` fails when pgvector is
    missing. ``timeout`` bounds how long a call waits for a connection or a
    lock (a recall during an outage fails in that time instead of hanging the
    turn).
    A recall for a session also sees the sessionless rows of
    ``shared_categories`` (durable facts); ``()`` makes the filter strict.
    ``rank_budget`` caps the keyword stage's work: the query's commonest words
    stop selecting candidates once its rarer words reach about 3% of the rows
    (at least 50), and never more than ``rank_budget`` rows (they still count
    in the rank); ``None`` ranks every match. Below 10,000 rows the words are
    counted in the rows the recall may return; above, ANALYZE's estimates are read.

    ``arecall`` opens an ``AsyncConnectionPool`` for the running loop at its
    first use there: one per event loop (threads each running their own loop
    share the store), of up to ``max_size`` connections each, closed when that
    loop shuts down (:mod:`~memory_inject.storage.postgres.loop_pools`).
    ``await store.aclose()`` (or ``async with store``) closes them all at once.
    """

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
        ``fusion`` says how keyword and vector hits combine (by default
        :func:`~memory_inject.storage.fusion.default_fusion` of the embedder, as on SQLite).
        ``ValueError`` for a bad ``namespace`` or ``table``; a :class:`StorageError`
        when the server cannot be reached, the table is not ours or is newer, or
        ``vectors=True`` finds no pgvector; :class:`PgvectorUnusableError` when
        pgvector is there but broken.
        """
        names = TableNames(table)
        self._namespace = check_namespace(namespace)
        self._name = name
        self._embedder = embedder

        def engine() -> PostgresEngine:
            return PostgresEngine(
                dsn,
                names,
                namespace,
                embedder=embedder,
                fusion=fusion if fusion is not None else default_fusion(embedder),
                min_size=min_size,
                max_size=max_size,
                vectors=vectors,
                timeout=timeout,
                shared_categories=shared_categories,
                rank_budget=rank_budget,
            )

        self._here = _forks.PerProcess(engine(), partial(_reopened, open_=engine))

    @property  # type: ignore[override] # the base's attribute, narrowed to this engine
    def _engine(self) -> PostgresEngine:
        """The engine of this process. A child of ``fork()`` (``gunicorn --preload``,
        ``multiprocessing``) opens its own pool on its first call: the parent's
        connections are its sockets, and one statement from the child on them broke the
        parent's session. The parent's engine is kept, never closed, in the child
        (closing a connection sends the server its goodbye on the shared socket)."""
        return self._here.get()

    @_engine.setter
    def _engine(self, engine: PostgresEngine) -> None:
        self._here.set(engine)

    # -- identity ---------------------------------------------------------------

    @property
    def recall_slots(self) -> int:
        """How many sync recalls may run on recall threads at once: the pool's size."""
        return max(1, self._engine.connections.max_size)

    @property
    def vectors_enabled(self) -> bool:
        """True when recall runs the pgvector stage."""
        return self._engine.vectors

    def __repr__(self) -> str:
        table = self._engine.q.names.table
        return f"PostgresStore(table={table!r}, namespace={self._namespace!r})"

    # -- lifecycle --------------------------------------------------------------

    def close(self) -> None:
        """Close both pools. After an ``arecall``, prefer ``await aclose()``."""
        self._engine.close()

    async def aclose(self) -> None:
        """Close both pools, awaiting the async pool's close on the loop ``arecall`` opened it on.

        Awaited on another loop, it closes that pool as :meth:`close` does.
        """
        await self._engine.connections.aclose_pool()
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- the PostgreSQL extras --------------------------------------------------

    def forget(
        self,
        key: str,
        *,
        sessions: Iterable[str | None] | None = None,
        shared_sources: Iterable[str] | None = None,
    ) -> bool:
        """Soft-delete ``key``; True if a live row was forgotten (``sessions`` and
        ``shared_sources`` limit which, in the same statement: see ``SQLiteStore.forget``)."""
        if not is_text(key):
            return False  # no row holds such a key
        return self._engine.forget(key, forget_scope(sessions, shared_sources))

    def erase(
        self,
        key: str,
        *,
        sessions: Iterable[str | None] | None = None,
        shared_sources: Iterable[str] | None = None,
    ) -> bool:
        """Delete ``key``'s row for good, live or already forgotten; True if one went.

        ``sessions`` and ``shared_sources`` limit which row may go exactly as on
        :meth:`forget`; the rows that took its text as context get theirs again in the
        same transaction (:mod:`.erase` says what PostgreSQL keeps until ``VACUUM``).
        """
        scope = forget_scope(sessions, shared_sources)
        if not is_text(key) or (scope is not None and not scope[0] and not scope[1]):
            return False
        engine = self._engine
        engine.writes += 1
        return bool(engine.moved("erase", lambda: erase_steps(engine.q, key, scope)))

    def erase_forgotten(self) -> int:
        """Erase every forgotten row of this namespace, then ``VACUUM (ANALYZE)`` the table
        (its dead tuples reclaimed; skipped with a logged warning when the role may not);
        returns how many rows went."""
        engine = self._engine
        engine.writes += 1
        n = int(engine.connections.run("erase_forgotten", erase_steps(engine.q, None)))
        if n:
            try:
                engine.connections.run("vacuum", vacuum(engine.q), read=True)
            except StorageError as exc:
                _log.warning("erase_forgotten: VACUUM of the table failed: %s", exc)
        return n

    def count(self) -> int:
        """How many rows of this namespace are not forgotten (superseded and expired ones count)."""
        return self._engine.count()

    def known_entities(self) -> dict[str, str]:
        """``{display name: entity id}`` for every entity id in use (see ``SQLiteStore``)."""
        return self._engine.known_entities()

    def entities_mentioned(
        self, mentions: Sequence[str], *, prefix: str = "company:"
    ) -> dict[str, str]:
        """``{mention: entity id}`` for the mentions whose rows name them (see ``SQLiteStore``)."""
        return self._engine.entities_mentioned(mentions, prefix)

    # -- standing context (PI's hard rules and L1, every turn) ------------------

    @property
    def data_version(self) -> int:
        """This store's write count: it changes with every write made through it.

        A server has no cheap "changed since" counter; writes by other processes
        are seen when the standing-context cache entry ages out
        (:data:`memory_inject.standing.MAX_AGE_S`).
        """
        return self._engine.writes

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
        """The profile's active L1 records (insertion order) and most confident L2 hard rules.

        One statement on the ``_standing_idx`` partial index; at most ``limit``
        of each, of the rows a turn of ``sessions`` (or a ``shared_only`` one)
        may see. See :class:`~memory_inject.contract.SupportsStandingContext`.
        """
        e = self._engine
        return standing.standing_entries(
            e.connections,
            e.q,
            profile_id,
            limit,
            min_confidence,
            categories,
            tuple(sessions),
            shared_only,
        )

    # -- bulk -------------------------------------------------------------------

    def export_jsonl(self, dst: str | os.PathLike[str] | IO[str]) -> int:
        """Write every row of this namespace, forgotten and superseded ones included."""
        return bulk.export_jsonl(self, dst)

    def embed_missing(self, *, batch_size: int = 256) -> int:
        """Embed the live rows that have no vector yet (written without the embedder)."""
        return backfill.embed_missing(self, batch_size=batch_size)

    def import_jsonl(
        self,
        src: str | os.PathLike[str] | IO[str],
        *,
        progress: Callable[[int], object] | None = None,
        batch_size: int = bulk.BATCH,
        rebuild_index: bool | None = None,
        reembed: bool = False,
    ) -> int:
        """Upsert one record per JSON line into this namespace; returns how many.

        All or nothing: rows are COPYed into a temporary table ``batch_size``
        at a time and merged by one ``INSERT ... ON CONFLICT`` at the end, so a
        bad line (``ValueError`` with its line number) leaves the table as it
        was. A key repeated in the file keeps its last line; each line's
        ``namespace`` is replaced by this store's. ``reembed``: every row is
        embedded again, whatever vector its line brings (as ``SQLiteStore``).

        With vectors, an import of at least 20,000 rows into an empty table
        (the initial load) drops the HNSW index and builds it after the merge,
        several times faster than inserting into it: other sessions' writes of
        the table wait for the merge (30,000 rows: about 1.5 s), and the index
        is then built concurrently, once the rows are committed, locking
        nothing out (vector recalls scan the table until it is ready; a build
        that fails is logged and left to the next open). ``rebuild_index``
        forces that choice either way.
        """
        return bulk.import_jsonl(
            self,
            src,
            progress=progress,
            batch_size=batch_size,
            rebuild_index=rebuild_index,
            reembed=reembed,
        )
