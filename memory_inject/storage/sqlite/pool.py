"""The read connections of a SQLite store: at most ``size``, opened as needed, handed out in turn.

Under WAL readers never wait for a writer or for each other, and SQLite
releases the GIL while it works, so many turns read at once on their own
connections; a read waits for a free connection only when all are busy, and
under a deadline that wait ends at the deadline with
:class:`~memory_inject.exceptions.RecallWaitError` (``connection_wait: ...``).
"""

from __future__ import annotations

import collections
import contextlib
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from memory_inject.contract import report_wait
from memory_inject.exceptions import RecallWaitError, StorageError
from memory_inject.storage import _forks
from memory_inject.storage.sqlite.term_stats import TermStats

__all__ = ["FORK_WAIT_S", "ReadPool"]

#: How long a ``fork()`` waits for the reads in flight to end (seconds); then it goes on.
FORK_WAIT_S = 2.0


class ReadPool:
    """At most ``size`` read connections, opened on first need, one reader each at a time.

    :meth:`take` hands out an idle connection (the most recently used, whose
    caches are warm), opens another while fewer than ``size`` exist, or waits
    in line for one to come back (first come, first served: a connection given
    back goes straight to the longest waiting reader, so no turn waits behind
    later ones): up to ``until`` (a ``perf_counter`` value; None waits as long
    as it takes), then :class:`RecallWaitError`. Each connection keeps its own
    index statistics (:class:`TermStats`).
    """

    def __init__(self, label: str, size: int, connect: Callable[[], sqlite3.Connection]) -> None:
        """Nothing is opened until the first :meth:`take`."""
        self.label = label
        self.size = size
        self._connect = connect
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._forking = False  # a fork() waits for the reads in flight: no new one starts
        self._idle: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = []
        self._opening = 0
        # Readers in line: each waits on its own lock and is handed a connection.
        self._line: collections.deque[list[Any]] = collections.deque()
        self.stats: dict[sqlite3.Connection, TermStats] = {}
        self.closed = False
        _forks.track(self, _ForkGate(weakref.ref(self)))

    def take(self, until: float | None = None) -> sqlite3.Connection:
        """A read connection for this thread's use alone; give it back with :meth:`give`."""
        t0 = time.perf_counter()
        place: list[Any] | None = None  # [wake-up lock, the connection handed over]
        with self._lock:
            while self._forking:  # a fork is waiting for the reads in flight (round 36)
                left = None if until is None else until - time.perf_counter()
                if left is not None and left <= 0:
                    raise RecallWaitError(self._note(time.perf_counter() - t0))
                self._cond.wait(left)
            if self.closed:
                raise StorageError(f"{self.label}: read: the store is closed")
            if self._idle and not self._line:
                return self._idle.pop()
            if len(self._all) + self._opening < self.size:
                self._opening += 1
            else:
                wake = threading.Lock()
                wake.acquire()
                place = [wake, None]
                self._line.append(place)
        if place is not None:
            return self._wait(place, until, t0)
        try:
            conn = self._connect()
        except BaseException:
            with self._lock:
                self._opening -= 1
            raise
        with self._lock:
            self._opening -= 1
            self._all.append(conn)
            self.stats[conn] = TermStats()
        return conn

    def _wait(self, place: list[Any], until: float | None, t0: float) -> sqlite3.Connection:
        wake: threading.Lock = place[0]
        # The render hears of the wait: a deadline passing in it (this thread scheduled
        # late on a loaded machine) is named as the wait, not as a recall out of time.
        report_wait(self._note)
        if until is None:
            wake.acquire()
        else:
            wake.acquire(timeout=max(0.0, until - time.perf_counter()))
        with self._lock:
            conn = place[1]
            if conn is None:
                with contextlib.suppress(ValueError):
                    self._line.remove(place)
        if conn is not None:
            report_wait(None)  # a wait that timed out stays heard: the recall never started
            return conn  # type: ignore[no-any-return]
        if self.closed:
            raise StorageError(f"{self.label}: read: the store is closed")
        raise RecallWaitError(self._note(time.perf_counter() - t0))

    def _quiet(self) -> bool:
        """No read in flight (a closed pool's connections never come back to it)."""
        return self.closed or len(self._all) + self._opening == len(self._idle)

    def _note(self, waited: float) -> str:
        return (
            f"connection_wait: all {self.size} read connections of {self.label} "
            f"stayed busy for {waited:.3f}s (the turn's deadline); the recall never started"
        )

    def give(self, conn: sqlite3.Connection) -> None:
        """Return ``conn``: to the first reader in line, or to the idle ones (closed
        instead, if the pool was closed meanwhile)."""
        with self._lock:
            if not self.closed:
                if self._line and not self._forking:
                    place = self._line.popleft()
                    place[1] = conn
                    place[0].release()
                else:
                    self._idle.append(conn)
                    self._cond.notify_all()  # a fork may be waiting for it
                return
        conn.close()

    def close(self) -> None:
        """Close the idle connections now, the busy ones when they come back."""
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
            line, self._line = list(self._line), collections.deque()
        for place in line:
            place[0].release()  # they find no connection and a closed pool
        for conn in idle:
            conn.close()

    def connections(self) -> list[sqlite3.Connection]:
        """Every connection opened so far (tests and tools)."""
        with self._lock:
            return list(self._all)


class _ForkGate:
    """What a ``fork()`` takes of a :class:`ReadPool` (:func:`~.._forks.track`): it waits up
    to :data:`FORK_WAIT_S` for the reads in flight to end and holds the pool's lock across
    the fork. A read in flight holds SQLite's own mutexes, and a child forked meanwhile
    inherits them held: its first ``sqlite3.connect`` hung for good (round 36)."""

    def __init__(self, pool: weakref.ref[ReadPool]) -> None:
        self._pool = pool  # weak: the tracked gate must not keep its pool alive

    def acquire(self) -> None:
        """Before the fork: no read in flight (or :data:`FORK_WAIT_S` passed), none starts."""
        pool = self._pool()
        if pool is None:
            return
        pool._lock.acquire()
        pool._forking = True
        pool._cond.wait_for(pool._quiet, FORK_WAIT_S)

    def release(self) -> None:
        """After the fork, on both sides: reads start again; readers in line get the idle."""
        pool = self._pool()
        if pool is None or not pool._forking:
            return
        pool._forking = False
        while pool._line and pool._idle:
            place = pool._line.popleft()
            place[1] = pool._idle.pop()
            place[0].release()
        pool._cond.notify_all()
        pool._lock.release()
