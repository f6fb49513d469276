"""Creating and migrating the :class:`~memory_inject.storage.postgres.PostgresStore` table.

Migrations are ordered and forward-only, under a transaction-level advisory lock (any
number of processes may open the table; the first to take the lock migrates it, the
others then find it current). A statement that must
change the table (a migration, the vector column or its index) waits at most
:data:`LOCK_TIMEOUT_MS` for its lock: while it waits, every later writer of the
table (every reader too, for ``ALTER TABLE``) queues behind it, so a long
transaction elsewhere must not turn one process's start into a stall of every
turn. :func:`open_table` retries such a wait for up to :data:`MIGRATION_WAIT_S`
and then raises :class:`~memory_inject.exceptions.StoreLockedError` naming the
sessions that hold the table. The layout itself is :mod:`.schema`'s.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg import sql

from memory_inject.exceptions import SchemaMismatchError, StoreLockedError
from memory_inject.storage.postgres import hnsw, writers
from memory_inject.storage.postgres import neighbours as nb
from memory_inject.storage.postgres.context import add_context, add_event_context, add_near_context
from memory_inject.storage.postgres.errors import lock_holders
from memory_inject.storage.postgres.folding import fold_words, split_compounds
from memory_inject.storage.postgres.hnsw import hnsw_index, index_valid
from memory_inject.storage.postgres.pgvector import check_pgvector
from memory_inject.storage.postgres.schema import (
    LOCK_CLASS,
    TableNames,
    create_base,
    relation_exists,
)

_log = logging.getLogger("memory_inject")

__all__ = [
    "LOCK_TIMEOUT_MS",
    "MIGRATIONS",
    "MIGRATION_WAIT_S",
    "ensure_vectors",
    "forgotten_context",
    "migrate",
    "open_table",
]

_HNSW_MAX_DIM = 2000
#: How long one statement that changes the table waits for its lock (``lock_timeout``).
LOCK_TIMEOUT_MS = 1000
#: How long :func:`open_table` keeps retrying a change whose lock it could not take.
MIGRATION_WAIT_S = 30.0


def _add_pi_records(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """``metadata`` (an imported record's fields without a column) and the standing index.

    New tables already have the column (``create_base`` writes every field).
    """
    conn.execute(
        sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS metadata jsonb").format(names.ident())
    )
    conn.execute(
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} (namespace, layer, rule_type, confidence) "
            "WHERE deleted_at IS NULL AND superseded_by IS NULL AND status = 'active'"
        ).format(names.ident("_standing_idx"), names.ident())
    )
    conn.execute(
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {} ON {} (namespace, category, updated_at) "
            "WHERE deleted_at IS NULL AND superseded_by IS NULL AND status = 'active'"
        ).format(names.ident("_standing_cat_idx"), names.ident())
    )


def _tsv_inline(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Keep ``tsv`` in the row (``STORAGE MAIN``): the keyword stage reads it for every row
    it ranks, and TOAST had moved it out of line (a row with its vectors is past TOAST's
    2 kB target), one more index lookup and page a row. Catalog only: rows written
    before keep their stored form until rewritten (docs/storage.md)."""
    conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN tsv SET STORAGE MAIN").format(names.ident()))


#: Forgotten rows a statement of :func:`forgotten_context` rebuilds around.
FORGOTTEN_BATCH = 500


def forgotten_context(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schema 10: the live rows that took a forgotten row's text as context before a forget
    computed its neighbours' context again (issue 29, thirtieth round) get theirs afresh,
    as a forget now does and as SQLite's schema 12 does: until then such a row's words kept
    lifting the row after it, and sat in its tsvector. :func:`.neighbours.refresh` with the
    forgotten rows as anchors, :data:`FORGOTTEN_BATCH` at a time (one statement for 4,000
    took ten times as long as for 1,000); only rows whose context changes are written."""
    t = names.ident()
    gone = conn.execute(
        sql.SQL(
            'SELECT namespace, "key", session_id, layer FROM {t} '
            "WHERE deleted_at IS NOT NULL ORDER BY namespace, rid"
        ).format(t=t)
    ).fetchall()
    for at in range(0, len(gone), FORGOTTEN_BATCH):
        batch = gone[at : at + FORGOTTEN_BATCH]
        for namespace in dict.fromkeys(row[0] for row in batch):
            rows = [row for row in batch if row[0] == namespace]
            kinds = {nb.kind(row[2], row[3]) for row in rows}
            stmt = nb.refresh_rows(t, namespace, [str(row[1]) for row in rows], kinds)
            conn.execute(stmt.query, stmt.params)


def short_gin_list(conn: psycopg.Connection[Any], names: TableNames) -> None:
    """Schema 11: the tsvector's GIN index keeps a pending list of 64 kB at most.

    With PostgreSQL's default, new rows' index entries wait in a pending list of up to
    4 MB, which every search of the index reads from end to end: after 2,760 chat writes
    a keyword recall took 12.6-14.2 ms p50 against 2.6-3.0 ms with a 64 kB list and
    2.3-2.9 ms with none (``fastupdate = off``), the writes costing the same with the
    short list (1.8-2.5 ms) and 25% more with none, an import of 20,000 rows 7.2 s, or
    11 s with none (``benchmarks/pg_pending_list.py``, docs/performance.md, round 34).
    Recall is the per-turn path. The list a table holds now is merged into the index here.

    Only the index's owner may do either: a role that may read and write the table but
    does not own it (it opened such a table up to schema 10) skips the step with a
    warning naming the statement for the owner to run.
    """
    idx = names.ident("_tsv_idx")
    alter = sql.SQL("ALTER INDEX {idx} SET (gin_pending_list_limit = 64)").format(idx=idx)
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the migration's work
            conn.execute(alter)
            conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (idx.as_string(),))
    except psycopg.errors.InsufficientPrivilege:
        _log.warning(
            "memory_inject: %s: this role does not own the index; its recalls stay slower "
            "until the owner runs: %s",
            names.table,
            alter.as_string(conn),
        )


#: Ordered, forward-only migrations: ``(version, description, apply)``.
MIGRATIONS: tuple[tuple[int, str, Callable[[psycopg.Connection[Any], TableNames], None]], ...] = (
    (1, "memories table, tsvector + GIN, recency, time and session indexes", create_base),
    (2, "context expansion: ctx_prev, ctx_prev2, ctx_day in the tsvector", add_context),
    (3, "PI records: metadata column, standing-context index", _add_pi_records),
    (4, "tsv kept in the row (STORAGE MAIN), not moved out of line by TOAST", _tsv_inline),
    (5, "event context: the sessionless rows of one moment are each other's", add_event_context),
    (6, "near context: a sessionless row with no event, the rows just before it", add_near_context),
    (7, "hosts, paths and versions parsed as words in the tsvector", split_compounds),
    (8, "hyphens read as spaces in the tsvector (prod-3, as on SQLite)", split_compounds),
    (9, "accents and Unicode normal forms folded: the table's own configuration", fold_words),
    (
        10,
        "context no longer taken from rows forgotten before forgets refreshed it",
        forgotten_context,
    ),
    (11, "the tsvector's GIN index keeps a pending list of 64 kB at most", short_gin_list),
)


def migrate(conn: psycopg.Connection[Any], names: TableNames) -> int:
    """Bring the table to the newest version; the caller owns the transaction. Returns it."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (LOCK_CLASS, names.table))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, "
            "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        ).format(names.versions)
    )
    row = conn.execute(sql.SQL("SELECT max(version) FROM {}").format(names.versions)).fetchone()
    current = int(row[0]) if row and row[0] is not None else 0
    newest = MIGRATIONS[-1][0]
    if current and not relation_exists(conn, names.ident()):  # dropped by hand: calls failed
        msg = f"table {names.table!r} is missing but {names.table}_schema_version is at {current}"
        raise SchemaMismatchError(f"{msg}: drop that too to start an empty table")
    if current > newest:
        raise SchemaMismatchError(
            f"table {names.table!r} is at schema version {current}, newer than this "
            f"library's {newest}; upgrade memory_inject"
        )
    # The writer guard before the steps, in their transaction: an older process still
    # writing fails from their commit on (writers.py); after them for a table just made.
    writers.ensure(conn, names, _bound_lock_waits)
    for version, description, apply in MIGRATIONS:
        if version <= current:
            continue
        _bound_lock_waits(conn)
        apply(conn, names)
        conn.execute(
            sql.SQL("INSERT INTO {} (version, description) VALUES (%s, %s)").format(names.versions),
            (version, description),
        )
    if current == 0:
        writers.ensure(conn, names, _bound_lock_waits)
    return newest


def ensure_vectors(conn: psycopg.Connection[Any], names: TableNames, dim: int) -> tuple[bool, bool]:
    """Add the ``vector(dim)`` column and its HNSW index if pgvector can be had.

    Runs inside :func:`migrate`'s transaction (under its lock). Returns whether
    the table has its vector stage, and whether its index is still to be built
    concurrently once the transaction committed (a table of
    :data:`~.hnsw.CONCURRENT_AT` rows or more: building it here would hold
    every writer for the whole build). The vector stage is missing,
    the table lexical-only, when the extension is not installed on the
    server or this role may not create it. Raises
    :class:`~memory_inject.exceptions.PgvectorUnusableError` when the extension
    is there but fails its smoke query (:func:`check_pgvector`).
    """
    if not _has_vector_extension(conn):
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error:
            return False, False
    # Before any vector column or index exists: a pgvector that cannot run
    # fails here, once and by name, not on every later insert.
    check_pgvector(conn)
    row = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass(%s) AND attname = 'embedding_vec' AND NOT attisdropped",
        (names.ident().as_string(),),
    ).fetchone()
    want = f"vector({dim})"
    if row is None:
        _bound_lock_waits(conn)
        hnsw.add_vector_column(conn, names, dim)
    elif row[0] != want:
        raise SchemaMismatchError(
            f"table {names.table!r} has an embedding column of type {row[0]} but the "
            f"embedder makes {dim}-dimensional vectors; use another 'table' or the same embedder"
        )
    # Not CREATE INDEX IF NOT EXISTS on every open: it takes the table's SHARE lock
    # before it looks, so it waits behind any open write and every writer waits behind it.
    valid = index_valid(conn, names.hnsw) if dim <= _HNSW_MAX_DIM else True
    if valid is False:
        # Left by a concurrent build that died (no query uses it), or one runs now (an
        # import's) and holds the table: the drop's lock wait ends, the open goes on.
        _bound_lock_waits(conn)
        try:
            with conn.transaction():
                conn.execute(sql.SQL("DROP INDEX {idx}").format(idx=names.hnsw))
        except psycopg.errors.LockNotAvailable:
            return True, False
        valid = None
    if valid is None:
        big = conn.execute(
            sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {t} LIMIT {n}) AS s").format(
                t=names.ident(), n=sql.Literal(hnsw.CONCURRENT_AT)
            )
        ).fetchone()
        if big is not None and big[0] >= hnsw.CONCURRENT_AT:
            return True, True  # built after this transaction, concurrently (open_table)
        _bound_lock_waits(conn)
        conn.execute(hnsw_index(names))
    return True, False


