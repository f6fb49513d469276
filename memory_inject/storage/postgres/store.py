"""``PostgresStore``: memories in PostgreSQL.

Lexical recall ranks with ``ts_rank_cd`` over a generated, weighted tsvector
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
yields statements and receives their results; :meth:`PostgresStore._run` drives
it on a ``ConnectionPool`` connection and :meth:`PostgresStore._arun` on an
``AsyncConnectionPool`` one. Every driver error leaves as a
:class:`~memory_inject.exceptions.StorageError` (``from`` the original).

The store is built in layers: the pools, their lifecycle and those two drivers
live in ``connection``; JSONL import/export in ``bulk``; the statements in
``queries`` (``keyword``, ``standing``), the write steps in ``writes`` and the
recall logic in ``recall``; this module owns the constructor, the reads and
writes, the recall plan and a recall plan's filtered queries.
"""

from __future__ import annotations

import builtins
import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.embedders import similarity_calibration
from memory_inject.exceptions import EmbedderError, StorageError
from memory_inject.models import MemoryEntry, is_time_only, parse_timestamp
from memory_inject.storage._base import VectorEmbedder as _Embedder
from memory_inject.storage._base import answer_of, check_namespace, forget_scope
from memory_inject.storage._plan_rows import MENTION_ROWS, entity_names, resolve_mentions
from memory_inject.storage.fusion import Fusion
from memory_inject.storage.postgres import recall as rq
from memory_inject.storage.postgres.bulk import PostgresBulk
from memory_inject.storage.postgres.connection import (
    rowcount_of,
    rows_of,
    session_options,
    translate_errors,
)
from memory_inject.storage.postgres.queries import Queries, Scope, TermStats
from memory_inject.storage.postgres.schema import (
    RECALL_COLUMNS,
    TableNames,
    ensure_vectors,
    migrate,
    required_dim,
    row_to_record,
)
from memory_inject.storage.postgres.standing import standing_statement
from memory_inject.storage.postgres.writes import supersede_steps, upsert_steps
from memory_inject.storage.records import CARRIED_ON_STORE, MemoryRecord, standing_pick

__all__ = ["PostgresStore"]

#: How long the keyword stage trusts its copy of the table's word statistics.
_TERMS_TTL_S = 60.0


