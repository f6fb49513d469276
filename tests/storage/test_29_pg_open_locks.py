"""Opening a PostgreSQL store never stalls the table's other sessions.

A statement waiting for a table lock queues every later writer of the table behind
it. Opening an up-to-date table therefore takes no table lock at all (the HNSW
index is looked up, not re-created with ``IF NOT EXISTS``, which takes the table's
SHARE lock before it looks), and a migration waits for its lock only
``LOCK_TIMEOUT_MS`` at a time, retrying until ``MIGRATION_WAIT_S`` and then
naming the sessions that hold the table.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import StoreLockedError
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import migrations as pg_migrations
from tests.storage import _pg_backend as pgb

pytestmark = pytest.mark.postgres

#: How long a test lets a blocked open run before it gives the lock back (a failing run).
_GUARD_S = 20.0


@pytest.fixture
def dsn(pg_scratch_dsn: str) -> str:
    return pg_scratch_dsn


@pytest.fixture
def blocker(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A session with a write transaction left open on ``memories`` (ROW EXCLUSIVE)."""
    conn = pgb.writer_connect(dsn)
    try:
        yield conn
    finally:
        conn.rollback()
        conn.close()


def _hold_a_write(conn: psycopg.Connection[Any]) -> None:
    conn.execute("UPDATE memories SET content = content WHERE key = 'k0'")


def _schema_versions(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT version FROM memories_schema_version").fetchall()
    return sorted(int(v) for (v,) in rows)


class _Opener(threading.Thread):
    """Opens (and closes) a store in a thread; ``result`` is "opened" or the exception."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.result: object = None

    def run(self) -> None:
        try:
            with PostgresStore(self.dsn, embedder=HashingEmbedder(64)) as store:
                store.store("opened", "the opener wrote this")
            self.result = "opened"
        except Exception as exc:  # the test inspects it
            self.result = exc


def _run_while(
    dsn: str, opener: threading.Thread, statement: str
) -> tuple[int, list[psycopg.errors.QueryCanceled]]:
    """Run ``statement`` again and again (3 s statement timeout) while ``opener`` runs:
    ``(times it ran, the cancelled runs)``."""
    done, failures = 0, []
    with pgb.writer_connect(dsn, autocommit=True) as conn:
        conn.execute("SET statement_timeout = '3s'")
        deadline = time.monotonic() + _GUARD_S
        while opener.is_alive() and time.monotonic() < deadline:
            try:
                conn.execute(statement)
                done += 1
            except psycopg.errors.QueryCanceled as exc:
                failures.append(exc)
            time.sleep(0.02)
    return done, failures


def _make_table(dsn: str, migrations: int | None = None) -> None:
    with pytest.MonkeyPatch.context() as m:
        if migrations is not None:
            pgb.old_schema(m, migrations)
        with PostgresStore(dsn, embedder=HashingEmbedder(64)) as store:
            store.store("k0", "the first memory")


class TestOpeningBesideOpenTransactions:
    def test_an_up_to_date_table_opens_while_a_write_transaction_is_open(
        self, dsn: str, blocker: psycopg.Connection[Any]
    ) -> None:
        """The open finishes while the other session still holds its write open."""
        _make_table(dsn)
        _hold_a_write(blocker)
        opener = _Opener(dsn)
        opener.start()
        opener.join(_GUARD_S)
        finished_while_held = not opener.is_alive()
        blocker.rollback()
        opener.join(_GUARD_S)
        assert finished_while_held, "opening waited for another session's write transaction"
        assert "opened" == opener.result
        with PostgresStore(dsn, embedder=HashingEmbedder(64)) as store:
            assert {"k0", "opened"} == {e.key for e in store.list()}

    def test_a_blocked_migration_gives_up_names_the_holder_and_never_stalls_writers(
        self, dsn: str, blocker: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Schema 3 -> 4 behind a transaction that never ends: StoreLockedError naming the
        holder's pid, nothing changed, and another session's writes go through meanwhile."""
        _make_table(dsn, migrations=3)
        monkeypatch.setattr(pg_migrations, "LOCK_TIMEOUT_MS", 200)
        monkeypatch.setattr(pg_migrations, "MIGRATION_WAIT_S", 1.5)
        _hold_a_write(blocker)
        holder = blocker.info.backend_pid
        opener = _Opener(dsn)
        opener.start()
        # ROW EXCLUSIVE on the table, as any write takes (on no row the holder has)
        writes, failures = _run_while(
            dsn, opener, "UPDATE memories SET content = content WHERE key = 'none'"
        )
        blocker.rollback()
        opener.join(_GUARD_S)
        assert isinstance(opener.result, StoreLockedError), opener.result
        message = str(opener.result)
        assert "'memories'" in message
        assert f"pid {holder}" in message
        assert [] == failures
        assert writes > 0
        assert [1, 2, 3] == _schema_versions(dsn)  # nothing half-done

    def test_readers_are_not_queued_behind_a_waiting_migration(
        self, dsn: str, blocker: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """ALTER TABLE wants ACCESS EXCLUSIVE: while it waits, even reads of the table queue.
        With the bounded wait a reader that starts during the open is served."""
        _make_table(dsn, migrations=3)
        monkeypatch.setattr(pg_migrations, "LOCK_TIMEOUT_MS", 200)
        monkeypatch.setattr(pg_migrations, "MIGRATION_WAIT_S", 1.5)
        _hold_a_write(blocker)
        opener = _Opener(dsn)
        opener.start()
        reads, failures = _run_while(dsn, opener, "SELECT content FROM memories WHERE key = 'k0'")
        blocker.rollback()
        opener.join(_GUARD_S)
        assert isinstance(opener.result, StoreLockedError), opener.result
        assert [] == failures
        assert reads > 0

    def test_a_migration_retries_until_a_short_transaction_ends(
        self, dsn: str, blocker: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The transaction ends after the first refused try: the open then migrates fully."""
        _make_table(dsn, migrations=3)
        monkeypatch.setattr(pg_migrations, "LOCK_TIMEOUT_MS", 200)
        retried = threading.Event()

        def sleep(seconds: float) -> None:
            retried.set()
            time.sleep(seconds)

        monkeypatch.setattr(
            pg_migrations, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep)
        )
        _hold_a_write(blocker)
        opener = _Opener(dsn)
        opener.start()
        assert retried.wait(_GUARD_S), "the open never retried"
        blocker.rollback()
        opener.join(_GUARD_S)
        assert "opened" == opener.result
        assert [v for v, _, _ in pg_migrations.MIGRATIONS] == _schema_versions(dsn)
