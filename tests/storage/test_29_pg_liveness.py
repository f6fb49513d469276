"""Issue 29, sixth round: a pooled connection is checked by polling its socket, not by a query.

The pools used to send an empty query on every borrow (a round trip per
recall). :func:`~memory_inject.storage.postgres.liveness.check` sends it only
when the socket has something to read or the connection is not plainly idle:
a terminated backend's FATAL message and closed socket make it readable. What
must hold: a healthy connection is handed out without that query; a killed
one is still found out and replaced, so the next recall answers (sync and
async); :func:`quiet` says False for every state it cannot vouch for.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from memory_inject.exceptions import StorageError, StoreLockedError
from memory_inject.storage.postgres import PostgresStore, liveness
from memory_inject.storage.postgres.queries import Stmt

pytestmark = pytest.mark.postgres


@pytest.fixture
def dsn(pg_scratch_dsn: str) -> str:
    return pg_scratch_dsn


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each empty-query check the pools send, by kind (``sync`` / ``async``)."""
    sent: list[str] = []
    sync_check = ConnectionPool.check_connection
    async_check = AsyncConnectionPool.check_connection

    def counted(conn: psycopg.Connection[Any]) -> None:
        sent.append("sync")
        sync_check(conn)

    async def acounted(conn: psycopg.AsyncConnection[Any]) -> None:
        sent.append("async")
        await async_check(conn)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(counted))
    monkeypatch.setattr(AsyncConnectionPool, "check_connection", staticmethod(acounted))
    return sent


def _kill_others(dsn: str) -> int:
    """Terminate every other backend of the database; how many were."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _until_readable(conn: psycopg.Connection[Any]) -> bool:
    """Wait (up to 5 s) until :func:`quiet` stops vouching for ``conn``; True if it did."""
    end = time.monotonic() + 5
    while time.monotonic() < end:
        if not liveness.quiet(conn):
            return True
        time.sleep(0.02)
    return False


class TestQuiet:
    def test_an_idle_connection_is_quiet(self, dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT 1").fetchall()
            assert liveness.quiet(conn)

    def test_not_quiet_inside_a_transaction(self, dsn: str) -> None:
        with psycopg.connect(dsn) as conn:
            conn.execute("SELECT 1").fetchall()  # opens a transaction (not autocommit)
            assert not liveness.quiet(conn)
            conn.rollback()
            assert liveness.quiet(conn)

    def test_not_quiet_once_the_backend_is_terminated(self, dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert liveness.quiet(conn)
            assert _kill_others(dsn) >= 1
            assert _until_readable(conn)
            with pytest.raises(psycopg.OperationalError):
                liveness.check(conn)

    def test_not_quiet_when_closed(self, dsn: str) -> None:
        conn = psycopg.connect(dsn, autocommit=True)
        conn.close()
        assert not liveness.quiet(conn)


class TestPools:
    def test_healthy_borrows_send_no_query(self, dsn: str, probes: list[str]) -> None:
        """Twenty recalls on a pool of one: the right hits and not one empty query."""
        with PostgresStore(dsn, min_size=1, max_size=1) as store:
            store.store("k", "quiet sockets need no probe")
            probes.clear()
            for _ in range(20):
                assert ["k"] == [e.key for e in store.recall("quiet sockets", 5)]
            assert probes == []

    def test_a_killed_connection_is_found_and_replaced(self, dsn: str, probes: list[str]) -> None:
        """After the pool's backends are terminated the check asks, fails and reconnects."""
        with PostgresStore(dsn, min_size=1, max_size=2) as store:
            store.store("k", "survives a backend kill")
            assert ["k"] == [e.key for e in store.recall("backend kill", 5)]
            probes.clear()
            assert _kill_others(dsn) >= 1
            time.sleep(0.2)  # the FATAL message reaches the socket
            for _ in range(3):
                assert ["k"] == [e.key for e in store.recall("backend kill", 5)]
            assert "sync" in probes  # the dead connection was probed, not handed out

    def test_async_pool_finds_a_killed_connection(self, dsn: str, probes: list[str]) -> None:
        with PostgresStore(dsn, min_size=1, max_size=2) as store:
            store.store("k", "async survives a backend kill")

            async def twice() -> tuple[list[str], list[str], list[str]]:
                first = [e.key for e in await store.arecall("async backend kill", 5)]
                quiet_probes = list(probes)
                _kill_others(dsn)
                await asyncio.sleep(0.2)
                second = [e.key for e in await store.arecall("async backend kill", 5)]
                await store.aclose()
                return first, second, quiet_probes

            first, second, quiet_probes = asyncio.run(twice())
            assert first == second == ["k"]
            assert "async" not in quiet_probes  # a fresh connection needed no probe
            assert "async" in probes


