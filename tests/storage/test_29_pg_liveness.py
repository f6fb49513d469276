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
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from memory_inject.storage.postgres import PostgresStore, liveness

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
