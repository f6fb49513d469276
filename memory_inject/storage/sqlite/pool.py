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
from collections.abc import Callable
from typing import Any

from memory_inject.contract import report_wait
from memory_inject.exceptions import RecallWaitError, StorageError
from memory_inject.storage.sqlite.term_stats import TermStats

__all__ = ["ReadPool"]


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
        self._idle: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = []
        self._opening = 0
        # Readers in line: each waits on its own lock and is handed a connection.
        self._line: collections.deque[list[Any]] = collections.deque()
        self.stats: dict[sqlite3.Connection, TermStats] = {}
        self.closed = False

    def take(self, until: float | None = None) -> sqlite3.Connection:
        """A read connection for this thread's use alone; give it back with :meth:`give`."""
        t0 = time.perf_counter()
        place: list[Any] | None = None  # [wake-up lock, the connection handed over]
        with self._lock:
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
                if self._line:
                    place = self._line.popleft()
                    place[1] = conn
                    place[0].release()
                else:
                    self._idle.append(conn)
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
