"""``row_to_entry`` (recall's fast path) builds exactly what ``row_to_record(row).to_entry``
builds, for records with every column set, empty, or absent."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_inject.storage.records import MemoryRecord
from memory_inject.storage.sqlite import SQLiteStore
from tests.storage import _sqlite_schema as schema

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_words = st.lists(_text, max_size=3)
_unit = st.none() | st.floats(0.0, 1.0)
_when = st.none() | st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@st.composite
def records(draw: st.DrawFn) -> MemoryRecord:
    stamp = draw(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2050, 1, 1)))
    return MemoryRecord(
        key=draw(st.text(min_size=1, max_size=8)),
        content=draw(_text),
        category=draw(st.sampled_from(["core", "daily", "conversation", "custom-x"])),
        timestamp=stamp.replace(tzinfo=UTC),
        updated_at=draw(st.none() | st.just(stamp.replace(tzinfo=UTC) + timedelta(hours=1))),
        session_id=draw(st.none() | _text),
        importance=draw(_unit),
        confidence=draw(_unit),
        status=draw(st.sampled_from(["active", "deprecated", "contested"])),
        tags=draw(_words),
        source=draw(st.none() | _text),
        entity_ids=draw(_words),
        profile_id=draw(st.none() | _text),
        scope=draw(st.none() | st.dictionaries(_text, st.integers() | _text, max_size=2)),
        applies_when=draw(_words),
        does_not_apply_when=draw(_words),
        known_exceptions=draw(_words),
        rule_type=draw(st.none() | _text),
        memory_kind=draw(st.none() | _text),
        layer=draw(st.none() | st.sampled_from(["L1", "L2"])),
        supersedes=draw(_words),
        times_used=draw(st.integers(0, 2**40)),
        last_used_at=draw(_when),
        metadata=draw(st.none() | st.dictionaries(_text, st.integers() | _text, max_size=2)),
        embedding=draw(
            st.none() | st.lists(st.floats(-1, 1, width=32), min_size=2, max_size=2).filter(any)
        ),  # a vector of zeros is refused (is near no prompt)
    )


@settings(max_examples=150, deadline=None)
@given(record=records(), score=st.none() | st.floats(0.0, 1.0))
def test_row_to_entry_matches_the_record_path(record: MemoryRecord, score: float | None) -> None:
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "m.db") as store:
        store.upsert(record)
        full = store._engine.connections.read(
            lambda c: c.execute(f"SELECT {schema.SELECT} FROM memories").fetchone(), "full"
        )
        short = store._engine.connections.read(
            lambda c: schema.fetch_entries(c, "default", "1 = 1", ())[0], "short"
        )
    fast = schema.row_to_entry(short, score)
    slow = schema.row_to_record(full).to_entry(score)
    assert fast == slow
    assert fast.extra == slow.extra
    assert {k: type(v) for k, v in fast.extra.items()} == {
        k: type(v) for k, v in slow.extra.items()
    }