def _bound_lock_waits(conn: psycopg.Connection[Any]) -> None:
    """End this transaction's lock waits after :data:`LOCK_TIMEOUT_MS` (``LockNotAvailable``)."""
    conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT_MS)))


def open_table(
    dsn: str, connect_kwargs: Mapping[str, Any], names: TableNames, vector_dim: int
) -> bool:
    """Create or migrate the table, and add its vector column when ``vector_dim`` is not 0.

    Returns whether the table has its vector stage (:func:`ensure_vectors`). A change
    whose lock another session holds is rolled back and retried, with jittered
    backoff, for :data:`MIGRATION_WAIT_S`; then :class:`StoreLockedError` names the
    sessions holding the table. Other driver errors propagate.
    """
    deadline = time.monotonic() + MIGRATION_WAIT_S
    attempt = 0
    while True:
        attempt += 1
        try:
            with psycopg.connect(dsn, **connect_kwargs) as conn:
                migrate(conn, names)
                vectors, later = (
                    ensure_vectors(conn, names, vector_dim) if vector_dim else (False, False)
                )
            if later:
                hnsw.build_concurrently(dsn, connect_kwargs, names, "open of")
            return vectors
        except psycopg.errors.LockNotAvailable as exc:
            if time.monotonic() >= deadline:
                raise StoreLockedError(
                    f"postgres open: could not lock table {names.table!r} to change its schema "
                    f"in {MIGRATION_WAIT_S:g} s ({attempt} tries): "
                    f"{lock_holders(dsn, connect_kwargs, names.ident())}; nothing was changed, "
                    f"the next open tries again"
                ) from exc
            time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.0))  # noqa: S311


def _has_vector_extension(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    return row is not None
