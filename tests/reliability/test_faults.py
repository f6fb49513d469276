"""Fault injection: whatever the store does, the turn goes on and one event says why.

Every fault is tried on the sync and the async renderer where it applies. The
promise checked each time: the render returns (within the deadline, for a
hang), nothing raises, exactly one ``memory_recall`` event is sent, its
``success`` is right and its ``error`` or ``degraded`` names the cause. Write
paths must raise a :class:`StorageError` instead, never a driver error.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_inject import (
    MemoryEntry,
    MemoryInjectConfig,
    MemoryRecall,
    RenderResult,
    arender_memory_context,
    render_memory_context,
)
from memory_inject.config import RecallPlanConfig
from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import (
    EmbedderError,
    SchemaMismatchError,
    StorageError,
    StoreCorruptError,
    StoreLockedError,
    StoreMissingError,
)
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import FixtureMemory, recording

FACT = MemoryEntry("fact", "server is prod-3", "core", None, score=0.9)
FACT_BLOCK = "[Memory context]\n- fact: server is prod-3\n[/Memory context]\n\n"
MODES = ["sync", "async"]
DEADLINE = MemoryInjectConfig(deadline_ms=200)
#: A hang ends only when the test releases it, so any render that returns
#: before this bound returned because of the deadline (200 ms), not the store.
HANG_BOUND_S = 5.0
ROWS = 300


def render(
    store: Any, query: str, mode: str, **kwargs: Any
) -> tuple[RenderResult, list[MemoryRecall]]:
    """Render once on the sync or the async path; the result and every event sent."""
    with recording() as rec:
        if mode == "sync":
            result = render_memory_context(store, query, **kwargs)
        else:
            result = asyncio.run(arender_memory_context(store, query, **kwargs))
    return result, list(rec.events)


def reason(event: MemoryRecall) -> str:
    """Everything the event says went wrong."""
    return "; ".join([event.error or "", *event.degraded])


def only_event(events: Sequence[MemoryRecall]) -> MemoryRecall:
    assert 1 == len(events)
    return events[0]


def populate(path: Path, n: int = ROWS, **kwargs: Any) -> None:
    """A closed database holding ``n`` rows that match the query 'deploy server'."""
    lines = "".join(
        json.dumps({"key": f"k{i}", "content": f"deploy server {i} " + "x" * 200}) + "\n"
        for i in range(n)
    )
    with SQLiteStore(path, **kwargs) as s:
        s.import_jsonl(io.StringIO(lines))


def checkpoint(path: Path) -> None:
    """Move everything from the WAL into the main file, so damage to it is seen."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def integrity(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def run_child(script: str, *args: str, timeout: float = 60) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter; it prints one JSON object last."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Set at teardown: stores that hang on it return then, freeing their worker."""
    event = threading.Event()
    yield event
    event.set()


class RaisingStore:
    """``recall`` raises ``exc`` for the scopes in ``failing``, answers FACT for the rest."""

    name = "raising"

    def __init__(self, exc: BaseException, failing: Sequence[str | None] = (None,)) -> None:
        self.exc = exc
        self.failing = set(failing)

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        if kw.get("session_id") in self.failing:
            raise self.exc
        return [FACT]


class HangingStore:
    """``recall`` blocks on ``gate`` for the scopes in ``hanging``; the rest answer FACT."""

    name = "hanging"

    def __init__(self, gate: threading.Event, hanging: Sequence[str | None] = (None,)) -> None:
        self.gate = gate
        self.hanging = set(hanging)

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        if kw.get("session_id") in self.hanging:
            self.gate.wait()
        return [FACT]


class HangingAsyncStore:
    """``arecall`` never returns (until cancelled) for the scopes in ``hanging``."""

    name = "hanging_async"

    def __init__(self, hanging: Sequence[str | None] = (None,)) -> None:
        self.hanging = set(hanging)

    def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        raise AssertionError("the async path must await arecall")

    async def arecall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
        if kw.get("session_id") in self.hanging:
            await asyncio.Event().wait()
        return [FACT]


def render_timed(
    store: Any, mode: str, gate: threading.Event, **kwargs: Any
) -> tuple[RenderResult, list[MemoryRecall], float]:
    """Render against a hanging store; how long the render itself took.

    On the async path the hung worker thread is released before the event loop
    closes, because ``asyncio.run`` waits for its executor's threads.
    """
    with recording() as rec:
        if mode == "sync":
            t0 = time.perf_counter()
            result = render_memory_context(store, "deploy", config=DEADLINE, **kwargs)
            elapsed = time.perf_counter() - t0
        else:

            async def go() -> tuple[RenderResult, float]:
                t0 = time.perf_counter()
                out = await arender_memory_context(store, "deploy", config=DEADLINE, **kwargs)
                took = time.perf_counter() - t0
                gate.set()
                return out, took

            result, elapsed = asyncio.run(go())
    return result, list(rec.events), elapsed


class TestStoreRaises:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(
        ("exc", "expected_reason"),
        [
            (RuntimeError("boom"), "RuntimeError: boom"),
            (StorageError("backend down"), "storage_error: backend down"),
            (StoreLockedError("busy"), "locked: busy"),
            (StoreCorruptError("malformed"), "corrupt: malformed"),
            (OSError(28, "No space left on device"), "OSError: [Errno 28] No space left on device"),
            (ConnectionResetError("peer reset"), "ConnectionResetError: peer reset"),
            (TimeoutError(), "TimeoutError"),
            (MemoryError(), "MemoryError"),
            (RecursionError("deep"), "RecursionError: deep"),
            (KeyError("k"), "KeyError: 'k'"),
            (
                sqlite3.OperationalError("database is locked"),
                "OperationalError: database is locked",
            ),
        ],
    )
    def test_store_that_raises(self, mode: str, exc: BaseException, expected_reason: str) -> None:
        """Any exception from recall: no block, one event, success False, the cause named."""
        result, events = render(RaisingStore(exc), "deploy", mode)
        event = only_event(events)
        assert ("", False, f"scope None: {expected_reason}") == (
            result.text,
            event.success,
            event.error,
        )

    @pytest.mark.parametrize("mode", MODES)
    def test_one_failing_scope_keeps_the_others(self, mode: str) -> None:
        """A scope that raises is reported; the scopes that answered still render."""
        store = RaisingStore(StoreLockedError("busy"), failing=["s1"])
        result, events = render(store, "deploy", mode, sessions=["s1", "s2"])
        event = only_event(events)
        assert (FACT_BLOCK, True, "scope 's1': locked: busy") == (
            result.text,
            event.success,
            event.error,
        )

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(
        ("garbage", "expected_reason"),
        [
            (None, "scope None: TypeError: 'NoneType' object is not iterable"),
            (42, "scope None: TypeError: 'int' object is not iterable"),
            ([FACT, "not an entry", None], "invalid_entries: store returned 2 non-entries"),
        ],
    )
    def test_store_that_returns_garbage(
        self, mode: str, garbage: Any, expected_reason: str
    ) -> None:
        """Non-iterables and non-entries: the good entries render, success False, cause named."""

        class Garbage:
            name = "garbage"

            def recall(self, query: str, limit: int, **kw: Any) -> Any:
                return garbage

        result, events = render(Garbage(), "deploy", mode)
        event = only_event(events)
        expected_text = FACT_BLOCK if isinstance(garbage, list) else ""
        assert (expected_text, False, expected_reason) == (result.text, event.success, event.error)

    @pytest.mark.parametrize("mode", MODES)
    def test_iterator_that_raises_midway(self, mode: str) -> None:
        """A result that fails while being read counts as a failed recall."""

        def broken() -> Iterator[MemoryEntry]:
            yield FACT
            raise StoreCorruptError("page 7 is malformed")

        class Midway:
            name = "midway"

            def recall(self, query: str, limit: int, **kw: Any) -> Any:
                return broken()

        result, events = render(Midway(), "deploy", mode)
        event = only_event(events)
        assert ("", False, "scope None: corrupt: page 7 is malformed") == (
            result.text,
            event.success,
            event.error,
        )

    def test_store_whose_name_raises(self) -> None:
        """A store that cannot even say its name is reported by its class name."""

        class Nameless:
            @property
            def name(self) -> str:
                raise RuntimeError("no name")

            def recall(self, query: str, limit: int, **kw: Any) -> list[MemoryEntry]:
                return [FACT]

        result, events = render(Nameless(), "deploy", "sync")
        assert (FACT_BLOCK, "Nameless", True) == (
            result.text,
            only_event(events).backend,
            events[0].success,
        )

    def test_usage_counter_failure_is_logged_not_raised(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A recall plan that tracks usage keeps the block when mark_used raises."""

        class Tracked(FixtureMemory):
            def mark_used(self, ids: Sequence[str]) -> int:
                raise StorageError("read-only")

        cfg = MemoryInjectConfig(recall_plan=RecallPlanConfig(enabled=True, track_usage=True))
        result, events = render(Tracked({None: [FACT]}), "deploy", "sync", config=cfg)
        assert (FACT_BLOCK, True, True) == (
            result.text,
            only_event(events).success,
            "could not update usage counters" in caplog.text,
        )


