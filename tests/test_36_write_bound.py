"""A SQLite write queued behind another write of its store ends within its own bound.

The bound of a write is two busy timeouts and the retry's pause. A write that waited for
this process's write lock (another thread's write, itself waiting for another process's
lock) then gave SQLite a full busy timeout on each try: 20 s against 10.3 (round 36's
operator helper). SQLite's wait is now what is left of the bound; the test reads the
busy timeouts the write connection was given, not how long anything took.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from pathlib import Path

from memory_inject.exceptions import StoreLockedError
from memory_inject.storage.sqlite import SQLiteStore

_BUSY = re.compile(r"PRAGMA busy_timeout = (\d+)")


def test_a_queued_write_gives_sqlite_only_what_is_left(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = SQLiteStore(db, busy_timeout_ms=400)
    store.store("seed", "a row", "core")
    connections = store._engine.connections
    seen: list[tuple[str, int]] = []
    connections._conn.set_trace_callback(
        lambda sql: seen.extend(
            (threading.current_thread().name, int(m)) for m in _BUSY.findall(sql)
        )
    )
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    errors: dict[str, BaseException] = {}

    def write(name: str) -> None:
        try:
            store.store(name, f"content of {name}", "core")
        except BaseException as exc:
            errors[name] = exc

    first = threading.Thread(target=write, args=("first",), name="first")
    first.start()
    while connections._lock.acquire(blocking=False):  # until the first write holds it
        connections._lock.release()
        time.sleep(0.001)
    second = threading.Thread(target=write, args=("second",), name="second")
    second.start()
    first.join()
    second.join()
    other.execute("ROLLBACK")
    other.close()
    store.close()
    assert {type(e) for e in errors.values()} == {StoreLockedError}
    assert "second" in errors
    # the second write waited for the first: SQLite got less than a full timeout from it
    assert [n for who, n in seen if who == "second"], seen
    assert all(n < 400 for who, n in seen if who == "second"), seen


def test_an_unqueued_write_sets_no_busy_timeout(tmp_path: Path) -> None:
    """A write nobody waits for runs no extra statement."""
    store = SQLiteStore(tmp_path / "m.db", busy_timeout_ms=400)
    seen: list[str] = []
    store._engine.connections._conn.set_trace_callback(seen.append)
    for i in range(20):
        store.store(f"k{i}", "a row", "core")
    store.close()
    assert not [s for s in seen if "busy_timeout" in s]
