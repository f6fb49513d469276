"""The query builder: the store calls of one render, in the order their results take precedence.

Owns :class:`Call` (one store call, with its awaitable twin), the plan's entity
query (the store's entity names, read once per render inside a call, under the
deadline) and :func:`build_calls`, which turns a turn's query, scopes and
recall plan into :class:`~memory_inject.contract.RecallQuery` calls. The
driver that runs them is ``memory_inject._recall``; the plan values and their
merge are ``memory_inject.plan``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import attrs
from attrs import frozen

from memory_inject._filter_first import both_statuses
from memory_inject._seam import Seam, seam_of
from memory_inject._window_rows import (
    DAY_ROWS,
    _about,
    _about_after,
    _about_since,
    _joined,
    _salient,
    _slices,
    _time_words,
    _what,
)
from memory_inject.contract import Memory, RecallAnswer, RecallExclusion, RecallQuery
from memory_inject.models import MemoryEntry
from memory_inject.plan import RecallPlan, company_mentions, extract_entities
from memory_inject.temporal import TimeWindow, time_window
from memory_inject.trivial import has_query_terms

__all__ = ["STANDING", "Call", "build_calls"]

#: The source of the standing-context call (``memory_inject.standing``): its
#: entries follow the query's, and a key the query returned keeps its entry.
STANDING = "standing"


@frozen
class Call:
    """One store call: which scope and plan source it serves, and how to make it."""

    scope: str | None
    source: str
    fn: Callable[[], Any]
    afn: Callable[[], Awaitable[Any]] | None = None


class _Entities:
    """A plan's entity query: the store's entity names, read once per render, inside a call.

    ``known_entities`` used to be read while the calls were built, before the
    deadline applied, so a slow or hung store held the turn there. A failure
    is the entity query's error (one per scope); no entity in the turn is an
    empty batch.
    """

    def __init__(
        self,
        store: Memory,
        query: str,
        seam: Seam,
        deadline: float | None,
        exclude: RecallExclusion | None = None,
    ) -> None:
        self._memory = store
        self._query = query
        self._seam = seam
        self._deadline = deadline
        self._exclude = exclude
        self._ids: list[str] | None = None

    def ids(self) -> list[str]:
        if self._ids is None:
            store = self._memory
            names = dict(store.known_entities()) if self._seam.entities else {}  # type: ignore[attr-defined]
            found = extract_entities(self._query, names.keys())
            ids = [names[c] for c in found.companies]
            mentions = company_mentions(self._query, found) if self._seam.mentions else ()
            if mentions:
                # founder-os resolves a company the input names by the rows that name it.
                resolved = store.entities_mentioned(mentions)  # type: ignore[attr-defined]
                ids.extend(str(v) for v in dict(resolved).values())
            self._ids = ids
        return self._ids

    def query(
        self,
        limit: int,
        scope: str | None,
        statuses: tuple[str, ...] | None,
        profiles: tuple[str | None, ...] | None = None,
    ) -> Any:
        """The rows of every company the input names (``acme`` and ``acme-corp`` alike),
        most confident first, at most ``limit`` in all."""
        ids = list(dict.fromkeys(self.ids()))
        if not ids:
            return []
        batches = []
        degraded: list[str] = []
        over: list[MemoryEntry] = []
        for entity_id in ids:
            q = RecallQuery(
                "",
                limit,
                session_id=scope,
                entity_id=entity_id,
                statuses=statuses,
                deadline=self._deadline,
                profiles=profiles,
                exclude=self._exclude,
            )
            got = self._seam.ask(self._memory, q)()
            if len(ids) == 1:
                return got
            if isinstance(got, RecallAnswer):
                degraded.extend(got.degraded)
                over.extend(got.passed_over)
                got = got.entries
            batches.append(list(got))
        seen: set[str] = set()
        merged = []
        for e in sorted((e for b in batches for e in b), key=lambda e: -_confidence_of(e)):
            if isinstance(e, MemoryEntry) and e.key not in seen:
                seen.add(e.key)
                merged.append(e)
        return RecallAnswer(merged[:limit], degraded=tuple(degraded), passed_over=over)


def _confidence_of(entry: MemoryEntry) -> float:
    value = entry.extra.get("confidence") if isinstance(entry, MemoryEntry) else None
    return float(value) if isinstance(value, int | float) else -1.0


def _filtered(fn: Callable[[], Any], keep: Callable[[Any], Any]) -> Callable[[], Any]:
    return lambda: keep(fn())


def _afiltered(
    afn: Callable[[], Awaitable[Any]] | None, keep: Callable[[Any], Any]
) -> Callable[[], Awaitable[Any]] | None:
    if afn is None:
        return None

    async def run() -> Any:
        return keep(await afn())

    return run


def _grounded(query: str, plan: RecallPlan | None, clock: datetime) -> TimeWindow | None:
    """The time window of a plan with a ``time`` query, if the prompt names one."""
    if plan is None or not any(q.source == "time" for q in plan.queries):
        return None
    return time_window(query, clock)


def build_calls(
    store: Memory,
    query: str,
    limit: int,
    scopes: tuple[str | None, ...],
    plan: RecallPlan | None,
    source: str | None,
    *,
    asynchronous: bool = False,
    deadline: float | None = None,
    statuses: tuple[str, ...] | None = None,
    profiles: tuple[str | None, ...] | None = None,
    now: datetime | None = None,
    exclude: RecallExclusion | None = None,
) -> list[Call]:
    """The store calls of one render, in the order their results take precedence.

    ``asynchronous`` also prepares the awaitable twin of each call (where the
    store has one), for the async runner. ``deadline`` (a ``perf_counter``
    value) travels in each :class:`RecallQuery`. ``statuses`` and ``profiles``
    (a governed turn's) restrict every query, so stores filter first and rank
    then; a plan's own statuses narrow them further. ``now`` (default: the
    clock) grounds a plan's ``time`` query (``memory_inject.plan``). ``exclude`` (a
    refill's, for a store whose seam ``excludes``) travels in every query.
    """
    seam = seam_of(store)
    if exclude is not None and not seam.excludes:
        exclude = None

    def ex(q: RecallQuery) -> RecallQuery:
        return q if exclude is None else attrs.evolve(q, exclude=exclude)

    def call(sid: str | None, src: str, q: RecallQuery) -> Call:
        q = ex(q)
        return Call(sid, src, seam.ask(store, q), seam.aask(store, q) if asynchronous else None)

    def kept(sid: str | None, src: str, q: RecallQuery, keep: Callable[[Any], Any]) -> Call:
        """:func:`call` with ``keep`` applied to what the store answers."""
        q = ex(q)
        ask, aask = seam.ask(store, q), seam.aask(store, q) if asynchronous else None
        return Call(sid, src, _filtered(ask, keep), _afiltered(aask, keep))

    def parted(sid: str | None, q: RecallQuery, window: TimeWindow, n: int) -> Call:
        """:func:`kept` with :func:`_salient` over each part of ``window`` (:func:`_slices`)
        asked ``q``, as one call: a busy window's newest rows would be its last part's."""
        src, keep = "time", _salient(n, window)
        # Newest part first, so the joined rows are newest first as one read's are: a tie
        # between parts goes to the later one, as within a part.
        qs = [attrs.evolve(ex(q), since=a, until=b) for a, b in reversed(_slices(window))]
        if len(qs) == 1:
            return kept(sid, src, q, keep)
        asks = [seam.ask(store, x) for x in qs]
        aasks = [seam.aask(store, x) for x in qs] if asynchronous else []

        async def together() -> Any:
            return keep(_joined([await a() for a in aasks if a is not None]))

        afn = together if aasks and all(a is not None for a in aasks) else None
        return Call(sid, src, lambda: keep(_joined([ask() for ask in asks])), afn)

    def default(sid: str | None, n: int) -> RecallQuery:
        return RecallQuery(
            query, n, session_id=sid, deadline=deadline, statuses=statuses, profiles=profiles
        )

    if plan is None:
        return [call(sid, "default", default(sid, limit)) for sid in scopes]
    only = both_statuses(plan.statuses, statuses)
    calls: list[Call] = []
    clock = now if now is not None else datetime.now(UTC)
    if clock.tzinfo is None:  # as time_window reads it
        clock = clock.replace(tzinfo=UTC)
    window = _grounded(query, plan, clock)
    searched = True
    if window is not None:
        # "yesterday" is when, not what: the text queries search the rest of the prompt,
        # and none runs when the rest asks nothing but when.
        query = _what(query, window)
        searched = has_query_terms(query)  # else it asks only what went on then
    # The entity lookup is a store call too: it runs inside the calls, under the deadline.
    entities = _Entities(store, query, seam, deadline, exclude)
    for sid in scopes:
        for q in plan.queries:
            if q.source == "time":
                if window is not None:
                    # First the rows that name the window ("yesterday", written the day
                    # after), then the rows written in it.
                    about = RecallQuery(
                        query if searched else _time_words(window),
                        max(4 * q.limit, 32),
                        session_id=sid,
                        since=_about_since(window),
                        until=min(window.until + _about_after(window), clock),
                        statuses=only,
                        deadline=deadline,
                        profiles=profiles,
                    )
                    calls.append(kept(sid, q.source, about, _about(window, not searched)))
                    rq = RecallQuery(
                        query if searched else "",
                        q.limit if searched else max(DAY_ROWS, q.limit),
                        session_id=sid,
                        since=window.since,
                        until=window.until,
                        statuses=only,
                        deadline=deadline,
                        profiles=profiles,
                    )
                    if searched:
                        calls.append(call(sid, q.source, rq))
                    else:  # the day's rows that say the most, not its goodbyes
                        calls.append(parted(sid, rq, window, q.limit))
            elif q.source in ("semantic", "lexical", "default") and not searched:
                continue
            elif q.source in ("semantic", "lexical"):
                rq = RecallQuery(
                    query,
                    q.limit,
                    session_id=sid,
                    mode=q.source,
                    statuses=only,
                    deadline=deadline,
                    profiles=profiles,
                )
                calls.append(call(sid, q.source, rq))
            elif q.source == "default":
                calls.append(call(sid, q.source, default(sid, q.limit)))
            elif q.source == "entity":
                calls.append(
                    Call(sid, q.source, partial(entities.query, q.limit, sid, only, profiles))
                )
            elif q.source == "plugin" and source:
                rq = RecallQuery(
                    "",
                    q.limit,
                    session_id=sid,
                    source=source,
                    statuses=only,
                    deadline=deadline,
                    profiles=profiles,
                )
                calls.append(Call(sid, q.source, seam.ask(store, ex(rq))))
    return calls
