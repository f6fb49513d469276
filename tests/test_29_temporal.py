"""Temporal grounding (issue 29): a prompt's "yesterday" is a time window, not a word.

Without it, "what did we talk about yesterday?" recalls the memories that *say*
yesterday, whenever they were written. A recall plan's ``time`` query asks the store
for the rows written inside the window the prompt names, resolved at the turn's
``now`` (``memory_inject.temporal``), and the plan's text queries search the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

from memory_inject import arender_memory_context, render_memory_context
from memory_inject.config import MemoryInjectConfig, RecallPlanConfig
from memory_inject.config._recall_plan import PlanQueryConfig
from memory_inject.config.loading import parse_agent_config
from memory_inject.exceptions import ConfigError
from memory_inject.storage import InMemoryStore, SQLiteStore
from memory_inject.temporal import time_window, without_phrase

#: A Friday evening.
NOW = datetime(2026, 12, 4, 18, 0, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _day(y: int, m: int, d: int) -> tuple[datetime, datetime]:
    start = datetime(y, m, d, tzinfo=UTC)
    return start, start + timedelta(days=1) - _US


def _span(a: tuple[int, int, int], b: tuple[int, int, int]) -> tuple[datetime, datetime]:
    """From the first day's midnight to just before the second's."""
    return datetime(*a, tzinfo=UTC), datetime(*b, tzinfo=UTC) - _US


class TestTimeWindow:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("what did we talk about yesterday?", _day(2026, 12, 3)),
            ("Yesterday", _day(2026, 12, 3)),
            ("and the day before yesterday?", _day(2026, 12, 2)),
            ("3 days ago", _day(2026, 12, 1)),
            ("a couple of days ago", _day(2026, 12, 2)),
            (
                "last night",
                (datetime(2026, 12, 3, 12, tzinfo=UTC), datetime(2026, 12, 4, 6, tzinfo=UTC) - _US),
            ),
            ("today", (datetime(2026, 12, 4, tzinfo=UTC), NOW)),
            ("this morning", (datetime(2026, 12, 4, tzinfo=UTC), NOW)),
            ("this week", (datetime(2026, 11, 30, tzinfo=UTC), NOW)),
            ("last week", _span((2026, 11, 23), (2026, 11, 30))),
            ("two weeks ago", _span((2026, 11, 16), (2026, 11, 23))),
            ("earlier this month", (datetime(2026, 12, 1, tzinfo=UTC), NOW)),
            ("last month", _span((2026, 11, 1), (2026, 12, 1))),
            ("3 months ago", _span((2026, 9, 1), (2026, 10, 1))),
            ("over the weekend", _span((2026, 11, 28), (2026, 11, 30))),
            ("last tuesday", _day(2026, 12, 1)),
            ("last friday", _day(2026, 11, 27)),  # today is a Friday: the one before
            ("what did we decide on Tuesday?", _day(2026, 12, 1)),
            ("what was said on Friday?", (datetime(2026, 12, 4, tzinfo=UTC), NOW)),
            ("on 8 May 2023", _day(2023, 5, 8)),
            ("May 8th, 2023", _day(2023, 5, 8)),
            ("the 8th of May 2023", _day(2023, 5, 8)),
            ("notes of 2023-05-08", _day(2023, 5, 8)),
            ("on 28 november", _day(2026, 11, 28)),
            ("on 28 december", _day(2025, 12, 28)),  # no year: the latest one not after today
            ("what did we do in May?", _span((2026, 5, 1), (2026, 6, 1))),
            ("May 2023", _span((2023, 5, 1), (2023, 6, 1))),
            ("in December.", (datetime(2026, 12, 1, tzinfo=UTC), NOW)),
            ("yesterday or last week", _day(2026, 12, 3)),  # the first phrase wins
            ("what did Jo finish last Friday, on 23 January, 2022?", _day(2022, 1, 23)),
            ("last week, not yesterday", _span((2026, 11, 23), (2026, 11, 30))),
            ("what did we talk about in 2023?", _span((2023, 1, 1), (2024, 1, 1))),
            ("during 2025", _span((2025, 1, 1), (2026, 1, 1))),
            ("throughout 1970", _span((1970, 1, 1), (1971, 1, 1))),
            ("in 2026", (datetime(2026, 1, 1, tzinfo=UTC), NOW)),
            ("what happened last year?", _span((2025, 1, 1), (2026, 1, 1))),
            ("this past year", _span((2025, 1, 1), (2026, 1, 1))),
            ("earlier this year", (datetime(2026, 1, 1, tzinfo=UTC), NOW)),
            ("two years ago", _span((2024, 1, 1), (2025, 1, 1))),
            ("what did Jo say in May 2023?", _span((2023, 5, 1), (2023, 6, 1))),  # the month
            ("since last week", (datetime(2026, 11, 23, tzinfo=UTC), NOW)),
            ("what changed since yesterday?", (datetime(2026, 12, 3, tzinfo=UTC), NOW)),
            ("since Tuesday", (datetime(2026, 12, 1, tzinfo=UTC), NOW)),
            ("since Friday", (datetime(2026, 12, 4, tzinfo=UTC), NOW)),  # today is one
            ("what did I decide since May?", (datetime(2026, 5, 1, tzinfo=UTC), NOW)),
            ("since December", (datetime(2026, 12, 1, tzinfo=UTC), NOW)),
            ("since 8 May 2023", (datetime(2023, 5, 8, tzinfo=UTC), NOW)),
            ("Since  2 days ago", (datetime(2026, 12, 2, tzinfo=UTC), NOW)),
        ],
    )
    def test_phrases_resolve_to_their_window(
        self, text: str, expected: tuple[datetime, datetime]
    ) -> None:
        window = time_window(text, NOW)
        assert window is not None
        assert expected == (window.since, window.until)
        assert window.phrase.lower() in text.lower()

    @pytest.mark.parametrize(
        "text",
        [
            "tomorrow",
            "next week",
            "this weekend",  # on a Friday: the coming one
            "on Monday",  # the last or the next: not grounded
            "what do I have on Monday?",  # not in the past tense: the next one
            "I may have said so",
            "at 10:30",
            "March 3: notes",
            "on 31 february",
            "2023-13-01",
            "on 28 december 2026",  # after today
            "in 2027",  # a year to come
            "during 1969",  # before any memory's time
            "the 2023 model",  # a year with no "in": a name, not a time
            "call 2023 now",
            "in 2023-13-01",
            "what did we do since then?",
            "since 28 december 2026",  # after today
            "since tomorrow",
            "",
            "\x00\u202e👍 " * 50,
            "what is the capital of Peru?",
        ],
    )
    def test_no_past_window_is_none(self, text: str) -> None:
        assert time_window(text, NOW) is None

    def test_since_is_part_of_the_phrase_and_its_kind(self) -> None:
        """ "since" runs the window on to now: it is cut from the prompt with the phrase,
        and the kind says so (a memory's "since May" names no one day)."""
        text = "what did Anna say since last week about Lisbon?"
        window = time_window(text, NOW)
        assert window is not None
        assert ("since last week", "since_last_week") == (window.phrase, window.kind)
        assert "what did Anna say about Lisbon?".split() == without_phrase(text, window).split()
        plain = time_window("what did Anna say last week?", NOW)
        assert plain is not None
        assert ("last week", "last_week") == (plain.phrase, plain.kind)

    def test_a_weekend_going_on_and_the_one_before(self) -> None:
        sunday = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
        now_window = time_window("over the weekend", sunday)
        last = time_window("last weekend", sunday)
        this = time_window("this weekend", sunday)
        assert now_window is not None and last is not None and this is not None
        assert (datetime(2026, 12, 5, tzinfo=UTC), sunday) == (
            now_window.since,
            now_window.until,
        )
        assert (datetime(2026, 11, 28, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC) - _US) == (
            last.since,
            last.until,
        )
        assert datetime(2026, 12, 5, tzinfo=UTC) == this.since

    def test_days_begin_at_midnight_in_the_clock_s_zone(self) -> None:
        """At 01:00 in UTC-5 (06:00 UTC) "yesterday" is the day before in that zone."""
        zone = timezone(timedelta(hours=-5))
        now = datetime(2026, 12, 4, 1, 0, tzinfo=zone)
        window = time_window("what happened yesterday", now)
        assert window is not None
        assert datetime(2026, 12, 3, tzinfo=zone) == window.since
        assert datetime(2026, 12, 3, 5, tzinfo=UTC) == window.since.astimezone(UTC)

    def test_a_naive_clock_is_utc(self) -> None:
        window = time_window("yesterday", NOW.replace(tzinfo=None))
        assert window is not None
        assert _day(2026, 12, 3) == (window.since, window.until)

    def test_the_phrase_is_cut_from_the_prompt(self) -> None:
        text = "what did Anna say yesterday about Lisbon?"
        window = time_window(text, NOW)
        assert window is not None
        assert "what did Anna say  about Lisbon?".split() == without_phrase(text, window).split()

    def test_a_log_of_future_dates_is_not_grounded(self) -> None:
        """Thousands of phrases that cannot be grounded: None (a bounded number are tried)."""
        assert time_window("on 28 december 2026, " * 5_000 + "yesterday", NOW) is None
        assert time_window("on 28 december 2026, " * 3 + "yesterday", NOW) is not None

    def test_a_long_hostile_prompt_is_read_once(self) -> None:
        """200,000 characters of near-phrases: found, and the first real phrase is the answer."""
        text = "5 dayz ago, last nite, may be " * 6_000 + " and 2 days ago"
        window = time_window(text, NOW)
        assert window is not None
        assert _day(2026, 12, 2) == (window.since, window.until)


def _plan(*queries: tuple[str, int], cap: int = 4) -> MemoryInjectConfig:
    return MemoryInjectConfig(
        recall_plan=RecallPlanConfig(
            enabled=True, queries=[PlanQueryConfig(s, n) for s, n in queries], cap=cap
        )
    )


TIME_PLAN = _plan(("default", 8), ("time", 8))


def _opened(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A store of the backend the fixture's parameter names."""
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "m.db")
    if request.param == "memory":
        return InMemoryStore()
    from memory_inject.storage.postgres import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_scratch_dsn"))


def _filled(s: Any, rows: list[tuple[str, str, str, str]]) -> Iterator[Any]:
    for key, content, ts, session in rows:
        s.store(key, content, "core", timestamp=ts, session_id=session)
    try:
        yield s
    finally:
        if not isinstance(s, InMemoryStore):
            s.close()


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    rows = [
        ("garden", "We planted tulips in the garden", "2026-12-03T10:00:00Z", "alice"),
        ("tax", "Filed the tax return with Anna", "2026-12-03T15:00:00Z", "alice"),
        ("old", "Yesterday we talked about moving to Lisbon", "2026-10-01T10:00:00Z", "alice"),
        ("anna", "Anna said she loves Lisbon", "2026-11-20T10:00:00Z", "alice"),
        ("bob-secret", "Bob's locker code is 4417", "2026-12-03T12:00:00Z", "bob"),
    ]
    yield from _filled(_opened(request, tmp_path), rows)


def _keys(
    store: SQLiteStore | InMemoryStore, prompt: str, cfg: MemoryInjectConfig, **kw: object
) -> list[str]:
    kw.setdefault("sessions", ["alice"])
    out = render_memory_context(store, prompt, config=cfg, now=NOW, **kw)  # type: ignore[arg-type]
    assert out.success
    return [e.key for e in out.entries]


class TestTheTimeQuery:
    def test_yesterday_is_the_rows_written_yesterday(
        self, store: SQLiteStore | InMemoryStore
    ) -> None:
        """Not the old row that says "yesterday"; yesterday's rows, the one that says more first."""
        plain = _keys(store, "what did we talk about yesterday?", MemoryInjectConfig())
        assert "old" in plain  # the word, not the day
        assert not {"tax", "garden"} & set(plain)
        assert ["tax", "garden"] == _keys(store, "what did we talk about yesterday?", TIME_PLAN)
        assert ["tax", "garden"] == _keys(store, "What did we decide on Thursday?", TIME_PLAN)

    def test_the_rest_of_the_prompt_is_searched_in_the_window_first(
        self, store: SQLiteStore | InMemoryStore
    ) -> None:
        """ "Anna ... yesterday": yesterday's row with Anna first (both queries found it), then
        what the plan's default query found for Anna at any time."""
        keys = _keys(store, "what did Anna say yesterday?", TIME_PLAN)
        assert "tax" == keys[0]
        assert "anna" in keys
        assert "garden" not in keys  # yesterday's, but not about Anna
        only_time = _plan(("time", 8))
        assert ["tax"] == _keys(store, "what did Anna say yesterday?", only_time)

    def test_a_window_with_no_rows_injects_nothing(
        self, store: SQLiteStore | InMemoryStore
    ) -> None:
        assert [] == _keys(store, "what happened last week?", TIME_PLAN)

    def test_another_session_s_rows_stay_out(self, store: SQLiteStore | InMemoryStore) -> None:
        """Bob's row of yesterday is in his session: a turn of alice's session never sees it."""
        keys = _keys(
            store, "what did we talk about yesterday?", TIME_PLAN, sessions=["alice", None]
        )
        assert "bob-secret" not in keys
        assert {"tax", "garden"} == set(keys)
        bob = _keys(store, "what did we talk about yesterday?", TIME_PLAN, sessions=["bob"])
        assert ["bob-secret"] == bob

    def test_prompts_without_a_past_time_are_as_without_the_query(
        self, store: SQLiteStore | InMemoryStore
    ) -> None:
        default_only = _plan(("default", 8))
        for prompt in (
            "tell me about tulips",
            "what did Anna say about Lisbon?",
            "when is my dentist appointment tomorrow?",
            "what is the capital of Peru?",
        ):
            assert _keys(store, prompt, default_only) == _keys(store, prompt, TIME_PLAN), prompt

    def test_the_async_render_grounds_the_same(self, store: SQLiteStore | InMemoryStore) -> None:
        out = asyncio.run(
            arender_memory_context(
                store,
                "what did we talk about yesterday?",
                config=TIME_PLAN,
                now=NOW,
                sessions=["alice"],
            )
        )
        assert ["tax", "garden"] == [e.key for e in out.entries]

    def test_without_now_the_clock_grounds_it(self, tmp_path: Path) -> None:
        with SQLiteStore(tmp_path / "c.db") as s:
            at = datetime.now(UTC) - timedelta(days=1)
            s.store("then", "a note from yesterday", "core", timestamp=at.replace(hour=12))
            s.store("older", "older note", "core", timestamp=at - timedelta(days=30))
            out = render_memory_context(s, "what happened yesterday?", config=TIME_PLAN)
            assert ["then"] == [e.key for e in out.entries]


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def said_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Rows that *say* when: written on the 4th, about the 3rd (or about last week)."""
    rows = [
        ("garden", "We planted tulips in the garden", "2026-12-03T10:00:00Z", "alice"),
        ("support", "I went to the support group yesterday", "2026-12-04T09:00:00Z", "alice"),
        ("budget", "We talked last week about the budget", "2026-12-04T11:00:00Z", "alice"),
        ("keys", "Yesterday I lost my keys", "2026-12-04T10:00:00Z", "bob"),
        ("busy", "This month has been busy", "2026-12-04T12:00:00Z", "alice"),
    ]
    yield from _filled(_opened(request, tmp_path), rows)


class TestRowsThatNameTheDay:
    """A memory's own "yesterday", read at its timestamp, names a day: it is shown for that
    day first, before the rows written on it."""

    @pytest.mark.parametrize("prompt", ["what happened yesterday?", "what happened on 3 December?"])
    def test_the_row_that_said_yesterday_comes_first(self, said_store: Any, prompt: str) -> None:
        assert ["support", "garden"] == _keys(said_store, prompt, TIME_PLAN)

    def test_a_row_naming_another_time_or_in_another_session_stays_out(
        self, said_store: Any
    ) -> None:
        keys = _keys(said_store, "what happened yesterday?", TIME_PLAN)
        assert "budget" not in keys  # written after the 3rd, but about the week before
        assert "busy" not in keys  # its month holds the 3rd, but it does not name that day
        assert "keys" not in keys  # bob's
        assert ["keys"] == _keys(
            said_store, "what happened yesterday?", TIME_PLAN, sessions=["bob"]
        )

    def test_a_prompt_about_something_keeps_the_floor(self, said_store: Any) -> None:
        """The rest of the prompt is searched: the row that names the day and matches it."""
        keys = _keys(said_store, "what about the support group yesterday?", TIME_PLAN)
        assert "support" == keys[0]
        assert "garden" not in keys  # written that day, but not about the group
        assert [] == _keys(said_store, "what about the tax return yesterday?", TIME_PLAN)


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def day_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A chat day of alice's that ends in goodbyes, a row of bob's that says the most, and
    two rows that say as much as each other."""
    day = "2026-12-03T"
    rows = [
        ("hi", "Hey! How are you?", f"{day}09:00:00Z", "alice"),
        (
            "move",
            "We signed the lease for the flat in Lisbon, moving in March with the cat",
            f"{day}09:05:00Z",
            "alice",
        ),
        ("job", "Anna starts her new job at the bakery on Monday", f"{day}09:10:00Z", "alice"),
        ("tie-a", "Bought fresh bread", f"{day}09:15:00Z", "alice"),
        ("tie-b", "Walked the big dog", f"{day}09:20:00Z", "alice"),
        ("thanks", "Thanks, you too!", f"{day}20:55:00Z", "alice"),
        ("bye", "Bye, talk soon!", f"{day}21:00:00Z", "alice"),
        (
            "bob-long",
            "Bob wrote down the alarm code, the wifi password and the spare key's hiding place",
            f"{day}12:00:00Z",
            "bob",
        ),
    ]
    yield from _filled(_opened(request, tmp_path), rows)


class TestWhatADaySaid:
    """ "What did we talk about yesterday?" shows the day's rows that say the most (a chat
    day's newest rows are its goodbyes), among as many of its rows as ``DAY_ROWS``."""

    def test_the_rows_that_say_the_most_not_the_last(self, day_store: Any) -> None:
        assert ["move", "job"] == _keys(
            day_store, "what did we talk about yesterday?", _plan(("time", 2))
        )

    def test_ties_keep_the_newest_first(self, day_store: Any) -> None:
        keys = _keys(day_store, "what happened yesterday?", _plan(("time", 8), cap=8))
        assert ["move", "job"] == keys[:2]
        assert keys.index("tie-b") < keys.index("tie-a")  # 3 words each; tie-b is newer
        assert "bob-long" not in keys  # says the most, in another session

    def test_async_picks_the_same(self, day_store: Any) -> None:
        out = asyncio.run(
            arender_memory_context(
                day_store,
                "what did we talk about yesterday?",
                config=_plan(("time", 2)),
                now=NOW,
                sessions=["alice"],
            )
        )
        assert ["move", "job"] == [e.key for e in out.entries]

    def test_a_prompt_about_something_is_ranked_by_it(self, day_store: Any) -> None:
        """Only a prompt that asks what went on is picked by what rows say: the rest of a
        prompt about something ranks that day's rows as before."""
        keys = _keys(day_store, "what did we say about the dog yesterday?", _plan(("time", 2)))
        assert "tie-b" == keys[0]


def _week_rows(per_day: int) -> list[tuple[str, str, str, str]]:
    """alice's chat from Monday 23 to Sunday 29 November 2026 ("last week" at NOW), ``per_day``
    rows a day at ten-minute steps; Sunday's rows say the most, the others the day's number
    of words and then less, and each day ends with a goodbye."""
    rows = []
    for day in range(23, 30):
        for i in range(per_day):
            n = 9 if day == 29 else max(1, 6 - i % 6)
            words = " ".join(f"topic{day}x{i}w{k}" for k in range(n))
            ts = f"2026-11-{day}T08:{0:02d}:00Z"
            stamp = datetime.fromisoformat(ts) + timedelta(minutes=10 * i)
            rows.append((f"d{day}-{i}", words, stamp.isoformat(), "alice"))
        rows.append((f"bye{day}", "Bye, talk soon!", f"2026-11-{day}T23:00:00Z", "alice"))
    return rows


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def week_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A week of 40 rows a day (more than DAY_ROWS a day, less than a week's worth)."""
    yield from _filled(_opened(request, tmp_path), _week_rows(40))


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def month_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Five rows on 2 November, 460 on the 29th."""
    rows = [
        (
            f"early{i}",
            f"Planted tulips{i} bulbs{i} by the fence",
            f"2026-11-02T1{i}:00:00Z",
            "alice",
        )
        for i in range(5)
    ]
    rows += [
        (
            f"late{i}",
            f"Sorted invoice{i} and receipt{i} for the tax office",
            f"2026-11-29T{i // 60:02d}:{i % 60:02d}:00Z",
            "alice",
        )
        for i in range(460)
    ]
    yield from _filled(_opened(request, tmp_path), rows)


class TestWhatAWeekSaid:
    """ "What did we talk about last week?" shows the week's days, not its busiest one nor its
    last: a window of several days is read a day's worth a day and its rows taken in turns."""

    def test_each_row_shown_is_from_another_day(self, week_store: Any) -> None:
        keys = _keys(week_store, "what did we talk about last week?", _plan(("time", 4)))
        assert 4 == len(keys)
        assert keys[0].startswith("d29-")  # the day whose best says the most comes first
        # Then one row a day; the other days' best say as much, so the newest days come.
        assert ["d29", "d28", "d27", "d26"] == [k.split("-")[0] for k in keys]
        assert not any(k.startswith("bye") for k in keys)

    def test_the_first_day_is_read_too(self, week_store: Any) -> None:
        """280 rows in the window: the newest 64 would have been Saturday's and Sunday's."""
        plan = _plan(("time", 7), cap=7)
        cfg = attrs.evolve(plan, budget=attrs.evolve(plan.budget, max_entries=7))
        keys = _keys(week_store, "what happened last week?", cfg)
        assert {f"d{day}" for day in range(23, 30)} == {k.split("-")[0] for k in keys}

    def test_a_busy_end_of_the_month_does_not_hide_its_start(self, month_store: Any) -> None:
        """Each part of the window is read for its own newest rows: 460 rows on the 29th
        (more than the window's whole read before) leave the 2nd's rows in the block."""
        keys = _keys(month_store, "what did we talk about in November?", _plan(("time", 4)))
        assert any(k.startswith("early") for k in keys), keys
        assert any(k.startswith("late") for k in keys), keys

    def test_async_takes_the_same_rows(self, week_store: Any) -> None:
        prompt, cfg = "what did we talk about last week?", _plan(("time", 4))
        out = asyncio.run(
            arender_memory_context(week_store, prompt, config=cfg, now=NOW, sessions=["alice"])
        )
        assert _keys(week_store, prompt, cfg) == [e.key for e in out.entries]
        assert 4 == len({e.key.split("-")[0] for e in out.entries})

    def test_a_day_is_still_one_part(self, week_store: Any) -> None:
        """A one-day window takes the day's rows that say the most, as before."""
        keys = _keys(week_store, "what did we talk about on 24 November?", _plan(("time", 3)))
        assert ["d24-36", "d24-30", "d24-24"] == keys  # six words each, newest first


def _year_rows() -> list[tuple[str, str, str, str]]:
    """alice's notes of 2025, one on the 10th of each month (each says as much), three
    notes written in 2026 that name 2025 in their own words, one of 2026 that names a day of
    2026, one of June 2025 that says "since May" and one of August 2025 that says
    "yesterday"; a row of 3 January 2026 and two rows of the days after whose "this year"
    and "since January" cover that day."""
    rows = [
        (f"m{month:02d}", f"note{month} about plan{month} and task{month}", "", "alice")
        for month in range(1, 13)
    ]
    rows = [(k, c, f"2025-{k[1:]}-10T10:00:00Z", who) for k, c, _, who in rows]
    rows += [
        ("said-year", "Last year we moved the studio", "2026-01-05T10:00:00Z", "alice"),
        ("said-in", "In 2025 the garden flooded twice", "2026-01-06T10:00:00Z", "alice"),
        ("said-later", "Last year the roof leaked", "2026-03-01T10:00:00Z", "alice"),
        ("said-other", "Yesterday we cleaned the attic", "2026-03-05T10:00:00Z", "alice"),
        ("said-since", "I have been running since May", "2025-06-20T10:00:00Z", "alice"),
        ("said-inside", "Yesterday we fixed the fence", "2025-08-20T10:00:00Z", "alice"),
        ("jan3", "Painted the hallway blue", "2026-01-03T10:00:00Z", "alice"),
        ("said-this-year", "This year the plan is to rest more", "2026-01-06T11:00:00Z", "alice"),
        ("said-since-jan", "Since January I walk every day", "2026-01-08T10:00:00Z", "alice"),
    ]
    return sorted(rows, key=lambda r: r[2])  # written in time order


def _wide(n: int) -> MemoryInjectConfig:
    """A plan of one ``time`` query that shows ``n`` entries."""
    plan = _plan(("time", n), cap=n)
    return attrs.evolve(plan, budget=attrs.evolve(plan.budget, max_entries=n))


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def year_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from _filled(_opened(request, tmp_path), _year_rows())


class TestWhatAYearSaid:
    """ "What did we talk about last year?" is the calendar year before, read in parts like
    a week: its rows come from across the year, not only from December."""

    def test_the_year_s_rows_come_from_across_it(self, year_store: Any) -> None:
        keys = _keys(year_store, "what did we talk about last year?", _wide(10))
        assert ["said-year", "said-in", "said-later"] == keys[:3]  # they name it (below)
        # Seven parts of about 52 days, one row of each (the newest of equals), not the
        # year's newest rows. August's "yesterday" names a day of the year, but inside so
        # long a window it is one of its rows, not ahead of them: its part shows m09.
        assert ["m12", "m10", "m09", "m07", "m05", "m04", "m02"] == keys[3:]

    def test_memories_that_name_the_year_are_shown_for_it(self, year_store: Any) -> None:
        """Written in the year after it and naming it: first, oldest first; the year's own
        rows after them. A row of that year naming another time is not one of them."""
        keys = _keys(year_store, "what happened in 2025?", _wide(8))
        assert ["said-year", "said-in", "said-later"] == keys[:3], keys
        assert "said-other" not in keys
        assert all(k.startswith(("m", "said-since", "said-inside")) for k in keys[3:]), keys

    def test_a_year_phrase_does_not_name_a_day_nor_since_a_month(self, year_store: Any) -> None:
        """A window of one day in 2025: the rows written that day, not the rows whose "last
        year" or "since May" merely covers it."""
        keys = _keys(year_store, "what happened on 10 June 2025?", TIME_PLAN)
        assert ["m06"] == keys
        keys = _keys(year_store, "what did we talk about in June 2025?", TIME_PLAN)
        assert "said-since" in keys  # written in June
        assert not {"said-year", "said-in"} & set(keys)

    def test_a_memory_s_year_or_since_names_no_day(self, year_store: Any) -> None:
        """Written days after 3 January and covering it ("this year", "since January"), but
        naming no day of it: the day shows its own row alone."""
        assert ["jan3"] == _keys(year_store, "what happened on 3 January 2026?", _wide(8))

    def test_since_runs_to_now(self, year_store: Any) -> None:
        plan = _wide(8)
        assert [] == _keys(year_store, "what did we talk about since May?", plan)  # 2026's
        assert {
            "said-year",
            "said-in",
            "said-later",
            "said-other",
            "jan3",
            "said-this-year",
            "said-since-jan",
        } == set(_keys(year_store, "what did we talk about since January?", plan))
        keys = _keys(year_store, "what did we talk about since 1 November 2025?", plan)
        assert {"m11", "m12", "said-year", "said-in"} <= set(keys), keys


class TestTheConfigKey:
    def test_yaml_accepts_the_time_source(self) -> None:
        agent = parse_agent_config(
            {
                "agent": "a",
                "memory": {
                    "recall_plan": {
                        "enabled": True,
                        "queries": [
                            {"source": "default", "limit": 6},
                            {"source": "time", "limit": 4},
                        ],
                    }
                },
            }
        )
        assert ["default", "time"] == [q.source for q in agent.memory.recall_plan.queries]

    def test_a_bad_source_names_the_choices_and_the_key(self) -> None:
        with pytest.raises(ConfigError) as err:
            parse_agent_config(
                {
                    "agent": "a",
                    "memory": {"recall_plan": {"queries": [{"source": "when", "limit": 4}]}},
                },
                source="agent.yaml",
            )
        message = str(err.value)
        assert "'time'" in message
        assert "agent.yaml" in message
        assert "recall_plan.queries[0]" in message


def test_today_at_midnight_is_the_moment_itself_and_yesterday_ends_before_it() -> None:
    """At exactly 00:00:00 "today" ran from 00:00 to 23:59:59.999999 the day before (an empty
    window): a memory written at that moment was not found (a helper's find)."""
    midnight = datetime(2026, 3, 10, tzinfo=UTC)
    today = time_window("what did we talk about today?", midnight)
    assert today is not None
    assert (today.since, today.until) == (midnight, midnight)
    yesterday = time_window("what did we talk about yesterday?", midnight)
    assert yesterday is not None
    assert yesterday.until == midnight - timedelta(microseconds=1)


def test_a_leap_day_without_a_year_is_the_last_one() -> None:
    """ "Feb 29" in 2026 is 29 February 2024; it was no date at all (a helper's find)."""
    window = time_window("what happened on Feb 29?", NOW)
    assert window is not None
    assert (window.since, window.until) == _day(2024, 2, 29)
    assert time_window("on 31 february", NOW) is None


@pytest.mark.parametrize(
    "now",
    [
        datetime.max.replace(tzinfo=UTC),
        datetime(9999, 12, 31, tzinfo=UTC),
        datetime.min.replace(tzinfo=UTC),
        datetime(1, 1, 1, 12, tzinfo=UTC),
        datetime(5, 6, 1, tzinfo=UTC),
        datetime(9999, 1, 1),
    ],
)
@pytest.mark.parametrize(
    "prompt",
    [
        "where did production deploys go yesterday?",
        "where did production deploys go 10 years ago?",
        "where did production deploys go last week?",
        "where did production deploys go since last month?",
    ],
)
def test_a_clock_at_the_ends_of_the_calendar_grounds_nothing_and_fails_nothing(
    now: datetime, prompt: str
) -> None:
    """A clock in year 1 or 9999 made the time query's window overflow ``datetime``, and
    the whole recall failed (``recall_failed: OverflowError``), the default query's rows
    too. The time phrase is left ungrounded there; the render shows what the prompt's
    words find."""
    s = InMemoryStore()
    s.store("deploy_target", "Production deploys go to prod-3.", "core")
    out = render_memory_context(s, prompt, config=TIME_PLAN, now=now)
    assert out.success, out.event
    assert ["deploy_target"] == [e.key for e in out.entries]
    if now.year in (1, 9999):
        assert time_window(prompt, now) is None
