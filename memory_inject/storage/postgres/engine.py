"""``PostgresEngine``: what :class:`~memory_inject.storage.postgres.PostgresStore` holds.

The engine is the store's database half (the
:class:`~memory_inject.storage._base.StoreEngine` methods: read, write,
search, close) plus the PostgreSQL extras the store forwards to it (count,
forget, entities; the standing context is ``standing``). It opens the table (create or migrate,
pgvector when wanted), holds the connections
(:class:`~memory_inject.storage.postgres.connection.PostgresConnections`), the
statements (:class:`~memory_inject.storage.postgres.queries.Queries`) and the
recall's caches (the keyword stage's term statistics and the query words'
lexemes), and builds each recall's :class:`~memory_inject.storage.postgres.recall.RecallRun`.
Every operation is a generator of statements
(``writes``, ``recall``, ``connection.rows_of``) that the connections drive,
sync or async. The store does the checks before it asks (closed aside: the
connections own that state).
"""

from __future__ import annotations

import builtins
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from psycopg.errors import DeadlockDetected, UniqueViolation

from memory_inject._deadline import in_recall_thread
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.embedders import embeds_meaning, reads_script, similarity_calibration
from memory_inject.exceptions import EmbedderError, StorageError, StoreLockedError
from memory_inject.models import MemoryEntry, is_time_only, parse_timestamp
from memory_inject.storage._base import StoreEngine, VectorEmbedder, answer_of
from memory_inject.storage._plan_rows import MENTION_ROWS, entity_names, resolve_mentions
from memory_inject.storage._query_vectors import QueryVectors
from memory_inject.storage.fusion import Fusion
from memory_inject.storage.postgres import migrations
from memory_inject.storage.postgres import recall as rq
from memory_inject.storage.postgres.connection import (
    PostgresConnections,
    rows_of,
    session_options,
)
from memory_inject.storage.postgres.errors import dsn_parts, translate_errors
from memory_inject.storage.postgres.folding import config_sql
from memory_inject.storage.postgres.neighbours import StreamMoved, lock_namespace
from memory_inject.storage.postgres.queries import Queries, Scope, TermStats
from memory_inject.storage.postgres.schema import (
    RECALL_COLUMNS,
    TableNames,
    required_dim,
    row_to_record,
)
from memory_inject.storage.postgres.writes import (
    forget_steps,
    supersede_steps,
    upsert_steps,
    usage_steps,
)
from memory_inject.storage.records import CARRIED_ON_STORE, MemoryRecord

__all__ = ["PostgresEngine"]

#: How many times a write runs when its row keeps moving to a stream it had not locked.
_MOVED_TRIES = 5
#: How long the keyword stage trusts its copy of the table's word statistics.
_TERMS_TTL_S = 60.0


def _again_if_deadlocked(run: Callable[[], Any]) -> Any:
    """``run()``, once more (after a pause) when the server ended it to break a deadlock:
    its transaction was rolled back, and PostgreSQL's advice is to run it again. Row
    updates of several rows (``mark_used``, a rewrite's neighbours) can cross."""
    for pause in (0.01, 0.05):
        try:
            return run()
        except StoreLockedError as exc:
            if not isinstance(exc.__cause__, DeadlockDetected):
                raise
            time.sleep(pause)
    return run()


