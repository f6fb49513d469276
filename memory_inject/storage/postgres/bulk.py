"""The bulk paths of :class:`~memory_inject.storage.postgres.PostgresStore`: JSONL in and out.

Plain functions that take the store (``PostgresStore.export_jsonl`` and
``import_jsonl`` call them): the store embeds the imported records, its
engine's connections run the statements. Export streams the namespace
through a server-side cursor. Import is all or nothing: records are COPYed
into a temporary staging table a batch at a time and merged by one
``INSERT ... ON CONFLICT``; an initial load with vectors drops the HNSW index
before the merge and builds it again once the merge committed, both
concurrently (no lock that another session's read or write waits for),
instead of inserting into it (:mod:`.hnsw`). The staging statements are here
with the code that runs them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any, TypeVar

import attrs
import psycopg
from psycopg import sql

from memory_inject.storage._base import owned
from memory_inject.storage._jsonl import read_jsonl, write_jsonl
from memory_inject.storage.postgres import hnsw
from memory_inject.storage.postgres import neighbours as nb
from memory_inject.storage.postgres.context import fill_near, merge_with_context
from memory_inject.storage.postgres.errors import translate_errors
from memory_inject.storage.postgres.queries import Queries, Stmt
from memory_inject.storage.postgres.schema import (
    COLUMNS,
    TableNames,
    record_params,
    row_to_record,
)

if TYPE_CHECKING:
    from memory_inject.storage.postgres.engine import PostgresEngine
    from memory_inject.storage.postgres.store import PostgresStore
    from memory_inject.storage.records import MemoryRecord

__all__ = [
    "BATCH",
    "any_rows",
    "export_jsonl",
    "import_jsonl",
    "stage_copy",
    "stage_create",
    "stage_held",
    "stage_merge",
    "stage_near",
    "stage_refresh",
]

T = TypeVar("T")

#: Rows per COPY batch of an import, and per fetch of an export's cursor.
BATCH = 1000
_STAGE = sql.Identifier("memory_inject_stage")


def export_jsonl(store: PostgresStore, dst: str | os.PathLike[str] | IO[str]) -> int:
    """Write every row of ``store``'s namespace, forgotten and superseded ones included."""
    engine = store._engine
    stmt = engine.q.export()
    with (
        translate_errors("export"),
        engine.connections.connection() as conn,
        conn.cursor(name="memory_inject_export") as cur,
    ):
        cur.itersize = BATCH
        cur.execute(stmt.query, stmt.params)
        return write_jsonl(dst, (row_to_record(row) for row in cur))


def import_jsonl(
    store: PostgresStore,
    src: str | os.PathLike[str] | IO[str],
    *,
    progress: Callable[[int], object] | None = None,
    batch_size: int = BATCH,
    rebuild_index: bool | None = None,
    reembed: bool = False,
) -> int:
    """Upsert one record per JSON line into ``store``'s namespace; returns how many.

    See ``PostgresStore.import_jsonl``: all or nothing, through a staging
    table, the HNSW index rebuilt after an initial load (``rebuild_index``
    forces that choice either way).
    """
    engine = store._engine
    q = engine.q
    n = 0
    lines = read_jsonl(src)
    dropped = False
    with translate_errors("import"), engine.connections.connection() as conn:
        try:
            with conn.cursor() as cur:
                for stmt in stage_create(q):
                    cur.execute(stmt)
                for batch in _batched(_checked_lines(lines), max(1, batch_size)):
                    records = store._embedded(
                        [r.evolve(namespace=store.namespace) for r in batch],
                        foreign="reembed" if reembed else "embed",
                    )
                    with cur.copy(stage_copy(q)) as copy:
                        for i, record in enumerate(records, start=n):
                            copy.write_row([*record_params(record), i])
                    n += len(records)
                    if progress is not None:
                        progress(n)
                rebuild = engine.vectors and _rebuild_wanted(engine, cur, n, rebuild_index)
            # The staged rows stay (the table is this session's); nothing holds the table.
            conn.commit()
            # An initial load drops the index first, without a lock a writer waits for,
            # and builds it once the rows are in: inserting into it is several times slower.
            dropped = rebuild and hnsw.drop_concurrently(*_at(engine), "import into")
            _merge_again_if_deadlocked(q, conn)
        finally:
            _unstage(conn)
            if dropped:
                hnsw.build_concurrently(*_at(engine), "import into")
        if n >= ANALYZE_AFTER:
            _analyze(q, conn)
    engine.stats_changed()
    return n


