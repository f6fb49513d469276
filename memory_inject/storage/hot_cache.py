"""The hot cache: recall answers kept in process, for ``memory.retrieval_stages: [..., cache]``.

zeroclaw's ``RetrievalPipeline`` decorator (spec section 7.3): with ``"cache"``
among the retrieval stages, a repeated recall is answered from memory,
:data:`HOT_CACHE_SIZE` answers at most, each for :data:`HOT_CACHE_TTL_S`
seconds. :class:`HotCacheStore` wraps any store that has ``answer`` and
``data_version`` (every built-in store) and forwards everything else to it;
:func:`open_store` applies it when the agent file asks.

An answer is kept under the whole :class:`~memory_inject.contract.RecallQuery`
(query text, limit, scope, time window, and a plan's mode, entity, source,
statuses and profiles; not the deadline), the store's ``data_version`` and the
wrapper's own write count, so:

* one scope's rows are never another scope's answer (the scope is in the key,
  and each wrapper holds one store);
* a write through the wrapper (``store``, ``upsert``, ``forget``,
  ``mark_used``, an import; any method it does not know to be a read) drops
  every answer, also for a recall that was running while the write ran;
* a write that bypasses the wrapper is seen through ``data_version``: on
  SQLite that is the change log's head, read at every lookup, which moves with
  every write of any connection or process; on PostgreSQL it counts only the
  writes of the store object itself, so another process's write (or another
  store object's) is seen when the answer ages out, after
  :data:`HOT_CACHE_TTL_S` at most;
* a degraded answer (an embedder that failed, damaged rows) is not kept, nor
  is a failed or interrupted call;
* a row whose ``expires_at`` passes while its answer is kept is served until
  the answer ages out (the time-to-live bounds it).

Entries are shared between the answers served; the pipeline never changes an
entry (it copies to rescore), and neither may a caller.
"""

from __future__ import annotations

import functools
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime
from typing import Any, Self, TypeVar, cast

import attrs
from attrs import frozen

from memory_inject._deadline import in_recall_thread
from memory_inject.contract import RecallAnswer, RecallQuery
from memory_inject.models import MemoryEntry

__all__ = [
    "HOT_CACHE_MAX_QUERY_CHARS",
    "HOT_CACHE_SIZE",
    "HOT_CACHE_TTL_S",
    "HotCacheInfo",
    "HotCacheStore",
    "with_retrieval_stages",
]

#: Most answers kept (zeroclaw's ``RetrievalPipeline``); the least recently used goes first.
HOT_CACHE_SIZE = 256
#: Seconds an answer is served for at most (zeroclaw's).
HOT_CACHE_TTL_S = 300.0
#: A query longer than this (characters) is never kept: each answer is filed under its
#: query's text, and 256 pasted 1.4 MB prompts held 352 MB that no turn asked for again.
HOT_CACHE_MAX_QUERY_CHARS = 4096

#: Members the wrapper forwards as they are: they never change what recall returns.
_READS = frozenset(
    {
        "count",
        "data_version",
        "embedder",
        "export_jsonl",
        "get",
        "health_check",
        "interrupt_at",
        "interrupts_in_place",
        "known_entities",
        "list",
        "namespace",
        "path",
        "recall_slots",
        "recall_where",
        "standing_records",
        "stall_note",
        "status",
        "vectors_enabled",
    }
)

_S = TypeVar("_S")


@frozen(slots=True)
class HotCacheInfo:
    """How the cache has done since it was made: like ``functools.lru_cache``'s ``cache_info``.

    ``hits`` and ``misses`` count lookups (a query that cannot be a key, such
    as one holding a list, counts as neither); ``size`` is the answers held now.
    """

    hits: int
    misses: int
    size: int
    maxsize: int
    ttl_s: float


