"""Issue 13 (item 5) and issue 14: a SQLite store stops its own recall at the deadline.

A render with a deadline used to hand every recall to a worker thread and walk
away from it at the deadline; the abandoned recall kept running and kept the
store's read lock, so the next users' renders got nothing (``deadline``, then
``store_busy``). The SQLite store now interrupts its statements at the
deadline (a progress handler) and waits for its lock no longer than that, so
nothing is left running. (Issue 25: only a private ``:memory:`` store recalls
in the caller's thread; a file's WAL-index lock wait cannot be interrupted, so
a file's recall runs on a recall thread, stopped there the same way.)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_inject import MemoryInjectConfig, arender_memory_context, render_memory_context
from memory_inject.exceptions import RecallInterruptedError
from memory_inject.storage import _forks
from memory_inject.storage.fusion import RecallInfo
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.storage.sqlite.engine import SQLiteEngine
from memory_inject.testing import recording

#: A statement that runs for minutes unless something stops it.
ENDLESS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1e12) "
    "SELECT count(*) FROM c"
)
DEADLINE = MemoryInjectConfig(deadline_ms=100)


class SlowEngine(SQLiteEngine):
    """The engine of a :class:`SlowSQLite`: its recall runs an endless statement."""

    owner: SlowSQLite

    def _recall(self, *args: Any, **kwargs: Any) -> tuple[list[Any], RecallInfo]:
        self.owner.threads.append(threading.current_thread().name)
        self.connections.read(lambda c: c.execute(ENDLESS).fetchall(), "recall")
        return [], RecallInfo()


class SlowSQLite(SQLiteStore):
    """A real SQLite store whose recall runs an endless statement on its read connection."""

    threads: list[str]
    _engine: SlowEngine

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._engine.__class__ = SlowEngine
        self._engine.owner = self


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[SlowSQLite]:
    with SlowSQLite(tmp_path / "m.db") as store:
        store.threads = []
        store.store("fact", "deploys go to prod-3")
        yield store


def lock_is_free(store: SQLiteStore, wait: float = 2.0) -> bool:
    """True when another thread can take every read connection of the store within ``wait`` s.

    (A recall left running would hold one.)
    """
    got: list[bool] = []
    pool = store._engine.connections._readers
    assert pool is not None

    def probe() -> None:
        held = []
        until = time.perf_counter() + wait
        try:
            for _ in range(pool.size):
                held.append(pool.take(until))
            got.append(True)
        except RecallInterruptedError:
            got.append(False)
        finally:
            for conn in held:
                pool.give(conn)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return got[0]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_recall_past_the_deadline_is_stopped_not_abandoned(slow: SlowSQLite, mode: str) -> None:
    with recording() as rec:
        if mode == "sync":
            result = render_memory_context(slow, "deploy", config=DEADLINE)
        else:
            result = asyncio.run(arender_memory_context(slow, "deploy", config=DEADLINE))
    (event,) = rec.events
    assert ("", True) == (result.text, event.partial)
    assert any(d.startswith("deadline: recall abandoned after 0.100s") for d in event.degraded)
    assert event.error is None
    # Nothing is left running on the store: the next user gets the lock at once.
    assert lock_is_free(slow)


def test_the_next_renders_are_served_after_a_stopped_recall(tmp_path: Path) -> None:
    """One crafted slow recall does not cost the other users their memory."""
    with SlowSQLite(tmp_path / "m.db") as store:
        store.threads = []
        store.store("fact", "deploys go to prod-3")
        render_memory_context(store, "deploy", config=DEADLINE)
        plain = SQLiteEngine.__new__(SQLiteEngine)  # the same caches, normal recall
        plain.__dict__.update(store._engine.__dict__)
        fine = SQLiteStore.__new__(SQLiteStore)  # the same file and connections, normal recall
        fine.__dict__.update(store.__dict__)
        fine._here = _forks.PerProcess(plain, lambda e: e)  # its own, not the slow store's
        with recording() as rec:
            results = [render_memory_context(fine, "deploy", config=DEADLINE) for _ in range(5)]
    assert all("prod-3" in r.text for r in results)
    assert [None] * 5 == [e.error for e in rec.events]
    assert not any(e.partial for e in rec.events)


def test_a_files_recall_runs_on_a_recall_thread_and_is_still_stopped(slow: SlowSQLite) -> None:
    """Issue 25: a file's WAL-index lock wait cannot be interrupted in place, so a
    file store's recall leaves the caller's thread, and is still stopped there."""
    with recording() as rec:
        render_memory_context(slow, "deploy", config=DEADLINE)
    assert ["memory-inject-recall"] == [t.split("_")[0] for t in slow.threads]
    assert any(d.startswith("deadline: recall abandoned") for d in rec.events[0].degraded)
    assert lock_is_free(slow)


def test_a_private_in_memory_store_recalls_in_the_callers_thread() -> None:
    """No file, no WAL index: the store stops itself in place, with no thread hop."""
    with SlowSQLite(":memory:") as store:
        store.threads = []
        store.store("fact", "deploys go to prod-3")
        with recording() as rec:
            render_memory_context(store, "deploy", config=DEADLINE)
    assert [threading.current_thread().name] == store.threads
    assert any(d.startswith("deadline: recall abandoned") for d in rec.events[0].degraded)


def test_with_an_embedder_the_recall_runs_in_a_worker_and_is_still_stopped(
    tmp_path: Path,
) -> None:
    from memory_inject.embedders import HashingEmbedder

    with SlowSQLite(tmp_path / "m.db", embedder=HashingEmbedder(dim=16)) as store:
        store.threads = []
        with recording() as rec:
            render_memory_context(store, "deploy", config=DEADLINE)
        assert store.threads[0] != threading.current_thread().name
        assert rec.events[0].partial
        assert lock_is_free(store)


def test_busy_read_connections_are_waited_for_no_longer_than_the_deadline(
    tmp_path: Path,
) -> None:
    """Every read connection held by other turns: the turn waits until its deadline, then
    says it waited for a connection (its recall never started: no 'deadline' abandonment)."""
    with SQLiteStore(tmp_path / "m.db", readers=2) as store:
        store.store("fact", "deploys go to prod-3")
        pool = store._engine.connections._readers
        assert pool is not None
        held = [pool.take(), pool.take()]
        try:
            holder_free = threading.Event()
            out: list[Any] = []

            def turn() -> None:
                with recording() as rec:
                    out.append(render_memory_context(store, "deploy", config=DEADLINE))
                out.append(rec.events[0])
                holder_free.set()

            t = threading.Thread(target=turn)
            t.start()
            assert holder_free.wait(5.0)
            t.join()
        finally:
            for conn in held:
                pool.give(conn)
        result, event = out
        assert ("", True) == (result.text, event.partial)
        assert [True] == [
            d.startswith("connection_wait: all 2 read connections") for d in event.degraded
        ]
        # Given back, the connections serve the next turn.
        assert "prod-3" in render_memory_context(store, "deploy", config=DEADLINE).text


def test_interrupt_at_raises_a_typed_error_and_leaves_no_transaction(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db") as store:
        with (
            store.interrupt_at(time.perf_counter() + 0.05),
            pytest.raises(RecallInterruptedError, match="stopped at the deadline"),
        ):
            store._engine.connections.read(lambda c: c.execute(ENDLESS).fetchall(), "recall")
        readers = store._engine.connections._readers
        assert readers is not None
        assert not any(c.in_transaction for c in readers.connections())
        # Outside the block the store is back to normal: no handler, its busy timeout.
        assert [(1,)] == store._engine.connections.read(
            lambda c: c.execute("SELECT 1").fetchall(), "probe"
        )
        assert 5000 == store._engine.connections.read(
            lambda c: c.execute("PRAGMA busy_timeout").fetchone()[0], "probe"
        )


def test_nested_deadlines_keep_the_earlier(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db") as store:
        soon = time.perf_counter() + 0.05
        with (
            store.interrupt_at(soon),
            store.interrupt_at(soon + 3600),
            pytest.raises(RecallInterruptedError),
        ):
            store._engine.connections.read(lambda c: c.execute(ENDLESS).fetchall(), "recall")


class _Plain:
    """A store without SupportsInterrupt: its recall goes to the worker pool."""

    name = "plain"

    def recall(self, query: str, limit: int, **kw: Any) -> list[Any]:
        return []


def test_a_recall_thread_that_cannot_start_gives_back_its_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memory_inject import _deadline

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_deadline._THREADS, "submit", refuse)
    store = _Plain()
    with recording() as rec:
        for _ in range(_deadline.MAX_STUCK_PER_STORE + 1):
            render_memory_context(store, "deploy", config=DEADLINE)
    # Every turn names the failure (none is refused as 'store_busy' by leaked slots).
    assert all("can't start new thread" in (e.error or "") for e in rec.events)
    assert not any("store_busy" in d for e in rec.events for d in e.degraded)
    assert 0 == _deadline.stuck_calls(store)