#: An import of at least this many rows ends with an ``ANALYZE`` of the table.
ANALYZE_AFTER = 1000


def _analyze(q: Queries, conn: psycopg.Connection[Any]) -> None:
    """``ANALYZE`` the table after a bulk load, as PostgreSQL's own docs advise: until
    autovacuum's first one (up to a minute or more later) the planner knows nothing of
    the rows, and it counted a keyword's rows by reading the whole namespace through its
    btree instead of the tsvector's GIN index (60 ms a recall at 7,000 rows, against 4).
    Best effort: a lock held by autovacuum's own ANALYZE is not waited for long, and a
    role that may not analyze the table leaves it to autovacuum."""
    try:
        conn.execute("SET LOCAL lock_timeout = '2s'")
        conn.execute(sql.SQL("ANALYZE {t}").format(t=q.t))
        conn.commit()
    except psycopg.Error:
        if not (conn.closed or conn.broken):
            conn.rollback()


def _merge_again_if_deadlocked(q: Queries, conn: psycopg.Connection[Any]) -> None:
    """:func:`_merge` and commit; once or twice more when the server ended it to break a
    deadlock (rolled back; the staged rows stay). A backstop: every writer of the namespace
    waits for the import's lock before it locks a row, so none should cross it."""
    for pause in (0.01, 0.05, None):
        try:
            with conn.cursor() as cur:
                _merge(q, cur)
            conn.commit()
            return
        except psycopg.errors.DeadlockDetected:
            if pause is None:
                raise
            conn.rollback()
            time.sleep(pause)


def _merge(q: Queries, cur: psycopg.Cursor[Any]) -> None:
    """The import's one transaction on the table: the staged rows merged, with context."""
    # The merge rewrites rows of any stream: the namespace's writers wait.
    lock = nb.lock_namespace(q.t, q.names.table, q.ns)
    cur.execute(lock.query, lock.params)
    _check_staged(q, cur)
    cur.execute(sql.SQL("SELECT coalesce(max(rid), 0) FROM {t}").format(t=q.t))
    before = cur.fetchone()
    held = stage_held(q)  # where the rows of keys written again were
    cur.execute(held.query, held.params)
    merge = stage_merge(q)
    cur.execute(merge.query, merge.params)
    # The new sessionless rows with no event: their near neighbours.
    near = stage_near(q, int(before[0]) if before else 0)
    cur.execute(near.query, near.params)
    # Keys written again: their rows and their successors get context afresh.
    again = stage_refresh(q)
    cur.execute(again.query, again.params)


def _at(engine: PostgresEngine) -> tuple[str, Mapping[str, Any], TableNames]:
    """Where the engine's index lives: its server, connection settings and table."""
    return engine.connections.dsn, engine.connections.connect_kwargs, engine.q.names


def _check_staged(q: Queries, cur: psycopg.Cursor[Any]) -> None:
    """Refuse the import (the caller's transaction rolls back) when a staged key's live row
    belongs to another scope, or a staged id is another key's."""
    for check in (stage_owned(q), stage_moved()):
        cur.execute(check.query, check.params)
        taken = cur.fetchone()
        if taken is not None:
            raise owned(str(taken[0]), f"import line {int(taken[1]) + 1}")
    clash_check = stage_id_clash(q)
    cur.execute(clash_check.query, clash_check.params)
    clash = cur.fetchone()
    if clash is not None:
        raise ValueError(
            f"import line {int(clash[0]) + 1}: id {clash[1]!r} is already the id of "
            f"key {clash[2]!r} (an id names one memory); nothing was written"
        )


