"""What the two persistent stores share: the checks and the write path above the engine.

``SQLiteStore`` and ``PostgresStore`` differ in how they talk to their engine
and agree on everything else, which lives here once: the namespace, closed and
ownership checks, the embedding checks (shape, dimension, NaN/inf rejected
with :class:`~memory_inject.exceptions.EmbedderError`, vectors rounded to
float32 so a returned record equals what ``get`` reads back), and the
``store``/``upsert``/``supersede``/``mark_used`` front halves. The engine half
is an object the store holds, not a layer it inherits: anything with the
:class:`StoreEngine` methods (read, write, search, close). ``SQLiteStore`` and
``PostgresStore`` each build theirs (:class:`~.sqlite.engine.SQLiteEngine`,
:class:`~.postgres.engine.PostgresEngine`) and add their own public extras.

The checks themselves (ownership, forget scopes, namespaces, vectors) are in
:mod:`._store_checks` and re-exported here.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol, Self

import attrs

from memory_inject._deadline import in_recall_thread
from memory_inject._filter_first import keeps, restricted
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.embedders import embedder_dim, embedder_name
from memory_inject.exceptions import EmbedderError, StorageError
from memory_inject.models import MemoryCategory, MemoryEntry
from memory_inject.storage._store_checks import (
    VectorEmbedder,
    answer_of,
    check_namespace,
    embed_checked,
    float32,
    forget_scope,
    given_vector,
    matchable,
    owned,
    refuse_moves,
    refuse_owned,
)
from memory_inject.storage.records import MemoryRecord, is_text, store_draft

__all__ = [
    "PersistentStore",
    "RecallQuery",
    "StoreEngine",
    "VectorEmbedder",
    "answer_of",
    "check_namespace",
    "check_open",
    "float32",
    "forget_scope",
    "owned",
    "refuse_moves",
    "refuse_owned",
]


def check_open(closed: bool, what: str) -> None:
    """:class:`StorageError` naming ``what`` when the engine was closed."""
    if closed:
        raise StorageError(f"{what}: the store is closed")


class StoreEngine(Protocol):
    """What a persistent store asks of its database: read, write, search, close.

    Every method works in the store's namespace; the checks (closed, ownership
    of the record's namespace, embeddings) are done by the store before it asks.
    """

    def get(self, key: str) -> MemoryRecord | None:
        """The live record under ``key``, or None."""
        ...

    def list(
        self, category: str | None, session_id: str | None, limit: int | None
    ) -> builtins.list[MemoryRecord]:
        """Live records, newest first by creation time, optionally filtered."""
        ...

    def write_draft(
        self, draft: MemoryRecord, fields: Mapping[str, Any], timestamp: datetime | str | None
    ) -> MemoryRecord:
        """Upsert ``draft``, carrying over what ``store`` keeps (see ``carry_over``)."""
        ...

    def write_record(self, record: MemoryRecord, move: bool) -> MemoryRecord:
        """Write ``record`` as given (``move``: take the key over from another scope)."""
        ...

    def write_superseding(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        """Write ``new`` and mark ``old_key`` superseded by it, in one transaction."""
        ...

    def write_usage(self, ids: builtins.list[str]) -> int:
        """Count one use of each id; returns the live rows touched."""
        ...

    def ranked(self, q: RecallQuery) -> RecallAnswer:
        """A ranked recall, of one modality when ``q.mode`` says so."""
        ...

    async def aranked(self, q: RecallQuery) -> RecallAnswer:
        """The async twin of :meth:`ranked` (the event loop never waits on the engine)."""
        ...

    def tagged(self, q: RecallQuery) -> builtins.list[MemoryEntry]:
        """A plan's entity or source query: rows by tag (``score`` None)."""
        ...

    def close(self) -> None:
        """Release the connections; later calls raise ``StorageError`` (see :func:`check_open`)."""
        ...