class TestFirstStatement:
    """A backend killed before its FATAL reaches the socket: the poll vouches for a dead
    connection (here forced: ``quiet`` always True), so the first statement finds out."""

    @pytest.fixture
    def blind(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(liveness, "quiet", lambda conn: True)

    def test_a_read_runs_again_on_another_connection(self, dsn: str, blind: None) -> None:
        with PostgresStore(dsn, min_size=2, max_size=2) as store:
            store.store("k", "retried after a kill")
            assert ["k"] == [e.key for e in store.recall("retried kill", 5)]
            assert _kill_others(dsn) >= 1
            time.sleep(0.2)
            assert ["k"] == [e.key for e in store.recall("retried kill", 5)]

    def test_a_write_runs_again_and_lands_once(self, dsn: str, blind: None) -> None:
        with PostgresStore(dsn, min_size=2, max_size=2) as store:
            store.store("a", "first write")
            assert _kill_others(dsn) >= 1
            time.sleep(0.2)
            store.store("b", "second write after the kill")
            assert ["a", "b"] == sorted(r.key for r in store.list())
            assert 2 == store.count()

    def test_an_async_read_runs_again(self, dsn: str, blind: None) -> None:
        with PostgresStore(dsn, min_size=2, max_size=2) as store:
            store.store("k", "async retried after a kill")

            async def twice() -> list[str]:
                await store.arecall("async retried", 5)
                _kill_others(dsn)
                await asyncio.sleep(0.2)
                found = [e.key for e in await store.arecall("async retried", 5)]
                await store.aclose()
                return found

            assert ["k"] == asyncio.run(twice())

    @pytest.fixture
    def sent(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        """The text of every statement sent through a psycopg cursor."""
        texts: list[str] = []
        execute = psycopg.Cursor.execute

        def counted(cur: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
            texts.append(query.as_string(cur) if isinstance(query, sql.Composable) else query)
            return execute(cur, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", counted)
        return texts

    def test_a_statement_error_is_not_run_again(
        self, dsn: str, blind: None, sent: list[str]
    ) -> None:
        """Only a dead connection is tried again: a failing statement is sent once."""
        with PostgresStore(dsn, min_size=1, max_size=1) as store:

            def failing() -> Any:
                yield Stmt(sql.SQL("SELECT 1 / 0"))

            with pytest.raises(StorageError, match="division by zero"):
                store._engine.connections.run("probe", failing(), read=True)
        assert sent.count("SELECT 1 / 0") == 1

    def test_a_live_connections_error_is_not_run_again(
        self, dsn: str, blind: None, sent: list[str]
    ) -> None:
        """A lock wait past ``timeout`` is an OperationalError on a live connection: sent once."""
        probe = "SELECT count(*) FROM memories"
        with PostgresStore(dsn, min_size=1, max_size=1, timeout=0.3) as store:
            store.store("k", "locked")

            def counting() -> Any:
                rows = yield Stmt(sql.SQL(probe))
                return rows

            with psycopg.connect(dsn) as locker:
                locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(StoreLockedError):
                    store._engine.connections.run("probe", counting(), read=True)
        assert sent.count(probe) == 1
