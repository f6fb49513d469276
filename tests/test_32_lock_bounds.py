"""A store another connection holds locked never holds a turn, nor an open, for long.

A recall plan's usage counts (``track_usage``) waited SQLite's busy timeout twice
after the render (10.5 s a turn, the event saying nothing), and opening a file
another process held exclusively waited 60 s before ``unavailable: degrade``
gave up. The turn now waits for its counts until its deadline and says on the
event that they were deferred; the open waits as long as
``memory.backend.open_timeout_ms`` says (2 s when it degrades).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memory_inject import (
    AgentConfig,
    RenderResult,
    SQLiteStore,
    arender_memory_context,
    load_agent_config,
    open_store,
    render_memory_context,
)
from memory_inject.exceptions import StoreLockedError
from memory_inject.storage.sqlite import writers
from memory_inject.storage.unavailable import UnavailableStore

# Far below what the old code held the caller (10.3 s a usage count, 60 s an open),
# far above what the fixed code takes (the deadline, the open bound).
_RETURNS_WITHIN_S = 8.0


def _agent(tmp_path: Path, backend: str = "") -> AgentConfig:
    yaml = tmp_path / "a.yaml"
    yaml.write_text(
        "agent: f\nmemory:\n  preset: founder_os\n"
        f"  backend: {{kind: sqlite, path: m.db, embedder: hashing{backend}}}\n"
    )
    return load_agent_config(yaml)


@contextmanager
def _held(db: Path, begin: str = "BEGIN IMMEDIATE", journal: str = "WAL") -> Iterator[None]:
    """Another connection holds the file's write (or exclusive) lock until the block ends."""
    other = sqlite3.connect(db, isolation_level=None)
    writers.register(other)  # a current writer (the writer guard refuses any other)
    other.execute(f"PRAGMA journal_mode = {journal}").fetchone()
    other.execute(begin)
    other.execute("UPDATE memories SET importance = importance")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def _returned_while_held(call: object) -> object:
    """What ``call()`` returned (or raises what it raised); fails when it did not end while
    the lock was held."""
    out: list[object] = []
    done = threading.Event()

    def run() -> None:
        try:
            out.append(call())  # type: ignore[operator]
        except Exception as exc:  # raised again by the caller's thread
            out.append(exc)
        done.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert done.wait(_RETURNS_WITHIN_S), "the call waited for the lock"
    if isinstance(out[0], Exception):
        raise out[0]
    return out[0]


def _uses(store: SQLiteStore, key: str) -> int:
    record = store.get(key)
    assert record is not None
    return int(record.times_used)


def _landed(store: SQLiteStore, key: str, expected: int) -> bool:
    """Whether the deferred counts reached the row (they land once the lock is gone)."""
    for _ in range(300):
        if _uses(store, key) == expected:
            return True
        threading.Event().wait(0.1)
    return False


@pytest.fixture
def agent(tmp_path: Path) -> AgentConfig:
    """A founder-os agent on a file holding one confirmed fact."""
    with SQLiteStore(tmp_path / "m.db") as seed:
        seed.store("acme", "Acme Corp pays by wire transfer.", "fact", status="confirmed")
    return _agent(tmp_path)


_QUERY = "how does Acme Corp pay by wire transfer?"


@pytest.fixture
def store(agent: AgentConfig) -> Iterator[SQLiteStore]:
    """The agent's store, as ``open_store`` opens it."""
    opened = open_store(agent)
    assert isinstance(opened, SQLiteStore)
    with opened:
        yield opened


def _turn(store: SQLiteStore, agent: AgentConfig, *, asynchronous: bool = False) -> RenderResult:
    """One turn, sync or async, that must return while the lock is held."""

    def call() -> RenderResult:
        if asynchronous:
            return asyncio.run(arender_memory_context(store, _QUERY, config=agent.memory))
        return render_memory_context(store, _QUERY, config=agent.memory)

    result = _returned_while_held(call)
    assert isinstance(result, RenderResult)
    return result


class TestUsageCountsUnderALock:
    """The usage counts of a turn on a locked store."""

    @pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
    def test_turn_returns_while_locked_and_says_counts_deferred(
        self, agent: AgentConfig, store: SQLiteStore, tmp_path: Path, asynchronous: bool
    ) -> None:
        """The turn renders and returns while the lock is held; ``degraded`` says the
        counts were deferred, and they land once the lock is gone."""
        with _held(tmp_path / "m.db"):
            result = _turn(store, agent, asynchronous=asynchronous)
            assert (["acme"], True) == ([e.key for e in result.entries], result.success)
            [note] = result.event.degraded  # type: ignore[union-attr]
            assert note.startswith("usage_deferred: the usage counts of 1 rendered memories")
            assert 0 == _uses(store, "acme")
        assert _landed(store, "acme", 1)

    def test_turns_meanwhile_join_one_write(
        self, agent: AgentConfig, store: SQLiteStore, tmp_path: Path
    ) -> None:
        """Three turns on the locked store each return; all their counts land afterwards."""
        with _held(tmp_path / "m.db"):
            for _ in range(3):
                degraded = _turn(store, agent).event.degraded  # type: ignore[union-attr]
                assert any(d.startswith("usage_deferred") for d in degraded)
        assert _landed(store, "acme", 3)

    def test_unlocked_turn_counts_before_it_returns(
        self, agent: AgentConfig, store: SQLiteStore
    ) -> None:
        """Without a lock the counts are written before the turn returns, and nothing is
        degraded."""
        result = render_memory_context(store, _QUERY, config=agent.memory)
        assert () == result.event.degraded  # type: ignore[union-attr]
        assert 1 == _uses(store, "acme")


class TestOpenUnderALock:
    """Opening a file another connection holds exclusively."""

    @pytest.mark.parametrize(
        ("setting", "bound"),
        [(", open_timeout_ms: 300", "0.3s"), ("", "2s")],
        ids=["open_timeout_ms", "degrade-default"],
    )
    def test_degrading_open_is_bounded_and_names_the_lock(
        self, tmp_path: Path, setting: str, bound: str
    ) -> None:
        """``unavailable: degrade`` gives up while the lock is held, after ``open_timeout_ms``
        (2 s unset, not the minute a raising open waits), with a status naming the lock."""
        SQLiteStore(tmp_path / "m.db").close()
        agent = _agent(tmp_path, f", unavailable: degrade{setting}")
        with _held(tmp_path / "m.db", "BEGIN EXCLUSIVE", journal="DELETE"):
            store = _returned_while_held(lambda: open_store(agent))
        assert isinstance(store, UnavailableStore)
        assert "StoreLockedError" in store.status
        assert "another process holds a lock on the file" in store.status
        assert f"still locked after {bound} (memory.backend.open_timeout_ms)" in store.status

    def test_store_open_timeout_raises_locked(self, tmp_path: Path) -> None:
        """``SQLiteStore(open_timeout_ms=...)`` raises ``StoreLockedError`` naming the lock."""
        SQLiteStore(tmp_path / "m.db").close()
        held = _held(tmp_path / "m.db", "BEGIN EXCLUSIVE", journal="DELETE")
        with held, pytest.raises(StoreLockedError, match="another process holds a lock"):
            _returned_while_held(lambda: SQLiteStore(tmp_path / "m.db", open_timeout_ms=200))

    def test_bad_open_timeout_is_refused(self, tmp_path: Path) -> None:
        """A negative ``open_timeout_ms`` is a ValueError naming the argument."""
        with pytest.raises(ValueError, match="'open_timeout_ms' must be"):
            SQLiteStore(tmp_path / "m.db", open_timeout_ms=-1)
