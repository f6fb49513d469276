"""``erase`` on PostgreSQL: a row deleted, live or forgotten, and its text out of the others.

``forget`` sets ``deleted_at``; an erase is a ``DELETE`` of the row in the
transaction that locks its stream (as every write does, :mod:`.neighbours`),
and the rows that took its text as context get theirs again in the same
transaction, computed from where the row was (its :data:`~.neighbours.ANCHOR`
values, sent back by the ``DELETE``). The row's ``tsv`` and ``embedding`` go
with it: no query sees a deleted row, and its text no longer counts in a
document frequency.

What stays, as PostgreSQL keeps it: the deleted row version (a dead tuple) and
its index entries until ``VACUUM`` reclaims them, and then their bytes on the
freed page space until it is reused; the write-ahead log, its archive, base
backups and replicas. :func:`vacuum` (run by ``erase_forgotten``) reclaims the
dead tuples; ``VACUUM FULL`` on the table rewrites it and its indexes without
them (an ``ACCESS EXCLUSIVE`` lock: recalls wait), which is what an operator
runs when the bytes must leave the data files (``docs/storage.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from memory_inject.storage.postgres import neighbours as nb
from memory_inject.storage.postgres.connection import Steps
from memory_inject.storage.postgres.context import stream_key
from memory_inject.storage.postgres.queries import Queries, Stmt

__all__ = ["erase_steps", "vacuum"]

#: The columns a deleted row sends back: its place (``neighbours.refresh_rows``'s
#: ``before``) and its stream's lock key.
_RETURNING = 'rid, "key", session_id, category, profile_id, layer, "timestamp", {k}'


def _delete(
    q: Queries, key: str | None, scope: tuple[Sequence[str], bool, Sequence[str] | None] | None
) -> Stmt:
    """Delete the row under ``key`` (any of ``scope``'s, live or forgotten), or with ``key``
    None every forgotten row of the namespace."""
    query = sql.SQL("DELETE FROM {t} AS g WHERE namespace = %(ns)s").format(t=q.t)
    params: dict[str, Any] = {"ns": q.ns}
    if key is None:
        query += sql.SQL(" AND deleted_at IS NOT NULL")
    else:
        query += sql.SQL(' AND "key" = %(key)s')
        params["key"] = key
    if scope is not None:
        named, shared, sources = scope
        params.update(named=list(named), shared=shared, sources=list(sources or ()))
        query += sql.SQL(
            " AND (session_id = ANY(%(named)s) OR (%(shared)s AND session_id IS NULL"
            + ("" if sources is None else " AND source = ANY(%(sources)s)")
            + "))"
        )
    query += sql.SQL(" RETURNING " + _RETURNING).format(k=sql.SQL(stream_key(q.names.table, "g")))
    return Stmt(query, params)


def erase_steps(
    q: Queries,
    key: str | None,
    scope: tuple[Sequence[str], bool, Sequence[str] | None] | None = None,
) -> Steps[int]:
    """Erase the row under ``key`` in ``scope`` (``key`` None: every forgotten row, under
    the namespace's lock, as an import holds it); the rows that took context from them
    get theirs again. Returns how many rows went."""
    locked: set[int] = set()
    if key is None:  # no write moves a row of the namespace meanwhile
        yield nb.lock_namespace(q.t, q.names.table, q.ns)
    else:
        locked = {int(r[0]) for r in (yield nb.lock_streams(q.t, q.names.table, q.ns, [key], None))}
    rows: list[Any] = yield _delete(q, key, scope)
    if key is not None and any(int(row[-1]) not in locked for row in rows):
        raise nb.StreamMoved(key)
    if rows:
        kinds = {nb.kind(row[2], row[5]) for row in rows}
        yield nb.refresh_rows(q.t, q.ns, [], kinds, [row[:-1] for row in rows])
    return len(rows)


def vacuum(q: Queries) -> Steps[int]:
    """``VACUUM (ANALYZE)`` of the table: the dead tuples of erased rows reclaimed and the
    planner's statistics (which sample the column's lexemes) read again. Outside a
    transaction: the caller runs it as a read (autocommit)."""
    done: int = yield Stmt(sql.SQL("VACUUM (ANALYZE) {t}").format(t=q.t), None, rows=False)
    return done