def _unstage(conn: psycopg.Connection[Any]) -> None:
    """Drop the staging table, so the pooled connection goes back as it came."""
    if conn.closed or conn.broken:
        return
    try:
        # A transaction still open here did not reach its commit: nothing of it stays.
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.rollback()
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {s}").format(s=_STAGE))
        conn.commit()
    except psycopg.Error:
        pass  # the error that ended the import is the one to raise; the next import drops it


def _rebuild_wanted(
    engine: PostgresEngine, cur: psycopg.Cursor[Any], n: int, wanted: bool | None
) -> bool:
    if wanted is False or (wanted is None and n < engine.hnsw_rebuild_at):
        return False
    if hnsw.index_valid(cur.connection, engine.q.names.hnsw) is None:
        return False
    if wanted:
        return True
    stmt = any_rows(engine.q)
    cur.execute(stmt.query, stmt.params)
    row = cur.fetchone()
    return row is not None and not row[0]


# -- the statements: COPY into a temp table, then one merge --------------------------


def stage_create(q: Queries) -> list[sql.Composed]:
    """Create the import's staging table: temporary (the session's, dropped by the import
    when it ends), plus ``_seq``."""
    return [
        sql.SQL("DROP TABLE IF EXISTS {s}").format(s=_STAGE),
        sql.SQL("CREATE TEMP TABLE {s} AS SELECT {cols} FROM {t} WITH NO DATA").format(
            s=_STAGE, cols=q.all, t=q.t
        ),
        sql.SQL("ALTER TABLE {s} ADD COLUMN _seq bigint").format(s=_STAGE),
    ]


def stage_copy(q: Queries) -> sql.Composed:
    """``COPY`` into the staging table: every column, then ``_seq``."""
    return sql.SQL("COPY {s} ({cols}, _seq) FROM STDIN").format(s=_STAGE, cols=q.all)


def any_rows(q: Queries) -> Stmt:
    """Whether the table holds any row at all, in any namespace, forgotten ones too."""
    return Stmt(sql.SQL("SELECT EXISTS (SELECT 1 FROM {t})").format(t=q.t))


def stage_owned(q: Queries) -> Stmt:
    """The first staged key whose live row in the table belongs to another scope, and its
    line (``_seq``): a row belongs to its scope, and an import is a write like any other."""
    query = sql.SQL(
        "SELECT s.key, s._seq FROM {s} AS s JOIN {t} AS m "
        "ON m.namespace = %(ns)s AND m.key = s.key AND m.deleted_at IS NULL "
        "AND m.session_id IS DISTINCT FROM s.session_id ORDER BY s._seq LIMIT 1"
    ).format(s=_STAGE, t=q.t)
    return Stmt(query, {"ns": q.ns})


def stage_moved() -> Stmt:
    """The first staged line that follows a live line of its key in another scope, and its
    line: the table is checked against each line, so a key written shared then into a
    session by one import would be written, then moved (``_store_checks.refuse_moves``)."""
    query = sql.SQL(
        "SELECT key, _seq FROM (SELECT key, _seq, session_id, "
        "lag(_seq) OVER w AS prev_seq, lag(session_id) OVER w AS prev_session, "
        "lag(deleted_at) OVER w AS prev_deleted FROM {s} "
        "WINDOW w AS (PARTITION BY key ORDER BY _seq)) AS x "
        "WHERE prev_seq IS NOT NULL AND prev_deleted IS NULL "
        "AND session_id IS DISTINCT FROM prev_session ORDER BY _seq LIMIT 1"
    ).format(s=_STAGE)
    return Stmt(query, {})


