"""A forgotten session record stays forgotten (issue 29, thirtieth round).

With ``memory.sessions.record`` on (``preset: pi``), a user who forgot every row of their
session (``session:<id>`` included) had the next turn write ``session:<id>`` again, and
SQLite revived the forgotten row in place: the new record kept the index context it was
first written with (``ctx_prev``, the session's first message), so the forgotten text was
live again and recalled by its words. PostgreSQL's upsert kept it the same way. A write
over a forgotten key is now a new row: its context is what a new row's would be, and
nothing of the forgotten row carries over. The check is the store's (the forgotten row
itself), so a forget by another process or connection counts too.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memory_inject.config import parse_agent_config
from memory_inject.sessions import session_key
from memory_inject.storage import InMemoryStore, SQLiteStore

# The adapters ship as memory_inject.adapters from the adapters/ folder (package-dir);
# type checkers read the folder, which has no such mapping.
if TYPE_CHECKING:
    from adapters import MemoryLoop
else:
    from memory_inject.adapters import MemoryLoop

FIRST = "My lawyer said the Hooli settlement is 9M dollars, keep it quiet"
DECISION = "#decision settle with Hooli out of court"
AGENT = parse_agent_config(
    {"agent": "pi", "memory": {"preset": "pi", "governance": {"profile_id": "project:x"}}}
)


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The store the adapter writes to, of each kind."""
    if request.param == "sqlite":
        opened: Any = SQLiteStore(tmp_path / "m.db")
    elif request.param == "memory":
        opened = InMemoryStore()
    else:
        from tests.storage._pg_backend import make_postgres_store

        opened = make_postgres_store(request.getfixturevalue("pg_dsn"))
    yield opened
    close = getattr(opened, "close", None)
    if callable(close):
        close()


def _turn(loop: MemoryLoop, session: str, text: str) -> None:
    with loop.turn(sessions=[session]):
        loop.prepare([{"role": "user", "content": text}])


def _forget_all(store: Any, session: str) -> None:
    for record in store.list(session_id=session):
        assert store.forget(record.key)
    assert store.list(session_id=session) == []


def _hooli_hits(store: Any) -> list[str]:
    hits = [e.key for e in store.recall("Hooli settlement lawyer", 10)]
    hits += [e.key for e in store.recall("Hooli settlement lawyer", 10, session_id="u1")]
    return hits


def _assert_forgotten(store: Any) -> None:
    record = store.get(session_key("u1"))
    assert record is not None
    assert record.content == "what is on my calendar this week?"
    assert "Hooli" not in repr(record.metadata)
    assert record.metadata["decisions"] == []
    assert _hooli_hits(store) == []


def test_the_next_turn_after_forgetting_a_session_brings_none_of_it_back(store: Any) -> None:
    loop = MemoryLoop(store, AGENT, channel="cli", api="openai", autosave=True)
    _turn(loop, "u1", f"{FIRST}\n{DECISION}")
    _turn(loop, "u1", "Also my therapist appointment is Tuesday at 5pm")
    assert "Hooli" in store.get(session_key("u1")).content
    _forget_all(store, "u1")
    _turn(loop, "u1", "what is on my calendar this week?")
    _assert_forgotten(store)
    # The record goes on from there, as any record does.
    _turn(loop, "u1", "#decision keep Tuesday free")
    record = store.get(session_key("u1"))
    assert record.content == "what is on my calendar this week?"
    assert record.metadata["decisions"] == ["#decision keep Tuesday free"]
    assert _hooli_hits(store) == []


def test_a_forget_by_another_process_counts(tmp_path: Path) -> None:
    """Another process forgot the session: the writer's next turn knows it from the store."""
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    forget = (
        "import sys\n"
        "from memory_inject.storage import SQLiteStore\n"
        "s = SQLiteStore(sys.argv[1])\n"
        "for r in s.list(session_id='u1'):\n"
        "    assert s.forget(r.key)\n"
        "s.close()\n"
    )
    try:
        loop = MemoryLoop(store, AGENT, channel="cli", api="openai", autosave=True)
        _turn(loop, "u1", f"{FIRST}\n{DECISION}")
        _turn(loop, "u1", "Also my therapist appointment is Tuesday at 5pm")
        subprocess.run([sys.executable, "-c", forget, str(path)], check=True, timeout=120)
        assert store.list(session_id="u1") == []
        _turn(loop, "u1", "what is on my calendar this week?")
        _assert_forgotten(store)
    finally:
        store.close()
    with sqlite3.connect(path) as conn:  # no live row's indexed text holds the forgotten words
        rows = conn.execute(
            "SELECT key FROM memories WHERE deleted_at IS NULL AND (content LIKE '%Hooli%' "
            "OR ctx_prev LIKE '%Hooli%' OR ctx_prev2 LIKE '%Hooli%')"
        ).fetchall()
    assert rows == []


def test_a_key_stored_again_after_its_forget_is_a_new_row(store: Any) -> None:
    """The store's rule under the session record: a write over a forgotten key takes the
    context a new row would, and nothing of the forgotten row (its usage)."""
    store.store("a", FIRST, "conversation", session_id="s")
    store.store("k", "the note about the Hooli case", "conversation", session_id="s")
    if hasattr(store, "mark_used"):  # the persistent stores count uses
        store.mark_used([store.get("k").id])
    store.forget("a")
    store.forget("k")
    store.store("k", "lunch on Friday", "conversation", session_id="s")
    fresh = store.get("k")
    assert fresh.times_used == 0
    assert fresh.last_used_at is None
    assert [e.key for e in store.recall("Hooli settlement lawyer", 5)] == []
    assert [e.key for e in store.recall("lunch Friday", 5)] == ["k"]
    store.store("k", "lunch on Friday at noon", "conversation", session_id="s")
    assert store.get("k").timestamp == fresh.timestamp  # a live row's update keeps its own