class PostgresEngine:
    """One namespace of one PostgreSQL table: its connections, statements and recall caches.

    The constructor takes ``PostgresStore``'s arguments, already checked
    (``dsn``, ``names``, ``namespace``, ``embedder``, ``fusion``, ``min_size``,
    ``max_size``, ``vectors``, ``timeout``, ``shared_categories``,
    ``rank_budget``: see ``PostgresStore.__init__``), connects once to create
    or migrate the table, then opens the pool.
    """

    #: The smallest import that rebuilds the HNSW index instead of inserting into it.
    hnsw_rebuild_at = 20_000

    def __init__(
        self,
        dsn: str,
        names: TableNames,
        namespace: str,
        *,
        embedder: VectorEmbedder | None,
        fusion: Fusion,
        min_size: int,
        max_size: int,
        vectors: bool | None,
        timeout: float,
        shared_categories: Sequence[str],
        rank_budget: int | None,
    ) -> None:
        self.embedder = embedder
        self._prompts = None if embedder is None else QueryVectors(embedder)
        self.fusion = fusion
        connect_kwargs: dict[str, Any] = {}
        if "connect_timeout" not in dsn_parts(dsn):
            connect_kwargs["connect_timeout"] = max(2, math.ceil(timeout))
        #: This engine's write count (``PostgresStore.data_version``).
        self.writes = 0
        #: Moves at every write's start and end: a recall's statistics read between
        #: them, or across them, are not cached (``RecallRun.epoch``).
        self.epoch = 0
        self.rank_budget = rank_budget
        self._terms: tuple[float, TermStats] | None = None
        self._lexemes: dict[str, tuple[str, ...]] = {}
        self.calibration = similarity_calibration(embedder)
        self.meaning = embeds_meaning(embedder)

        dim = required_dim(embedder) if embedder is not None and vectors is not False else 0
        with translate_errors("open"):
            self.vectors: bool = migrations.open_table(dsn, connect_kwargs, names, dim)
        if vectors and embedder is not None and not self.vectors:
            raise StorageError("'vectors=True' but the server has no pgvector extension")
        connect_kwargs["options"] = session_options(dsn, timeout, vectors=self.vectors)
        # open_table brought the table to this library's newest schema.
        config = config_sql(names, migrations.MIGRATIONS[-1][0])
        self.q = Queries(names, namespace, tuple(str(c) for c in shared_categories), config)
        self._pkey = names.table + "_pkey"  # PostgreSQL's name for the table's primary key
        self.connections = PostgresConnections(
            dsn, names, connect_kwargs, min_size=min_size, max_size=max_size, timeout=timeout
        )

    def close(self) -> None:
        """Close both pools; later calls raise :class:`StorageError`."""
        self.connections.close()

    # -- writes -----------------------------------------------------------------

    def stats_changed(self, *, done: bool = False) -> None:
        """A write of ours: count it, and forget the term statistics if they were exact.

        ``done``: the write ended; a recall that read the statistics meanwhile must not
        keep them (``epoch``), and the write is not counted again.
        """
        if not done:
            self.writes += 1
        self.epoch += 1
        cached = self._terms
        if cached is not None and cached[1].exact:
            self._terms = None

    def write_draft(
        self, draft: MemoryRecord, fields: Mapping[str, Any], timestamp: datetime | str | None
    ) -> MemoryRecord:
        """Upsert ``draft``, keeping the carried-over columns that ``fields`` does not name."""
        self.stats_changed()
        keep = [c for c in CARRIED_ON_STORE if c not in fields]
        if timestamp is None:
            keep.append("timestamp")
        return self._write("store", lambda: upsert_steps(self.q, draft, keep))

    def write_record(self, record: MemoryRecord, move: bool) -> MemoryRecord:
        """Write ``record`` as given (``move``: take the key over from another scope)."""
        self.stats_changed()
        return self._write("upsert", lambda: upsert_steps(self.q, record, (), move, "upsert"))

    def write_superseding(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        """Write ``new`` and mark ``old_key`` superseded by it, in one transaction."""
        self.stats_changed()
        return self._write("supersede", lambda: supersede_steps(self.q, old_key, new))

    def _write(self, action: str, steps: Callable[[], Any]) -> MemoryRecord:
        """Run a write's ``steps``; once more when it lost a race to insert its key.

        A new key's id is the key, and ``ON CONFLICT`` names the key: two writers that
        insert one new key at once both find no row, and the later one then fails on
        the id (a duplicate), not on the key. Run again, it finds the winner's row and
        updates it (or is refused as another scope's, ``KeyOwnedError``), as SQLite's
        one writer at a time does.
        """
        try:
            try:
                return self.moved(action, steps)  # type: ignore[no-any-return]
            except ValueError as exc:
                cause = exc.__cause__
                if (
                    not isinstance(cause, UniqueViolation)
                    or cause.diag.constraint_name != self._pkey
                ):
                    raise
            return self.moved(action, steps)  # type: ignore[no-any-return]
        finally:
            self.stats_changed(done=True)

    def moved(self, action: str, steps: Callable[[], Any]) -> Any:
        """Run ``steps``, again when the row moved to a stream it had not locked
        (:class:`~.neighbours.StreamMoved`: a concurrent move; rolled back) or the server
        chose it to end a deadlock. The last try holds the namespace's lock alone, as an
        import does: no row can move then (a helper's ten movers of one key made five tries
        run out, and ``StreamMoved`` reached the caller)."""
        for _ in range(_MOVED_TRIES - 1):
            try:
                return _again_if_deadlocked(lambda: self.connections.run(action, steps()))
            except StreamMoved:
                continue
        return self.connections.run(action, self._alone(steps()))

    def _alone(self, steps: Any) -> Any:
        yield lock_namespace(self.q.t, self.q.names.table, self.q.ns)
        return (yield from steps)

    def write_usage(self, ids: builtins.list[str]) -> int:
        """Count one use of each id; returns the live rows touched."""
        return int(
            _again_if_deadlocked(
                lambda: self.connections.run("mark_used", usage_steps(self.q, ids))
            )
        )

    def forget(
        self, key: str, scope: tuple[builtins.list[str], bool, tuple[str, ...] | None] | None
    ) -> bool:
        """Soft-delete ``key`` within ``scope`` (:func:`~._store_checks.forget_scope`'s value)."""
        if scope is not None and not scope[0] and not scope[1]:
            return False
        self.stats_changed()
        try:
            return bool(self.moved("forget", lambda: forget_steps(self.q, key, scope)))
        finally:
            self.stats_changed(done=True)

    # -- reads ------------------------------------------------------------------

    def get(self, key: str) -> MemoryRecord | None:
        """The live record under ``key``, or None."""
        rows = self.connections.run("get", rows_of(self.q.get(key)), read=True)
        return row_to_record(rows[0]) if rows else None

    def list(
        self, category: str | None, session_id: str | None, limit: int | None
    ) -> builtins.list[MemoryRecord]:
        """Live records, newest first by creation time, optionally filtered."""
        stmt = self.q.listing(category, session_id, limit)
        rows = self.connections.run("list", rows_of(stmt), read=True)
        return [row_to_record(r) for r in rows]

    def count(self) -> int:
        """How many rows of this namespace are not forgotten."""
        rows = self.connections.run("count", rows_of(self.q.count()), read=True)
        return int(rows[0][0])

    def known_entities(self) -> dict[str, str]:
        """``{display name: entity id}`` for every entity id in use."""
        rows = self.connections.run("entities", rows_of(self.q.entity_ids()), read=True)
        return entity_names(str(r[0]) for r in rows)

    def entities_mentioned(self, mentions: Sequence[str], prefix: str) -> dict[str, str]:
        """``{mention: entity id}`` for the mentions whose rows name them."""

        def rows(mention: str) -> builtins.list[tuple[str, str]]:
            found = self.connections.run(
                "entities", rows_of(self.q.mentioning(prefix, mention, MENTION_ROWS)), read=True
            )
            return [(str(e), str(c)) for e, c in found]

        return resolve_mentions(mentions, rows, prefix)

    # -- recall -----------------------------------------------------------------

    def ranked(self, q: RecallQuery) -> RecallAnswer:
        """A ranked recall, of one modality when ``q.mode`` says so."""
        run, early = self._ranked_run(q)
        if run is None:
            return early
        entries, info = self.connections.run("recall", rq.recall_steps(run), q.deadline, read=True)
        self._keep_terms(run)
        return answer_of(entries, info)

    async def aranked(self, q: RecallQuery) -> RecallAnswer:
        """The async twin of :meth:`ranked`, on the async pool of the running loop.

        The prompt is embedded on a worker thread, never on the loop: a 3 s model held
        every task of the loop 3 s, past the turn's deadline."""
        if self.embedder is not None and self.fusion.search_mode != "bm25":
            # A recall thread, never the host's executor: a turn whose hop waited there
            # was told ``deadline`` though its recall never started.
            run, early = await in_recall_thread(
                self.connections, partial(self._ranked_run, q), q.deadline
            )
        else:
            run, early = self._ranked_run(q)
        if run is None:
            return early
        entries, info = await self.connections.arun(
            "recall", rq.recall_steps(run), q.deadline, read=True
        )
        self._keep_terms(run)
        return answer_of(entries, info)

    def tagged(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        """A plan's entity or source query: rows by tag (``score`` None)."""
        if q.limit <= 0:
            return []
        stmt = self.q.tagged(
            Scope(session_id=q.session_id, exclude=q.exclude),
            int(q.limit),
            entity_id=q.entity_id,
            source=q.source,
            statuses=None if q.statuses is None else builtins.list(q.statuses),
        )
        rows = self.connections.run("recall_where", rows_of(stmt), q.deadline, read=True)
        return [row_to_record(r, RECALL_COLUMNS).to_entry(None) for r in rows]

    def _ranked_run(self, q: RecallQuery) -> tuple[rq.RecallRun | None, RecallAnswer]:
        """The recall's inputs (a run), or None and the answer when the server need not be asked.

        ``q.mode`` forces one modality, as on SQLite: ``"semantic"`` (the
        pgvector stage; the keyword stage without an embedder; the store's own recall
        with an embedder of spellings, ``embedders.embeds_meaning``; none with an embedder
        but without pgvector, said so in the answer) or ``"lexical"`` (the keyword stage).
        """
        forced = {"semantic": "embedding", "lexical": "bm25"}.get(q.mode or "")
        if forced == "embedding" and self.embedder is None:
            forced = "bm25"  # a store without an embedder is keyword-only, semantic asks too
        elif forced == "embedding" and not self.meaning:
            forced = None  # hashed spellings are no meaning: the store's own recall
        if forced == "embedding" and not self.vectors:
            return None, RecallAnswer(degraded=("embedder_failed: no vector search configured",))
        run = self._run_of(q)
        if run is None:
            return None, RecallAnswer()
        if forced is not None:
            f = self.fusion
            run.fusion = Fusion(
                mode=f.mode,
                vector_weight=f.vector_weight,
                keyword_weight=f.keyword_weight,
                rrf_k=f.rrf_k,
                search_mode=forced,
            )
            if forced == "bm25":
                run.vector = None
        return run, RecallAnswer()

    def _run_of(self, q: RecallQuery) -> rq.RecallRun | None:
        query, limit, since, until = q.query, q.limit, q.since, q.until
        if not isinstance(query, str):
            raise TypeError(f"'query' must be a string (got {type(query).__name__})")
        if limit <= 0:
            return None
        lo, hi = (None if t is None else parse_timestamp(t) for t in (since, until))
        scope = Scope(session_id=q.session_id, since=lo, until=hi, exclude=q.exclude)
        if is_time_only(query):
            return rq.RecallRun(self.q, scope, int(limit), self.fusion)
        cached = self._terms
        terms = cached[1] if cached is not None and cached[0] > time.monotonic() else None
        vector: tuple[float, ...] | None = None
        degraded: str | None = None
        # Embedded before a connection is taken: a slow model must not hold one.
        embedder = self.embedder if self.fusion.search_mode != "bm25" else None
        if embedder is not None and self._prompts is not None and reads_script(embedder, query):
            try:
                vector = self._prompts.vector(query, q.deadline)
            except EmbedderError as exc:
                degraded = f"embedder_failed: {exc}"
        return rq.RecallRun(
            self.q,
            scope,
            int(limit),
            self.fusion,
            query=query,
            vector=vector if self.vectors else None,
            degraded=degraded,
            rank_budget=self.rank_budget,
            terms=terms,
            epoch=self.epoch,
            calibration=self.calibration,
            lexemes=self._lexemes,
        )

    def _keep_terms(self, run: rq.RecallRun) -> None:
        if run.terms_read and run.terms is not None and run.epoch == self.epoch:
            self._terms = (time.monotonic() + _TERMS_TTL_S, run.terms)


#: mypy proves the engine is a :class:`StoreEngine` (no base class needed).
_: type[StoreEngine] = PostgresEngine