class HotCacheStore:
    """``inner`` with its recall answers kept in process (see the module docstring).

    ``maxsize`` answers at most, each for ``ttl_s`` seconds of ``clock`` (a
    :func:`time.monotonic`-like function; tests pass their own). ``TypeError``
    when ``inner`` has no ``answer`` or no ``data_version``: without them an
    answer could not be told stale. The wrapper has the render capabilities of
    ``inner`` (``honours_deadline`` included), so a render takes the same paths.
    """

    #: Set per instance's class: the wrapper honours the deadline when ``inner`` does.
    honours_deadline = False

    def __new__(cls, inner: object, **_: Any) -> Self:
        """An instance of the class whose ``honours_deadline`` is ``inner``'s."""
        if cls is HotCacheStore and getattr(type(inner), "honours_deadline", False) is True:
            return cast(Self, object.__new__(_HonouringHotCacheStore))
        return object.__new__(cls)

    def __init__(
        self,
        inner: object,
        *,
        maxsize: int = HOT_CACHE_SIZE,
        ttl_s: float = HOT_CACHE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Wrap ``inner``; nothing is cached yet."""
        for member in ("answer", "data_version"):
            if not hasattr(inner, member):
                raise TypeError(
                    f"the hot cache needs a store with '{member}' (got {type(inner).__name__})"
                )
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 0:
            raise ValueError(f"'maxsize' must be an integer >= 0 (got {maxsize!r})")
        if not ttl_s >= 0:
            raise ValueError(f"'ttl_s' must be >= 0 (got {ttl_s!r})")
        self._inner = inner
        self._maxsize = maxsize
        self._ttl = float(ttl_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._answers: OrderedDict[Hashable, tuple[float, RecallAnswer]] = OrderedDict()
        self._generation = 0
        self._version: Hashable = None
        self._hits = 0
        self._misses = 0

    def __repr__(self) -> str:
        return f"HotCacheStore({self._inner!r})"

    @property
    def inner(self) -> object:
        """The store the answers come from."""
        return self._inner

    @property
    def name(self) -> str:
        """The wrapped store's name (the recall event's ``backend``)."""
        return str(self._inner.name)  # type: ignore[attr-defined]

    # -- the cache ------------------------------------------------------------

    def cache_info(self) -> HotCacheInfo:
        """Hits, misses and size so far (:class:`HotCacheInfo`)."""
        with self._lock:
            return HotCacheInfo(
                self._hits, self._misses, len(self._answers), self._maxsize, self._ttl
            )

    def cache_clear(self) -> None:
        """Drop every answer kept (the counts stay)."""
        with self._lock:
            self._answers.clear()

    def _key(self, query: RecallQuery) -> tuple[int, Hashable, RecallQuery] | None:
        """The key of ``query`` now, or None when it cannot be one (unhashable fields, a
        text over :data:`HOT_CACHE_MAX_QUERY_CHARS`).

        The wrapper's write count is read before the store's ``data_version``
        and both before the store is asked, so an answer a write may have
        overtaken is filed under a key no later lookup makes.
        """
        if isinstance(query.query, str) and len(query.query) > HOT_CACHE_MAX_QUERY_CHARS:
            return None
        generation = self._generation
        version = self._inner.data_version  # type: ignore[attr-defined]
        if query.deadline is not None:
            query = attrs.evolve(query, deadline=None)
        key = (generation, version, query)
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def _get(self, key: tuple[int, Hashable, RecallQuery] | None) -> RecallAnswer | None:
        if key is None or self._maxsize == 0 or self._ttl == 0:
            return None
        with self._lock:
            if key[1] != self._version:
                # The store changed: no kept answer can be asked for again.
                self._answers.clear()
                self._version = key[1]
            held = self._answers.get(key)
            if held is not None and self._clock() < held[0]:
                self._answers.move_to_end(key)
                self._hits += 1
                return held[1]
            if held is not None:
                del self._answers[key]
            self._misses += 1
            return None

    def _put(
        self, key: tuple[int, Hashable, RecallQuery] | None, answer: RecallAnswer
    ) -> RecallAnswer:
        """``answer`` as it is served from now on (its entries a tuple), kept if it may be:
        not degraded, and no write through the wrapper began since its key was read."""
        if not isinstance(answer, RecallAnswer):
            return answer
        frozen_answer = attrs.evolve(answer, entries=tuple(answer.entries))
        if key is None or answer.degraded or self._maxsize == 0 or self._ttl == 0:
            return frozen_answer
        with self._lock:
            if key[0] != self._generation:
                return frozen_answer
            self._answers[key] = (self._clock() + self._ttl, frozen_answer)
            self._answers.move_to_end(key)
            while len(self._answers) > self._maxsize:
                self._answers.popitem(last=False)
        return frozen_answer

    def _wrote(self) -> None:
        """A write through the wrapper started or ended: every kept answer is dropped."""
        with self._lock:
            self._generation += 1
            self._answers.clear()

    # -- recall -----------------------------------------------------------------

    def answer(self, query: RecallQuery) -> RecallAnswer:
        """The kept answer to ``query``, or the store's (kept unless degraded)."""
        key = self._key(query)
        hit = self._get(key)
        if hit is not None:
            return hit
        return self._put(key, self._inner.answer(query))  # type: ignore[attr-defined]

    async def aanswer(self, query: RecallQuery) -> RecallAnswer:
        """The async twin of :meth:`answer`; ``data_version`` is read off the event loop."""
        inner = self._inner
        # Recall threads, never the host's executor (``_deadline.in_recall_thread``).
        key = await in_recall_thread(inner, functools.partial(self._key, query), query.deadline)
        hit = self._get(key)
        if hit is not None:
            return hit
        inner_aanswer = getattr(self._inner, "aanswer", None)
        if inner_aanswer is None:
            ask = functools.partial(inner.answer, query)  # type: ignore[attr-defined]
            found = await in_recall_thread(inner, ask, query.deadline)
        else:
            found = await inner_aanswer(query)
        return self._put(key, found)

    def recall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> list[MemoryEntry]:
        """``recall`` through the cache (the same answers as :meth:`answer`)."""
        q = RecallQuery(query, limit, session_id=session_id, since=since, until=until)
        return list(self.answer(q).entries)

    async def arecall(
        self,
        query: str,
        limit: int,
        *,
        session_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> list[MemoryEntry]:
        """The async twin of :meth:`recall`."""
        q = RecallQuery(query, limit, session_id=session_id, since=since, until=until)
        return list((await self.aanswer(q)).entries)

    # -- everything else --------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        close = getattr(self, "close", None)
        if close is not None:
            close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # PostgreSQL's async pool must close on the loop that opened it: ``aclose``.
        aclose = getattr(self, "aclose", None)
        if aclose is not None:
            await aclose()
        else:
            self.__exit__()

    def __getattr__(self, name: str) -> Any:
        # Only reached for what the class does not define. ``_inner`` is missing only
        # while the object is being made or copied: no forwarding then.
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        found = getattr(self._inner, name)
        if name in _READS or name.startswith("_") or not callable(found):
            return found
        return self._as_write(found)

    def _as_write(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` dropping every kept answer before and after it runs."""
        if inspect.iscoroutinefunction(method):

            @functools.wraps(method)
            async def awrite(*args: Any, **kwargs: Any) -> Any:
                self._wrote()
                try:
                    return await method(*args, **kwargs)
                finally:
                    self._wrote()

            return awrite

        @functools.wraps(method)
        def write(*args: Any, **kwargs: Any) -> Any:
            self._wrote()
            try:
                return method(*args, **kwargs)
            finally:
                self._wrote()

        return write


class _HonouringHotCacheStore(HotCacheStore):
    """A :class:`HotCacheStore` around a store that ends its own waits at the deadline."""

    honours_deadline = True


def with_retrieval_stages(store: _S, agent: object) -> _S:
    """``store`` as ``agent.memory.retrieval_stages`` asks: in a :class:`HotCacheStore` when
    they name ``"cache"`` and the store can be cached (it has ``answer`` and
    ``data_version``), else unchanged (``fts`` and ``vector`` are the store's own search).

    The agent is read by shape, as :func:`~memory_inject.storage.open_store` reads it. The
    wrapper forwards every member of ``store``, so it is typed as the store it wraps.
    """
    stages: Sequence[str] = getattr(getattr(agent, "memory", None), "retrieval_stages", ())
    if "cache" not in stages or not all(hasattr(store, m) for m in ("answer", "data_version")):
        return store
    return cast(_S, HotCacheStore(store))
