"""After ``fork()``: a child process opens its own connections to a store's file.

A SQLite connection must not be carried across ``fork()`` (sqlite.org, "How To
Corrupt An SQLite Database File", 2.6), and every lock a parent's thread held
at that moment stays held in the child for good: a child of ``gunicorn
--preload`` or of ``multiprocessing``'s ``fork`` start method hung on its
first write, and waited out every render's deadline for recalls that ran
only in its parent. So :class:`~.store.SQLiteStore` holds its engine in a
:class:`~memory_inject.storage._forks.PerProcess`; in another process its first
call opens the file again (:func:`reopened`), and the module-level locks and
ledgers of the recall path are new in the child (``os.register_at_fork`` in
each module that has one). The parent's engine is kept, never closed, in the
child (:func:`~memory_inject.storage._forks.keep`): closing it would run
SQLite's close on the parent's handles (a last connection's close may
checkpoint the parent's write-ahead log). A fork waits for the store's writes
in flight to end (:func:`~memory_inject.storage._forks.track`, by
``connection``): a write transaction open at the fork stays open in SQLite's
lock bookkeeping of the file in the child, and no connection the child opened
could ever write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_inject.storage import _forks

if TYPE_CHECKING:  # the type only: the store imports the engine and this module
    from memory_inject.storage.sqlite.engine import SQLiteEngine

__all__ = ["reopened"]


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
    _forks.keep(engine)
    return open_(conn.path, False)
