"""The store contract: what a store must implement, and what it may add.

A store is any object; nothing here is a base class to inherit. The renderer
needs one thing, :class:`Memory` (a ``name`` and ``recall``). Everything else
a store can do is an optional *capability*, one small runtime-checkable
Protocol each. Callers test for a capability with ``isinstance(store,
SupportsX)`` and fall back when it is missing; a store never has to implement
a method it has no use for, and never fails a turn by lacking one.

Required of every store handed to ``render_memory_context``:

* :class:`Memory`: ``name`` and ``recall(query, limit, *, session_id, since,
  until)``. An empty, blank or ``"*"`` query means "most recent first"
  (``score=None``); ``since``/``until`` are inclusive; a session id sees that
  session's rows and, on the built-in stores, sessionless ``core``/``daily``
  rows, never another session's.

What the built-in stores implement (``InMemoryStore``, ``SQLiteStore``,
``PostgresStore``), and what the CLI manages:

* :class:`MemoryStore`: :class:`Memory` plus :class:`SupportsWrite`
  (``store(key, content, category="core", *, session_id=None, ...)``, an
  upsert by key) and ``get``, ``forget``, ``list``, ``count``.

Optional capabilities (``docs/storage.md`` lists which store has which):

=========================  ==============================  ===========================
protocol                   member                          used by
=========================  ==============================  ===========================
SupportsWrite              ``store(...)``                  autosave, CLI ``add``
SupportsAsyncWrite         ``astore(...)``                 async autosave
SupportsAsyncRecall        ``arecall(...)``                ``arender_memory_context``
SupportsAnswer             ``answer(RecallQuery)``         every render (one value per call)
SupportsAsyncAnswer        ``aanswer(RecallQuery)``        ``arender_memory_context``
SupportsFilteredRecall     ``recall_where(...)``           recall plans
SupportsEntities           ``known_entities()``            recall plans (entity query)
SupportsMentions           ``entities_mentioned(...)``     recall plans (a company named
                                                           in the input, by content)
SupportsUsage              ``mark_used(ids)``              recall plans (``track_usage``)
SupportsStandingContext    ``standing_records``,           ``standing.enabled`` (PI's
                           ``data_version``                hard rules and L1 every turn)
SupportsRecords            ``upsert``, ``supersede``       integrators, JSONL tooling
SupportsJsonl              ``import_jsonl``, ``export_``   CLI ``import`` / ``export``
SupportsErase              ``erase``, ``erase_forgotten``  CLI ``erase``, retention jobs
SupportsNamespaces         ``namespace``                   agents sharing one database
SupportsVectors            ``embedder``                    hybrid (semantic) recall
SupportsClose              ``close()``                     CLI, demo
SupportsInterrupt          ``interrupt_at(until)``         the deadline without a thread
SupportsExcludingRecall    ``recall_excludes``             a refill past never-shown rows
SupportsPath               ``path``                        CLI ``stats``
=========================  ==============================  ===========================

:class:`AsyncMemory` is the async twin of :class:`Memory` for code that only
awaits. The storage contract suite (``tests/storage/test_contract.py``) runs
every test on every store that has the capabilities the test declares.

This module owns the protocols a render and a full store speak; the seam's
values (``_recall_query``), the capabilities no render asks for
(``_store_capabilities``), :func:`report_wait` (``_render_ears``) and :func:`supports`
(``_supports``) live in private modules and are re-exported here, their public home.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from datetime import datetime
from typing import Protocol, runtime_checkable

from memory_inject._recall_query import RecallAnswer, RecallExclusion, RecallQuery
from memory_inject._render_ears import report_wait
from memory_inject._store_capabilities import (
    SupportsClose,
    SupportsErase,
    SupportsExcludingRecall,
    SupportsJsonl,
    SupportsNamespaces,
    SupportsPath,
    SupportsRecords,
    SupportsVectors,
)
from memory_inject._supports import supports
from memory_inject.models import MemoryEntry
from memory_inject.records import MemoryRecord

__all__ = [
    "AsyncMemory",
    "Memory",
    "MemoryStore",
    "RecallAnswer",
    "RecallExclusion",
    "RecallQuery",
    "SupportsAnswer",
    "SupportsAsyncAnswer",
    "SupportsAsyncRecall",
    "SupportsAsyncWrite",
    "SupportsClose",
    "SupportsEntities",
    "SupportsErase",
    "SupportsExcludingRecall",
    "SupportsFilteredRecall",
    "SupportsInterrupt",
    "SupportsJsonl",
    "SupportsMentions",
    "SupportsNamespaces",
    "SupportsPath",
    "SupportsRecords",
    "SupportsStandingContext",
    "SupportsUsage",
    "SupportsVectors",
    "SupportsWrite",
    "report_wait",
    "supports",
]


@runtime_checkable
class Memory(Protocol):
    """What the renderer needs of a store: a ``name`` for the event, and ``recall``.

    ``recall`` returns entries ordered by relevance (best first). An empty,
    whitespace-only or bare ``"*"`` query means "most recent first" with
    ``score=None``. ``since``/``until`` are inclusive bounds on the timestamp.
    """

    @property
    def name(self) -> str: ...

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Sequence[MemoryEntry]: ...


@runtime_checkable
class SupportsAsyncRecall(Protocol):
    """``arecall``: awaited by ``arender_memory_context``.

    Without it the async render runs the store's ``recall`` in a worker thread.
    """

    def arecall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Awaitable[Sequence[MemoryEntry]]: ...


@runtime_checkable
class AsyncMemory(SupportsAsyncRecall, Protocol):
    """The async twin of :class:`Memory`: a ``name`` and ``arecall``."""

    @property
    def name(self) -> str: ...


@runtime_checkable
class SupportsWrite(Protocol):
    """``store``: the one write API, an upsert by key; autosave and the CLI's ``add`` call it.

    ``fields`` are further record fields (``tags``, ``confidence``, ...); an
    unknown one is a ``TypeError``. Without it autosave reports
    ``autosave_failed`` on the turn and the turn goes on.
    """

    def store(
        self,
        key: str,
        content: str,
        category: str = ...,
        *,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        importance: float | None = None,
        **fields: object,
    ) -> object: ...


@runtime_checkable
class SupportsAsyncWrite(Protocol):
    """``astore``: the async twin of :class:`SupportsWrite`, awaited by async autosave.

    Without it async autosave runs ``store`` in a worker thread.
    """

    def astore(
        self,
        key: str,
        content: str,
        category: str = ...,
        *,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        importance: float | None = None,
        **fields: object,
    ) -> Awaitable[object]: ...


@runtime_checkable
class MemoryStore(Memory, SupportsWrite, Protocol):
    """A full store: what every built-in store implements and the CLI manages.

    :class:`Memory` and :class:`SupportsWrite`, plus ``get(key)`` (the record,
    or None), ``forget(key)`` (True if there was one; it is never recalled,
    listed or counted again), ``list(category=, session_id=, limit=)`` (newest
    first) and ``count()`` (the records not forgotten).
    """

    def get(self, key: str) -> MemoryRecord | None: ...

    def forget(self, key: str) -> bool: ...

    def list(
        self,
        *,
        category: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> Sequence[MemoryRecord]: ...

    def count(self) -> int: ...


@runtime_checkable
class SupportsAnswer(Protocol):
    """``answer``: a :class:`RecallQuery` in, a :class:`RecallAnswer` out; every render uses it.

    What went wrong in one call travels with that call's answer, so many
    turns can share one store and each hears only about its own recall.
    Without it the render asks ``recall`` (and ``recall_where`` for a plan's
    queries) through a thin adapter, and the answer reports nothing degraded.
    """

    def answer(self, query: RecallQuery) -> RecallAnswer: ...


@runtime_checkable
class SupportsAsyncAnswer(Protocol):
    """``aanswer``: the async twin of :class:`SupportsAnswer`, awaited by the async render."""

    def aanswer(self, query: RecallQuery) -> Awaitable[RecallAnswer]: ...


@runtime_checkable
class SupportsFilteredRecall(Protocol):
    """``recall_where``: one query of a recall plan, run by the render when a plan is set.

    Without it a plan's semantic and lexical queries use plain ``recall``, and
    its entity and plugin queries filter a window of recent rows in Python.
    ``statuses`` (passed only when the plan restricts them) keeps rows of
    those statuses and applies before ``limit``, so rows of other statuses
    never take a slot.
    """

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
    ) -> Sequence[MemoryEntry]: ...


@runtime_checkable
class SupportsEntities(Protocol):
    """``known_entities``: ``{display name: entity id}``, read by a plan's entity query.

    Without it no entity is recognised in the turn and the entity query is dropped.
    """

    def known_entities(self) -> Mapping[str, str]: ...


@runtime_checkable
class SupportsMentions(Protocol):
    """``entities_mentioned``: names in the turn's input resolved to entity ids by content.

    A plan's entity query asks it for the capitalised names of the input that
    no known entity name matched (``Acme Corp`` when the company's id is a
    Notion page id): ``{mention: entity id}`` for those the store's rows name
    unambiguously. Without it only :class:`SupportsEntities` names match.
    """

    def entities_mentioned(
        self, mentions: Sequence[str], *, prefix: str = "company:"
    ) -> Mapping[str, str]: ...


@runtime_checkable
class SupportsUsage(Protocol):
    """``mark_used``: counts a use of each rendered id, called after a plan with ``track_usage``.

    Without it usage is not counted; the render is the same.
    """

    def mark_used(self, ids: Iterable[str]) -> int: ...


@runtime_checkable
class SupportsStandingContext(Protocol):
    """``standing_records`` and ``data_version``: PI's standing context, read every turn.

    ``standing_records(profile_id, limit=, min_confidence=, categories=)``
    returns the live, ``active`` records bound to ``profile_id`` or to no
    profile (``None``: only unbound ones): the first ``limit`` of layer L1 in
    insertion order, then the ``limit`` most confident of layer L2 whose
    ``rule_type`` makes a hard rule and whose confidence is at least
    ``min_confidence``, then for each category of ``categories`` (name ->
    earliest timestamp, or None) its ``limit`` most recently updated records;
    no key twice, ``score`` None. Each limit counts only the rows the turn may
    see (the render's session rule): with ``sessions=`` (the turn's own ids)
    the rows bound to no session or to one of them, and a profile's session
    records (``session:<id>``); with ``shared_only=True`` (a scheduled turn)
    only the rows bound to no session; with neither, every row. A store whose
    method names neither keyword (written before they existed) is still
    called, without them: its rows are filtered after the limit, so another
    session's may crowd the turn's out.
    ``data_version`` changes whenever a write may have changed that answer, so
    :mod:`memory_inject.standing` caches it between writes. Without the
    capability a turn gets only what recall returned.
    """

    @property
    def data_version(self) -> Hashable: ...

    def standing_records(
        self,
        profile_id: str | None,
        *,
        limit: int,
        min_confidence: float,
        categories: Mapping[str, datetime | None] | None = None,
        sessions: Sequence[str] = (),
        shared_only: bool = False,
    ) -> Sequence[MemoryEntry]: ...


@runtime_checkable
class SupportsInterrupt(Protocol):
    """``interrupt_at``: the store stops its own calls at a deadline.

    Inside ``with store.interrupt_at(until):`` (``until`` a
    :func:`time.perf_counter` value) every call this thread makes returns or
    raises :class:`~memory_inject.exceptions.RecallInterruptedError` by
    ``until``, as far as the store's own work goes (SQLite: a progress handler
    interrupts the statement; its locks are waited for no longer than that).
    ``interrupts_in_place`` says whether that covers the whole call now (no
    model embedder to wait for, no lock that the store cannot stop waiting
    for, such as a SQLite file's WAL-index lock): then a render with a
    deadline makes the calls in its own thread, with no worker thread hop;
    otherwise the calls still run in a worker, interrupted there at the
    deadline so an abandoned call never holds the store. Without it the
    worker is used and an abandoned call runs until the store answers.

    A store may also have ``stall_note() -> str | None``: when a recall ran
    past its deadline or the store was busy, the render asks it why and adds
    the answer to the event's ``degraded`` (SQLite: ``wal_lock: ...``).
    """

    @property
    def interrupts_in_place(self) -> bool: ...

    def interrupt_at(self, until: float) -> AbstractContextManager[None]: ...


#: Set on a recall thread around a render's calls: lends the call's slot of the store to
#: the next turn while the call waits for its prompt's vector, and answers what takes it
#: back (``storage._query_vectors``; ``memory_inject._deadline`` sets it).
_SLOT_LEND: ContextVar[Callable[[], Callable[[], None]] | None] = ContextVar(
    "memory_inject_slot_lend", default=None
)


# The re-exported names are this module's (docs, reprs, and the contract suite's
# capability table read ``__module__``), as trio's ``fixup_module_metadata`` does.
for _public in __all__:
    _obj = globals()[_public]
    if getattr(_obj, "__module__", __name__) != __name__:
        _obj.__module__ = __name__
del _public, _obj
