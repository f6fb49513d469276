"""The query builder: the store calls of one render, in the order their results take precedence.

Owns :class:`Call` (one store call, with its awaitable twin), the plan's entity
query (the store's entity names, read once per render inside a call, under the
deadline) and :func:`build_calls`, which turns a turn's query, scopes and
recall plan into :class:`~memory_inject.contract.RecallQuery` calls. The
driver that runs them is ``memory_inject._recall``; the plan values and their
merge are ``memory_inject.plan``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import attrs
from attrs import frozen

from memory_inject._filter_first import both_statuses
from memory_inject._seam import Seam, seam_of
from memory_inject._stopwords import STOPWORDS
from memory_inject.contract import Memory, RecallAnswer, RecallQuery
from memory_inject.models import MemoryEntry
from memory_inject.plan import RecallPlan, company_mentions, extract_entities
from memory_inject.temporal import TimeWindow, time_window, without_phrase
from memory_inject.trivial import CHITCHAT, has_query_terms

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

    def __init__(self, store: Memory, query: str, seam: Seam, deadline: float | None) -> None:
        self._memory = store
        self._query = query
        self._seam = seam
        self._deadline = deadline
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


#: Words that, beside a time phrase, ask only "what went on then" ("what did we talk about
#: yesterday?"): the ``time`` query then lists the window's rows instead of searching it.
_ONLY_WHEN = frozenset(
    "talk talked talking discuss discussed discussing say said tell told happen happened "
    "happening do did done doing chat chatted chatting mention mentioned speak spoke spoken "
    "go went going get got up anything something stuff things thing remind recap "
    "decide decided agree agreed plan planned "
    "summary summarise summarize conversation conversations".split()
)


_FILLER = re.compile(r"\b(?:" + "|".join(sorted(_ONLY_WHEN)) + r")\b", re.IGNORECASE)


def _what(query: str, window: TimeWindow) -> str:
    """The prompt without its time phrase and the words that only ask what went on then:
    what the plan's text queries search ("what did Anna say yesterday?" -> "what Anna")."""
    return " ".join(_FILLER.sub(" ", without_phrase(query, window)).split())


#: The words of a memory's relative time phrase (``memory_inject.temporal``); the ``time``
#: query's second call asks the week after the window for rows holding one of them, or the
#: window's weekday or month names (:func:`_time_words`).
_RELATIVE_WORDS = "yesterday ago last week weekend month night tonight today morning"


def _time_words(window: TimeWindow) -> str:
    """:data:`_RELATIVE_WORDS` and the names of the window's weekdays and months."""
    days = min(32, (window.until - window.since).days + 1)  # a month holds every weekday
    names: dict[str, None] = {}
    for i in range(days):
        day = window.since + timedelta(days=i)
        names.update(dict.fromkeys((f"{day:%A}".lower(), f"{day:%B}".lower())))
    return " ".join([_RELATIVE_WORDS, *names])


#: Phrases of a month, which cover a day without naming it (``memory_inject.temporal``).
_VAGUE = frozenset({"this_month", "last_month", "months_ago", "month_year", "in_month"})
#: How far after the window a memory may still name it ("last Friday", a week on).
_ABOUT_AFTER = timedelta(days=8)


def _about(window: TimeWindow, unscored: bool) -> Callable[[Any], Any]:
    """A filter for the ``time`` query's second call: the rows whose own time phrase, read
    at their timestamp, names ``window``, oldest first. ``unscored`` (the prompt asks only
    what went on) drops their scores, as for the rows written in the window; otherwise they
    keep the score the rest of the prompt gave them, and the relevance floor applies."""

    # A memory's "this month" overlaps every day of it without naming one: for a window of
    # a week or less only a phrase of a day or a week names it.
    vague = _VAGUE if window.until - window.since <= timedelta(days=7) else frozenset()

    def names_it(e: Any) -> bool:
        if not isinstance(e, MemoryEntry) or e.timestamp is None or not isinstance(e.content, str):
            return False
        said = time_window(e.content, e.timestamp)
        return (
            said is not None
            and said.kind not in vague
            and said.since <= window.until
            and said.until >= window.since
        )

    def keep(got: Any) -> Any:
        if isinstance(got, RecallAnswer):
            return attrs.evolve(got, entries=keep(list(got.entries)))
        rows = sorted((e for e in got if names_it(e)), key=lambda e: e.timestamp)
        return [e.with_score(None) for e in rows] if unscored else rows

    return keep


