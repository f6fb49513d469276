"""A time window's rows for the plan's ``time`` query: which words ask only "when", the rows
that name a window, the parts a window is read in, and which rows say the most.

Split out of :mod:`memory_inject._calls`, which builds the calls from these.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs

from memory_inject._stopwords import STOPWORDS
from memory_inject.contract import RecallAnswer
from memory_inject.models import MemoryEntry
from memory_inject.temporal import TimeWindow, time_window, without_phrase
from memory_inject.trivial import CHITCHAT

__all__ = ["DAY_ROWS", "SLICES"]


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
_RELATIVE_WORDS = "yesterday ago last week weekend month year night tonight today morning"


#: Phrases of a month, which cover a day without naming it (``memory_inject.temporal``).
_VAGUE = frozenset({"this_month", "last_month", "months_ago", "month_year", "in_month"})
#: Phrases of a year, which cover a day, a week or a month without naming it.
_VAGUE_YEAR = frozenset({"this_year", "last_year", "years_ago", "in_year"})
#: How far after the window a memory may still name it ("last Friday", a week on).
_ABOUT_AFTER = timedelta(days=8)
#: A window longer than this reads the rows that name it only after it: inside a long
#: window a row's own "yesterday" is one of the window's rows, read with the others, not
#: ahead of them (a year would otherwise open with every row that says "last week").
_ABOUT_INSIDE = timedelta(days=31)
_YEAR = timedelta(days=364)  # a calendar year's window, a microsecond short of 365 days


def _time_words(window: TimeWindow) -> str:
    """:data:`_RELATIVE_WORDS` and the names of the window's weekdays and months; for a
    window of a year or more its years ("In 2025 we moved")."""
    span = window.until - window.since
    days = min(32, span.days + 1)  # a month holds every weekday
    names: dict[str, None] = {}
    for i in range(days):
        day = window.since + timedelta(days=i)
        names.update(dict.fromkeys((f"{day:%A}".lower(), f"{day:%B}".lower())))
    if span >= _YEAR:
        names.update(dict.fromkeys(str(y) for y in range(window.since.year, window.until.year + 1)))
    return " ".join([_RELATIVE_WORDS, *names])


def _about_after(window: TimeWindow) -> timedelta:
    """How long after ``window`` a memory may still name it: :data:`_ABOUT_AFTER`, or for a
    longer window as long as it lasts (a month's "last month", a year's "last year")."""
    return max(_ABOUT_AFTER, window.until - window.since)


def _about_since(window: TimeWindow) -> datetime:
    """Where the ``time`` query's call for the rows that name ``window`` starts."""
    if window.until - window.since <= _ABOUT_INSIDE:
        return window.since
    return window.until


def _about(window: TimeWindow, unscored: bool) -> Callable[[Any], Any]:
    """A filter for the ``time`` query's second call: the rows whose own time phrase, read
    at their timestamp, names ``window``, oldest first. ``unscored`` (the prompt asks only
    what went on) drops their scores, as for the rows written in the window; otherwise they
    keep the score the rest of the prompt gave them, and the relevance floor applies."""

    # A memory's "this month" overlaps every day of it without naming one: for a window of
    # a week or less only a phrase of a day or a week names it; a year's phrase names no
    # window shorter than a year, and "since May" (on to the memory's time) none at all.
    span = window.until - window.since
    vague = (_VAGUE if span <= timedelta(days=7) else frozenset()) | (
        _VAGUE_YEAR if span < _YEAR else frozenset()
    )

    def names_it(e: Any) -> bool:
        if not isinstance(e, MemoryEntry) or e.timestamp is None or not isinstance(e.content, str):
            return False
        said = time_window(e.content, e.timestamp)
        return (
            said is not None
            and said.kind not in vague
            and not said.kind.startswith("since_")
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
#: A longer window reads as many from each of its :data:`SLICES` parts.
DAY_ROWS = 64
#: How many parts a window longer than a day is cut into (one a day up to a week), each read
#: for its newest DAY_ROWS: the rows shown take turns among the parts, so "last week" is not
#: the week's last day, nor "in May" its last days.
SLICES = 7
_DAY = timedelta(days=1)


def _parts(window: TimeWindow) -> int:
    """How many parts ``window`` is cut into: its days (the last may be part of one), at most
    :data:`SLICES`."""
    return max(1, min(SLICES, -(-(window.until - window.since) // _DAY)))


def _slices(window: TimeWindow) -> list[tuple[datetime, datetime]]:
    """The :func:`_parts` of ``window`` as inclusive ``(since, until)`` bounds, in order."""
    n = _parts(window)
    width = (window.until - window.since) / n
    starts = [window.since + k * width for k in range(n)]
    ends = [s - timedelta(microseconds=1) for s in starts[1:]] + [window.until]
    return list(zip(starts, ends, strict=True))


def _joined(results: list[Any]) -> Any:
    """The answers of a window's parts as one: their entries in turn, what degraded in any."""
    answers = [r for r in results if isinstance(r, RecallAnswer)]
    if len(answers) < len(results):
        return [e for r in results for e in (r.entries if isinstance(r, RecallAnswer) else r)]
    return attrs.evolve(
        answers[0],
        entries=[e for a in answers for e in a.entries],
        degraded=tuple(dict.fromkeys(d for a in answers for d in a.degraded)),
        keyword_hits=sum(a.keyword_hits for a in answers),
        vector_hits=sum(a.vector_hits for a in answers),
        passed_over=[e for a in answers for e in a.passed_over],
    )


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
    starts = [since for since, _ in _slices(window)]  # the parts the reads ask for

    def part(e: Any) -> int:
        ts = getattr(e, "timestamp", None)
        if len(starts) == 1 or not isinstance(ts, datetime) or ts.tzinfo is None:
            return 0
        return max(0, bisect_right(starts, ts) - 1)

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
