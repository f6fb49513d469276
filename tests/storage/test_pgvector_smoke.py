"""A server whose pgvector cannot run gives one clear error at store open (issue 9).

The real failure is a pgvector built for another CPU: its backend dies with
SIGILL on the first distance. These tests build the same situations on a
healthy server: the scratch database gets a ``trap`` schema, first on its
search path, whose ``<=>`` operator for two vectors kills its own backend,
raises, or answers wrongly, so the store's smoke query meets each failure for real.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from memory_inject.embedders import HashingEmbedder
from memory_inject.exceptions import PgvectorUnusableError, StorageError
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import local as pg_local
from memory_inject.storage.postgres.pgvector import SMOKE_QUERY, check_pgvector
from tests.storage import _pg_backend as pgb

_BODIES = {
    # The backend dies mid-query, as a SIGILL'd one does (the client sees the
    # connection drop).
    "dies": "PERFORM pg_terminate_backend(pg_backend_pid()); RETURN 0;",
    "raises": "RAISE EXCEPTION 'illegal instruction (simulated)';",
    "wrong": "RETURN 42;",
}


@pytest.fixture
def db(pg_dsn: str) -> Iterator[str]:
    """The DSN of a fresh database, dropped after the test."""
    with pgb.scratch_database(pg_dsn) as dsn:
        yield dsn


def _trap(dsn: str, body: str) -> None:
    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute("CREATE SCHEMA trap")
        conn.execute(
            "CREATE FUNCTION trap.smoke(public.vector, public.vector) RETURNS float8 "
            f"LANGUAGE plpgsql AS $$ BEGIN {body} END $$"
        )
        conn.execute(
            "CREATE OPERATOR trap.<=> (LEFTARG = public.vector, RIGHTARG = public.vector, "
            "FUNCTION = trap.smoke)"
        )
        conn.execute(f'ALTER DATABASE "{name}" SET search_path = trap, public')


class TestStoreOpen:
    @pytest.mark.parametrize("failure", sorted(_BODIES))
    def test_failing_pgvector_is_one_clear_error(self, db: str, failure: str) -> None:
        """Each way the smoke query can fail raises PgvectorUnusableError naming the CPU cause."""
        _trap(db, _BODIES[failure])
        with pytest.raises(PgvectorUnusableError) as info:
            PostgresStore(db, embedder=HashingEmbedder(32))
        message = str(info.value)
        assert isinstance(info.value, StorageError)
        assert "pgvector_unusable" == info.value.reason
        assert "smoke query" in message
        assert "another CPU" in message
        assert "AVX-512" in message
        assert "vectors=False" in message
        assert "pg-local" in message

    def test_server_serves_again_after_a_dying_smoke_query(self, db: str) -> None:
        """The failed open leaves the server (and a lexical store on it) usable."""
        _trap(db, _BODIES["dies"])
        with pytest.raises(PgvectorUnusableError):
            PostgresStore(db, embedder=HashingEmbedder(32))
        store = PostgresStore(db)
        try:
            store.store("k", "still here after the smoke failure", "core")
            assert ["k"] == [e.key for e in store.recall("smoke failure", 5)]
        finally:
            store.close()

    def test_lexical_store_runs_no_smoke_query(self, db: str) -> None:
        """vectors=False (the way out the message offers) opens on the same server."""
        _trap(db, _BODIES["raises"])
        store = PostgresStore(db, embedder=HashingEmbedder(32), vectors=False)
        try:
            assert not store.vectors_enabled
        finally:
            store.close()

    def test_healthy_pgvector_passes(self, db: str) -> None:
        """The real pgvector of the test server computes the expected distances."""
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            check_pgvector(conn)
            row = conn.execute(SMOKE_QUERY).fetchone()
            assert row is not None
            cosine, cast = row
        assert 0.0 < cosine < 1.0
        assert abs(cast) < 1e-9


class TestFixture:
    def test_session_stops_once_with_the_store_message(
        self, pg_dsn: str, db: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """require_pgvector ends the whole run (pytest.exit) instead of failing each test."""
        _trap(db, _BODIES["raises"])
        with pytest.raises(PgvectorUnusableError) as expected:
            pgb.check_database(db)
        seen: list[str] = []
        real = pgb.check_database

        def check_trapped_database(dsn: str) -> None:
            seen.append(dsn)
            real(db)

        monkeypatch.setattr(pgb, "check_database", check_trapped_database)
        with pytest.raises(pytest.exit.Exception) as stopped:
            pgb.require_pgvector(pg_dsn)
        assert 1 == len(seen)
        assert 1 == stopped.value.returncode
        assert str(expected.value) in str(stopped.value)
        assert str(stopped.value).startswith("PostgreSQL tests cannot run:")


@pytest.mark.postgres
class TestLocalTrialServer:
    def test_start_checks_pgvector_and_serves_a_vector_store(self, tmp_path: Path) -> None:
        """pg_local start gives a DSN whose pgvector passed the smoke query; stop stops it."""
        data = tmp_path / "pg"
        dsn = pg_local.start(data)
        try:
            assert "memory" == conninfo_to_dict(dsn)["dbname"]
            assert dsn == pg_local.start(data)  # a second start finds it running
            store = PostgresStore(dsn, embedder=HashingEmbedder(32))
            try:
                assert store.vectors_enabled
                store.store("trial", "a local trial of the shared store", "core")
                assert ["trial"] == [e.key for e in store.recall("local trial", 3)]
            finally:
                store.close()
        finally:
            pg_local.stop(data)
        assert not (data / "postmaster.pid").exists()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(dsn, connect_timeout=2).close()

    def test_check_command_reports_a_broken_pgvector(
        self, db: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`pg_local check --dsn` exits 1 with the store's message on a failing pgvector."""
        assert 0 == pg_local.main(["check", "--dsn", db])
        assert "pgvector ok" in capsys.readouterr().out
        _trap(db, _BODIES["dies"])
        assert 1 == pg_local.main(["check", "--dsn", db])
        assert "another CPU" in capsys.readouterr().err
