"""Connection plumbing for :class:`~memory_inject.storage.postgres.PostgresStore`.

:class:`PostgresConnections` is what the engine
(:class:`~memory_inject.storage.postgres.engine.PostgresEngine`) holds to talk
to the server: the sync and async pools, their lifecycle and the closed state,
and the two drivers (:meth:`~PostgresConnections.run`,
:meth:`~PostgresConnections.arun`) that run one operation's statements in a
transaction (a read's in autocommit mode). Driver and pool errors become the
library's :class:`~memory_inject.exceptions.StorageError` tree in
:mod:`~memory_inject.storage.postgres.errors`; the async pools, one per event
loop, are :mod:`~memory_inject.storage.postgres.loop_pools`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from memory_inject.contract import report_wait
from memory_inject.storage._base import check_open
from memory_inject.storage.postgres.errors import translate_errors
from memory_inject.storage.postgres.lending import Lending
from memory_inject.storage.postgres.liveness import acheck, check
from memory_inject.storage.postgres.loop_pools import LoopPools
from memory_inject.storage.postgres.options import TUNABLE, session_options
from memory_inject.storage.postgres.queries import Stmt
from memory_inject.storage.postgres.schema import TableNames

__all__ = [
    "TUNABLE",
    "PostgresConnections",
    "Steps",
    "rowcount_of",
    "rows_of",
    "session_options",
]

T = TypeVar("T")
#: One operation: a generator that yields statements and is sent back their results.
Steps = Generator[Stmt, Any, T]


def rows_of(stmt: Stmt) -> Steps[list[tuple[Any, ...]]]:
    """One statement's operation: its rows."""
    rows = yield stmt
    return list(rows)


def rowcount_of(stmt: Stmt) -> Steps[int]:
    """One statement's operation: its rowcount (a ``rows=False`` statement)."""
    n = yield stmt
    return int(n)


#: How many connections an operation's first statement may try: a pooled connection is
#: handed out unchecked while its socket is quiet, and a backend killed just before (its
#: FATAL message not yet sent) fails that statement; then every one of them may be gone.
FIRST_STATEMENT_TRIES = 3


