"""A session's earlier records are a record's context only when written within 30 minutes.

A record written in a session indexes the two records written before it as context,
as a chat's turns are. A long-lived session (a channel, a chat the memory tools write in
now and then) also gathers facts days apart: those are not each other's context, so
recalling one never brings the fact written after it, and a word one fact holds counts
as one row's word, not three (``benchmarks/facts.py --layout days`` answers as
``--layout apart`` does). The window is ``day_vote.NEAR_MINUTES``, the one sessionless
records written alone use; it holds both ways (a record stamped before its predecessor
by more than that, as an out-of-order import writes, takes no context either).
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_inject.storage.day_vote import NEAR_MINUTES
from memory_inject.storage.sqlite import SQLiteStore, ddl, ddl_context
from tests.storage._sqlite_backend import on_file

ENGINES = ["sqlite", "postgres"]
SESSION = "channel-1"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FACTS = [
    ("cat", "My cat Miso is a grey British Shorthair."),
    ("insurance", "Home insurance renews every April with Aviva."),
    ("sprint", "Sprint planning is every other Tuesday at 10:00."),
]


def _stamps(gap: timedelta) -> list[str]:
    return [(START + i * gap).isoformat() for i in range(len(FACTS))]


def _write(store: Any, gap: timedelta) -> None:
    for (key, content), stamp in zip(FACTS, _stamps(gap), strict=True):
        store.store(key, content, session_id=SESSION, timestamp=stamp)


def _import(store: Any, gap: timedelta) -> None:
    lines = [
        json.dumps({"key": k, "content": c, "session_id": SESSION, "timestamp": t})
        for (k, c), t in zip(FACTS, _stamps(gap), strict=True)
    ]
    store.import_jsonl(io.StringIO("\n".join(lines) + "\n"))


def _recalled(store: Any, prompt: str) -> list[str]:
    return [e.key for e in store.recall(prompt, 10, session_id=SESSION)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("write", [_write, _import], ids=["store", "import"])
class TestWindow:
    def test_facts_a_day_apart_are_not_each_others_context(
        self, engine_store: Callable[[str], Any], engine: str, write: Callable[..., None]
    ) -> None:
        store = engine_store(engine)
        write(store, timedelta(days=1))
        assert _recalled(store, "Miso") == ["cat"]
        assert _recalled(store, "insurance") == ["insurance"]

    def test_turns_minutes_apart_still_are(
        self, engine_store: Callable[[str], Any], engine: str, write: Callable[..., None]
    ) -> None:
        store = engine_store(engine)
        write(store, timedelta(minutes=NEAR_MINUTES - 1))
        assert _recalled(store, "Miso") == ["cat", "insurance"]
        assert _recalled(store, "insurance") == ["insurance", "sprint"]

    def test_the_window_is_measured_from_each_record(
        self, engine_store: Callable[[str], Any], engine: str, write: Callable[..., None]
    ) -> None:
        """20 minutes apart: the record just before is context, the one before that
        (40 minutes back) is not."""
        store = engine_store(engine)
        write(store, timedelta(minutes=20))
        assert _recalled(store, "Miso") == ["cat", "insurance"]

    def test_a_record_stamped_long_before_its_predecessor_takes_no_context(
        self, engine_store: Callable[[str], Any], engine: str, write: Callable[..., None]
    ) -> None:
        store = engine_store(engine)
        write(store, timedelta(days=-1))
        assert _recalled(store, "Miso") == ["cat"]


def _old_neighbour(n: int) -> str:
    """Schema 9's session neighbour: the n-th record before, however long before."""
    return (
        "(SELECT p.content FROM memories AS p WHERE {row}.session_id IS NOT NULL "
        "AND p.namespace = {row}.namespace AND p.session_id = {row}.session_id "
        f"AND p.rid < {{row}}.rid AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
    )


def _old_trigger() -> str:
    """Schema 9's insert trigger, as the previous release created it."""
    assign = ddl_context.CTX_NEAR_ASSIGN
    for n in (0, 1):
        windowed = ddl_context._NEIGHBOUR.replace("{n}", str(n))
        assert windowed in assign
        assign = assign.replace(windowed, _old_neighbour(n))
    trigger = next(s for s in ddl.MIGRATIONS[9] if s.startswith("CREATE TRIGGER"))
    return trigger.replace(ddl_context.CTX_NEAR_ASSIGN.format(row="new"), assign.format(row="new"))


def test_a_schema_9_file_gets_the_window_for_new_writes(tmp_path: Path) -> None:
    """Opening a file the previous release wrote replaces its insert trigger; the records
    already written keep the context they were written with."""
    db = tmp_path / "memory.db"
    SQLiteStore(db).close()
    on_file(db, "DROP TRIGGER memories_fts_insert", _old_trigger())
    with SQLiteStore(db) as store:  # still at the current version: the old trigger writes
        _write(store, timedelta(days=1))
        assert _recalled(store, "Miso") == ["cat", "insurance", "sprint"]
    on_file(db, "PRAGMA user_version = 9")
    with SQLiteStore(db) as store:
        later = (START + timedelta(days=3)).isoformat()
        store.store("tuesday", "Tuesday is also bin day.", session_id=SESSION, timestamp=later)
        assert _recalled(store, "Miso") == ["cat", "insurance", "sprint"]
        assert _recalled(store, "sprint") == ["sprint"]
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == ddl.SCHEMA_VERSION
    finally:
        conn.close()