class PersistentStore:
    """The engine-independent half of a persistent store (see the module docstring).

    ``_engine`` is set by the concrete store's constructor before any call.
    """

    _namespace: str
    _name: str
    _embedder: VectorEmbedder | None
    _engine: StoreEngine
    #: Waits for a connection end at ``RecallQuery.deadline`` and are reported
    #: (:class:`~memory_inject.exceptions.RecallWaitError`).
    honours_deadline = True
    #: ``answer`` leaves out the rows ``RecallQuery.exclude`` names, in its SQL
    #: (``SupportsExcludingRecall``).
    recall_excludes = True

    # -- identity -------------------------------------------------------------

    @property
    def name(self) -> str:
        """The store's name (``name=``), reported on the recall event."""
        return self._name

    @property
    def namespace(self) -> str:
        """The agent whose rows this store reads and writes."""
        return self._namespace

    @property
    def embedder(self) -> VectorEmbedder | None:
        """The embedder that gives each record a vector (None: lexical recall only)."""
        return self._embedder

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the engine's connections; later calls raise :class:`StorageError`."""
        self._engine.close()

    # -- checks ---------------------------------------------------------------

    def _own(self, record: MemoryRecord) -> None:
        if not isinstance(record, MemoryRecord):
            raise TypeError(f"'record' must be a MemoryRecord (got {type(record).__name__})")
        if record.namespace != self._namespace:
            raise ValueError(
                f"'namespace' must be this store's {self._namespace!r} (got {record.namespace!r})"
            )

    # -- embedding ------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> builtins.list[tuple[float, ...]]:
        """One checked float32 vector per text, or :class:`EmbedderError`."""
        if self._embedder is None:
            raise EmbedderError("this store has no embedder")
        return embed_checked(self._embedder, texts)

    def _embedded(
        self, records: Sequence[MemoryRecord], *, foreign: str = "refuse"
    ) -> builtins.list[MemoryRecord]:
        """Records as they will read back: float32 vectors, embedded if an embedder is set.

        A given vector that is all zeros or not of the embedder's ``dim`` (another model's,
        or empty) would never be searched: ``foreign="refuse"`` makes it an :class:`EmbedderError`
        naming the key, ``"embed"`` (an import) embeds the record again instead, and
        ``"reembed"`` (``import_jsonl(reembed=True)``) embeds every record again, whatever
        vector it brings (another model's of the same size cannot be told apart). A text the
        embedder gives zeros for (no word it knows) is kept without a vector.
        """
        if foreign == "reembed" and self._embedder is not None:
            records = [r.evolve(embedding=None) for r in records]
        out = [r if r.embedding is None else r.evolve(embedding=given_vector(r)) for r in records]
        dim = embedder_dim(self._embedder) if self._embedder is not None else None
        for i, r in enumerate(out):
            if r.embedding and not any(r.embedding):  # zeros: no prompt is near it
                if foreign == "refuse":
                    raise EmbedderError(f"'embedding' of {r.key!r:.80} is all zeros")
                out[i] = r.evolve(embedding=None)
            elif dim is not None and r.embedding is not None and len(r.embedding) != dim:
                if foreign != "embed":
                    raise EmbedderError(
                        f"'embedding' of {r.key!r:.80} has {len(r.embedding)} dimensions; "
                        f"this store's embedder {embedder_name(self._embedder)!r} gives {dim}"
                    )
                out[i] = r.evolve(embedding=None)
        todo = [i for i, r in enumerate(out) if r.embedding is None]
        if self._embedder is None or not todo:
            return out
        vectors = self._embed([out[i].content for i in todo])
        for i, vec in zip(todo, vectors, strict=True):  # zeros (no known word): no vector
            out[i] = out[i].evolve(embedding=vec if any(vec) else None)
        return out

    # -- writes ---------------------------------------------------------------

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

        Updating keeps the row's id, creation time, usage counters and
        supersession links unless they are passed; every other field takes the
        given value or its default, and a forgotten key comes back to life.
        """
        draft = store_draft(
            key,
            content,
            category,
            namespace=self._namespace,
            session_id=session_id,
            timestamp=timestamp,
            importance=importance,
            fields=fields,
            now=datetime.now(UTC),
        )
        [draft] = self._embedded([draft])
        return self._engine.write_draft(draft, fields, timestamp)

    def upsert(self, record: MemoryRecord, *, move: bool = False) -> MemoryRecord:
        """Write ``record`` exactly as given, replacing the row with the same key.

        A live row of another scope under the key is refused
        (:class:`~memory_inject.exceptions.KeyOwnedError`) unless ``move=True``:
        the host moving that row into the record's scope (a migration), in the
        same single write.
        """
        self._own(record)
        [record] = self._embedded([record])
        return self._engine.write_record(record, move)

    def supersede(self, old_key: str, new: MemoryRecord) -> MemoryRecord:
        """Write ``new`` and mark the row under ``old_key`` superseded by it, atomically."""
        self._own(new)
        if new.key == old_key:
            raise ValueError(f"a memory cannot supersede itself (key {old_key!r})")
        [new] = self._embedded([new])
        return self._engine.write_superseding(old_key, new)

    def mark_used(self, ids: Iterable[str]) -> int:
        """Count one use of each id with ONE statement; returns the live rows touched."""
        wanted = [ids] if isinstance(ids, str) else sorted(set(ids))
        if not wanted:
            return 0
        return self._engine.write_usage(wanted)

    # -- reads ----------------------------------------------------------------

    def get(self, key: str) -> MemoryRecord | None:
        """The live record under ``key`` (superseded and expired ones too), or None."""
        return self._engine.get(key) if is_text(key) else None

    def list(
        self,
        *,
        category: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[MemoryRecord]:
        """Live records, newest first by creation time, optionally filtered."""
        if not (is_text(category) and is_text(session_id)):
            return []  # no row holds such a value
        return self._engine.list(category, session_id, limit)

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> builtins.list[MemoryEntry]:
        """Entries for ``query``, best first, with scores in 0..1 (spec 7.4).

        Superseded, forgotten and expired rows never come back; ``status`` is
        left to the governance stages. :meth:`answer` also says how it ran.
        """
        q = RecallQuery(query, limit, session_id=session_id, since=since, until=until)
        return builtins.list(self.answer(q).entries)

    async def arecall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> builtins.list[MemoryEntry]:
        """The async twin of :meth:`recall`; the event loop never waits on the engine."""
        q = RecallQuery(query, limit, session_id=session_id, since=since, until=until)
        return builtins.list((await self.aanswer(q)).entries)

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
        """One query of a recall plan.

        With ``entity_id`` or ``source``: the live rows tagged with that entity
        or written by that source, best confidence first, then newest
        (``score`` None). Otherwise ``recall`` restricted to one modality:
        ``mode="semantic"`` (vectors only; the store's own recall with an embedder of
        spellings, ``embedders.embeds_meaning``) or ``"lexical"`` (keywords only).
        ``statuses`` keeps only rows with one of those statuses, before the
        limit (a ranked recall looks deeper, see :func:`memory_inject._filter_first.restricted`).
        """
        q = RecallQuery(
            query or "",
            limit,
            session_id=session_id,
            mode=mode,
            entity_id=entity_id,
            source=source,
            statuses=None if statuses is None else tuple(statuses),
        )
        return builtins.list(self.answer(q).entries)

    def answer(self, query: RecallQuery) -> RecallAnswer:
        """Answer one :class:`~memory_inject.contract.RecallQuery`: the entries and what degraded.

        What degraded is this call's alone, so any number of turns can share
        the store. Waits for a connection end at ``query.deadline``
        (:class:`~memory_inject.exceptions.RecallWaitError` names the wait).
        """
        checked = matchable(query)
        if checked is None:
            return RecallAnswer(strategy="none")
        query = checked
        if query.filtered:
            mine = keeps(None, query.profiles)  # statuses are the tag query's own SQL
            if mine is None:
                return RecallAnswer(self._engine.tagged(query))

            def tagged(n: int) -> builtins.list[MemoryEntry]:
                return self._engine.tagged(attrs.evolve(query, limit=n))

            _, kept, over = restricted(tagged, list, query.limit, mine)
            return RecallAnswer(kept, passed_over=over)
        why = keeps(query.statuses, query.profiles)
        if why is None:
            return self._engine.ranked(query)

        def ranked(n: int) -> RecallAnswer:
            return self._engine.ranked(attrs.evolve(query, limit=n, statuses=None, profiles=None))

        found, kept, over = restricted(ranked, lambda a: a.entries, query.limit, why)
        # The nearest row may be one the restriction hides: no similarity is told.
        return attrs.evolve(found, entries=kept, passed_over=over, similarity=None)

    async def aanswer(self, query: RecallQuery) -> RecallAnswer:
        """The async twin of :meth:`answer`; the event loop never waits on the engine."""
        if query.filtered or query.restricted or matchable(query) is not query:
            # On a recall thread, never the host's executor (``_deadline.in_recall_thread``).
            return await in_recall_thread(self, partial(self.answer, query), query.deadline)
        return await self._engine.aranked(query)
