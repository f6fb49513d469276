"""Issue 29, fifth round: PostgreSQL reads run in autocommit mode, writes in a transaction.

A recall only reads, and at READ COMMITTED each statement takes its own
snapshot inside a transaction as well, so ``run(..., read=True)`` drops the
BEGIN and COMMIT round trips. What must hold: a read's statements really run
each on its own (two ``txid_current()`` differ), a write's still share one
transaction (they are equal), and a pooled connection comes back out of
autocommit whatever happened to the read: finished, failed, or cancelled
mid-statement (a connection that is not idle then is closed, and the pool replaces it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from psycopg import sql

from memory_inject.exceptions import StorageError
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres.connection import PostgresConnections, Steps
from memory_inject.storage.postgres.queries import Stmt
from tests.storage import _pg_backend as pgb

pytestmark = pytest.mark.postgres

_XID = Stmt(sql.SQL("SELECT txid_current(), pg_backend_pid()"))


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PostgresStore]:
    """A store on a fresh database with a pool of one connection (every run reuses it)."""
    with pgb.scratch_database(pg_dsn) as dsn:
        opened = PostgresStore(dsn, min_size=1, max_size=1)
        yield opened
        opened.close()


def _two_xids() -> Steps[tuple[int, int, int, int]]:
    """Two statements' transaction ids and backends."""
    [(x1, p1)] = yield _XID
    [(x2, p2)] = yield _XID
    return int(x1), int(x2), int(p1), int(p2)


def _conns(store: PostgresStore) -> PostgresConnections:
    return store._engine.connections


class TestSync:
    def test_a_reads_statements_each_run_on_their_own(self, store: PostgresStore) -> None:
        """``read=True``: two statements, two transactions; the default: one."""
        x1, x2, _, _ = _conns(store).run("probe", _two_xids(), read=True)
        w1, w2, _, _ = _conns(store).run("probe", _two_xids())
        assert x1 != x2
        assert w1 == w2

    def test_the_connection_leaves_autocommit_after_a_read(self, store: PostgresStore) -> None:
        """The one pooled connection serves a read, then a write-shaped run in one transaction."""
        _, _, pid_read, _ = _conns(store).run("probe", _two_xids(), read=True)
        w1, w2, pid_write, _ = _conns(store).run("probe", _two_xids())
        assert pid_read == pid_write  # the same connection, back out of autocommit
        assert w1 == w2

    def test_a_failed_read_gives_back_a_usable_connection(self, store: PostgresStore) -> None:
        """A read whose statement fails raises StorageError; the connection is reused as it was."""
        _, _, before, _ = _conns(store).run("probe", _two_xids())

        def failing() -> Steps[None]:
            yield Stmt(sql.SQL("SELECT 1 / 0"))

        with pytest.raises(StorageError, match="division by zero"):
            _conns(store).run("probe", failing(), read=True)
        w1, w2, after, _ = _conns(store).run("probe", _two_xids())
        assert (before, True) == (after, w1 == w2)

    def test_recall_and_writes_through_the_store(self, store: PostgresStore) -> None:
        """Reads between writes: every write lands, every read sees it, on one connection."""
        for i in range(5):
            store.store(f"k{i}", f"note {i} about autocommit reads")
            assert f"k{i}" in {e.key for e in store.recall("autocommit reads", 10)}
            assert i + 1 == store.count()
        w1, w2, _, _ = _conns(store).run("probe", _two_xids())
        assert w1 == w2


class TestAsync:
    def test_a_reads_statements_each_run_on_their_own(self, store: PostgresStore) -> None:
        """The async driver: the same two answers as the sync one."""

        async def main() -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
            read = await _conns(store).arun("probe", _two_xids(), read=True)
            write = await _conns(store).arun("probe", _two_xids())
            await _conns(store).aclose_pool()
            return read, write

        (x1, x2, pid_read, _), (w1, w2, pid_write, _) = asyncio.run(main())
        assert x1 != x2
        assert (w1, pid_read) == (w2, pid_write)

    def test_a_read_cancelled_mid_statement_leaves_no_autocommit_behind(
        self, store: PostgresStore
    ) -> None:
        """Cancelled while the server sleeps (psycopg cancels the statement and waits for it):
        the next run on the pool still shares one transaction, and a read after it works."""

        def sleeping() -> Steps[None]:
            yield Stmt(sql.SQL("SELECT pg_sleep(5)"))

        async def main() -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(_conns(store).arun("probe", sleeping(), read=True), 0.3)
            write = await _conns(store).arun("probe", _two_xids())
            read = await _conns(store).arun("probe", _two_xids(), read=True)
            await _conns(store).aclose_pool()
            return write, read

        (w1, w2, _, _), (x1, x2, _, _) = asyncio.run(main())
        assert (w1 == w2, x1 != x2) == (True, True)
