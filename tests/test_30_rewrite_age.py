"""A fact written again under its key is new: its age, what decay counts, starts again.

A helper's simulated year (round 30): the model kept a ``daily`` "reading now" row under
one key and rewrote it whenever the user started a book; the update kept the first
write's time, so "what book am I reading right now?" found the row at a score of 5.8e-17
(a year of decay) and showed nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from memory_inject import render_memory_context
from memory_inject.storage import SQLiteStore

if TYPE_CHECKING:
    from adapters import memory_tools, remember
else:
    from memory_inject.adapters import memory_tools, remember

QUESTION = "which book am I reading right now?"


def _old(store: SQLiteStore, key: str, session: str | None, source: str) -> None:
    when = datetime.now(UTC) - timedelta(days=40)
    store.store(key, "Reading Dune.", "daily", session_id=session, timestamp=when, source=source)


def test_a_tool_rewrite_is_as_fresh_as_a_new_row(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    _old(store, "reading_now", "s", "tool")
    assert render_memory_context(store, QUESTION, sessions=["s"]).entries == ()  # decayed
    tools = memory_tools(store, None, sessions=["s"])
    answer = tools.call(
        "memory_store",
        {"key": "reading_now", "content": "Reading the book Piranesi.", "category": "daily"},
    )
    assert answer == "Remembered as 'reading_now'."
    row = store.get("reading_now")
    assert row is not None and datetime.now(UTC) - row.timestamp < timedelta(minutes=1)
    out = render_memory_context(store, QUESTION, sessions=["s"])
    assert [e.key for e in out.entries] == ["reading_now"]
    assert "Piranesi" in out.text


def test_remember_under_a_key_restarts_the_age(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    _old(store, "current_book", None, "remember")
    saved = remember(store, None, "Reading the book Emma.", key="current_book", category="daily")
    assert saved.ok
    out = render_memory_context(store, QUESTION)
    assert [e.key for e in out.entries] == ["current_book"]
