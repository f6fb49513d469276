"""After ``fork()``: a child process opens its own connections to a store's file.

A SQLite connection must not be carried across ``fork()`` (sqlite.org, "How To
Corrupt An SQLite Database File", 2.6), and every lock a parent's thread held
at that moment stays held in the child for good: a child of ``gunicorn
--preload`` or of ``multiprocessing``'s ``fork`` start method hung on its
first write, and waited out every render's deadline for recalls that ran
only in its parent. So :class:`~.store.SQLiteStore` notes the process that
opened it; in another process its first call opens the file again
(:func:`reopened`), and the module-level locks and ledgers of the recall path
are new in the child (``os.register_at_fork`` in each module that has one).
The parent's engine is kept, never closed, in the child: closing it would
run SQLite's close on the parent's handles (a last connection's close may
checkpoint the parent's write-ahead log).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the engine imports the connections, which import this module
    from memory_inject.storage.sqlite.engine import SQLiteEngine

__all__ = ["guard", "reopened", "track"]

_guard = threading.Lock()
#: The engines of parent processes, held so they are never closed here.
_orphans: list[SQLiteEngine] = []


def _after_fork_in_child() -> None:
    global _guard  # noqa: PLW0603 - a lock a parent's thread held stays held otherwise
    _guard = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)

#: Every open store's write lock in this process (by its connections object).
_writers: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_held: list[threading.RLock] = []


def track(connections: object, write_lock: threading.RLock) -> None:
    """Count ``write_lock`` (a store's ``SQLiteConnection``'s) among the ones a fork waits for."""
    _writers[connections] = write_lock


def _before_fork() -> None:
    """Wait for every write of this process to end before ``fork()`` copies it: a write
    transaction open at the fork stays open in SQLite's lock bookkeeping of the file in
    the child, and no connection the child opened could ever write."""
    for _ in range(8):  # another thread may open a store meanwhile: copy again
        try:
            locks = list(_writers.values())
            break
        except RuntimeError:
            continue
    else:  # pragma: no cover - eight copies in a row raced a new store
        return
    for lock in locks:
        lock.acquire()
        _held.append(lock)  # as it is taken: the after-fork hooks release what was


def _after_fork() -> None:
    while _held:
        _held.pop().release()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)


def guard() -> threading.Lock:
    """The lock under which a store of this process replaces its parent's engine."""
    return _guard


def reopened(engine: SQLiteEngine, open_: Callable[[str, bool], SQLiteEngine]) -> SQLiteEngine:
    """The engine this process uses in place of ``engine``, opened by another process.

    ``open_(path, create)`` opens the file again (never creating it: a file gone
    since is a ``StorageError``, which the render reports). A closed store stays
    closed; a private ``:memory:`` database has no file to open again (its
    connection is the data) and is kept.
    """
    conn = engine.connections
    if conn.closed or conn.path == ":memory:":
        return engine
    _orphans.append(engine)
    return open_(conn.path, False)
