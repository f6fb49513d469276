"""The connection layer of the SQLite engine (:class:`~.engine.SQLiteEngine` holds one).

One SQLite file behind one write connection and a small pool of read
connections. Writes run on the write connection under a lock, one at a time,
in ``BEGIN IMMEDIATE`` transactions. Reads take a read connection of the pool
(:class:`~.pool.ReadPool`, at most ``readers`` of them, opened as needed): under WAL
readers never wait for a writer or for each other, and SQLite releases the
GIL while it works, so many turns read at once. A read waits for a free
connection only when all are busy; under a deadline that wait ends at the
deadline with :class:`~memory_inject.exceptions.RecallWaitError`
(``connection_wait: ...``). A locked database is retried once after
:data:`LOCK_RETRY_DELAY_S` (founder-os), then reported as
:class:`~memory_inject.exceptions.StoreLockedError`; other driver errors leave
as :class:`~memory_inject.exceptions.StorageError` (``from`` the original).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from memory_inject.exceptions import (
    RecallInterruptedError,
    RecallWaitError,
    StorageError,
)
from memory_inject.storage import _forks
from memory_inject.storage._base import check_open
from memory_inject.storage.sqlite.errors import is_locked, wrap_error
from memory_inject.storage.sqlite.files import OpenFiles
from memory_inject.storage.sqlite.locks import wal_lock_note
from memory_inject.storage.sqlite.migrations import access_hint, connect, prepare
from memory_inject.storage.sqlite.opening import open_waiting
from memory_inject.storage.sqlite.pool import ReadPool
from memory_inject.storage.sqlite.term_stats import TermStats

__all__ = ["DEFAULT_READERS", "LOCK_RETRY_DELAY_S", "PROGRESS_STEPS", "SQLiteConnection"]

T = TypeVar("T")

#: One retry after this pause when the database is locked (founder-os's rule).
LOCK_RETRY_DELAY_S = 0.3
#: Under a deadline, the clock is read every this many SQLite VM steps (a few
#: tens of microseconds of work), so a statement stops that soon after it.
PROGRESS_STEPS = 10_000
#: Read connections per store unless ``readers=`` says otherwise: one per core (at
#: least 2, at most 8). More only add GIL hand-offs (on a small store, where the
#: in-process keyword mirror does most of a recall, 4 readers served 16 threads at
#: 0.7x the rate of 1); fewer serialise the big stores' FTS5 work, which runs without
#: the GIL (50k rows, 16 threads: 1 reader 0.89x one thread, 2 readers 1.49x).
#: The cores, read once: ``os.cpu_count()`` reads sysfs (about 6 µs), and
#: :attr:`SQLiteConnection.recall_slots` is asked on every render's hand-off.
_CORES = os.cpu_count() or 2
DEFAULT_READERS = min(8, max(2, _CORES))


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


class SQLiteConnection:
    """How the SQLite engine talks to its file: opening, locks, the one retry, transactions.

    One connection guarded by a lock serves every thread's writes; reads take
    a connection of the :class:`~.pool.ReadPool` (a ``:memory:`` database has one
    connection, so there reads share the writer's, under its lock). It owns the
    closed state: after :meth:`close` every read and write raises
    :class:`~memory_inject.exceptions.StorageError` (``_base.check_open``).
    """

    def __init__(
        self,
        path: str,
        *,
        create: bool,
        busy_timeout_ms: int,
        synchronous: str,
        readers: int,
        open_timeout_ms: int | None = None,
    ) -> None:
        """Open (and migrate) the database at ``path``: ``SQLiteStore``'s arguments, checked;
        another process's lock on the file is waited for as :func:`.opening.open_waiting` says."""
        self._path = path
        self._closed = False
        self._lock = threading.RLock()
        self._busy_ms = busy_timeout_ms
        self._file = None if self._path == ":memory:" else os.path.abspath(self._path)
        self._local = threading.local()
        self._files = OpenFiles(None)  # none to check while the schema is prepared
        self._conn = connect(self._path, create=create, busy_timeout_ms=busy_timeout_ms)
        try:
            open_waiting(
                self._conn,
                self._prepare_schema(create, synchronous),
                busy_ms=busy_timeout_ms,
                wait_ms=open_timeout_ms,
                label=self._path,
                wrap=lambda exc: self._wrap(exc, "open"),
            )
        except StorageError as exc:  # "attempt to write a readonly database": say which part
            self._conn.close()
            if hint := access_hint(Path(self._file or path)):
                raise type(exc)(f"{exc}{hint}") from exc
            raise
        except BaseException:
            self._conn.close()
            raise
        # The files the connections hold: a write checks they are still the ones at the path,
        # and every read and write that neither the log nor its index was truncated.
        self._files = OpenFiles(self._file)
        # Reads get connections of their own: under WAL they never wait for a
        # writer, so a write stuck behind another process's lock cannot stall
        # the renders of this store, and they run side by side. (":memory:"
        # has one database per connection, so there reads share the writer's.)
        path = self._path
        self._readers = (
            None
            if path == ":memory:"
            else ReadPool(
                path,
                readers,
                lambda: connect(path, create=False, busy_timeout_ms=busy_timeout_ms, links=False),
            )
        )
        # The shared connection's index statistics (":memory:"), cached until the data changes.
        self._shared_stats = TermStats()
        # Each connection's busy_timeout where it is not the store's own (ms).
        self._busy_now: dict[sqlite3.Connection, int] = {}
        _forks.track(self, self._lock)

    def _prepare_schema(self, create: bool, synchronous: str) -> Callable[[], None]:
        def run() -> None:
            self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            # Writes zero what they free, so an erase leaves no earlier copy (erase.py).
            self._conn.execute("PRAGMA secure_delete = ON")
            self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
            prepare(self._conn, create=create, label=self._path)

        return run

    # -- plumbing -------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def path(self) -> str:
        """The database file (``:memory:`` for a private in-process database)."""
        return self._path

    @property
    def recall_slots(self) -> int:
        """How many recalls may run on recall threads at once (with an embedder).

        As many as there are read connections and cores: more only fight for
        the GIL and the connections, and make every turn slower.
        """
        readers = self._readers.size if self._readers is not None else 1
        return max(1, min(readers, _CORES))

    def stall_note(self) -> str | None:
        """Why a recall of this store may be waiting past its deadline, if a cause is
        seen: another process holding the file's WAL-index lock (``wal_lock: ...``,
        from ``/proc/locks`` on Linux). The render adds it to the recall event."""
        if self._file is None:
            return None
        return wal_lock_note(self._file)

    def interrupt_at(self, until: float) -> _Until:
        """Reads this thread makes inside stop by ``until`` (a ``perf_counter`` value).

        A statement still running then is interrupted (a progress handler),
        the read lock and a locked database are waited for no longer, and the
        call raises :class:`~memory_inject.exceptions.RecallInterruptedError`:
        nothing is left running that holds the store.
        """
        return _Until(self._local, until)

    def _read_until(self, op: Callable[[sqlite3.Connection], T], what: str, until: float) -> T:
        for attempt in (1, 2):
            conn, lock = self._take_reader(until, what)
            try:
                check_open(self._closed, what)
                self._check_index(what)
                left = until - time.perf_counter()
                conn.set_progress_handler(lambda: time.perf_counter() > until, PROGRESS_STEPS)
                self._busy_within(conn, max(1, min(self._busy_ms, int(left * 1000.0))))
                try:
                    return op(conn)
                finally:
                    conn.set_progress_handler(None, 0)
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
            except sqlite3.OperationalError as exc:
                if "interrupt" in str(exc).lower():
                    raise RecallInterruptedError(
                        f"{self._path}: {what}: stopped at the deadline"
                    ) from exc
                late = until - time.perf_counter() <= LOCK_RETRY_DELAY_S
                if attempt == 1 and is_locked(exc) and not late:
                    time.sleep(LOCK_RETRY_DELAY_S)
                    continue
                raise self._wrap(exc, what) from exc
            except sqlite3.Error as exc:
                raise self._wrap(exc, what) from exc
            finally:
                self._give_reader(conn, lock)
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_index(self, what: str) -> None:
        """Refuse a read before SQLite touches a truncated WAL index (it would SIGBUS)."""
        if (damage := self._files.damage(self._path, what, log=False)) is not None:
            raise damage

    def _wrap(self, exc: sqlite3.Error, what: str) -> StorageError:
        """The error to raise for ``exc``: the truncated file, when that explains it."""
        return self._files.damage(self._path, what) or wrap_error(exc, f"{self._path}: {what}")

    def _busy_within(self, conn: sqlite3.Connection, most: int) -> None:
        """Make SQLite's lock waits on ``conn`` end within ``most`` ms (and not much sooner).

        The pragma is a statement, and every statement lets another thread take
        the GIL, so it runs only when the current value is too long, or less
        than half of what is allowed; a read without a deadline puts the
        store's own value back.
        """
        now = self._busy_now.get(conn, self._busy_ms)
        if now > most or now < most // 2:
            # Rounded down to 100 ms, so the next turns' slightly shorter deadlines
            # do not each need the pragma again.
            most = most - most % 100 if most >= 200 else most
            conn.execute(f"PRAGMA busy_timeout = {most}")
            self._busy_now[conn] = most

    def _take_reader(
        self, until: float | None, what: str
    ) -> tuple[sqlite3.Connection, threading.RLock | None]:
        """A read connection and the lock taken for it (``:memory:``: the writer's)."""
        readers = self._readers
        if readers is not None:
            return readers.take(until), None
        lock = self._lock
        left = None if until is None else until - time.perf_counter()
        if left is not None and (left <= 0.0 or not lock.acquire(timeout=left)):
            raise RecallWaitError(
                f"connection_wait: the connection of {self._path} stayed busy until the "
                "turn's deadline; the recall never started"
            )
        if left is None:
            lock.acquire()
        return self._conn, lock

    def _give_reader(self, conn: sqlite3.Connection, lock: threading.RLock | None) -> None:
        if lock is not None:
            lock.release()
        elif self._readers is not None:
            self._readers.give(conn)

    def stats_of(self, conn: sqlite3.Connection) -> TermStats:
        """The index statistics cached for ``conn`` (each read connection has its own)."""
        readers = self._readers
        if readers is None:
            return self._shared_stats
        return readers.stats.get(conn) or self._shared_stats

    def _retry(self, op: Callable[[], T], what: str) -> T:
        """``op`` under the write lock, retried once when the database is locked.

        The wait for this process's write lock counts against the write's bound (two busy
        timeouts and the retry's pause), as SQLite's own wait does: writes queued behind
        one that waits for another process's lock each waited the whole bound in turn
        (eight autosaving turns held 30 s by a lock held 30 s, with 5 s timeouts)."""
        until = time.monotonic() + 2 * self._busy_ms / 1000 + LOCK_RETRY_DELAY_S

        def locked() -> T:
            if not self._lock.acquire(timeout=max(0.0, until - time.monotonic())):
                raise sqlite3.OperationalError("database is locked (held by queued writes)")
            try:
                check_open(self._closed, what)
                left = int((until - time.monotonic()) * 1000)  # SQLite's wait ends there too
                self._write_busy(max(1, min(self._busy_ms, left)))  # (was 20 s: round 36)
                return op()
            finally:
                self._lock.release()

        return self._once_more_if_locked(locked, what)

    def _write_busy(self, most: int) -> None:
        """The write connection's busy timeout is ``most`` ms (a statement on a change)."""
        if self._busy_now.get(self._conn, self._busy_ms) != most:
            self._conn.execute(f"PRAGMA busy_timeout = {most}")
            self._busy_now[self._conn] = most

    def _once_more_if_locked(self, op: Callable[[], T], what: str) -> T:
        """``op``, retried once after :data:`LOCK_RETRY_DELAY_S` when the database is locked."""
        for attempt in (1, 2):
            try:
                return op()
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"{what}: {exc}") from exc
            except sqlite3.Error as exc:
                if attempt == 1 and is_locked(exc):
                    time.sleep(LOCK_RETRY_DELAY_S)
                    continue
                raise self._wrap(exc, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def write(self, op: Callable[[sqlite3.Connection], T], what: str) -> T:
        """``op`` in a ``BEGIN IMMEDIATE`` transaction on the write connection, committed
        (rolled back if it raises), retried once when the database is locked."""

        def run() -> T:
            conn = self._conn
            self._files.check(self._path, what)
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

    def checkpoint(self, what: str) -> bool:
        """Copy the WAL into the file and truncate it (``wal_checkpoint(TRUNCATE)``, waiting
        for readers as long as the busy timeout); True when it did (an erase's old frames
        are then gone from the ``-wal`` file). A ``:memory:`` database has nothing to do."""
        if self._file is None:
            return True
        busy = self._retry(
            lambda: self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0], what
        )
        return not busy

    def read(self, op: Callable[[sqlite3.Connection], T], what: str) -> T:
        """``op`` on a read connection (retried once when the database is locked).

        Inside :meth:`interrupt_at` the wait for a connection, the statements
        and SQLite's lock waits all end at the deadline.
        """
        until = getattr(self._local, "until", None)
        if until is not None:
            return self._read_until(op, what, until)

        def once() -> T:
            conn, lock = self._take_reader(None, what)
            try:
                check_open(self._closed, what)
                self._check_index(what)
                if self._busy_now.get(conn, self._busy_ms) != self._busy_ms:
                    self._busy_within(conn, self._busy_ms)
                return op(conn)
            finally:
                if lock is None and conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._give_reader(conn, lock)

        return self._once_more_if_locked(once, what)

    def close(self) -> None:
        """Close the connections; later calls raise :class:`StorageError`.

        A read running now finishes; its connection is closed when it is given back.
        """
        with self._lock:
            if not self._closed:
                # A truncated WAL index is made whole (zeros) first: SQLite's close reads it.
                self._files.damage(self._path, "close", log=False)
            self._closed = True
            conn, self._conn = self._conn, None  # type: ignore[assignment]
        if self._readers is not None:
            self._readers.close()
        if conn is not None:
            conn.close()