def _dead(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when ``conn`` can no longer be used (its backend or socket is gone)."""
    return bool(conn.closed or conn.broken)


def _idle(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when ``conn`` is open and between statements (it may leave autocommit)."""
    return not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE


class PostgresConnections:
    """How the engine talks to the server: its pools, their lifecycle, the drivers.

    The constructor opens the sync pool on ``dsn`` with ``connect_kwargs``
    (``min_size`` to ``max_size`` connections, waits bounded by ``timeout``);
    the async pool is opened by the first ``arecall`` on its loop. ``names``
    are the table's names (the pools are named after it). After :meth:`close`
    every call raises :class:`StorageError` (:func:`check_open`).
    """

    def __init__(
        self,
        dsn: str,
        names: TableNames,
        connect_kwargs: dict[str, Any],
        *,
        min_size: int,
        max_size: int,
        timeout: float,
    ) -> None:
        self.names = names
        self.dsn = dsn
        self.timeout = timeout
        self.min_size, self.max_size = min_size, max_size
        self.connect_kwargs = connect_kwargs
        self.closed = False
        # One async pool per event loop that recalls, opened there on its first call.
        self._loops = LoopPools(self._new_async_pool)
        # The connections each pool lent and has not got back.
        self._lending = Lending(max_size)
        self.pool: ConnectionPool[Any] = ConnectionPool(
            dsn,
            kwargs=connect_kwargs,
            min_size=min_size,
            max_size=max_size,
            open=True,
            check=check,
            timeout=timeout,
            name=f"memory_inject.{names.table}",
        )

    # -- lifecycle --------------------------------------------------------------

    def close(self) -> None:
        """Close both pools. After an ``arecall``, prefer awaiting :meth:`aclose_pool` first."""
        self.closed = True
        self.pool.close()
        self._loops.close()

    async def aclose_pool(self) -> None:
        """Close the async pools, awaiting the running loop's own.

        Another loop's pool is closed as :meth:`close` does. The sync pool stays
        open: ``PostgresStore.aclose`` closes the store next.
        """
        await self._loops.aclose()

    # -- the drivers --------------------------------------------------------------

    def run(
        self, action: str, steps: Steps[T], deadline: float | None = None, *, read: bool = False
    ) -> T:
        """Drive ``steps`` in one transaction on a pooled connection.

        ``deadline`` (a ``perf_counter`` value) bounds the wait for a connection.
        ``read``: the statements only read, so each runs on its own, without the
        BEGIN and COMMIT round trips (see :meth:`connection`).

        The pool hands out a connection whose socket is quiet without asking the
        server (:mod:`~memory_inject.storage.postgres.liveness`), so the first
        statement is where a backend killed a moment before shows: when that
        statement fails and leaves its connection dead, nothing was done (no
        result came back, no transaction committed), and it runs again on another
        connection, at most :data:`FIRST_STATEMENT_TRIES` times in all.
        """
        check_open(self.closed, action)
        with translate_errors(action):
            try:
                stmt = next(steps)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            for attempt in range(1, FIRST_STATEMENT_TRIES + 1):
                with self.connection(deadline, read=read) as conn, conn.cursor() as cur:
                    try:
                        cur.execute(stmt.query, stmt.params)
                    except psycopg.OperationalError:
                        if attempt < FIRST_STATEMENT_TRIES and _dead(conn):
                            continue  # the connection was gone before the statement
                        raise
                    # Caught in the block: the transaction commits as the block ends.
                    try:
                        while True:
                            result = cur.fetchall() if stmt.rows else cur.rowcount
                            stmt = steps.send(result)
                            cur.execute(stmt.query, stmt.params)
                    except StopIteration as stop:
                        done: T = stop.value
                return done
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def arun(
        self, action: str, steps: Steps[T], deadline: float | None = None, *, read: bool = False
    ) -> T:
        """The async twin of :meth:`run`."""
        with translate_errors(action):
            try:
                stmt = next(steps)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            for attempt in range(1, FIRST_STATEMENT_TRIES + 1):
                async with self.aconnection(deadline, read=read) as conn, conn.cursor() as cur:
                    try:
                        await cur.execute(stmt.query, stmt.params)
                    except psycopg.OperationalError:
                        if attempt < FIRST_STATEMENT_TRIES and _dead(conn):
                            continue
                        raise
                    try:
                        while True:
                            result = await cur.fetchall() if stmt.rows else cur.rowcount
                            stmt = steps.send(result)
                            await cur.execute(stmt.query, stmt.params)
                    except StopIteration as stop:
                        done: T = stop.value
                return done
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _wait_for(self, deadline: float | None) -> float:
        """How long a call may wait for a pooled connection: ``timeout``, less by the deadline."""
        if deadline is None:
            return self.timeout
        return max(0.0, min(self.timeout, deadline - time.perf_counter()))

    @contextmanager
    def connection(
        self, deadline: float | None = None, *, read: bool = False
    ) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in a transaction (committed on success, rolled back on error).

        With ``read``, in autocommit mode instead: a recall only reads, and at
        READ COMMITTED each of its statements takes its own snapshot inside a
        transaction too, so the transaction bought nothing but two round trips
        (BEGIN and COMMIT; about a tenth of a 1k-record recall). The connection
        goes back to the pool out of autocommit, or closed (the pool replaces it)
        when it cannot be (broken, or interrupted mid-statement).

        The wait for one ends at ``deadline``. When every connection is in use
        past it, :class:`RecallWaitError`. After an outage the pool reconnects
        with growing back-off, so it can lag a restarted server by seconds;
        when it has nothing to give within ``timeout``, one direct connection
        tells at once whether the server is back, and until the pool lends a
        connection again the next turns wait only ``lending.OUTAGE_WAIT_S`` for it.
        """
        t0, lent_before = time.perf_counter(), self._lending.ever_lent(self.pool)
        try:
            conn = self._get(deadline, read)
        except PoolTimeout:
            waited = time.perf_counter() - t0
            self._lending.exhausted(self.pool, waited, deadline, lent_before)
            with (
                self._lending.direct(self.pool, waited, deadline),
                psycopg.connect(self.dsn, autocommit=read, **self.connect_kwargs) as direct,
            ):
                if read:  # still waiting until now: the recall starts here
                    report_wait(None)
                yield direct
            return
        self._lending.lend(self.pool, 1)
        try:
            if read:
                conn.autocommit = True
                try:
                    yield conn
                finally:
                    if _idle(conn):
                        conn.autocommit = False
                    else:
                        conn.close()
            else:
                with conn:
                    yield conn
        finally:
            self._lending.lend(self.pool, -1)
            self.pool.putconn(conn)

    @asynccontextmanager
    async def aconnection(
        self, deadline: float | None = None, *, read: bool = False
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The async twin of :meth:`connection`."""
        pool = await self.async_pool()
        t0, lent_before = time.perf_counter(), self._lending.ever_lent(pool)
        try:
            conn = await self._aget(pool, deadline, read)
        except PoolTimeout:
            waited = time.perf_counter() - t0
            self._lending.exhausted(pool, waited, deadline, lent_before)
            with self._lending.direct(pool, waited, deadline):
                async with await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=read, **self.connect_kwargs
                ) as direct:
                    if read:  # still waiting until now: the recall starts here
                        report_wait(None)
                    yield direct
            return
        self._lending.lend(pool, 1)
        try:
            if read:
                await conn.set_autocommit(True)
                try:
                    yield conn
                finally:
                    if _idle(conn):
                        await conn.set_autocommit(False)
                    else:
                        await conn.close()
            else:
                async with conn:
                    yield conn
        finally:
            self._lending.lend(pool, -1)
            await pool.putconn(conn)

    def _get(self, deadline: float | None, read: bool) -> psycopg.Connection[Any]:
        """:meth:`_aget`'s sync twin (a recall thread waits late on a loaded machine)."""
        if read:
            report_wait(self._lending.wait_note(self.pool))
        wait, before = self._wait_for(deadline), self._lending.ever_lent(self.pool)
        first = self._lending.first_wait(self.pool, wait)
        try:
            conn: psycopg.Connection[Any] = self.pool.getconn(timeout=first)
        except PoolTimeout:  # after an outage: go direct, or wait the rest (``wait_on``)
            if first >= wait or not self._lending.wait_on(self.pool, before):
                raise
            conn = self.pool.getconn(timeout=self._wait_for(deadline))
        if read:  # a wait that timed out stays heard: the recall never started
            report_wait(None)
        return conn

    async def _aget(
        self, pool: AsyncConnectionPool[Any], deadline: float | None, read: bool
    ) -> psycopg.AsyncConnection[Any]:
        """A pooled connection. A recall tells the render it waits for one (``report_wait``)
        until it has one: a deadline passing meanwhile (every connection lent, or the pool
        still opening them; a busy loop runs the pool's own timeout late) is named as this
        wait, not as a recall that ran out of time."""
        if read:
            report_wait(self._lending.wait_note(pool))
        wait, before = self._wait_for(deadline), self._lending.ever_lent(pool)
        first = self._lending.first_wait(pool, wait)
        try:
            conn: psycopg.AsyncConnection[Any] = await pool.getconn(timeout=first)
        except PoolTimeout:  # as :meth:`_get`
            if first >= wait or not self._lending.wait_on(pool, before):
                raise
            conn = await pool.getconn(timeout=self._wait_for(deadline))
        if read:  # a wait that timed out stays heard: the recall never started
            report_wait(None)
        return conn

    async def async_pool(self) -> AsyncConnectionPool[Any]:
        """The async pool of the running loop, opened on first use (:class:`LoopPools`).

        Each event loop that recalls gets a pool of its own, closed when that loop
        shuts down (or the store closes), never by a call from another loop.
        """
        check_open(self.closed, "recall")
        return await self._loops.get()

    def _new_async_pool(self) -> AsyncConnectionPool[Any]:
        """An unopened async pool for one loop, of up to ``max_size`` connections.

        ``min_size`` 0: it opens connections as its turns need them. With the
        store's ``min_size`` an ``asyncio.run`` per request opened that many for
        each request, and one more as the first turn's wait grew the pool.
        """
        return AsyncConnectionPool(
            self.dsn,
            kwargs=self.connect_kwargs,
            min_size=0,
            max_size=max(1, self.min_size, self.max_size),
            open=False,
            check=acheck,
            timeout=self.timeout,
            name=f"memory_inject.{self.names.table}.async",
        )