class TestStoreHangs:
    @pytest.mark.parametrize("mode", MODES)
    def test_hung_store_returns_by_the_deadline(self, mode: str, gate: threading.Event) -> None:
        """A recall that never answers is abandoned at the deadline: partial, success False."""
        result, events, elapsed = render_timed(HangingStore(gate), mode, gate)
        event = only_event(events)
        assert elapsed < HANG_BOUND_S
        assert ("", False, True) == (result.text, event.success, event.partial)
        assert "deadline: recall abandoned after 0.200s" in reason(event)

    @pytest.mark.parametrize("mode", MODES)
    def test_deadline_keeps_what_already_answered(self, mode: str, gate: threading.Event) -> None:
        """The scope that answered before the hang renders; the event says partial."""
        store = HangingStore(gate, hanging=["s2"])
        result, events, elapsed = render_timed(store, mode, gate, sessions=["s1", "s2"])
        event = only_event(events)
        assert elapsed < HANG_BOUND_S
        assert (FACT_BLOCK, True, True) == (result.text, event.success, event.partial)

    def test_hung_async_store_is_cancelled(self) -> None:
        """An ``arecall`` that never returns is cancelled at the deadline."""
        store = HangingAsyncStore(hanging=["s2"])
        t0 = time.perf_counter()
        result, events = render(store, "deploy", "async", config=DEADLINE, sessions=["s1", "s2"])
        event = only_event(events)
        assert time.perf_counter() - t0 < HANG_BOUND_S
        assert (FACT_BLOCK, True, True) == (result.text, event.success, event.partial)

    def test_every_turn_against_a_hung_store_returns(self, gate: threading.Event) -> None:
        """Ten turns in a row against a store that hangs for good each return by the deadline."""
        store = HangingStore(gate)
        outcomes = []
        t0 = time.perf_counter()
        for _ in range(10):
            result, events = render(store, "deploy", "sync", config=DEADLINE)
            outcomes.append((result.text, only_event(events).partial))
        assert time.perf_counter() - t0 < 10 * HANG_BOUND_S
        assert [("", True)] * 10 == outcomes

    @pytest.mark.parametrize("mode", MODES)
    def test_hung_embedder_returns_by_the_deadline_with_the_keyword_block(
        self, mode: str, db: Path, gate: threading.Event
    ) -> None:
        """An embedder that hangs inside a real SQLite recall is waited for half the time
        the recall has, then the recall goes on by keywords (twenty-eighth round: it was
        abandoned at the deadline, and the block with it)."""

        class Stuck(HashingEmbedder):
            armed = False

            def embed(self, texts: Sequence[str]) -> list[list[float]]:
                if self.armed:
                    gate.wait()
                return super().embed(texts)

        embedder = Stuck(dim=32)
        with SQLiteStore(db, embedder=embedder) as s:
            s.store("fact", "deploy goes to prod-3")
            embedder.armed = True
            result, events, elapsed = render_timed(s, mode, gate)
            event = only_event(events)
            assert elapsed < HANG_BOUND_S
            block = "[Memory context]\n- fact: deploy goes to prod-3\n[/Memory context]\n\n"
            assert (block, True, False) == (result.text, event.success, event.partial)
            assert any("gave no vector in" in d for d in event.degraded)
            gate.set()


