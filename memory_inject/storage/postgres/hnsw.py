"""The table's HNSW index: its statement, whether it is valid, and changing it concurrently.

Dropping or building the index inside a transaction holds a table lock every writer of the
table waits behind (``DROP INDEX``: ACCESS EXCLUSIVE; ``CREATE INDEX``: SHARE) for as long
as the transaction runs. :func:`drop_concurrently` and :func:`build_concurrently` use the
``CONCURRENTLY`` forms instead, on an autocommit connection of their own, for the two
places that change the index on a table that may be big and busy: an initial bulk load
(``bulk.import_jsonl``) and an open that finds the index missing on a table of
:data:`CONCURRENT_AT` rows or more (``migrations.open_table``). Each waits at most
:data:`BUILD_WAIT_S` for older transactions; a build that fails leaves an invalid index,
which is dropped (an open that finds one rebuilds it), and is logged.

The column the index is over, ``embedding_vec``, is added by :func:`add_vector_column`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from memory_inject.storage.postgres.schema import TableNames

__all__ = [
    "BUILD_WAIT_S",
    "CONCURRENT_AT",
    "add_vector_column",
    "build_concurrently",
    "drop_concurrently",
    "hnsw_index",
    "index_valid",
    "rebuild_statements",
]

_log = logging.getLogger("memory_inject")

#: How long a concurrent drop or build waits for older transactions to end (each waits for
#: every transaction that could still use the index or see the table).
BUILD_WAIT_S = 30
#: From how many rows an open builds a missing index concurrently, after its transaction,
#: instead of inside it (a table this size takes seconds to index; below, milliseconds).
CONCURRENT_AT = 20_000


def hnsw_index(names: TableNames, *, concurrently: bool = False) -> sql.Composed:
    """The (idempotent) statement creating the table's HNSW cosine index; ``concurrently``
    builds it without locking out writers (outside a transaction block only)."""
    return sql.SQL(
        "CREATE INDEX {how}IF NOT EXISTS {idx} ON {t} USING hnsw (embedding_vec vector_cosine_ops)"
    ).format(how=sql.SQL("CONCURRENTLY " if concurrently else ""), idx=names.hnsw, t=names.ident())


def rebuild_statements(names: TableNames) -> list[sql.SQL | sql.Composed]:
    """A concurrent build, ``maintenance_work_mem`` raised to 512MB first if lower (for the
    session: the connection is the build's own)."""
    return [
        sql.SQL(
            "SELECT set_config('maintenance_work_mem', '512MB', false) "
            "WHERE pg_size_bytes(current_setting('maintenance_work_mem')) "
            "< pg_size_bytes('512MB')"
        ),
        hnsw_index(names, concurrently=True),
    ]


def index_valid(conn: psycopg.Connection[Any], ident: sql.Identifier) -> bool | None:
    """Whether the index exists and is valid; ``None`` when it does not exist. A
    ``CREATE INDEX CONCURRENTLY`` that failed leaves an invalid index behind."""
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index AS i WHERE i.indexrelid = to_regclass(%s)",
        (ident.as_string(),),
    ).fetchone()
    return None if row is None else bool(row[0])


def _own_connection(dsn: str, connect_kwargs: Mapping[str, Any]) -> psycopg.Connection[Any]:
    """An autocommit connection outside any pool, waiting up to BUILD_WAIT_S for locks."""
    conn = psycopg.connect(dsn, autocommit=True, **connect_kwargs)
    conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{BUILD_WAIT_S}s")))
    return conn


def drop_concurrently(
    dsn: str, connect_kwargs: Mapping[str, Any], names: TableNames, why: str
) -> bool:
    """``DROP INDEX CONCURRENTLY`` (no lock that a read or a write waits for); whether it
    was dropped (``why`` names the caller in the log line when it was not)."""
    try:
        with _own_connection(dsn, connect_kwargs) as conn:
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {idx}").format(idx=names.hnsw))
    except psycopg.Error as exc:
        _log.warning("%s %s: the HNSW index was kept (%s)", why, names.table, _first_line(exc))
        return False
    return True


def build_concurrently(
    dsn: str, connect_kwargs: Mapping[str, Any], names: TableNames, why: str
) -> bool:
    """``CREATE INDEX CONCURRENTLY`` (:func:`rebuild_statements`); whether it was built.

    A build that fails (an older transaction held past :data:`BUILD_WAIT_S`,
    the server's memory) leaves an invalid index, which is dropped; vector
    recalls scan the table until the next store to open it builds the index.
    """
    try:
        with _own_connection(dsn, connect_kwargs) as conn:
            for stmt in rebuild_statements(names):
                conn.execute(stmt)
            return True
    except psycopg.Error as exc:
        try:
            with _own_connection(dsn, connect_kwargs) as conn:
                if index_valid(conn, names.hnsw) is False:
                    conn.execute(sql.SQL("DROP INDEX IF EXISTS {idx}").format(idx=names.hnsw))
        except psycopg.Error:
            pass  # the next open drops an invalid index too
        _log.warning(
            "%s %s: the HNSW index could not be built (%s); vector recalls scan the table "
            "until the next store opens it and builds it",
            why,
            names.table,
            _first_line(exc),
        )
        return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def add_vector_column(conn: psycopg.Connection[Any], names: TableNames, dim: int) -> None:
    """Add ``embedding_vec vector(dim)``, the pgvector copy of ``embedding``, kept by a trigger.

    A plain column without a default changes the catalog only. The generated
    column this used to add (tables made before keep theirs; both work alike)
    made PostgreSQL rewrite the whole table under ACCESS EXCLUSIVE, which held
    every reader and writer of the table (100,000 rows: 2.5 s; the first open
    with an embedder). The trigger sets it on every insert and every update
    of ``embedding``; the rows that already hold an embedding (written while
    pgvector was missing) get theirs here.
    """
    copy = sql.SQL("CASE WHEN array_length({e}, 1) = {dim} THEN {e}::vector({dim}) END")
    t, fn, d = names.ident(), names.ident("_embedding_vec"), sql.Literal(dim)
    statements = (
        sql.SQL("ALTER TABLE {t} ADD COLUMN embedding_vec vector({d})").format(t=t, d=d),
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN NEW.embedding_vec := {copy}; RETURN NEW; END $$"
        ).format(fn=fn, copy=copy.format(e=sql.SQL("NEW.embedding"), dim=d)),
        # Not CREATE OR REPLACE TRIGGER: PostgreSQL 13 has no such statement.
        sql.SQL("DROP TRIGGER IF EXISTS {fn} ON {t}").format(t=t, fn=fn),
        sql.SQL(
            "CREATE TRIGGER {fn} BEFORE INSERT OR UPDATE OF embedding ON {t} "
            "FOR EACH ROW EXECUTE FUNCTION {fn}()"
        ).format(t=t, fn=fn),
        sql.SQL("UPDATE {t} SET embedding_vec = {copy} WHERE embedding IS NOT NULL").format(
            t=t, copy=copy.format(e=sql.Identifier("embedding"), dim=d)
        ),
    )
    for stmt in statements:
        conn.execute(stmt)
