"""How long opening a SQLite file waits for another process's lock on it.

Opening checks (and may migrate) the schema and puts the file in WAL mode:
statements that wait for a lock another process holds, a write transaction
(``BEGIN IMMEDIATE``) or an exclusive lock (a file in rollback-journal mode
being written, a backup tool). An open may wait for another process
migrating the schema of a large old file (one step of a 100k-row upgrade
outlasted the busy timeout and its retry, and one of four processes opening
at once failed to start), so by default it waits
:data:`OPEN_WAIT_TIMEOUTS` busy timeouts (60 s at the default 5 s). A store
that may go on without memory (``memory.backend.unavailable: degrade``) has
a much shorter bound (``open_timeout_ms``, ``memory_inject.stores``): a CLI
command or a cron job that opens its store on each run stalled a minute
behind a locked file before it degraded. Every statement's lock wait ends
by the bound (the busy timeout is lowered to what is left of it), and the
error names the lock and the bound.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable

from memory_inject.exceptions import StorageError, StoreLockedError
from memory_inject.storage.sqlite.errors import is_locked

__all__ = ["OPEN_WAIT_TIMEOUTS", "open_waiting"]

#: How many busy timeouts opening a file waits for another process's lock, retries
#: included, unless the store is given ``open_timeout_ms`` (60 s at the default 5 s).
OPEN_WAIT_TIMEOUTS = 12
#: The pause between two tries to open a locked file (seconds).
_PAUSE_S = 0.3


def open_waiting(
    conn: sqlite3.Connection,
    op: Callable[[], None],
    *,
    busy_ms: int,
    wait_ms: int | None,
    label: str,
    wrap: Callable[[sqlite3.Error], StorageError],
) -> None:
    """Run ``op`` (the schema's check and migration on ``conn``), tried again while another
    process holds the file locked, for ``wait_ms`` in all (None: :data:`OPEN_WAIT_TIMEOUTS`
    busy timeouts); then :class:`StoreLockedError` naming the lock. ``wrap`` makes the
    error of any other driver failure."""
    wait_s = (OPEN_WAIT_TIMEOUTS * busy_ms if wait_ms is None else wait_ms) / 1000
    until = time.monotonic() + wait_s
    try:
        while True:
            left_ms = int((until - time.monotonic()) * 1000)
            conn.execute(f"PRAGMA busy_timeout = {max(0, min(busy_ms, left_ms))}")
            try:
                op()
                return
            except (sqlite3.Error, StoreLockedError) as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error) and not is_locked(exc):
                    raise wrap(exc) from exc
                if time.monotonic() + _PAUSE_S >= until:
                    raise StoreLockedError(
                        f"{label}: open: database is locked: another process holds a lock on "
                        f"the file (writing it, or upgrading its schema), still locked after "
                        f"{wait_s:g}s (memory.backend.open_timeout_ms): {exc}"
                    ) from exc
                time.sleep(_PAUSE_S)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