def stage_id_clash(q: Queries) -> Stmt:
    """The first staged line whose ``id`` another key holds (an earlier line of the file, or
    a row of the table that the import does not rewrite), that id and that key."""
    query = sql.SQL(
        "WITH s AS (SELECT _seq, id, key, "
        "first_value(key) OVER (PARTITION BY id ORDER BY _seq) AS first_key FROM {s}) "
        "SELECT s._seq, s.id, CASE WHEN s.first_key <> s.key THEN s.first_key ELSE m.key END "
        "FROM s LEFT JOIN {t} AS m ON m.namespace = %(ns)s AND m.id = s.id AND m.key <> s.key "
        "AND NOT EXISTS (SELECT 1 FROM {s} AS x WHERE x.key = m.key) "
        "WHERE s.first_key <> s.key OR m.key IS NOT NULL ORDER BY s._seq LIMIT 1"
    ).format(s=_STAGE, t=q.t)
    return Stmt(query, {"ns": q.ns})


def stage_merge(q: Queries) -> Stmt:
    """Upsert the staged rows into the table in file order; a repeated key's last line wins.

    New rows of a session get their predecessors as context
    (:func:`~memory_inject.storage.postgres.context.merge_with_context`).
    """
    query = merge_with_context(q.t, _STAGE, COLUMNS, q.assignments(()))
    return Stmt(query, {"ns": q.ns}, rows=False)


_HELD = sql.Identifier("memory_inject_held")


def stage_held(q: Queries) -> Stmt:
    """Keep, for the transaction, where the table's rows of the staged keys are before the
    merge (:data:`.neighbours.ANCHOR`), for :func:`stage_refresh`."""
    query = sql.SQL(
        'CREATE TEMP TABLE {h} ON COMMIT DROP AS SELECT rid, "key", session_id, category, '
        'profile_id, layer, "timestamp" AS ts FROM {t} WHERE namespace = %(ns)s '
        'AND "key" IN (SELECT "key" FROM {s})'
    ).format(h=_HELD, t=q.t, s=_STAGE)
    return Stmt(query, {"ns": q.ns}, rows=False)


def stage_refresh(q: Queries) -> Stmt:
    """Context afresh for the rows the merge updated, as they were and as they are, and
    for the rows that took context from them (:func:`.neighbours.refresh`)."""
    anchors = sql.SQL(
        'SELECT * FROM {h} UNION ALL SELECT rid, "key", session_id, category, profile_id, '
        'layer, "timestamp" FROM {t} WHERE namespace = %(ns)s AND "key" IN (SELECT "key" FROM {h})'
    ).format(h=_HELD, t=q.t)
    return nb.refresh(q.t, anchors, {"ns": q.ns})


def stage_near(q: Queries, before: int) -> Stmt:
    """Near context for the rows the merge inserted (``rid`` past ``before``) that have
    none, as a row-by-row write gives it (:func:`~.context.fill_near`)."""
    where = sql.SQL(
        "m.namespace = %(ns)s AND m.rid > %(before)s AND m.key IN (SELECT key FROM {s})"
    ).format(s=_STAGE)
    return Stmt(fill_near(q.t, where), {"ns": q.ns, "before": before}, rows=False)


def _nul_field(record: MemoryRecord) -> str | None:
    """The first field of ``record`` holding a NUL character (PostgreSQL's text and jsonb
    cannot hold one), or None."""
    for f in attrs.fields(type(record)):
        name: str = f.name
        value = getattr(record, name)
        if isinstance(value, str):
            if "\x00" in value:
                return name
        elif isinstance(value, tuple | list):
            if any(isinstance(v, str) and "\x00" in v for v in value):
                return name
        elif isinstance(value, Mapping) and "\\u0000" in json.dumps(value):
            return name
    return None


def _checked_lines(lines: Iterable[tuple[int, MemoryRecord]]) -> Iterator[MemoryRecord]:
    """The records of ``lines``; a ``ValueError`` naming the line and the field of the first
    one PostgreSQL cannot store (it named neither)."""
    for lineno, record in lines:
        field = _nul_field(record)
        if field is not None:
            raise ValueError(
                f"import line {lineno}: '{field}' holds a NUL character, which PostgreSQL "
                "cannot store; nothing was imported"
            )
        yield record


def _batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
