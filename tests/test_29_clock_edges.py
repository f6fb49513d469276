"""Times of a zone with summer time, and times at the calendar's ends (twenty-ninth round).

Found by a helper trying the library with messy clocks:

- ``datetime.now(New_York)`` in the hour a clock repeats (fold=1) made "today" end an
  hour before ``now``: ``now + tick`` drops the fold. SQLite dropped the last hour's rows
  and the in-memory store, which kept each record's zone and compared same-zone times by
  their clocks, returned another wrong set.
- Decay counted the clocks of two same-zone times, not the time between them: one
  instant decayed differently in New York and in UTC, across the floor.
- The in-memory store accepted 9999-12-31T23:30-05:00 (past year 9999 in UTC), and every
  recall matching that row raised; SQLite raised a bare ``OverflowError``.
- "what did we talk about on 0001-01-01?" asked east of UTC overflowed SQLite's window.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memory_inject import MemoryInjectConfig, MemoryRecall, render_memory_context
from memory_inject.config import PlanQueryConfig, RecallPlanConfig
from memory_inject.stages.filters import age_days
from memory_inject.storage import InMemoryStore, SQLiteStore
from memory_inject.temporal import time_window

NY = ZoneInfo("America/New_York")
TIMED = MemoryInjectConfig(
    recall_plan=RecallPlanConfig(
        enabled=True,
        cap=8,
        queries=(
            PlanQueryConfig(source="default", limit=8),
            PlanQueryConfig(source="time", limit=8),
        ),
    )
)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made: Any = InMemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "m.db")
    yield made
    if isinstance(made, SQLiteStore):
        made.close()


def _keys(result: Any) -> list[str]:
    event = result.event
    assert isinstance(event, MemoryRecall)
    assert event.success, event.error
    return sorted(e.key for e in result.entries)


# 01:10 the second time on 3 November 2024 (06:10 UTC), as datetime.now(NY) gives it.
REPEATED = datetime(2024, 11, 3, 1, 10, fold=1, tzinfo=NY)


def test_today_in_the_repeated_hour_ends_at_now() -> None:
    window = time_window("what did we talk about today?", REPEATED)
    assert window is not None
    assert REPEATED.astimezone(UTC) == window.until.astimezone(UTC)
    assert datetime(2024, 11, 3, 4, tzinfo=UTC) == window.since.astimezone(UTC)


def test_today_in_the_repeated_hour_finds_its_last_hour(store: Any) -> None:
    rows = {
        "at_0005": datetime(2024, 11, 3, 0, 5, tzinfo=NY),  # 04:05 UTC
        "at_0150_first": datetime(2024, 11, 3, 1, 50, fold=0, tzinfo=NY),  # 05:50 UTC
        "at_0105_second": datetime(2024, 11, 3, 1, 5, fold=1, tzinfo=NY),  # 06:05 UTC
        "yesterday": datetime(2024, 11, 2, 23, 0, tzinfo=NY),
    }
    for key, ts in rows.items():
        store.store(key, f"we talked about item {key}", "daily", timestamp=ts)
    result = render_memory_context(
        store, "what did we talk about today?", config=TIMED, now=REPEATED
    )
    assert ["at_0005", "at_0105_second", "at_0150_first"] == _keys(result)


def test_a_record_reads_back_in_utc(store: Any) -> None:
    ts = datetime(2024, 11, 3, 1, 5, fold=1, tzinfo=NY)
    store.store("k", "a note", timestamp=ts)
    got = store.get("k").timestamp
    assert (UTC, ts.astimezone(UTC)) == (got.tzinfo, got)


def test_decay_counts_the_time_between_not_the_clocks() -> None:
    """Seven days on the clock across the autumn change are seven days and an hour."""
    now = datetime(2024, 11, 8, 12, tzinfo=NY)
    row = datetime(2024, 11, 1, 12, tzinfo=NY)
    assert 7 + 1 / 24 == age_days(row, now)
    assert age_days(row.astimezone(UTC), now) == age_days(row, now)
    fixed = timezone(timedelta(hours=-5))  # a fixed offset's clock is its time
    assert 7 == age_days(
        datetime(2024, 11, 1, 12, tzinfo=fixed), datetime(2024, 11, 8, 12, tzinfo=fixed)
    )


@pytest.mark.parametrize(
    "ts",
    [
        datetime(9999, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-5))),
        datetime(1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=5))),
        "9999-12-31T23:30:00-05:00",
    ],
)
def test_a_time_with_no_utc_day_is_refused_by_name(store: Any, ts: Any) -> None:
    store.store("deploy", "Production deploys go to prod-3.")
    with pytest.raises(ValueError, match=r"^'timestamp' is out of range in UTC \(got '"):
        store.store("odd", "production deploys are frozen", "daily", timestamp=ts)
    result = render_memory_context(store, "where do production deploys go?")
    assert ["deploy"] == _keys(result)


def test_a_window_before_year_one_in_utc_is_searched(store: Any) -> None:
    now = datetime(2024, 5, 8, 12, tzinfo=ZoneInfo("Asia/Kathmandu"))
    store.store("deploy", "deploys go to prod-3")
    store.store("old", "ancient deploys note", "daily", timestamp=datetime(1, 1, 1, 12, tzinfo=UTC))
    result = render_memory_context(
        store, "what did we talk about on 0001-01-01?", config=TIMED, now=now
    )
    assert ["old"] == _keys(result)