#: How many of a window's newest rows a prompt that asks only what went on then reads, to
#: show the ones that say the most (:func:`_salient`); a chat day on LoCoMo holds 20 to 40.
#: A longer window reads as many a day for up to :data:`SLICES` days.
DAY_ROWS = 64
#: How many parts a window longer than a day is cut into (one a day up to a week): the rows
#: shown take turns among the parts, so "last week" is not the week's last day.
SLICES = 7
_DAY = timedelta(days=1)


def _parts(window: TimeWindow) -> int:
    """How many parts ``window`` is cut into: its days (the last may be part of one), at most
    :data:`SLICES`."""
    return max(1, min(SLICES, -(-(window.until - window.since) // _DAY)))


_WORD = re.compile(r"\w+")


def _says(e: Any) -> int:
    """How much a row says: its distinct words of three letters or more that are neither
    function words nor chit-chat ("Bye, talk soon!" says one: "soon")."""
    if not isinstance(e, MemoryEntry) or not isinstance(e.content, str):
        return 0
    words = {w for w in _WORD.findall(e.content.lower()) if len(w) > 2}
    return len(words - STOPWORDS - CHITCHAT)


def _salient(limit: int, window: TimeWindow) -> Callable[[Any], Any]:
    """A filter keeping the ``limit`` rows that say the most, most first, ties newest first
    (the store gives a window's rows newest first): a day's last turns are its goodbyes.

    A window of several days is cut into :func:`_parts`; the rows are taken in turns, the
    best of each part first (the part whose best says the most first), so a week shows its
    days, not its one busiest day.
    """
    n = _parts(window)
    width = (window.until - window.since) / n

    def part(e: Any) -> int:
        ts = getattr(e, "timestamp", None)
        if n == 1 or not isinstance(ts, datetime) or ts.tzinfo is None:
            return 0
        return min(n - 1, max(0, int((ts - window.since) / width)))

    def keep(got: Any) -> Any:
        if isinstance(got, RecallAnswer):
            return attrs.evolve(got, entries=keep(list(got.entries)))
        rows = list(got)
        order = sorted(range(len(rows)), key=lambda i: (-_says(rows[i]), i))
        parts: dict[int, list[int]] = {}
        for i in order:  # each part's rows, best first; parts in the order of their best
            parts.setdefault(part(rows[i]), []).append(i)
        turns: list[int] = []
        for r in range(max(map(len, parts.values()), default=0)):
            turns.extend(p[r] for p in parts.values() if r < len(p))
        return [rows[i] for i in turns[:limit]]

    return keep


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
) -> list[Call]:
    """The store calls of one render, in the order their results take precedence.

    ``asynchronous`` also prepares the awaitable twin of each call (where the
    store has one), for the async runner. ``deadline`` (a ``perf_counter``
    value) travels in each :class:`RecallQuery`. ``statuses`` and ``profiles``
    (a governed turn's) restrict every query, so stores filter first and rank
    then; a plan's own statuses narrow them further. ``now`` (default: the
    clock) grounds a plan's ``time`` query (``memory_inject.plan``).
    """
    seam = seam_of(store)

    def call(sid: str | None, src: str, q: RecallQuery) -> Call:
        return Call(sid, src, seam.ask(store, q), seam.aask(store, q) if asynchronous else None)

    def kept(sid: str | None, src: str, q: RecallQuery, keep: Callable[[Any], Any]) -> Call:
        """:func:`call` with ``keep`` applied to what the store answers."""
        ask, aask = seam.ask(store, q), seam.aask(store, q) if asynchronous else None
        return Call(sid, src, _filtered(ask, keep), _afiltered(aask, keep))

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
    entities = _Entities(store, query, seam, deadline)
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
                        since=window.since,
                        until=min(window.until + _ABOUT_AFTER, clock),
                        statuses=only,
                        deadline=deadline,
                        profiles=profiles,
                    )
                    calls.append(kept(sid, q.source, about, _about(window, not searched)))
                    rq = RecallQuery(
                        query if searched else "",
                        q.limit if searched else max(DAY_ROWS * _parts(window), q.limit),
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
                        calls.append(kept(sid, q.source, rq, _salient(q.limit, window)))
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
                calls.append(Call(sid, q.source, seam.ask(store, rq)))
    return calls
