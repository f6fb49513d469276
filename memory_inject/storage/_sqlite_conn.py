"""The connection layer of :class:`~memory_inject.storage.sqlite.SQLiteStore`.

One SQLite file behind two connections: writes run on one connection under a
lock, in ``BEGIN IMMEDIATE`` transactions; reads get a connection of their
own, which under WAL never waits for a writer. A locked database is retried
once after :data:`LOCK_RETRY_DELAY_S` (founder-os), then reported as
:class:`~memory_inject.exceptions.StoreLockedError`; other driver errors leave
as :class:`~memory_inject.exceptions.StorageError` (``from`` the original).
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from memory_inject.exceptions import RecallInterruptedError, StoreMissingError
from memory_inject.storage import _sqlite_schema as schema
from memory_inject.storage._base import PersistentStore
from memory_inject.storage._fts_terms import TermStats
from memory_inject.storage.records import MemoryRecord

__all__ = ["LOCK_RETRY_DELAY_S", "SQLiteConnections"]

T = TypeVar("T")

#: One retry after this pause when the database is locked (founder-os's rule).
LOCK_RETRY_DELAY_S = 0.3
#: Under a deadline, the clock is read every this many SQLite VM steps (a few
#: tens of microseconds of work), so a statement stops that soon after it.
PROGRESS_STEPS = 10_000


def _file_id(path: str) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Until:
    """``with store.interrupt_at(until):`` for this thread (nested ones keep the earlier)."""

    __slots__ = ("_local", "_prev", "_until")

    def __init__(self, local: threading.local, until: float) -> None:
        self._local = local
        self._until = until
        self._prev: float | None = None

    def __enter__(self) -> None:
        self._prev = getattr(self._local, "until", None)
        self._local.until = self._until if self._prev is None else min(self._prev, self._until)

    def __exit__(self, *exc: object) -> None:
        self._local.until = self._prev


class SQLiteConnections(PersistentStore):
    """How ``SQLiteStore`` talks to its file: opening, locks, the one retry, transactions.

    One connection guarded by a lock serves every thread's writes (``arecall``
    runs ``recall`` in a worker thread); reads take the second connection
    under a lock of their own. ``SQLiteStore.__init__`` sets ``_path`` and
    calls :meth:`_open`.
    """

    _path: str
    _lock: threading.RLock
    _rlock: threading.RLock
    _conn: sqlite3.Connection
    _rconn: sqlite3.Connection
    _stats: TermStats
    _busy_ms: int
    _local: threading.local
    _file: str | None
    _file_id: tuple[int, int] | None

    # -- opening --------------------------------------------------------------

    def _open(self, *, create: bool, busy_timeout_ms: int, synchronous: str) -> None:
        self._lock = threading.RLock()
        self._busy_ms = busy_timeout_ms
        self._file = None if self._path == ":memory:" else os.path.abspath(self._path)
        self._local = threading.local()
        self._conn = schema.connect(self._path, create=create, busy_timeout_ms=busy_timeout_ms)
        try:
            self._retry(self._prepare_schema(create, synchronous), "open")
        except BaseException:
            self._conn.close()
            raise
        # The file the connections hold: a write checks it is still the one at the path.
        self._file_id = None if self._file is None else _file_id(self._file)
        # Reads get a connection of their own: under WAL they never wait for a
        # writer, so a write stuck behind another process's lock cannot stall
        # the renders of this store. (":memory:" has one database per
        # connection, so there reads share the writer's.)
        self._rlock = threading.RLock() if self._path != ":memory:" else self._lock
        self._rconn = (
            self._conn
            if self._path == ":memory:"
            else schema.connect(self._path, create=False, busy_timeout_ms=busy_timeout_ms)
        )
        # The read connection's index statistics, cached until the data changes.
        self._stats = TermStats()

    def _prepare_schema(self, create: bool, synchronous: str) -> Callable[[], None]:
        def run() -> None:
            self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
            schema.prepare(self._conn, create=create, label=self._path)

        return run

    # -- plumbing -------------------------------------------------------------

    @property
    def path(self) -> str:
        """The database file (``:memory:`` for a private in-process database)."""
        return self._path

    def interrupt_at(self, until: float) -> _Until:
        """Reads this thread makes inside stop by ``until`` (a ``perf_counter`` value).

        A statement still running then is interrupted (a progress handler),
        the read lock and a locked database are waited for no longer, and the
        call raises :class:`~memory_inject.exceptions.RecallInterruptedError`:
        nothing is left running that holds the store.
        """
        return _Until(self._local, until)

    def _read_until(self, op: Callable[[], T], what: str, until: float) -> T:
        conn = self._rconn
        for attempt in (1, 2):
            left = until - time.perf_counter()
            if left <= 0.0 or not self._rlock.acquire(timeout=left):
                raise RecallInterruptedError(f"{self._path}: {what}: the deadline passed")
            try:
                self._check_open(what)
                conn.set_progress_handler(lambda: time.perf_counter() > until, PROGRESS_STEPS)
                busy = max(1, int(left * 1000.0))
                if busy < self._busy_ms:
                    conn.execute(f"PRAGMA busy_timeout = {busy}")
                try:
                    return op()
                finally:
                    conn.set_progress_handler(None, 0)
                    if busy < self._busy_ms:
                        conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
            except sqlite3.OperationalError as exc:
                if "interrupt" in str(exc).lower():
                    raise RecallInterruptedError(
                        f"{self._path}: {what}: stopped at the deadline"
                    ) from exc
                late = until - time.perf_counter() <= LOCK_RETRY_DELAY_S
                if attempt == 1 and schema.is_locked(exc) and not late:
                    time.sleep(LOCK_RETRY_DELAY_S)
                    continue
                raise schema.wrap_error(exc, f"{self._path}: {what}") from exc
            except sqlite3.Error as exc:
                raise schema.wrap_error(exc, f"{self._path}: {what}") from exc
            finally:
                self._rlock.release()
        raise AssertionError("unreachable")  # pragma: no cover

    def _retry(self, op: Callable[[], T], what: str, *, read: bool = False) -> T:
        if read:
            until = getattr(self._local, "until", None)
            if until is not None:
                return self._read_until(op, what, until)
        lock = self._rlock if read else self._lock
        for attempt in (1, 2):
            try:
                with lock:
                    self._check_open(what)
                    return op()
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"{what}: {exc}") from exc
            except sqlite3.Error as exc:
                if attempt == 1 and schema.is_locked(exc):
                    time.sleep(LOCK_RETRY_DELAY_S)
                    continue
                raise schema.wrap_error(exc, f"{self._path}: {what}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(self, op: Callable[[sqlite3.Connection], T], what: str) -> T:
        def run() -> T:
            conn = self._conn
            self._check_same_file(what)
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = op(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        return self._retry(run, what)

    def _check_same_file(self, what: str) -> None:
        """Refuse a write when the file at the path is gone or another one (F6).

        SQLite keeps writing to the file it opened; once that file is deleted or
        replaced (a restore, a ``mv``), those writes land in an unlinked inode and
        are lost at the next open, although each one returned.
        """
        if self._file is None or self._file_id is None:
            return
        if _file_id(self._file) != self._file_id:
            raise StoreMissingError(
                f"{self._path}: {what}: the database file was deleted or replaced while the "
                "store was open; nothing was written (open the store again)"
            )

    def _read(self, op: Callable[[sqlite3.Connection], T], what: str) -> T:
        return self._retry(lambda: op(self._rconn), what, read=True)

    def _fetch(
        self, conn: sqlite3.Connection, where: str, params: Sequence[Any]
    ) -> builtins.list[MemoryRecord]:
        return schema.fetch(conn, self._namespace, where, params)

    def close(self) -> None:
        """Close the connections; later calls raise :class:`StorageError`."""
        with self._lock:
            super().close()
            conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is not None:
            with self._rlock:
                rconn = self._rconn
                if rconn is not conn:
                    rconn.close()
            conn.close()
