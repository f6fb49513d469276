"""A ``fork()`` waits for the reads in flight of every SQLite store, as it waits for writes.

A read in flight holds SQLite's own mutexes; a child forked meanwhile inherits them held,
and its first ``sqlite3.connect`` (the child's first render of an inherited store) hung for
good (round 36's operator helper: within 28-392 forks under rendering threads). The fork
now takes each read pool's gate: it waits for the reads in flight, and no new read starts
until the fork is done. The test reads what the child saw, not how long anything took.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from memory_inject.storage.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")


def test_a_fork_waits_for_a_read_in_flight(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    store.store("k", "a row", "core")
    inside, go = threading.Event(), threading.Event()
    ended: list[bool] = []

    def slow_read(conn: object) -> None:
        inside.set()
        go.wait(10)
        ended.append(True)  # the child sees this only if the fork waited for the read

    reader = threading.Thread(target=store._engine.connections.read, args=(slow_read, "t"))
    reader.start()
    assert inside.wait(10)
    status: list[int] = []

    def fork() -> None:
        pid = os.fork()
        if pid == 0:  # the child: did the read end before the copy was made?
            os._exit(0 if ended else 3)
        status.append(os.waitpid(pid, 0)[1])

    forker = threading.Thread(target=fork)
    forker.start()
    forker.join(0.3)  # the fork is waiting for the read (or, before the fix, done)
    go.set()
    forker.join(30)
    reader.join(30)
    store.close()
    assert status and os.waitstatus_to_exitcode(status[0]) == 0


def test_a_child_renders_an_inherited_store_while_the_parent_reads(tmp_path: Path) -> None:
    """Forks taken while threads read: every child reads the inherited store and exits."""
    store = SQLiteStore(tmp_path / "m.db")
    for i in range(50):
        store.store(f"k{i}", f"fact {i} about production deploys", "core")
    stop = threading.Event()

    def reads() -> None:
        while not stop.is_set():
            store.recall("production deploys", 5)

    readers = [threading.Thread(target=reads) for _ in range(3)]
    for t in readers:
        t.start()
    codes = []
    try:
        for _ in range(40):
            pid = os.fork()
            if pid == 0:
                signal.alarm(20)  # a hung child dies (SIGALRM) instead of hanging the test
                try:
                    found = store.recall("production deploys", 5)
                    os._exit(0 if found else 4)
                except BaseException:
                    os._exit(5)
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    finally:
        stop.set()
        for t in readers:
            t.join(30)
        store.close()
    assert codes == [0] * 40
    assert sys.platform != "win32"