class PostgresStore(PostgresBulk):
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
        self._apool = None
        self._aloop = None
        self._alock = threading.Lock()
        self._writes = 0
        self._rank_budget = rank_budget
        self._terms: tuple[float, TermStats] | None = None
        self._lexemes: dict[str, tuple[str, ...]] = {}
        self._calibration = similarity_calibration(embedder)

        dim = required_dim(embedder) if embedder is not None and vectors is not False else 0
        with translate_errors("open"), psycopg.connect(dsn, **self._connect_kwargs) as conn:
            migrate(conn, self._names)
            self._vectors = (
                embedder is not None
                and vectors is not False
                and ensure_vectors(conn, self._names, dim)
            )
        if vectors and embedder is not None and not self._vectors:
            raise StorageError("'vectors=True' but the server has no pgvector extension")
        self._connect_kwargs["options"] = session_options(dsn, timeout, vectors=self._vectors)
        self._q = Queries(self._names, namespace, tuple(str(c) for c in shared_categories))
        self._pool = ConnectionPool(
            dsn,
            kwargs=self._connect_kwargs,
            min_size=min_size,
            max_size=max_size,
            open=True,
            check=ConnectionPool.check_connection,
            timeout=timeout,
            name=f"memory_inject.{table}",
        )

    # -- identity ---------------------------------------------------------------

    @property
    def recall_slots(self) -> int:
        """How many sync recalls may run on recall threads at once: the pool's size."""
        return max(1, self._max_size)

    @property
    def vectors_enabled(self) -> bool:
        """True when recall runs the pgvector stage."""
        return self._vectors

    def __repr__(self) -> str:
        return f"PostgresStore(table={self._names.table!r}, namespace={self._namespace!r})"

    # -- writes -----------------------------------------------------------------

    def _stats_changed(self) -> None:
        """A write of ours: forget the term statistics if they counted the rows exactly."""
        self._writes += 1
        cached = self._terms
        if cached is not None and cached[1].exact:
            self._terms = None

    def _write_draft(
        self, draft: MemoryRecord, fields: Mapping[str, Any], timestamp: datetime | str | None
    ) -> MemoryRecord:
        self._stats_changed()
        keep = [c for c in CARRIED_ON_STORE if c not in fields]
        if timestamp is None:
            keep.append("timestamp")
        return self._run("store", upsert_steps(self._q, draft, keep))

    def _write_record(self, record: MemoryRecord, move: bool = False) -> MemoryRecord:
        self._stats_changed()
        return self._run("upsert", upsert_steps(self._q, record, (), move))

    def forget(
        self,
        key: str,
        *,
        sessions: Iterable[str | None] | None = None,
        shared_sources: Iterable[str] | None = None,
    ) -> bool:
        """Soft-delete ``key``; True if a live row was forgotten (``sessions`` and
        ``shared_sources`` limit which, in the same statement: see ``SQLiteStore.forget``)."""
        scope = forget_scope(sessions, shared_sources)
        if scope is not None and not scope[0] and not scope[1]:
            return False
        self._writes += 1
        return self._run("forget", rowcount_of(self._q.forget(key, scope))) > 0

    def _write_superseding(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        self._stats_changed()
        return self._run("supersede", supersede_steps(self._q, old_key, new))

    def _write_usage(self, ids: builtins.list[str]) -> int:
        return self._run("mark_used", rowcount_of(self._q.mark_used(ids)))

    # -- reads ------------------------------------------------------------------

    def _get(self, key: str) -> MemoryRecord | None:
        rows = self._run("get", rows_of(self._q.get(key)))
        return row_to_record(rows[0]) if rows else None

    def _list(
        self, category: str | None, session_id: str | None, limit: int | None
    ) -> builtins.list[MemoryRecord]:
        rows = self._run("list", rows_of(self._q.listing(category, session_id, limit)))
        return [row_to_record(r) for r in rows]

    def count(self) -> int:
        """How many rows of this namespace are not forgotten (superseded and expired ones count)."""
        rows = self._run("count", rows_of(self._q.count()))
        return int(rows[0][0])

    def _ranked(self, q: RecallQuery) -> RecallAnswer:
        plan, early = self._ranked_plan(q)
        if plan is None:
            return early
        entries, info = self._run("recall", rq.recall_steps(plan), q.deadline)
        self._keep_terms(plan)
        return answer_of(entries, info)

    async def _aranked(self, q: RecallQuery) -> RecallAnswer:
        # On an AsyncConnectionPool of the running loop (see the class docstring).
        plan, early = self._ranked_plan(q)
        if plan is None:
            return early
        entries, info = await self._arun("recall", rq.recall_steps(plan), q.deadline)
        self._keep_terms(plan)
        return answer_of(entries, info)

    def _ranked_plan(self, q: RecallQuery) -> tuple[rq.Plan | None, RecallAnswer]:
        """The recall's plan, or None and the answer when there is nothing to ask the server.

        ``q.mode`` forces one modality, as on SQLite: ``"semantic"`` (the
        pgvector stage; none without an embedder and pgvector, said so in the
        answer) or ``"lexical"`` (the keyword stage).
        """
        forced = {"semantic": "embedding", "lexical": "bm25"}.get(q.mode or "")
        if forced == "embedding" and not self._vectors:
            return None, RecallAnswer(degraded=("embedder_failed: no vector search configured",))
        plan = self._plan(q)
        if plan is None:
            return None, RecallAnswer()
        if forced is not None:
            f = self._fusion
            plan.fusion = Fusion(
                mode=f.mode,
                vector_weight=f.vector_weight,
                keyword_weight=f.keyword_weight,
                rrf_k=f.rrf_k,
                search_mode=forced,
            )
            if forced == "bm25":
                plan.vector = None
        return plan, RecallAnswer()

    def _tagged(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        if q.limit <= 0:
            return []
        stmt = self._q.tagged(
            Scope(session_id=q.session_id),
            int(q.limit),
            entity_id=q.entity_id,
            source=q.source,
            statuses=None if q.statuses is None else builtins.list(q.statuses),
        )
        rows = self._run("recall_where", rows_of(stmt), q.deadline)
        return [row_to_record(r, RECALL_COLUMNS).to_entry(None) for r in rows]

    def known_entities(self) -> dict[str, str]:
        """``{display name: entity id}`` for every entity id in use (see ``SQLiteStore``)."""
        rows = self._run("entities", rows_of(self._q.entity_ids()))
        return entity_names(str(r[0]) for r in rows)

    def entities_mentioned(
        self, mentions: Sequence[str], *, prefix: str = "company:"
    ) -> dict[str, str]:
        """``{mention: entity id}`` for the mentions whose rows name them (see ``SQLiteStore``)."""

        def rows(mention: str) -> list[tuple[str, str]]:
            found = self._run(
                "entities", rows_of(self._q.mentioning(prefix, mention, MENTION_ROWS))
            )
            return [(str(e), str(c)) for e, c in found]

        return resolve_mentions(mentions, rows, prefix)

    # -- standing context (PI's hard rules and L1, every turn) ------------------

    @property
    def data_version(self) -> int:
        """This store's write count: it changes with every write made through it.

        A server has no cheap "changed since" counter; writes by other processes
        are seen when the standing-context cache entry ages out
        (:data:`memory_inject.standing.MAX_AGE_S`).
        """
        return self._writes

    def standing_records(
        self,
        profile_id: str | None,
        *,
        limit: int,
        min_confidence: float,
        categories: Mapping[str, datetime | None] | None = None,
    ) -> builtins.list[MemoryEntry]:
        """The profile's active L1 records (insertion order) and most confident L2 hard rules.

        One statement on the ``_standing_idx`` partial index; at most ``limit``
        of each. See :class:`~memory_inject.contract.SupportsStandingContext`.
        """
        if limit <= 0:
            return []
        rows = self._run(
            "standing_records",
            rows_of(standing_statement(self._q, profile_id, limit, min_confidence, categories)),
        )
        records = [row_to_record(r[:-1], RECALL_COLUMNS) for r in rows]  # in rid order
        picked = standing_pick(records, limit, min_confidence, categories)
        return [r.to_entry(None) for r in picked]

    # -- the shared core ----------------------------------------------------------

    def _plan(self, q: RecallQuery) -> rq.Plan | None:
        query, limit, since, until = q.query, q.limit, q.since, q.until
        if not isinstance(query, str):
            raise TypeError(f"'query' must be a string (got {type(query).__name__})")
        if limit <= 0:
            return None
        scope = Scope(
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
            calibration=self._calibration,
            lexemes=self._lexemes,
        )

    def _keep_terms(self, plan: rq.Plan) -> None:
        if plan.terms_read and plan.terms is not None:
            self._terms = (time.monotonic() + _TERMS_TTL_S, plan.terms)