class TestDatabaseFile:
    @pytest.mark.parametrize(
        ("damage", "kwargs", "expected"),
        [
            ("missing", {"create": False}, StoreMissingError),
            ("empty", {"create": False}, StoreMissingError),
            ("directory", {}, StoreMissingError),
            ("truncated to 100 bytes", {}, StoreCorruptError),
            ("truncated to half", {}, StoreCorruptError),
            ("garbage", {}, StoreCorruptError),
            ("another program's database", {}, SchemaMismatchError),
            ("newer schema", {}, SchemaMismatchError),
        ],
    )
    def test_damaged_file_fails_at_open_with_a_typed_error(
        self,
        db: Path,
        damage: str,
        kwargs: dict[str, Any],
        expected: type[StorageError],
    ) -> None:
        """A file that cannot serve is refused at open with its StorageError, before any turn."""
        populate(db)
        checkpoint(db)
        size = db.stat().st_size
        if damage in ("missing", "directory", "empty"):
            db.unlink()
            if damage == "directory":
                db.mkdir()
            elif damage == "empty":
                db.write_bytes(b"")
        elif damage.startswith("truncated"):
            with db.open("r+b") as fh:
                fh.truncate(100 if "100" in damage else size // 2)
        elif damage == "garbage":
            db.write_bytes(os.urandom(size))
        elif damage == "another program's database":
            db.unlink()
            with contextlib.closing(sqlite3.connect(db)) as conn:
                conn.execute("CREATE TABLE memories (key TEXT, content TEXT)")
                conn.commit()
        else:
            with contextlib.closing(sqlite3.connect(db)) as conn:
                conn.execute("PRAGMA user_version = 99")
        with pytest.raises(StorageError) as info:
            SQLiteStore(db, **kwargs).close()
        assert (expected, True) == (type(info.value), bool(info.value.reason))

    @pytest.mark.parametrize("mode", MODES)
    def test_file_damaged_under_an_open_store(self, mode: str, db: Path) -> None:
        """Pages overwritten while the store is open: recall degrades, writes raise corrupt."""
        populate(db, n=2000)
        checkpoint(db)
        with SQLiteStore(db) as s:
            with db.open("r+b") as fh:
                fh.seek(8192)
                fh.write(os.urandom(db.stat().st_size - 8192))
            result, events = render(s, "deploy server", mode)
            event = only_event(events)
            assert ("", False, True) == (result.text, event.success, "corrupt:" in reason(event))
            with pytest.raises(StoreCorruptError):
                s.store("new", "value")

    @pytest.mark.parametrize("mode", MODES)
    def test_every_render_of_a_damaged_file_says_so(self, mode: str, db: Path) -> None:
        """A few pages damaged, the header and schema intact: the first render's failed
        read transaction rolled back the connection's vocabulary view, so the next
        renders said success with "fts_failed: no such table" and no word of damage."""
        with SQLiteStore(db) as s:
            for i in range(300):
                s.store(f"key{i}", f"deploy fact number {i} about servers " + "pad " * 40)
        checkpoint(db)
        with db.open("r+b") as fh:
            fh.seek(60 * 4096)
            fh.write(random.Random(1).randbytes(5 * 4096))
        with SQLiteStore(db) as s:
            for query in ("deploy", "pad", "pad"):
                _, events = render(s, query, mode)
                event = only_event(events)
                assert (False, True) == (event.success, "corrupt:" in reason(event))
                assert not [d for d in event.degraded if "no such table" in d]

    @pytest.mark.parametrize("mode", MODES)
    def test_closed_store(self, mode: str, db: Path) -> None:
        """A store closed under the host (shutdown race): the turn goes on without memory."""
        populate(db)
        s = SQLiteStore(db)
        s.close()
        result, events = render(s, "deploy server", mode)
        event = only_event(events)
        assert ("", False, True) == (
            result.text,
            event.success,
            "the store is closed" in reason(event),
        )

    @pytest.mark.parametrize("mode", MODES)
    def test_file_removed_between_runs_starts_empty(self, mode: str, db: Path) -> None:
        """A deleted file is recreated (create=True): an empty, successful render."""
        populate(db)
        db.unlink()
        with SQLiteStore(db) as s:
            result, events = render(s, "deploy server", mode)
            assert ("", True, 0) == (result.text, only_event(events).success, s.count())


HOLD_LOCK = r"""
import sqlite3, sys
from memory_inject.storage.sqlite import writers
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
writers.register(conn)  # another process of this library (its writes pass the guard)
if sys.argv[2] == "exclusive":
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
else:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO memories (id, key, content, category, timestamp, updated_at, "
                 "namespace) VALUES ('held', 'held', 'deploy held row', 'core', "
                 "'2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', 'default')")
print("locked", flush=True)
sys.stdin.read()
conn.close()
"""


@contextlib.contextmanager
def lock_held_by_another_process(path: Path, mode: str = "write") -> Iterator[None]:
    """Another process holds a write transaction (or an exclusive lock) until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "locked" == proc.stdout.readline().strip()
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()


class TestLockedByAnotherProcess:
    @pytest.mark.parametrize("mode", MODES)
    def test_recall_proceeds_and_write_reports_locked(self, mode: str, db: Path) -> None:
        """Under WAL a held write lock does not stop recall; a write raises StoreLockedError."""
        populate(db)
        with SQLiteStore(db, busy_timeout_ms=100) as s:
            with lock_held_by_another_process(db):
                _result, events = render(s, "deploy server", mode)
                event = only_event(events)
                with pytest.raises(StoreLockedError, match="after one retry") as info:
                    s.store("mine", "written under the lock")
            assert (4, True, None) == (event.rendered_entries, event.success, event.error)
            assert isinstance(info.value.__cause__, sqlite3.OperationalError)
            s.store("mine", "written after the lock")
            assert (ROWS + 1, None) == (s.count(), s.get("held"))

    def test_queued_writes_each_end_within_their_own_bound(self, tmp_path: Path) -> None:
        """Another connection holds the file's write lock far longer than a write's bound
        (2 x busy timeout + the retry's pause: 0.7 s here). Each of eight concurrent writes
        ends with ``StoreLockedError``; before, they waited for this process's write lock
        in turn, each for the whole bound, so the later ones were still waiting when the
        lock went and a turn's autosave waited for as long as the other process held it."""
        db = tmp_path / "m.db"
        with SQLiteStore(db, busy_timeout_ms=200) as store:
            store.store("first", "written before the lock")
            other = sqlite3.connect(db, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            outcomes: list[str] = []

            def write(i: int) -> None:
                try:
                    store.store(f"w{i}", "an autosave")
                    outcomes.append("written")
                except StoreLockedError:
                    outcomes.append("locked")

            writers = [threading.Thread(target=write, args=(i,)) for i in range(8)]
            for t in writers:
                t.start()
            threading.Event().wait(3.0)  # twice what one write may wait, all of them at once
            other.execute("ROLLBACK")
            other.close()
            for t in writers:
                t.join()
            assert 8 * ["locked"] == outcomes
            assert 1 == store.count()

    def test_open_waits_out_a_write_lock_longer_than_one_busy_timeout(self, tmp_path: Path) -> None:
        """Another process creating or upgrading the schema holds the write lock past the
        busy timeout and its one retry (a 100k-row upgrade): the open waits for it, up to
        ``OPEN_WAIT_TIMEOUTS`` busy timeouts, instead of failing the agent's start."""
        db = tmp_path / "new.db"
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("PRAGMA journal_mode = WAL").fetchone()
        other.execute("BEGIN IMMEDIATE")
        opened: list[object] = []

        def open_it() -> None:
            try:
                opened.append(SQLiteStore(db, busy_timeout_ms=200))  # one try: 0.7 s
            except StoreLockedError as exc:  # pragma: no cover - the bug
                opened.append(exc)

        opener = threading.Thread(target=open_it)
        opener.start()
        opener.join(1.2)  # past one try and its retry, inside the 2.4 s the open waits
        other.execute("ROLLBACK")
        other.close()
        opener.join()
        [store] = opened
        assert isinstance(store, SQLiteStore), store
        with store:
            store.store("k", "written once the lock was gone")
            assert 1 == store.count()

    def test_exclusive_lock_at_open_is_a_typed_error(self, db: Path) -> None:
        """An exclusive lock held by another process: open raises StoreLockedError."""
        populate(db)
        with lock_held_by_another_process(db, "exclusive"), pytest.raises(StoreLockedError):
            SQLiteStore(db, busy_timeout_ms=100).close()


FILL_DISK = r"""
import json, os, resource, signal, sys
from memory_inject import render_memory_context
from memory_inject.exceptions import StorageError
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording

path = sys.argv[1]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
store = SQLiteStore(path)
used = sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))
resource.setrlimit(resource.RLIMIT_FSIZE, (used + 256 * 1024, resource.RLIM_INFINITY))
out = {"acked": [], "error": None}
for i in range(100000):
    key = f"full-{i}"
    try:
        store.store(key, f"deploy server overflow {i} " + "y" * 4000)
    except Exception as exc:
        out["error"] = [type(exc).__name__, isinstance(exc, StorageError), str(exc)]
        break
    out["acked"].append(key)
with recording() as rec:
    result = render_memory_context(store, "deploy server")
event = rec.events[0]
out["render"] = [len(rec.events), event.success, event.rendered_entries, event.error]
try:
    store.close()
except Exception as exc:
    out["close_error"] = repr(exc)
print(json.dumps(out))
"""


class TestDiskFull:
    def test_full_database_refuses_writes_and_keeps_serving(self, db: Path) -> None:
        """SQLITE_FULL (max_page_count): writes raise StorageError, recall works, none lost."""
        populate(db)
        with SQLiteStore(db) as s:
            # The page limit lives on the store's own connection (a test-only reach-in).
            pages = s._engine.connections._conn.execute("PRAGMA page_count").fetchone()[0]
            s._engine.connections._conn.execute(f"PRAGMA max_page_count = {pages + 4}")
            acked, error = [], None
            for i in range(1000):
                try:
                    s.store(f"big-{i}", "deploy " + "z" * 3000)
                except StorageError as exc:
                    error = exc
                    break
                acked.append(f"big-{i}")
            result, events = render(s, "deploy server", "sync")
            assert (True, 4) == (only_event(events).success, len(result.entries))
            assert "database or disk is full" in str(error)
            s._engine.connections._conn.execute("PRAGMA max_page_count = 4294967294")
            s.store("after", "room again")
            assert all(s.get(k) is not None for k in acked)
            assert ROWS + len(acked) + 1 == s.count()
        assert "ok" == integrity(db)

    def test_file_size_limit_fails_writes_not_recall(self, db: Path) -> None:
        """Real write(2) failures (RLIMIT_FSIZE): StorageError, recall works, acked rows survive."""
        populate(db)
        out = run_child(FILL_DISK, str(db))
        name, is_storage_error, _message = out["error"]
        assert (True, [1, True, 4, None]) == (is_storage_error, out["render"]), name
        assert "ok" == integrity(db)
        with SQLiteStore(db) as s:
            assert [] == [k for k in out["acked"] if s.get(k) is None]
            assert ROWS + len(out["acked"]) == s.count()


READ_ONLY = r"""
import json, os, sys
from memory_inject import render_memory_context
from memory_inject.storage.sqlite import SQLiteStore
from memory_inject.testing import recording

path = sys.argv[1]
if os.geteuid() == 0:  # root ignores file modes: become nobody (modules already imported)
    os.setgid(65534)
    os.setuid(65534)
out = {"readable": os.access(path, os.R_OK), "writable": os.access(path, os.W_OK)}
try:
    store = SQLiteStore(path)
except Exception as exc:
    out["open"] = [type(exc).__name__, str(exc)]
else:
    with recording() as rec:
        render_memory_context(store, "deploy server")
    event = rec.events[0]
    out["render"] = [len(rec.events), event.success, event.rendered_entries, event.error]
    try:
        store.store("new", "value")
        out["write"] = "ok"
    except Exception as exc:
        out["write"] = [type(exc).__name__, str(exc)]
    store.close()
print(json.dumps(out))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can traverse (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="mi-readonly-"))
    path.chmod(0o755)
    yield path
    path.chmod(0o755)
    for child in path.iterdir():
        child.chmod(0o644)
    shutil.rmtree(path)


def read_only_child(path: Path) -> dict[str, Any]:
    out = run_child(READ_ONLY, str(path))
    if not out["readable"] or out["writable"]:
        pytest.skip("cannot make a file read-only for this user here")
    return out


class TestReadOnly:
    def test_read_only_database_in_use_serves_recall_and_refuses_writes(
        self,
        shared_dir: Path,
    ) -> None:
        """Read-only file and directory, WAL open elsewhere: recall works, writes StorageError."""
        db = shared_dir / "memory.db"
        populate(db)
        with SQLiteStore(db) as keeper:  # keeps -wal and -shm in place, as a running agent does
            keeper.store("live", "deploy server live")
            for child in shared_dir.iterdir():
                child.chmod(0o444)
            shared_dir.chmod(0o555)
            out = read_only_child(db)
        assert [1, True, 4, None] == out["render"]
        assert ("StorageError", True) == (out["write"][0], "readonly" in out["write"][1])

    def test_read_only_database_alone_fails_at_open_with_storage_error(
        self,
        shared_dir: Path,
    ) -> None:
        """A read-only WAL database nobody has open: open raises StorageError, not a crash."""
        db = shared_dir / "memory.db"
        populate(db)
        db.chmod(0o444)
        shared_dir.chmod(0o555)
        out = read_only_child(db)
        assert "StorageError" == out["open"][0], out


class BadEmbedder(HashingEmbedder):
    """Embeds like HashingEmbedder until armed, then fails in one of several ways."""

    def __init__(self, fault: Callable[[Sequence[str]], Any]) -> None:
        super().__init__(dim=32)
        self.fault = fault
        self.armed = False

    def embed(self, texts: Sequence[str]) -> Any:
        if self.armed:
            return self.fault(texts)
        return super().embed(texts)


def _raise(texts: Sequence[str]) -> Any:
    raise RuntimeError("CUDA out of memory")


EMBEDDER_FAULTS: dict[str, Callable[[Sequence[str]], Any]] = {
    "raises": _raise,
    "too few vectors": lambda texts: [],
    "too many vectors": lambda texts: [[0.1] * 32] * (len(texts) + 1),
    "strings": lambda texts: ["vector"] * len(texts),
    "nested lists": lambda texts: [[[0.1]] * 32] * len(texts),
    "dicts": lambda texts: [{"embedding": [0.1] * 32}] * len(texts),
}


class TestEmbedderFaults:
    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("fault", sorted(EMBEDDER_FAULTS))
    def test_recall_falls_back_to_keywords(self, mode: str, fault: str, db: Path) -> None:
        """A failing embedder at recall: keyword results, success True, degraded names it."""
        embedder = BadEmbedder(EMBEDDER_FAULTS[fault])
        with SQLiteStore(db, embedder=embedder) as s:
            s.store("fact", "deploy goes to prod-3")
            embedder.armed = True
            result, events = render(s, "deploy", mode)
            event = only_event(events)
            assert ("fact", True, True) == (
                ",".join(event.rendered_keys),
                event.success,
                any(d.startswith("embedder_failed: ") for d in event.degraded),
            )
            assert result.text == event.text

    @pytest.mark.parametrize("fault", sorted(EMBEDDER_FAULTS))
    def test_write_raises_embedder_error_and_stores_nothing(self, fault: str, db: Path) -> None:
        """The same failure on a write is an EmbedderError and the row is not half-written."""
        embedder = BadEmbedder(EMBEDDER_FAULTS[fault])
        with SQLiteStore(db, embedder=embedder) as s:
            s.store("fact", "deploy goes to prod-3")
            embedder.armed = True
            with pytest.raises(EmbedderError):
                s.store("other", "never written")
            assert (1, None) == (s.count(), s.get("other"))
