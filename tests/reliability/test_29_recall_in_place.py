"""A SQLite file's recalls on the turn's own thread, when the agent asks (issue 29).

By default a file store's recall is handed to a recall thread, so a wait SQLite
cannot interrupt (another process's WAL recovery, a hung file system) never holds
the turn past its deadline; the hand-off is about half of a small store's render.
``memory.backend.recall_in_place`` (``SQLiteStore(recall_in_place=True)``) runs it
on the turn's thread instead, keyword-only stores only, and SQLite's own interrupt
still stops a slow statement at the deadline.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryInjectConfig, arender_memory_context, render_memory_context
from memory_inject.config import parse_agent_config
from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import ConfigError
from memory_inject.signals import MemoryRecall
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite.engine import SQLiteEngine
from memory_inject.stores import open_store

QUESTION = "which colour do I prefer for the dashboards?"
#: An endless statement: only an interrupt ends it.
ENDLESS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1e12) "
    "SELECT count(*) FROM c"
)


class Recorded:
    """The thread each recall of a store ran on; ``stall`` makes the next ones endless."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.stall = False


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    seen = Recorded()
    original = SQLiteEngine._recall

    def _recall(self: SQLiteEngine, *args: Any, **kwargs: Any) -> Any:
        seen.threads.append(threading.current_thread().name)
        if seen.stall:
            self.connections.read(lambda c: c.execute(ENDLESS).fetchall(), "recall")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SQLiteEngine, "_recall", _recall)
    return seen


def _filled(path: Path, **kwargs: Any) -> SQLiteStore:
    store = SQLiteStore(path, **kwargs)
    store.store("colour", "User prefers the colour teal for the dashboards.", "core")
    return store


@pytest.mark.parametrize("in_place", [False, True], ids=["hand-off", "in-place"])
def test_a_file_stores_recall_runs_where_the_agent_asked(
    tmp_path: Path, recorded: Recorded, in_place: bool
) -> None:
    """The same memory either way; on a recall thread by default, on the turn's own
    thread with ``recall_in_place``."""
    with _filled(tmp_path / "m.db", recall_in_place=in_place) as store:
        assert store.interrupts_in_place is in_place
        result = render_memory_context(store, QUESTION, config=MemoryInjectConfig())
    assert "teal" in result.text
    assert isinstance(result.event, MemoryRecall) and not result.event.degraded
    here = threading.current_thread().name
    assert recorded.threads and all((t == here) is in_place for t in recorded.threads)


def test_in_place_a_stalled_recall_still_stops_at_the_deadline(
    tmp_path: Path, recorded: Recorded
) -> None:
    """An endless statement on the turn's thread is interrupted at the deadline: the
    turn returns without memory and its event says ``deadline``."""
    with _filled(tmp_path / "m.db", recall_in_place=True) as store:
        recorded.stall = True
        result = render_memory_context(store, QUESTION, config=MemoryInjectConfig(deadline_ms=100))
        recorded.stall = False
        again = render_memory_context(store, QUESTION, config=MemoryInjectConfig())
    assert isinstance(result.event, MemoryRecall)
    assert result.text == "" and any(d.startswith("deadline") for d in result.event.degraded)
    assert "teal" in again.text  # the store is fine afterwards
    here = threading.current_thread().name
    assert recorded.threads and set(recorded.threads) == {here}


def test_an_async_render_recalls_on_the_loop_in_place(tmp_path: Path, recorded: Recorded) -> None:
    """Async renders of such a store make their fast recalls on the event loop."""

    async def turn() -> tuple[str, str]:
        result = await arender_memory_context(store, QUESTION, config=MemoryInjectConfig())
        return result.text, threading.current_thread().name

    with _filled(tmp_path / "m.db", recall_in_place=True) as store:
        text, loop_thread = asyncio.run(turn())
    assert "teal" in text
    assert recorded.threads == [loop_thread]


def test_with_an_embedder_the_recall_is_still_handed_off(
    tmp_path: Path, recorded: Recorded
) -> None:
    """A model's query embedding cannot be stopped at the deadline: the flag changes
    nothing for a store with an embedder."""
    store = _filled(tmp_path / "m.db", embedder=HashingEmbedder(dim=32), recall_in_place=True)
    with store:
        assert store.interrupts_in_place is False
        result = render_memory_context(store, QUESTION, config=MemoryInjectConfig())
    assert "teal" in result.text
    assert threading.current_thread().name not in recorded.threads


def test_the_agent_file_key_opens_such_a_store(tmp_path: Path) -> None:
    """``memory.backend.recall_in_place`` reaches the store; a value that is not a boolean
    is refused with the key's path, and so is one given to the store in code."""
    agent = parse_agent_config(
        {"agent": "a", "memory": {"backend": {"path": "m.db", "recall_in_place": True}}}
    )
    for config, in_place in ((agent, True), (parse_agent_config({"agent": "a"}), False)):
        store = open_store(config, base_dir=tmp_path)
        assert isinstance(store, SQLiteStore)
        with store:
            assert store.interrupts_in_place is in_place
    with pytest.raises(ConfigError, match=r"recall_in_place"):
        parse_agent_config({"agent": "a", "memory": {"backend": {"recall_in_place": "fast"}}})
    with pytest.raises(ValueError, match=r"'recall_in_place' must be true or false"):
        SQLiteStore(tmp_path / "x.db", recall_in_place="yes")  # type: ignore[arg-type]
